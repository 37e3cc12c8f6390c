//! Settings: every threshold and option of every check, with its default.
//!
//! [`Settings`] is the resolved form the checks read. Its defaults are the
//! documented ones (`docs/checks.md`); the CLI overrides them field by field.

use crate::findings::Severity;

/// Thresholds of the `cold_connections` check.
#[derive(Debug, Clone, PartialEq)]
pub struct ColdSettings {
    /// A record whose `http_req_dns_lookup` exceeds this (ms) is cold.
    pub dns_ms: f64,
    /// A record whose `http_req_connecting` (TCP + TLS) exceeds this (ms) is cold.
    pub connect_ms: f64,
    /// Finding when a published statistic over all records differs from the
    /// warm-only one by more than this (percent).
    pub bias_pct: f64,
    /// Fewer warm records than this: too few to tell.
    pub min_warm: usize,
}

impl Default for ColdSettings {
    fn default() -> Self {
        ColdSettings {
            dns_ms: 1.0,
            connect_ms: 1.0,
            bias_pct: 5.0,
            min_warm: 5,
        }
    }
}

/// Options of the `phase_contamination` check.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct PhaseSettings {
    /// Extra request-scoped metrics (name, observed at `arrival`,
    /// `first_token` or `completion`), added to the built-in table.
    pub extra_metrics: Vec<(String, crate::frameworks::ObservedAt)>,
    /// Slack (ms) when matching a scrape increment to the request whose
    /// event it records: client and server clocks and the scrape's own
    /// latency put the two a little apart.
    pub match_slack_ms: f64,
}

/// Thresholds of the `prefix_cache` check.
#[derive(Debug, Clone, PartialEq)]
pub struct PrefixSettings {
    /// Finding when |server - client| hit rate exceeds this (percentage points).
    pub gap_pp: f64,
    /// Finding when AIPerf's `overall_usage_prompt_cache_read_pct` differs
    /// from the records by more than this (percentage points).
    pub client_summary_pp: f64,
    /// Finding when server and client prompt-token totals differ by more than
    /// this (percent).
    pub prompt_tokens_pct: f64,
    /// Finding when the published prefill throughput overstates the uncached
    /// one by more than this (percent).
    pub prefill_overstatement_pct: f64,
}

impl Default for PrefixSettings {
    fn default() -> Self {
        PrefixSettings {
            gap_pp: 1.0,
            client_summary_pp: 0.1,
            prompt_tokens_pct: 0.5,
            prefill_overstatement_pct: 10.0,
        }
    }
}

/// Everything the checks and the report need.
#[derive(Debug, Clone, PartialEq)]
pub struct Settings {
    /// Exit 1 when a finding at or above this severity exists.
    pub fail_on: Severity,
    /// `cold_connections`.
    pub cold: ColdSettings,
    /// `phase_contamination`.
    pub phase: PhaseSettings,
    /// `prefix_cache`.
    pub prefix: PrefixSettings,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            fail_on: Severity::Error,
            cold: ColdSettings::default(),
            phase: PhaseSettings {
                extra_metrics: Vec::new(),
                match_slack_ms: 20.0,
            },
            prefix: PrefixSettings::default(),
        }
    }
}
