//! The checks, and the one seam they plug into.
//!
//! A check is a module that exports a [`Check`]: its name (its key in the
//! JSON report), its finding codes (defined in the module with
//! [`crate::define_codes!`]) and a `run` function from the run's context
//! ([`Ctx`]) to a [`CheckOutput`]: its figures as a report of its own type
//! ([`CheckReport`], which also writes its one-line summary and any detail
//! tables), its findings, and, when it lacked what it needed, why it could
//! not tell. Checks read the model and the artifacts; they never import each
//! other, print, or decide a status or an exit code. [`ALL`] is the registry:
//! adding a check is a new module plus one line there.
//!
//! A check that lacks what it needs says so: its status is `unknown` and its
//! `reason` says why ("cannot tell, because ..."), never a silent pass.

pub mod artifacts;
pub mod cold_connections;
pub mod phase_contamination;
pub mod prefix_cache;
pub mod steady_state;

use std::any::Any;
use std::fmt::Debug;
use std::sync::Arc;

use rayon::prelude::*;
use serde::ser::SerializeMap;
use serde::{Serialize, Serializer};

use crate::artifacts::RunArtifacts;
use crate::config::Settings;
use crate::findings::{Code, Finding, Severity};
use crate::model::RunModel;

/// The checks, in report order.
pub const ALL: &[Check] = &[
    artifacts::CHECK,
    phase_contamination::CHECK,
    cold_connections::CHECK,
    prefix_cache::CHECK,
    steady_state::CHECK,
];

/// Every finding code, in registry order: each check's codes, then the
/// claims', then `compare`'s.
pub fn codes() -> impl Iterator<Item = Code> {
    ALL.iter()
        .flat_map(|c| c.codes.iter().flat_map(|list| list.iter().copied()))
        .chain(crate::claims::CODES.iter().copied())
        .chain(crate::compare::CODES.iter().copied())
}

/// A finding code by its id.
pub fn code(id: &str) -> Option<Code> {
    codes().find(|c| c.as_str() == id)
}

/// A check: what the registry knows of it.
pub struct Check {
    /// `snake_case` name: the key under `checks` in the JSON report, the
    /// `check` of its findings.
    pub name: &'static str,
    /// Its finding codes, in lists (the `artifacts` check reports the
    /// readers' codes and its own).
    pub codes: &'static [&'static [Code]],
    /// Runs it on one run.
    pub run: fn(&Ctx) -> CheckOutput,
}

/// What every check gets.
pub struct Ctx<'a> {
    /// Parsed artifacts.
    pub run: &'a RunArtifacts,
    /// The run model.
    pub model: &'a RunModel,
    /// Settings.
    pub settings: &'a Settings,
}

impl Ctx<'_> {
    /// The records, if `profile_export.jsonl` was read.
    pub fn records(&self) -> Option<&[crate::artifacts::records::Record]> {
        self.run.records.as_ref().map(|r| r.records.as_slice())
    }
}

/// What a check returns.
pub struct CheckOutput {
    /// Its figures.
    pub report: Arc<dyn CheckReport>,
    /// Its findings.
    pub findings: Vec<Finding>,
    /// Why it could not tell, when it could not: its status is then
    /// `unknown` unless a warning or an error says more.
    pub cannot_tell: Option<String>,
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
}

/// One headline number of a check: a short name and its formatted value.
#[derive(Debug, Clone, PartialEq)]
pub struct Headline {
    /// Column name, e.g. `hit rate client / server`.
    pub name: &'static str,
    /// The value as shown, e.g. `68.4 % / 68.4 %`.
    pub value: String,
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

/// Runs every check. They are independent, so they run in parallel; their
/// outputs come back in registry order whatever the schedule.
pub fn run_all(ctx: &Ctx) -> Vec<(&'static Check, CheckOutput)> {
    ALL.par_iter().map(|c| (c, (c.run)(ctx))).collect()
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
    }
}
