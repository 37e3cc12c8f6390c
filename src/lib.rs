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
pub mod results;
pub mod stats;
pub mod text;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::checks::Ctx;
use crate::claims::Claim;
pub use crate::config::CodeFilter;
use crate::config::Settings;
use crate::discover::PathError;
use crate::findings::{Code, Finding, RunNames, Severity};
use crate::model::RunModel;
use crate::results::{CheckResult, CheckStatus, Checks};
pub use crate::results::{
    ExitStatus, Report, RunReport, RunStatus, Summary, EXIT_ERROR, EXIT_FINDINGS, EXIT_OK,
    REPORT_SCHEMA_VERSION,
};

/// Every finding code of the tool, in registry order: each check's codes,
/// then the claims', then `compare`'s (the order of SARIF's rules and of
/// `artifact-check codes`).
static CODES: std::sync::LazyLock<Vec<Code>> = std::sync::LazyLock::new(|| {
    checks::codes()
        .chain(claims::CODES.iter().copied())
        .chain(baseline::CODES.iter().copied())
        .chain(compare::CODES.iter().copied())
        .collect()
});

/// Every finding code of the tool, in registry order.
pub fn codes() -> impl Iterator<Item = Code> {
    CODES.iter().copied()
}

/// A finding code by its id.
pub fn code(id: &str) -> Option<Code> {
    codes().find(|c| c.as_str() == id)
}

/// What an audit does besides checking, set per invocation and never read
/// from a configuration file (thresholds and filters are [`Settings`]).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RunOptions {
    /// Only this shard's runs are audited (`--shard`).
    pub shard: Option<discover::Shard>,
    /// Keep each run's timeline (an HTML report is written).
    pub timeline: bool,
    /// Findings of an earlier audit accepted as they are (`--baseline`).
    pub baseline: baseline::Baseline,
    /// The run's identity ([`discover::run_id`]); the run directory's own
    /// name when not given.
    pub id: Option<String>,
    /// Do not follow symlinked directories below the given paths
    /// (`--no-follow-links`); each one skipped is listed in the summary.
    pub no_follow_links: bool,
}

/// Audits one run directory.
pub fn audit_run(dir: &Path, settings: &Settings, claims: &[Claim]) -> RunReport {
    audit_run_with(dir, settings, &RunOptions::default(), claims)
}

/// [`audit_run`] with run options.
pub fn audit_run_with(
    dir: &Path,
    settings: &Settings,
    options: &RunOptions,
    claims: &[Claim],
) -> RunReport {
    audit_run_as(dir, &discover::run_id(dir, dir), settings, options, claims)
}

/// [`audit_run_with`] for a run whose identity ([`discover::run_id`]) is
/// `id`: what the baseline and scoped ignores match on.
pub fn audit_run_as(
    dir: &Path,
    id: &str,
    settings: &Settings,
    options: &RunOptions,
    claims: &[Claim],
) -> RunReport {
    let run = artifacts::load(dir);
    let model = RunModel::build(&run, settings);
    let mut options = std::borrow::Cow::Borrowed(options);
    if options.id.as_deref() != Some(id) {
        options.to_mut().id = Some(id.to_string());
    }
    let report = audit_with_model(dir, &run, &model, settings, &options, claims);
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
    let model = RunModel::build(run, settings);
    audit_with_model(dir, run, &model, settings, &RunOptions::default(), claims)
}

