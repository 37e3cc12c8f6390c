//! The report data: what an audit found, as plain serializable data, below
//! the checks and the renderers. The checks fill it ([`CheckReport`]: a
//! check's figures, its one-line summary, its detail tables, its headline
//! quantities and its hit rates, all typed); the flow assembles it
//! ([`RunReport`], [`Report`], [`Summary`], [`ExitStatus`]); the renderers
//! (`crate::report`) read only it, the findings and `crate::text`. Nothing
//! here runs a check or writes text for a format.

pub mod comparison;
pub mod published;
pub mod timeline;

use std::any::Any;
use std::collections::BTreeMap;
use std::fmt::Debug;
use std::sync::Arc;

use serde::ser::SerializeMap;
use serde::{Serialize, Serializer};

use crate::findings::{Finding, Severity};
use crate::model::PhaseModel;

/// A path that could not be searched, or held no run.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct PathError {
    /// The path as given.
    pub path: String,
    /// What went wrong.
    pub message: String,
}

/// Version of the JSON report's layout (`docs/report-schema.md`).
pub const REPORT_SCHEMA_VERSION: &str = "1.0";

/// The process exit status an audit maps to; written as its number.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub enum ExitStatus {
    /// 0: nothing at or above the fail level.
    #[default]
    Ok,
    /// 1: at least one finding at or above the fail level.
    Findings,
    /// 2: the tool could not do its job (bad arguments, a path with no run,
    /// a run none of whose artifacts could be read).
    Error,
}

impl ExitStatus {
    /// The process exit code.
    pub fn code(self) -> i32 {
        match self {
            ExitStatus::Ok => EXIT_OK,
            ExitStatus::Findings => EXIT_FINDINGS,
            ExitStatus::Error => EXIT_ERROR,
        }
    }
}

impl std::fmt::Display for ExitStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.code())
    }
}

impl Serialize for ExitStatus {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_i32(self.code())
    }
}

/// Exit code of [`ExitStatus::Ok`].
pub const EXIT_OK: i32 = 0;
/// Exit code of [`ExitStatus::Findings`].
pub const EXIT_FINDINGS: i32 = 1;
/// Exit code of [`ExitStatus::Error`].
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

closed_set! {
    /// What silenced a finding.
    pub enum SuppressedBy {
        /// A `[[scoped-ignore]]` of the configuration.
        ScopedIgnore => "scoped-ignore",
        /// The `--baseline` report: the finding was already there.
        Baseline => "baseline",
    }
}

/// A finding a suppression silenced.
#[derive(Debug, Clone, Serialize)]
pub struct Suppressed {
    /// The finding, as it would have been reported.
    pub finding: Finding,
    /// What silenced it.
    pub rule: SuppressedBy,
    /// Why: the scoped ignore's reason, or the baseline's path.
    pub reason: String,
}

/// Everything found about one run.
#[derive(Debug, Clone, Serialize)]
pub struct RunReport {
    /// The run directory as found.
    pub path: String,
    /// Its identity, independent of how its path was spelled: the audited
    /// folder's name and the run's path below it (`discover::run_id`).
    /// What `--baseline`, `[[scoped-ignore]]` `run` globs and the SARIF and
    /// GitLab fingerprints match on.
    pub id: String,
    /// AIPerf's `benchmark_id`, when the summary has one (a baseline
    /// matches a run by it too).
    pub benchmark_id: Option<String>,
    /// The run's resolved path, when the path to it passes through a
    /// symbolic link.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resolved_path: Option<String>,
    /// Findings a `[[scoped-ignore]]` or `--baseline` silenced, each with
    /// the rule and its reason: silenced, never lost.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub suppressed: Vec<Suppressed>,
    /// AIPerf version that wrote it.
    pub aiperf_version: Option<String>,
    /// Verdict.
    pub status: RunStatus,
    /// Every number the run publishes that people quote, with its verdict
    /// and its corrected value (`published::build`).
    pub published: Vec<published::Published>,
    /// Per phase kind: configured and realised counts.
    pub phases: BTreeMap<&'static str, PhaseModel>,
    /// One entry per check.
    pub checks: Checks,
    /// Published claims checked (`--expect`), when any.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub claims: Vec<ClaimResult>,
    /// Every finding, in check order.
    pub findings: Vec<Finding>,
    /// Request-scoped metrics the user named that this run's server export
    /// does not have (a name in no run is an error of the audit).
    #[serde(skip)]
    pub unknown_user_metrics: Vec<String>,
    /// The run in time, when a report needs it (an HTML report: `RunOptions::timeline`).
    #[serde(skip)]
    pub timeline: Option<Arc<timeline::Timeline>>,
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
    /// Symlinked directories not followed (`--no-follow-links`), each with
    /// why; absent when none. Not an error: the exit code ignores them.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub skipped: Vec<PathError>,
    /// `[[scoped-ignore]]`s without a run glob that silenced nothing in any
    /// audited run: `unused-suppression` warnings of the audit, counted in
    /// `findings` (a run-scoped one is a finding of its run); absent when
    /// none.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub unused_suppressions: Vec<String>,
    /// Findings by severity.
    pub findings: BTreeMap<&'static str, usize>,
    /// The fail level in force.
    pub fail_on: Severity,
    /// The process exit status this report maps to (`exit_code` in JSON).
    #[serde(rename = "exit_code")]
    pub exit: ExitStatus,
}

