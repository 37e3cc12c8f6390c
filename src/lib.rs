//! artifact-check audits the result directories AIPerf writes before anyone
//! trusts or publishes their numbers.
//!
//! The flow is: [`discover::find_runs`] finds run directories under the given
//! paths; for each run, [`artifacts::load`] reads every artifact with a typed
//! reader (problems become findings, never panics); [`model::RunModel`]
//! summarises what the artifacts say happened per phase; the
//! [`checks`] each return a typed report and their [`findings::Finding`]s;
//! [`audit`] collects it all into a [`Report`] that [`report`] renders as a
//! table, JSON, JUnit, Markdown or GitHub annotations. Nothing here prints,
//! exits or writes into the directories it audits: the binary (`main.rs`)
//! does the printing and maps [`Report::exit_code`] to the process status.

#![warn(missing_docs)]
// No unsafe code in the library; the one unsafe module is the binary's
// allocator (src/alloc.rs, declared in main.rs).
#![deny(unsafe_code)]
#![warn(clippy::undocumented_unsafe_blocks)]

#[macro_use]
mod macros;

pub mod artifacts;
pub mod baseline;
pub mod checks;
pub mod claims;
pub mod clean;
pub mod cli;
pub mod compare;
pub mod config;
pub mod discover;
pub mod files;
pub mod findings;
pub mod frameworks;
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod fuzzing;
pub mod model;
pub mod report;
pub mod stats;
pub mod text;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use rayon::prelude::*;
use serde::Serialize;

use crate::checks::{CheckResult, CheckStatus, Checks, Ctx};
use crate::claims::Claim;
pub use crate::config::CodeFilter;
use crate::config::Settings;
use crate::discover::PathError;
use crate::findings::{reading, Finding, Severity};
use crate::model::{PhaseModel, RunModel};

/// Version of the JSON report's layout (`docs/report-schema.md`).
pub const REPORT_SCHEMA_VERSION: &str = "1.0";

/// Exit status: nothing at or above the fail level.
pub const EXIT_OK: i32 = 0;
/// Exit status: at least one finding at or above the fail level.
pub const EXIT_FINDINGS: i32 = 1;
/// Exit status: the tool could not do its job (bad arguments, a path with no
/// run, an unreadable run).
pub const EXIT_ERROR: i32 = 2;

/// A run's overall verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum RunStatus {
    /// No warning or error finding.
    Pass,
    /// Warnings, no errors.
    Warn,
    /// At least one error finding.
    Fail,
    /// The run could not be read at all.
    Error,
}

impl RunStatus {
    /// Lowercase name.
    pub fn as_str(self) -> &'static str {
        match self {
            RunStatus::Pass => "pass",
            RunStatus::Warn => "warn",
            RunStatus::Fail => "fail",
            RunStatus::Error => "error",
        }
    }
}

/// Everything found about one run.
#[derive(Debug, Clone, Serialize)]
pub struct RunReport {
    /// The run directory as found.
    pub path: String,
    /// AIPerf version that wrote it.
    pub aiperf_version: Option<String>,
    /// Verdict.
    pub status: RunStatus,
    /// Per phase kind: configured and realised counts.
    pub phases: BTreeMap<&'static str, PhaseModel>,
    /// One entry per check.
    pub checks: Checks,
    /// Published claims checked (`--expect`), when any.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub claims: Vec<claims::ClaimResult>,
    /// Every finding, in check order.
    pub findings: Vec<Finding>,
    /// Request-scoped metrics the user named that this run's server export
    /// does not have (a name in no run is an error of the audit).
    #[serde(skip)]
    pub unknown_user_metrics: Vec<String>,
    /// The run in time, when a report needs it (`Settings::timeline`).
    #[serde(skip)]
    pub timeline: Option<std::sync::Arc<model::timeline::Timeline>>,
}

impl RunReport {
    /// Findings of a severity.
    pub fn count(&self, severity: Severity) -> usize {
        self.findings
            .iter()
            .filter(|f| f.severity == severity)
            .count()
    }

    /// The most severe finding (the first of them).
    pub fn worst(&self) -> Option<&Finding> {
        self.findings.iter().rev().max_by_key(|f| f.severity)
    }
}

/// Counts over all runs.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Summary {
    /// Runs audited.
    pub runs: usize,
    /// Runs that passed.
    pub passed: usize,
    /// Runs with warnings only.
    pub warned: usize,
    /// Runs with errors.
    pub failed: usize,
    /// Runs that could not be read.
    pub errored: usize,
    /// Paths that held no run or could not be searched.
    pub path_errors: usize,
    /// Findings by severity.
    pub findings: BTreeMap<&'static str, usize>,
    /// The fail level in force.
    pub fail_on: Severity,
    /// The process exit code this report maps to.
    pub exit_code: i32,
}