/// Audits a run already read whose model is already built, for a caller
/// that uses the model afterwards too (`compare`: temperatures and the
/// steady state are computed once).
pub fn audit_with_model(
    dir: &Path,
    run: &artifacts::RunArtifacts,
    model: &RunModel,
    settings: &Settings,
    options: &RunOptions,
    claims: &[Claim],
) -> RunReport {
    let ctx = Ctx {
        run,
        model,
        settings,
    };
    let mut findings = Vec::new();
    let mut outputs = Vec::new();
    for (check, out) in checks::run_all(&ctx) {
        findings.extend(out.findings);
        outputs.push((check.name, out.report, out.cannot_tell));
    }
    // One finding per root cause: a cause's findings on several metrics
    // are one that lists what it moves.
    findings::merge_root_causes(&mut findings);
    let (claims, claim_findings) = if claims.is_empty() {
        (Vec::new(), Vec::new())
    } else {
        claims::evaluate(claims, ctx.records(), ctx.model)
    };
    findings.extend(claim_findings);
    let shown = dir.display().to_string();
    let id = options
        .id
        .clone()
        .unwrap_or_else(|| discover::run_id(dir, dir));
    let benchmark_id = run.summary.as_ref().and_then(|s| s.benchmark_id.clone());
    let names = RunNames {
        shown: &shown,
        id: &id,
        benchmark_id: benchmark_id.as_deref(),
    };
    let suppressed = silence(&mut findings, settings, options, &names);
    findings.extend(unused_suppressions(&suppressed, settings, options, &names));
    findings::cap(&mut findings);
    let checks = statuses(outputs, &findings);
    // A silenced finding still moves its numbers: the gate accepts it, the
    // number is no truer for that.
    let moving: Vec<Finding> = findings
        .iter()
        .cloned()
        .chain(suppressed.iter().map(|s| s.finding.clone()))
        .collect();
    let published = published_of(&ctx, &checks, &moving);
    let phases = phases_of(model);
    let timeline = options
        .timeline
        .then(|| std::sync::Arc::new(timeline_of(run, model, &findings)));
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
        id,
        benchmark_id,
        resolved_path: discover::resolved_through_link(dir).map(|p| p.display().to_string()),
        suppressed,
        aiperf_version: model.aiperf_version.clone(),
        status,
        published,
        phases,
        checks,
        claims,
        findings,
        unknown_user_metrics,
        timeline,
    }
}

/// Each check's result: its status follows the findings that survived the
/// filters, once, here.
fn statuses(outputs: Vec<CheckOut>, findings: &[Finding]) -> Checks {
    Checks(
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
    )
}

/// What a check returned: its name, report and why it could not tell.
type CheckOut = (
    &'static str,
    std::sync::Arc<dyn results::CheckReport>,
    Option<String>,
);

/// The suppressions that silenced nothing in this run, one finding for
/// them all: baseline entries held for this run whose finding is gone (of
/// codes the filters keep), and scoped ignores whose `run` glob names this
/// run. Either would hide a new finding of the same identity.
fn unused_suppressions(
    suppressed: &[results::Suppressed],
    settings: &Settings,
    options: &RunOptions,
    names: &RunNames,
) -> Option<Finding> {
    let used: Vec<findings::Identity> = suppressed
        .iter()
        .filter(|s| s.rule == results::SuppressedBy::Baseline)
        .map(|s| s.finding.identity(names.id))
        .collect();
    let used: std::collections::BTreeSet<findings::Subject> =
        used.iter().map(findings::Identity::subject).collect();
    // Counted whole, named only as far as the message shows them (a
    // baseline may hold a million entries).
    let mut n = 0;
    let mut unused: Vec<String> = Vec::new();
    let mut named = 0;
    let entries = options.baseline.entries_of(names);
    for [code_id, _, field, metric, endpoint, _] in entries
        .into_iter()
        .filter(|k| !used.contains(k))
        .filter(|k| code(k[0]).is_some_and(|c| settings.filter.keeps(c)))
    {
        n += 1;
        if named > 400 {
            continue;
        }
        let subject = [metric, field, endpoint]
            .into_iter()
            .find(|s| !s.is_empty())
            .map(|s| format!(" ({s})"))
            .unwrap_or_default();
        let entry = format!("baseline {code_id}{subject}");
        named += entry.len() + 2;
        unused.push(entry);
    }
    let run_scoped = settings
        .filter
        .scoped
        .iter()
        .filter(|i| i.run.is_some() && i.applies_to(names));
    for i in run_scoped {
        let silenced = suppressed.iter().any(|s| {
            s.rule == results::SuppressedBy::ScopedIgnore && i.silences(&s.finding, names)
        });
        if !silenced {
            n += 1;
            unused.push(format!("scoped-ignore {} ({})", i.code.as_str(), i.reason));
        }
    }
    if n == 0 {
        return None;
    }
    let shown = text::clip(&unused.join("; "), 400).into_owned();
    Some(
        Finding::new(
            baseline::UNUSED_SUPPRESSION,
            format!(
                "{n} suppression(s) matched no finding of this run: {shown}. What they accepted \
                 is gone (or its identity changed), and they would hide a new finding of the \
                 same identity: regenerate the baseline (`--report json=baseline.json`) or \
                 remove the scoped ignore"
            ),
        )
        .effect("unused_suppressions", n as f64, findings::Unit::Count),
    )
}