/// The whole audit.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// Every finding code the audit could report, in registry order (the
    /// order of SARIF's rules; not serialized).
    #[serde(skip)]
    pub codes: &'static [crate::findings::Code],
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
        self.summary.exit.code()
    }
}

/// A check's figures: serialized under its name in the JSON report (after
/// `status` and `reason`), summarised in one line and detail tables for the
/// table report. Renderers read checks through this and nothing else.
pub trait CheckReport: erased_serde::Serialize + Debug + Send + Sync + Any {
    /// One line: what the check found, in figures (`reason` when it could
    /// not tell).
    fn summary(&self, reason: Option<&str>) -> String;

    /// Tables of detail worth showing with this status.
    fn details(&self, _status: CheckStatus) -> Vec<Detail> {
        Vec::new()
    }

    /// The numbers a reader looks for first (a short name and its value),
    /// shown at the top of a summary: a hit rate, a warm-only percentile.
    fn headline(&self) -> Vec<Headline> {
        Vec::new()
    }

    /// The prefix-cache hit rates it measured: the clients' first, then
    /// each server formula's.
    fn hit_rates(&self) -> Vec<HitRate> {
        Vec::new()
    }

    /// The published figures it looked at: that it vouches for each, or
    /// could not tell and why (`reason`: why the check as a whole could
    /// not; `published::build` joins them with the findings).
    fn figures(&self, _reason: Option<&str>) -> Vec<published::Figure> {
        Vec::new()
    }
}

/// One headline of a check: a short name and the quantities it compares
/// (`None`: unknown), in one unit, with the change between them in percent
/// where the check gives one.
#[derive(Debug, Clone, PartialEq)]
pub struct Headline {
    /// Column name, e.g. `hit rate client / server`.
    pub name: &'static str,
    /// The quantities, in the order the name gives them.
    pub values: Vec<Option<f64>>,
    /// Their unit.
    pub unit: HeadlineUnit,
    /// The last quantity against the first, in percent, when given.
    pub change_pct: Option<f64>,
}

/// The unit of a headline's quantities.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HeadlineUnit {
    /// A fraction, shown as a percentage.
    Fraction,
    /// Milliseconds.
    Ms,
}

impl Headline {
    /// The quantities as shown: `68.4 % / 68.4 %`, `126.3 / 94.8 ms (+33.2 %)`,
    /// `?` for an unknown one.
    pub fn value_text(&self) -> String {
        let values: Vec<String> = self
            .values
            .iter()
            .map(|v| match (v, self.unit) {
                (None, _) => "?".to_string(),
                (Some(v), HeadlineUnit::Fraction) => format!("{:.1} %", v * 100.0),
                (Some(v), HeadlineUnit::Ms) => format!("{v:.1}"),
            })
            .collect();
        let mut text = values.join(" / ");
        if self.unit == HeadlineUnit::Ms {
            text.push_str(" ms");
        }
        if let Some(c) = self.change_pct {
            text.push_str(&format!(" ({c:+.1} %)"));
        }
        text
    }
}

/// A prefix-cache hit rate a check measured.
#[derive(Debug, Clone, PartialEq)]
pub struct HitRate {
    /// Whose rate it is.
    pub source: HitSource,
    /// The rate, a fraction.
    pub rate: f64,
}

