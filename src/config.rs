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
    /// Published claims to check (`--expect`).
    pub claims: Vec<crate::claims::Claim>,
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
            claims: Vec::new(),
        }
    }
}

// --- The configuration file ----------------------------------------------------------

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// `artifact-check.toml`: every key optional, unknown keys rejected. Flags
/// given on the command line win over the file; the file wins over defaults.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct FileConfig {
    /// `error`, `warning` or `info`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fail_on: Option<String>,
    /// Only report these codes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub select: Option<Vec<String>>,
    /// Never report these codes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ignore: Option<Vec<String>>,
    /// `cold_connections` thresholds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cold_connections: Option<ColdFile>,
    /// `phase_contamination` options.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase_contamination: Option<PhaseFile>,
    /// `prefix_cache` thresholds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefix_cache: Option<PrefixFile>,
}

/// `[cold-connections]`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
#[allow(missing_docs)]
pub struct ColdFile {
    pub dns_ms: Option<f64>,
    pub connect_ms: Option<f64>,
    pub bias_pct: Option<f64>,
    pub min_warm_records: Option<usize>,
}

/// `[phase-contamination]`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
#[allow(missing_docs)]
pub struct PhaseFile {
    pub match_slack_ms: Option<f64>,
    /// Metric name → `arrival`, `first_token` or `completion`.
    pub request_scoped_metrics: Option<std::collections::BTreeMap<String, String>>,
}

/// `[prefix-cache]`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
#[allow(missing_docs)]
pub struct PrefixFile {
    pub gap_pp: Option<f64>,
    pub client_summary_pp: Option<f64>,
    pub prompt_tokens_pct: Option<f64>,
    pub prefill_overstatement_pct: Option<f64>,
}

/// The file name searched for.
pub const CONFIG_FILE: &str = "artifact-check.toml";

/// `artifact-check.toml` in `start` or its nearest parent that has one.
pub fn find_config(start: &Path) -> Option<PathBuf> {
    start
        .ancestors()
        .map(|d| d.join(CONFIG_FILE))
        .find(|p| p.is_file())
}

/// Reads and parses a configuration file; the error names the file and key.
pub fn read_config(path: &Path) -> Result<FileConfig, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    toml::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))
}

/// A threshold must be a finite, non-negative number; the error names `key`.
pub fn non_negative(key: &str, v: Option<f64>) -> Result<Option<f64>, String> {
    match v {
        Some(x) if !(x.is_finite() && x >= 0.0) => {
            Err(format!("{key} must be a non-negative number, not {x}"))
        }
        v => Ok(v),
    }
}

impl FileConfig {
    /// Applies the file's thresholds to `s` (not `fail-on`/`select`/`ignore`,
    /// which the CLI resolves with its own flags).
    pub fn apply(&self, s: &mut Settings) -> Result<(), String> {
        if let Some(c) = &self.cold_connections {
            if let Some(v) = non_negative("cold-connections.dns-ms", c.dns_ms)? {
                s.cold.dns_ms = v;
            }
            if let Some(v) = non_negative("cold-connections.connect-ms", c.connect_ms)? {
                s.cold.connect_ms = v;
            }
            if let Some(v) = non_negative("cold-connections.bias-pct", c.bias_pct)? {
                s.cold.bias_pct = v;
            }
            if let Some(v) = c.min_warm_records {
                s.cold.min_warm = v;
            }
        }
        if let Some(p) = &self.phase_contamination {
            if let Some(v) = non_negative("phase-contamination.match-slack-ms", p.match_slack_ms)? {
                s.phase.match_slack_ms = v;
            }
            for (name, when) in p.request_scoped_metrics.iter().flatten() {
                let at = crate::frameworks::ObservedAt::parse(when).ok_or_else(|| {
                    format!(
                        "phase-contamination.request-scoped-metrics.{name:?}: {when:?} is not \
                         arrival, first_token or completion"
                    )
                })?;
                s.phase.extra_metrics.push((name.clone(), at));
            }
        }
        if let Some(p) = &self.prefix_cache {
            if let Some(v) = non_negative("prefix-cache.gap-pp", p.gap_pp)? {
                s.prefix.gap_pp = v;
            }
            if let Some(v) = non_negative("prefix-cache.client-summary-pp", p.client_summary_pp)? {
                s.prefix.client_summary_pp = v;
            }
            if let Some(v) = non_negative("prefix-cache.prompt-tokens-pct", p.prompt_tokens_pct)? {
                s.prefix.prompt_tokens_pct = v;
            }
            if let Some(v) = non_negative(
                "prefix-cache.prefill-overstatement-pct",
                p.prefill_overstatement_pct,
            )? {
                s.prefix.prefill_overstatement_pct = v;
            }
        }
        Ok(())
    }

    /// The effective configuration of `s` (with `select`/`ignore`), as a file.
    pub fn effective(s: &Settings, select: &[String], ignore: &[String]) -> FileConfig {
        FileConfig {
            fail_on: Some(s.fail_on.as_str().to_string()),
            select: Some(select.to_vec()),
            ignore: Some(ignore.to_vec()),
            cold_connections: Some(ColdFile {
                dns_ms: Some(s.cold.dns_ms),
                connect_ms: Some(s.cold.connect_ms),
                bias_pct: Some(s.cold.bias_pct),
                min_warm_records: Some(s.cold.min_warm),
            }),
            phase_contamination: Some(PhaseFile {
                match_slack_ms: Some(s.phase.match_slack_ms),
                request_scoped_metrics: Some(
                    s.phase
                        .extra_metrics
                        .iter()
                        .map(|(n, a)| (n.clone(), a.as_str().to_string()))
                        .collect(),
                ),
            }),
            prefix_cache: Some(PrefixFile {
                gap_pp: Some(s.prefix.gap_pp),
                client_summary_pp: Some(s.prefix.client_summary_pp),
                prompt_tokens_pct: Some(s.prefix.prompt_tokens_pct),
                prefill_overstatement_pct: Some(s.prefix.prefill_overstatement_pct),
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_keys_are_rejected_with_their_name() {
        let e =
            toml::from_str::<FileConfig>("fail-on = \"warning\"\n[cold-connections]\nbias = 3\n")
                .expect_err("unknown key");
        assert!(e.to_string().contains("unknown field `bias`"), "{e}");
    }

    #[test]
    fn file_values_apply_and_round_trip() {
        let f: FileConfig = toml::from_str(
            "[prefix-cache]\ngap-pp = 2.5\n[phase-contamination.request-scoped-metrics]\n\"my:metric\" = \"completion\"\n",
        )
        .expect("parses");
        let mut s = Settings::default();
        f.apply(&mut s).expect("applies");
        assert_eq!(s.prefix.gap_pp, 2.5);
        assert_eq!(s.phase.extra_metrics.len(), 1);
        let eff = FileConfig::effective(&s, &[], &[]);
        let text = toml::to_string(&eff).expect("serializes");
        let back: FileConfig = toml::from_str(&text).expect("round trip");
        assert_eq!(back, eff);
    }
}