/// Applies the filters: `--select`/`--ignore` choose codes; a scoped ignore
/// or the baseline silences a finding, which is kept as data with why.
fn silence(
    findings: &mut Vec<Finding>,
    settings: &Settings,
    options: &RunOptions,
    names: &RunNames,
) -> Vec<results::Suppressed> {
    findings.retain(|f| settings.filter.keeps(f.code));
    let mut suppressed = Vec::new();
    findings.retain(|f| {
        let by = match settings.filter.silencer(f, names) {
            Some(s) => Some((results::SuppressedBy::ScopedIgnore, s.reason.clone())),
            None if options.baseline.contains(f, names) => Some((
                results::SuppressedBy::Baseline,
                options.baseline.source().to_string(),
            )),
            None => None,
        };
        let Some((rule, reason)) = by else {
            return true;
        };
        suppressed.push(results::Suppressed {
            finding: f.clone(),
            rule,
            reason,
        });
        false
    });
    suppressed
}

/// The run's published numbers with their verdicts: the checks' figures
/// joined with the findings that survived the filters. A statistic two
/// causes move is recomputed over the records without both
/// (`model::selection`, the rules `clean` and the claims use).
fn published_of(
    ctx: &Ctx,
    checks: &Checks,
    findings: &[Finding],
) -> Vec<results::published::Published> {
    use findings::Over;
    let figures = checks
        .iter()
        .flat_map(|c| c.report.figures(c.reason.as_deref()));
    let mut cache: BTreeMap<Vec<Over>, BTreeMap<&'static str, stats::Summary>> = BTreeMap::new();
    let mut recompute = |metric: &str, stat: &str, overs: &[Over]| -> Option<f64> {
        let records = ctx.records()?;
        let by_metric = cache.entry(overs.to_vec()).or_insert_with(|| {
            let ex = model::selection::Exclusions {
                cold: overs.contains(&Over::WarmOnly),
                steady_state: overs.contains(&Over::SteadyState),
                ..Default::default()
            };
            let steady = ex.steady_state.then(|| ctx.model.steady(records));
            let sel = model::selection::select_with(records, &ctx.model.temperatures, ex, steady);
            model::selection::statistics(&sel.kept)
        });
        let s = by_metric.get(metric)?;
        match stat {
            "avg" => s.mean,
            "p50" => s.p50,
            "p90" => s.p90,
            "p99" => s.p99,
            _ => None,
        }
    };
    results::published::build(figures, findings, &mut recompute)
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
    findings: &[Finding],
) -> results::timeline::Timeline {
    // The checks that place server metrics in time (`Check::timeline`).
    let placing = |name: &str| checks::ALL.iter().any(|c| c.name == name && c.timeline);
    let mut named: Vec<(String, String)> = findings
        .iter()
        .filter(|f| placing(f.check) && f.severity >= Severity::Warning)
        .filter_map(|f| Some((f.metric.clone()?, f.endpoint.clone()?)))
        .collect();
    named.sort();
    named.dedup();
    results::timeline::build(run, model, &named)
}