/// Whose hit rate.
#[derive(Debug, Clone, PartialEq)]
pub enum HitSource {
    /// The clients' token-weighted rate over so many records.
    Clients {
        /// Records it is over.
        records: usize,
    },
    /// A server formula over its endpoints.
    Server {
        /// The formula, as the check names it.
        formula: String,
        /// The endpoints it is computed over.
        endpoints: Vec<String>,
    },
}

erased_serde::serialize_trait_object!(CheckReport);

impl dyn CheckReport {
    /// The report as its own type (for library users and tests).
    pub fn downcast<T: CheckReport>(&self) -> Option<&T> {
        (self as &dyn Any).downcast_ref()
    }
}

/// A table of detail: a header and rows of cells, rendered by the table
/// format.
#[derive(Debug, Clone, PartialEq)]
pub struct Detail {
    /// Column names.
    pub header: Vec<&'static str>,
    /// Rows, as many cells as columns.
    pub rows: Vec<Vec<String>>,
}

/// What a check concluded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum CheckStatus {
    /// Nothing wrong.
    Pass,
    /// Could not tell (see `reason`).
    Unknown,
    /// Warning-level findings.
    Warn,
    /// Error-level findings.
    Fail,
}

impl CheckStatus {
    /// From the check's findings; `unknown` when it could not run and found nothing.
    pub fn from_findings<'a>(
        findings: impl IntoIterator<Item = &'a Finding>,
        could_not_tell: bool,
    ) -> CheckStatus {
        match findings.into_iter().map(|f| f.severity).max() {
            Some(Severity::Error) => CheckStatus::Fail,
            Some(Severity::Warning) => CheckStatus::Warn,
            _ if could_not_tell => CheckStatus::Unknown,
            _ => CheckStatus::Pass,
        }
    }

    /// Lowercase name.
    pub fn as_str(self) -> &'static str {
        match self {
            CheckStatus::Pass => "pass",
            CheckStatus::Unknown => "unknown",
            CheckStatus::Warn => "warn",
            CheckStatus::Fail => "fail",
        }
    }
}

/// One check's result in a run's report.
#[derive(Debug, Clone)]
pub struct CheckResult {
    /// The check's name.
    pub name: &'static str,
    /// Its status, from the findings that survived `--select`/`--ignore`.
    pub status: CheckStatus,
    /// Why it could not tell.
    pub reason: Option<String>,
    /// Its figures.
    pub report: Arc<dyn CheckReport>,
}

impl CheckResult {
    /// The one-line summary.
    pub fn summary(&self) -> String {
        self.report.summary(self.reason.as_deref())
    }

    /// The detail tables for this status.
    pub fn details(&self) -> Vec<Detail> {
        self.report.details(self.status)
    }
}

impl Serialize for CheckResult {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct View<'a> {
            status: CheckStatus,
            #[serde(skip_serializing_if = "Option::is_none")]
            reason: &'a Option<String>,
            #[serde(flatten)]
            report: &'a dyn CheckReport,
        }
        View {
            status: self.status,
            reason: &self.reason,
            report: self.report.as_ref(),
        }
        .serialize(s)
    }
}

/// Every check's result, in registry order; serialized as an object keyed
/// by check name.
#[derive(Debug, Clone, Default)]
pub struct Checks(pub Vec<CheckResult>);

impl Checks {
    /// A check's result by name.
    pub fn get(&self, name: &str) -> Option<&CheckResult> {
        self.0.iter().find(|c| c.name == name)
    }

    /// A check's report as its own type.
    pub fn report<T: CheckReport>(&self) -> Option<&T> {
        self.0.iter().find_map(|c| c.report.downcast::<T>())
    }

    /// The results, in registry order.
    pub fn iter(&self) -> impl Iterator<Item = &CheckResult> {
        self.0.iter()
    }
}

impl Serialize for Checks {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(Some(self.0.len()))?;
        for c in &self.0 {
            map.serialize_entry(c.name, c)?;
        }
        map.end()
    }
}

/// One claim against one run.
#[derive(Debug, Clone, Serialize)]
pub struct ClaimResult {
    /// The claim's name.
    pub name: String,
    /// The published value.
    pub claimed: f64,
    /// What the cleaned artifacts give; `null` when they cannot tell.
    pub supported: Option<f64>,
    /// claimed - supported.
    pub difference: Option<f64>,
    /// (claimed - supported) / supported x 100.
    pub difference_pct: Option<f64>,
    /// Within tolerance; `null` when unknown.
    pub within: Option<bool>,
    /// Which records the supported value is over, in words.
    #[serde(skip)]
    pub(crate) over: &'static str,
}
