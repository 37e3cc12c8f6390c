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

use std::sync::Arc;

use rayon::prelude::*;

pub use crate::results::{CheckReport, CheckResult, CheckStatus, Checks, Detail, Headline};

use crate::artifacts::RunArtifacts;
use crate::config::Settings;
use crate::findings::{Code, Finding};
use crate::model::RunModel;

/// The checks, in report order.
pub const ALL: &[Check] = &[
    artifacts::CHECK,
    phase_contamination::CHECK,
    cold_connections::CHECK,
    prefix_cache::CHECK,
    steady_state::CHECK,
];

/// The checks' finding codes, in registry order (every code of the tool,
/// the claims' and `compare`'s too: [`crate::codes`]).
pub fn codes() -> impl Iterator<Item = Code> {
    ALL.iter()
        .flat_map(|c| c.codes.iter().flat_map(|list| list.iter().copied()))
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
    /// Its warning and error findings that name a server metric and an
    /// endpoint get that metric's scrape intervals on the HTML timeline.
    pub timeline: bool,
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

/// Runs every check. They are independent, so they run in parallel; their
/// outputs come back in registry order whatever the schedule.
pub fn run_all(ctx: &Ctx) -> Vec<(&'static Check, CheckOutput)> {
    run_all_with(|c| (c.run)(ctx))
}

/// [`run_all`]'s schedule, each check run by `run` (`examples/check_timeline`
/// times each check of the real schedule through it).
pub fn run_all_with(
    run: impl Fn(&'static Check) -> CheckOutput + Sync,
) -> Vec<(&'static Check, CheckOutput)> {
    ALL.par_iter().map(|c| (c, run(c))).collect()
}