/// The whole audit.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// Layout version of this document.
    pub schema_version: &'static str,
    /// `artifact-check` version.
    pub tool_version: &'static str,
    /// Runs, in path order.
    pub runs: Vec<RunReport>,
    /// Paths that held no run or could not be searched.
    pub errors: Vec<PathError>,
    /// Counts.
    pub summary: Summary,
}

impl Report {
    /// 0, 1 or 2; see [`EXIT_OK`], [`EXIT_FINDINGS`], [`EXIT_ERROR`].
    pub fn exit_code(&self) -> i32 {
        self.summary.exit_code
    }
}

/// Audits one run directory.
pub fn audit_run(dir: &Path, settings: &Settings, claims: &[Claim]) -> RunReport {
    let run = artifacts::load(dir);
    let report = audit_artifacts(dir, &run, settings, claims);
    // Freeing a large run's records takes a while (about 0.01 s per 400,000
    // records): do it beside whatever the caller does next (rendering the
    // report), not before returning. If no thread can be started, the run is
    // freed here.
    if run
        .records
        .as_ref()
        .is_some_and(|r| r.records.len() >= 100_000)
    {
        let _ = std::thread::Builder::new().spawn(move || drop(run));
    }
    report
}

/// Audits a run already read (`artifacts::load`), for a caller that needs
/// its artifacts afterwards too (`compare`).
pub fn audit_artifacts(
    dir: &Path,
    run: &artifacts::RunArtifacts,
    settings: &Settings,
    claims: &[Claim],
) -> RunReport {
    let model = RunModel::build(run);
    let ctx = Ctx {
        run,
        model: &model,
        settings,
    };
    let mut findings = Vec::new();
    let mut outputs = Vec::new();
    for (check, out) in checks::run_all(&ctx) {
        findings.extend(out.findings);
        outputs.push((check.name, out.report, out.cannot_tell));
    }
    let (claims, claim_findings) = if claims.is_empty() {
        (Vec::new(), Vec::new())
    } else {
        claims::evaluate(
            claims,
            ctx.records(),
            ctx.model.profiling.server_window_ns,
            settings,
        )
    };
    findings.extend(claim_findings);
    let shown = dir.display().to_string();
    findings.retain(|f| settings.filter.keeps_finding(f, &shown));
    findings::cap(&mut findings);
    // Statuses follow the findings that survived the filter, once.
    let checks = Checks(
        outputs
            .into_iter()
            .map(|(name, report, reason)| CheckResult {
                name,
                status: CheckStatus::from_findings(
                    findings.iter().filter(|f| f.check == name),
                    reason.is_some(),
                ),
                reason,
                report,
            })
            .collect(),
    );
    let phases = phases_of(&model);
    let timeline = settings
        .timeline
        .then(|| std::sync::Arc::new(timeline_of(run, &model, settings, &findings, &checks)));
    let status = run_status(run.unreadable, &findings);
    let unknown_user_metrics = settings
        .phase
        .extra_metrics
        .iter()
        .filter(|(name, _)| !run.server.as_ref().is_some_and(|s| s.has_cumulative(name)))
        .map(|(name, _)| name.clone())
        .collect();
    RunReport {
        path: dir.display().to_string(),
        aiperf_version: model.aiperf_version.clone(),
        status,
        phases,
        checks,
        claims,
        findings,
        unknown_user_metrics,
        timeline,
    }
}

fn phases_of(model: &RunModel) -> BTreeMap<&'static str, model::PhaseModel> {
    let mut phases = BTreeMap::new();
    if let Some(w) = model.warmup.clone() {
        phases.insert("warmup", w);
    }
    phases.insert("profiling", model.profiling.clone());
    phases
}

/// The run in time for the HTML report, with the intervals of every server
/// metric a phase-contamination finding names.
fn timeline_of(
    run: &artifacts::RunArtifacts,
    model: &RunModel,
    settings: &Settings,
    findings: &[Finding],
    checks: &Checks,
) -> model::timeline::Timeline {
    let mut named: Vec<(String, String)> = findings
        .iter()
        .filter(|f| f.check == "phase_contamination" && f.severity >= Severity::Warning)
        .filter_map(|f| Some((f.metric.clone()?, f.endpoint.clone()?)))
        .collect();
    named.sort();
    named.dedup();
    // The steady state the check found, not found again.
    let steady = checks
        .report::<checks::steady_state::Report>()
        .map(|r| &r.state)
        .filter(|s| s.basis.is_some());
    model::timeline::build(run, model, settings, &named, steady)
}

/// A run's status: `error` when it could not be read (no artifact, or a
/// file that exists but cannot be read), else its worst finding's.
fn run_status(unreadable: bool, findings: &[Finding]) -> RunStatus {
    if unreadable || findings.iter().any(|f| f.code == reading::UNREADABLE_FILE) {
        return RunStatus::Error;
    }
    match findings.iter().map(|f| f.severity).max() {
        Some(Severity::Error) => RunStatus::Fail,
        Some(Severity::Warning) => RunStatus::Warn,
        _ => RunStatus::Pass,
    }
}