/// A run's status: `error` when none of its artifacts could be read (exit
/// 2, as `--help` says), else its worst finding's: one unreadable artifact
/// among others read is an `unreadable-file` error finding (exit 1), and the
/// findings of the others stand.
fn run_status(unreadable: bool, findings: &[Finding]) -> RunStatus {
    if unreadable {
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
    audit_with_progress(paths, settings, &RunOptions::default(), claims, &|| {})
}

/// [`audit`], calling `tick` after each run (for a progress bar).
pub fn audit_with_progress(
    paths: &[PathBuf],
    settings: &Settings,
    options: &RunOptions,
    claims: &[Claim],
    tick: &(dyn Fn() + Sync),
) -> Report {
    let mut runs = Vec::new();
    let (errors, summary) = audit_each(paths, settings, options, claims, tick, &mut |r| {
        runs.push(r);
        Ok(())
    })
    .unwrap_or_else(|e: std::io::Error| unreachable!("collecting cannot fail: {e}"));
    Report {
        codes: &CODES,
        schema_version: REPORT_SCHEMA_VERSION,
        tool_version: env!("CARGO_PKG_VERSION"),
        runs,
        errors,
        summary,
    }
}

/// Audits every run under `paths` and hands each report to `emit` in path
/// order as soon as it and those before it are done, keeping no more than a
/// window of runs (four per worker) in memory: 10,000 runs cost what a
/// window costs, not what all of them do. Returns the path errors and the
/// summary, which are only known at the end. An `emit` error stops the
/// audit.
pub fn audit_each(
    paths: &[PathBuf],
    settings: &Settings,
    options: &RunOptions,
    claims: &[Claim],
    tick: &(dyn Fn() + Sync),
    emit: &mut dyn FnMut(RunReport) -> std::io::Result<()>,
) -> std::io::Result<(Vec<PathError>, Summary)> {
    let (dirs, errors, skipped) =
        discover::find_shard_ids_following(paths, options.shard, !options.no_follow_links);
    let audit_one = |(d, id): &(PathBuf, String)| {
        let r = audit_run_as(d, id, settings, options, claims);
        tick();
        r
    };
    let mut tally = Tally::new(settings);
    if dirs.len() == 1 || rayon::current_thread_index().is_some() {
        // One run: audited from this thread, so its reader can use the
        // whole pool. Called on a worker of a pool (a library caller's):
        // one run after the other, each with the pool, as this thread
        // cannot wait for the others' runs without keeping a worker from
        // them (with one worker, for ever).
        for d in &dirs {
            let r = audit_one(d);
            tally.add(&r, settings);
            emit(r)?;
        }
    } else {
        // Many: each worker audits the next run as soon as it is free, at
        // most four runs per worker past the one emitted next, and this
        // thread emits each report in path order as soon as it and those
        // before it are done. (In batches, the workers waited for each
        // batch's slowest run and for the emission of its reports.)
        let window = rayon::current_num_threads().max(1) * 4;
        in_order_on_pool(&dirs, window, &audit_one, &mut |r| {
            tally.add(&r, settings);
            emit(r)
        })?;
    }
    let (errors, mut summary) = tally.finish(errors, settings);
    summary.skipped = skipped;
    Ok((errors, summary))
}

/// `work` of every item on the pool, each worker taking the next item as
/// it is free, at most `window` items past the one handed on next; each
/// result handed to `take` on this thread (not a pool worker) in item
/// order, as soon as it and those before it are done. An error of `take`
/// starts no more items (those in flight finish) and is returned. A panic
/// of `work` is carried to this thread, not left to hang it.
fn in_order_on_pool<T: Sync, R: Send>(
    items: &[T],
    window: usize,
    work: &(dyn Fn(&T) -> R + Sync),
    take: &mut dyn FnMut(R) -> std::io::Result<()>,
) -> std::io::Result<()> {
    let (done, results) = std::sync::mpsc::channel();
    let mut taken: std::io::Result<()> = Ok(());
    rayon::in_place_scope(|s| {
        let start = |i: usize| {
            let done = done.clone();
            let item = &items[i];
            s.spawn(move |_| {
                let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| work(item)));
                let _ = done.send((i, r));
            });
        };
        let (mut started, mut received, mut next) = (0, 0, 0);
        while started < items.len().min(window) {
            start(started);
            started += 1;
        }
        let mut waiting = BTreeMap::new();
        while received < started {
            let Ok((i, r)) = results.recv() else { break };
            received += 1;
            match r {
                Ok(r) => waiting.insert(i, r),
                Err(panic) => std::panic::resume_unwind(panic),
            };
            while let Some(r) = waiting.remove(&next) {
                next += 1;
                if taken.is_err() {
                    continue;
                }
                taken = take(r);
                if taken.is_ok() && started < items.len() {
                    start(started);
                    started += 1;
                }
            }
        }
    });
    taken
}

