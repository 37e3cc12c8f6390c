//! Findings: what a check reports, as data.
//!
//! Every problem artifact-check can report has a stable [`Code`] listed once in
//! the table below, with the check that emits it, its default severity and a
//! one-line summary. `docs/checks.md` documents each code, and a test fails if
//! a code is missing there, so the table, the docs and the report cannot drift.
//!
//! Checks build [`Finding`]s and return them; they never print. Renderers in
//! [`crate::report`] turn findings into text.

use serde::Serialize;
use serde_json::Value;

/// How bad a finding is. Ordered: `Info < Warning < Error`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// Worth knowing; never fails a run unless `--fail-on info`.
    Info,
    /// A number is suspect or a check could only partly run.
    Warning,
    /// A published number is wrong, or an artifact is broken. The default
    /// fail level.
    #[default]
    Error,
}

impl Severity {
    /// Every severity, lowest first.
    pub const ALL: [Severity; 3] = [Severity::Info, Severity::Warning, Severity::Error];

    /// The lowercase name used in every output format.
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Info => "info",
            Severity::Warning => "warning",
            Severity::Error => "error",
        }
    }
}

/// Not `error`, `warning` or `info`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0:?} is not error, warning or info")]
pub struct UnknownSeverity(pub String);

impl std::str::FromStr for Severity {
    type Err = UnknownSeverity;

    /// The lowercase name, as [`Severity::as_str`] writes it.
    fn from_str(s: &str) -> Result<Severity, UnknownSeverity> {
        Severity::ALL
            .into_iter()
            .find(|v| v.as_str() == s)
            .ok_or_else(|| UnknownSeverity(s.to_string()))
    }
}

macro_rules! codes {
    ($( $variant:ident => ($code:literal, $check:literal, $sev:ident, $summary:literal), )*) => {
        /// A stable finding code. The string form (kebab-case) is the contract.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        #[non_exhaustive]
        pub enum Code { $( #[doc = $summary] $variant, )* }

        impl Code {
            /// Every code, in table order.
            pub const ALL: &'static [Code] = &[ $( Code::$variant, )* ];

            /// The code as written in reports and accepted by `--select`/`--ignore`.
            pub fn as_str(self) -> &'static str {
                match self { $( Code::$variant => $code, )* }
            }

            /// The check that emits this code.
            pub fn check(self) -> &'static str {
                match self { $( Code::$variant => $check, )* }
            }

            /// The severity a finding with this code gets.
            pub fn severity(self) -> Severity {
                match self { $( Code::$variant => Severity::$sev, )* }
            }

            /// One line saying what the code means.
            pub fn summary(self) -> &'static str {
                match self { $( Code::$variant => $summary, )* }
            }

            /// Looks a code up by its string form.
            pub fn parse(s: &str) -> Option<Code> {
                match s { $( $code => Some(Code::$variant), )* _ => None }
            }
        }
    };
}

codes! {
    // --- artifacts: reading the run directory -------------------------------------------
    MissingArtifact => ("missing-artifact", "artifacts", Warning,
        "An artifact a check needs is not in the run directory"),
    UnreadableFile => ("unreadable-file", "artifacts", Error,
        "A file exists but cannot be read (permissions, a directory in its place, I/O error)"),
    EmptyFile => ("empty-file", "artifacts", Error,
        "An artifact file is empty"),
    InvalidJson => ("invalid-json", "artifacts", Error,
        "A JSON artifact is not valid JSON or a field has the wrong type"),
    InvalidRecord => ("invalid-record", "artifacts", Error,
        "A line of a JSON-lines artifact is not valid JSON or a field has the wrong type"),
    TruncatedRecord => ("truncated-record", "artifacts", Warning,
        "The last line of a JSON-lines artifact is cut off (the run was killed mid-write)"),
    OversizedLine => ("oversized-line", "artifacts", Error,
        "A line of a JSON-lines artifact is longer than the reader accepts; it was skipped"),
    UnknownSchemaVersion => ("unknown-schema-version", "artifacts", Warning,
        "An artifact declares a schema version this tool was not built for"),
    DuplicateRequestId => ("duplicate-request-id", "artifacts", Warning,
        "Two records carry the same x_request_id"),
    InvalidTimestamps => ("invalid-timestamps", "artifacts", Warning,
        "A record ends before it starts"),
    RequestCountMismatch => ("request-count-mismatch", "artifacts", Warning,
        "The configured request count of a phase differs from its successful records"),
    SummaryMismatch => ("summary-mismatch", "artifacts", Error,
        "profile_export_aiperf.json disagrees with the records in profile_export.jsonl"),
    RunIncomplete => ("run-incomplete", "artifacts", Warning,
        "AIPerf marked the run cancelled or incomplete"),
    SymlinkOutsideRun => ("symlink-outside-run", "artifacts", Warning,
        "An artifact is a symlink that leads outside the run directory (it was read)"),
    // --- phase_contamination -------------------------------------------------------------
    LateWarmupObservation => ("late-warmup-observation", "phase_contamination", Error,
        "Warmup observations were counted in profiling (profiling +k, warmup -k)"),
    ProfilingLostToWarmup => ("profiling-lost-to-warmup", "phase_contamination", Error,
        "Profiling observations were counted in warmup (profiling -k, warmup +k)"),
    PhaseWindowOverlap => ("phase-window-overlap", "phase_contamination", Warning,
        "The warmup window closes after profiling has started"),
    UnexplainedExcess => ("unexplained-excess", "phase_contamination", Error,
        "A phase holds more observations than it had requests, with no matching deficit"),
    UnexplainedDeficit => ("unexplained-deficit", "phase_contamination", Error,
        "A phase holds fewer observations than it had requests, with no matching excess"),
    CounterWindowEarly => ("counter-window-early", "phase_contamination", Error,
        "A counter's profiling timeslices start before profiling started"),
    CounterReset => ("counter-reset", "phase_contamination", Error,
        "A cumulative server metric went down: the server restarted or the series was reset"),
    AiperfVersionAdvisory => ("aiperf-version-advisory", "phase_contamination", Info,
        "This AIPerf version takes the end-of-warmup scrape without a flush barrier"),
    PhaseCheckUnknown => ("phase-check-unknown", "phase_contamination", Info,
        "The phase split cannot be checked: no request-scoped server metric or no records"),
    // --- cold_connections ----------------------------------------------------------------
    ColdConnectionBias => ("cold-connection-bias", "cold_connections", Warning,
        "Cold-connection requests move a published statistic by more than the threshold"),
    AllConnectionsCold => ("all-connections-cold", "cold_connections", Warning,
        "Every profiling request opened a new connection; there is no warm baseline"),
    ConnectionFieldsMissing => ("connection-fields-missing", "cold_connections", Info,
        "Records lack the HTTP connection fields; cold requests cannot be told apart"),
    // --- prefix_cache --------------------------------------------------------------------
    PrefixCacheGap => ("prefix-cache-gap", "prefix_cache", Error,
        "The server's prefix-cache hit rate differs from the clients' cached tokens"),
    PrefixCacheInconsistent => ("prefix-cache-inconsistent", "prefix_cache", Error,
        "Server cache counters contradict themselves (hits > queries, cached > prompt, ratio > 1)"),
    PrefixCacheGaugeOnly => ("prefix-cache-gauge-only", "prefix_cache", Warning,
        "Only a hit-rate gauge exists; a gauge average is not a token-weighted hit rate"),
    ClientCacheMismatch => ("client-cache-mismatch", "prefix_cache", Warning,
        "AIPerf's overall_usage_prompt_cache_read_pct differs from the records"),
    PromptTokenMismatch => ("prompt-token-mismatch", "prefix_cache", Warning,
        "Server prompt-token totals differ from the clients' usage_prompt_tokens"),
    PrefillThroughputOverstated => ("prefill-throughput-overstated", "prefix_cache", Warning,
        "prefill_throughput_per_user counts cached tokens that were never prefilled"),
    CacheRateUnknown => ("cache-rate-unknown", "prefix_cache", Info,
        "A hit rate cannot be computed (no cached-token field or no cache counters)"),
    // --- claims (--expect) ---------------------------------------------------------------
    ClaimMismatch => ("claim-mismatch", "claims", Error,
        "A published claim differs from what the cleaned artifacts support beyond its tolerance"),
    ClaimUnsupported => ("claim-unsupported", "claims", Warning,
        "A published claim cannot be checked: the artifacts do not carry what it measures"),
}

