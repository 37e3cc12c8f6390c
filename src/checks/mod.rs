//! The checks. Each is a module with a `run(&Ctx) -> (Report, Vec<Finding>)`
//! function: it reads the parsed run, returns its figures as a typed report
//! and its problems as findings, and never prints or decides exit codes.
//!
//! A check that lacks what it needs says so: its status is `unknown` and its
//! `reason` says why ("cannot tell, because ..."), never a silent pass.

pub mod artifacts;
pub mod cold_connections;
pub mod phase_contamination;
pub mod prefix_cache;

use serde::Serialize;

use crate::artifacts::RunArtifacts;
use crate::config::Settings;
use crate::findings::{Finding, Severity};
use crate::model::RunModel;

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
    pub fn from_findings(findings: &[Finding], could_not_tell: bool) -> CheckStatus {
        match findings.iter().map(|f| f.severity).max() {
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

/// The reports of every check, keyed as in the JSON report.
#[derive(Debug, Clone, Serialize)]
pub struct Checks {
    /// Artifact integrity and counts.
    pub artifacts: artifacts::Report,
    /// Phase split of server metrics.
    pub phase_contamination: phase_contamination::Report,
    /// Cold-connection requests and their bias.
    pub cold_connections: cold_connections::Report,
    /// Prefix-cache hit rates.
    pub prefix_cache: prefix_cache::Report,
}

/// Runs every check. They are independent, so they run in parallel; their
/// findings are concatenated in a fixed order whatever the schedule.
pub fn run_all(ctx: &Ctx) -> (Checks, Vec<Finding>) {
    let ((artifacts, phase_contamination), (cold_connections, prefix_cache)) = rayon::join(
        || rayon::join(|| artifacts::run(ctx), || phase_contamination::run(ctx)),
        || rayon::join(|| cold_connections::run(ctx), || prefix_cache::run(ctx)),
    );
    let mut findings = Vec::new();
    for mut f in [
        artifacts.1,
        phase_contamination.1,
        cold_connections.1,
        prefix_cache.1,
    ] {
        findings.append(&mut f);
    }
    let checks = Checks {
        artifacts: artifacts.0,
        phase_contamination: phase_contamination.0,
        cold_connections: cold_connections.0,
        prefix_cache: prefix_cache.0,
    };
    (checks, findings)
}