/// The summary's counts, run by run.
struct Tally {
    summary: Summary,
    failing: bool,
    /// User-named metrics missing from every run so far (`None`: no run yet).
    missing_everywhere: Option<Vec<String>>,
    /// Per `[[scoped-ignore]]` without a run glob: whether it silenced a
    /// finding in some run so far.
    ignore_used: Vec<bool>,
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
            ignore_used: vec![false; settings.filter.scoped.len()],
        }
    }

    fn add(&mut self, r: &RunReport, settings: &Settings) {
        let names = RunNames {
            shown: &r.path,
            id: &r.id,
            benchmark_id: r.benchmark_id.as_deref(),
        };
        for (used, ignore) in self.ignore_used.iter_mut().zip(&settings.filter.scoped) {
            *used |= r.suppressed.iter().any(|s| {
                s.rule == results::SuppressedBy::ScopedIgnore && ignore.silences(&s.finding, &names)
            });
        }
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
        // A scoped ignore for every run that silenced nothing in any: an
        // `unused-suppression` of the audit (a run-scoped one is its run's).
        let mut failing = self.failing;
        if summary.runs > 0 {
            for (used, i) in self.ignore_used.iter().zip(&settings.filter.scoped) {
                if !used && i.run.is_none() {
                    summary.unused_suppressions.push(format!(
                        "scoped-ignore {} ({}) silenced nothing in the {} audited run(s): \
                         remove it, or it would hide a new finding",
                        i.code.as_str(),
                        i.reason,
                        summary.runs
                    ));
                    *summary.findings.entry("warning").or_default() += 1;
                    failing |= Severity::Warning >= summary.fail_on;
                }
            }
        }
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
        summary.exit = if summary.errored > 0 || !errors.is_empty() {
            ExitStatus::Error
        } else if failing {
            ExitStatus::Findings
        } else {
            ExitStatus::Ok
        };
        (errors, summary)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn codes_are_unique_kebab_case_and_round_trip() {
        let mut seen = HashSet::new();
        for c in codes() {
            let s = c.as_str();
            assert!(seen.insert(s), "duplicate code {s}");
            assert!(s.chars().all(|c| c.is_ascii_lowercase() || c == '-'), "{s}");
            assert_eq!(code(s), Some(c));
            assert!(!c.summary().is_empty());
        }
        assert!(seen.len() > 30);
        assert_eq!(code("no-such-code"), None);
        // The checks' own list holds no claim or compare code.
        assert!(
            checks::codes().all(|c| !claims::CODES.contains(&c) && !compare::CODES.contains(&c))
        );
    }

    /// Many runs: every report emitted once, in path order, each the one a
    /// run audited alone gets; from the main thread (the workers take the
    /// next run as they are free) and from a pool's worker (one run after
    /// the other). An emit error stops the audit: no run is started after
    /// it, so at most the window of runs then in flight is audited.
    #[test]
    fn many_runs_are_emitted_in_order_and_an_emit_error_stops_them() {
        let root = [Path::new(env!("CARGO_MANIFEST_DIR")).join("sample-artifacts")];
        let settings = Settings::default();
        let options = RunOptions::default();
        let alone: Vec<String> = discover::find_shard_ids_following(&root, None, true)
            .0
            .iter()
            .map(|(d, id)| {
                let r = audit_run_as(d, id, &settings, &options, &[]);
                serde_json::to_string(&r).expect("json")
            })
            .collect();
        assert!(alone.len() >= 10, "{} runs", alone.len());
        let audited = std::sync::atomic::AtomicUsize::new(0);
        let tick = || {
            audited.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        };
        let each = |stop_after: usize| {
            let mut got = Vec::new();
            let r = audit_each(&root, &settings, &options, &[], &tick, &mut |r| {
                got.push(serde_json::to_string(&r).expect("json"));
                if got.len() == stop_after {
                    return Err(std::io::Error::other("stop"));
                }
                Ok(())
            });
            (r.is_ok(), got)
        };
        assert_eq!(each(usize::MAX), (true, alone.clone()));
        let one = rayon::ThreadPoolBuilder::new()
            .num_threads(1)
            .build()
            .expect("pool");
        assert_eq!(one.install(|| each(usize::MAX)), (true, alone.clone()));
        // Stopped at the first report, from the main thread: the runs in
        // flight then (a window of four per worker) finish, none starts.
        audited.store(0, std::sync::atomic::Ordering::Relaxed);
        let (ok, got) = each(1);
        assert!(!ok);
        assert_eq!(got, alone[..1]);
        let window = rayon::current_num_threads().max(1) * 4;
        let n = audited.load(std::sync::atomic::Ordering::Relaxed);
        assert!(n <= window, "{n} runs audited, window {window}");
    }
}