impl Serialize for Code {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

/// A measured size of an effect: "+1 observation", "+20 %", "-3.1 pp".
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Effect {
    /// What is measured, e.g. `count_inflation`.
    pub quantity: &'static str,
    /// The value.
    pub value: f64,
    /// `count`, `%`, `pp` (percentage points), `ms`, `tokens/s`.
    pub unit: &'static str,
}

/// One problem found in one run.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[non_exhaustive]
pub struct Finding {
    /// Stable code.
    pub code: Code,
    /// Severity (the code's default).
    pub severity: Severity,
    /// The check that found it.
    pub check: &'static str,
    /// What is wrong, in one or two sentences a person can act on.
    pub message: String,
    /// The file it concerns, relative to the run directory.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
    /// 1-based line number within `file`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub line: Option<u64>,
    /// The JSON field (path) concerned.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub field: Option<String>,
    /// What the artifacts should have said.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expected: Option<Value>,
    /// What they say.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub found: Option<Value>,
    /// The size of the effect.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub effect: Vec<Effect>,
}

impl Finding {
    /// A finding with the code's default severity and check.
    pub fn new(code: Code, message: impl Into<String>) -> Finding {
        Finding {
            code,
            severity: code.severity(),
            check: code.check(),
            message: message.into(),
            file: None,
            line: None,
            field: None,
            expected: None,
            found: None,
            effect: Vec::new(),
        }
    }

    /// Sets the file.
    pub fn file(mut self, file: impl Into<String>) -> Finding {
        self.file = Some(file.into());
        self
    }

    /// Sets the line.
    pub fn line(mut self, line: u64) -> Finding {
        self.line = Some(line);
        self
    }

    /// Sets the field path.
    pub fn field(mut self, field: impl Into<String>) -> Finding {
        self.field = Some(field.into());
        self
    }

    /// Sets expected and found.
    pub fn expected_found(mut self, expected: impl Serialize, found: impl Serialize) -> Finding {
        self.expected = serde_json::to_value(expected).ok();
        self.found = serde_json::to_value(found).ok();
        self
    }

    /// Adds an effect size.
    pub fn effect(mut self, quantity: &'static str, value: f64, unit: &'static str) -> Finding {
        if value.is_finite() {
            self.effect.push(Effect {
                quantity,
                value,
                unit,
            });
        }
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn codes_are_unique_kebab_case_and_round_trip() {
        let mut seen = HashSet::new();
        for &code in Code::ALL {
            let s = code.as_str();
            assert!(seen.insert(s), "duplicate code {s}");
            assert!(s.chars().all(|c| c.is_ascii_lowercase() || c == '-'), "{s}");
            assert_eq!(Code::parse(s), Some(code));
            assert!(!code.summary().is_empty());
        }
        assert_eq!(Code::parse("no-such-code"), None);
    }

    #[test]
    fn non_finite_effects_are_dropped() {
        let f = Finding::new(Code::PrefixCacheGap, "x").effect("gap", f64::NAN, "pp");
        assert!(f.effect.is_empty());
    }
}