/// Audits every run under `paths`, in parallel on the current rayon pool;
/// the order of the result does not depend on the schedule.
pub fn audit(paths: &[PathBuf], settings: &Settings, claims: &[Claim]) -> Report {
    audit_with_progress(paths, settings, claims, &|| {})
}

/// [`audit`], calling `tick` after each run (for a progress bar).
pub fn audit_with_progress(
    paths: &[PathBuf],
    settings: &Settings,
    claims: &[Claim],
    tick: &(dyn Fn() + Sync),
) -> Report {
    let mut runs = Vec::new();
    let (errors, summary) = audit_each(paths, settings, claims, tick, &mut |r| {
        runs.push(r);
        Ok(())
    })
    .unwrap_or_else(|e: std::io::Error| unreachable!("collecting cannot fail: {e}"));
    Report {
        schema_version: REPORT_SCHEMA_VERSION,
        tool_version: env!("CARGO_PKG_VERSION"),
        runs,
        errors,
        summary,
    }
}

/// Audits every run under `paths` and hands each report to `emit` in path
/// order as soon as it and those before it are done, keeping no more than a
/// batch of runs (a few per worker) in memory: 10,000 runs cost what a batch
/// costs, not what all of them do. Returns the path errors and the summary,
/// which are only known at the end. An `emit` error stops the audit.
pub fn audit_each(
    paths: &[PathBuf],
    settings: &Settings,
    claims: &[Claim],
    tick: &(dyn Fn() + Sync),
    emit: &mut dyn FnMut(RunReport) -> std::io::Result<()>,
) -> std::io::Result<(Vec<PathError>, Summary)> {
    let (dirs, errors) = discover::find_shard(paths, settings.shard);
    let audit_one = |d: &PathBuf| {
        let r = audit_run(d, settings, claims);
        tick();
        r
    };
    let mut tally = Tally::new(settings);
    if dirs.len() == 1 {
        // One run: audited from this thread, so its reader can use the
        // whole pool.
        let r = audit_one(&dirs[0]);
        tally.add(&r);
        emit(r)?;
    } else {
        // Many: one per worker, in batches emitted in order.
        let batch = rayon::current_num_threads().max(1) * 4;
        for chunk in dirs.chunks(batch) {
            let reports: Vec<RunReport> = chunk.par_iter().map(audit_one).collect();
            for r in reports {
                tally.add(&r);
                emit(r)?;
            }
        }
    }
    Ok(tally.finish(errors, settings))
}

/// The summary's counts, run by run.
struct Tally {
    summary: Summary,
    failing: bool,
    /// User-named metrics missing from every run so far (`None`: no run yet).
    missing_everywhere: Option<Vec<String>>,
}

impl Tally {
    fn new(settings: &Settings) -> Tally {
        let mut summary = Summary {
            fail_on: settings.fail_on,
            ..Default::default()
        };
        for sev in ["error", "warning", "info"] {
            summary.findings.insert(sev, 0);
        }
        Tally {
            summary,
            failing: false,
            missing_everywhere: None,
        }
    }

    fn add(&mut self, r: &RunReport) {
        let s = &mut self.summary;
        s.runs += 1;
        match r.status {
            RunStatus::Pass => s.passed += 1,
            RunStatus::Warn => s.warned += 1,
            RunStatus::Fail => s.failed += 1,
            RunStatus::Error => s.errored += 1,
        }
        for f in &r.findings {
            *s.findings.entry(f.severity.as_str()).or_default() += 1;
            self.failing |= f.severity >= s.fail_on;
        }
        let missing = self
            .missing_everywhere
            .get_or_insert_with(|| r.unknown_user_metrics.clone());
        missing.retain(|m| r.unknown_user_metrics.contains(m));
    }

    fn finish(self, mut errors: Vec<PathError>, settings: &Settings) -> (Vec<PathError>, Summary) {
        let mut summary = self.summary;
        // A user-named metric that exists in no run is a mistake, not a pass.
        let missing = self.missing_everywhere.unwrap_or_default();
        for (name, _) in &settings.phase.extra_metrics {
            if missing.contains(name) {
                errors.push(PathError {
                    path: format!("--request-scoped-metric {name}"),
                    message: "this metric exists in no audited run (misspelt?)".into(),
                });
            }
        }
        summary.path_errors = errors.len();
        summary.exit_code = if summary.errored > 0 || !errors.is_empty() {
            EXIT_ERROR
        } else if self.failing {
            EXIT_FINDINGS
        } else {
            EXIT_OK
        };
        (errors, summary)
    }
}
