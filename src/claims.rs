//! `--expect FILE`: published claims held to what the artifacts support after
//! cleaning (warmup, cold-connection and failed requests dropped).
//!
//! ```toml
//! [[claim]]
//! name = "ttft_p99_ms"          # or time_to_first_token.p99, prefix_cache_hit_rate,
//!                               # output_token_throughput, request_throughput, ...
//! value = 152.0
//! tolerance-pct = 5.0           # relative; or `tolerance = 0.5` (absolute)
//! over = "steady-state"         # optional: the opening wave and drain tail
//!                               # dropped too (throughputs: the steady window)
//! ```

use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::artifacts::records::{Metric, Phase, Record};
use crate::findings::{Finding, Unit};

crate::define_codes! { "claims";
    CLAIM_MISMATCH => ("claim-mismatch", Error,
        "A published claim differs from what the cleaned artifacts support beyond its tolerance"),
    CLAIM_UNSUPPORTED => ("claim-unsupported", Warning,
        "A published claim cannot be checked: the artifacts do not carry what it measures"),
}
use crate::model::cache::client_rate;
use crate::model::selection::{self, Exclusions};
use crate::model::steady::Per;
use crate::results::ClaimResult;
use crate::stats::Stat;

/// What a claim is about.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Quantity {
    /// A statistic (`mean`, `p50`, `p90`, `p99`) of a per-request metric.
    Record(Metric, Stat),
    /// The clients' token-weighted prefix-cache hit rate (0..1).
    PrefixCacheHitRate,
    /// AIPerf's `output_token_throughput` (tokens/s): the successful
    /// profiling requests' output tokens over the profiling window.
    OutputTokenThroughput,
    /// AIPerf's `request_throughput` (requests/s): the successful profiling
    /// requests over the profiling window.
    RequestThroughput,
}

/// A parsed claim.
#[derive(Debug, Clone, PartialEq)]
pub struct Claim {
    /// The name as written.
    pub name: String,
    /// What it measures.
    pub quantity: Quantity,
    /// The published value.
    pub value: f64,
    /// Allowed relative difference (percent).
    pub tolerance_pct: Option<f64>,
    /// Allowed absolute difference.
    pub tolerance: Option<f64>,
    /// Over the steady state only (`over = "steady-state"`).
    pub steady_state: bool,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ClaimsFile {
    claim: Vec<ClaimSpec>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct ClaimSpec {
    name: String,
    value: f64,
    tolerance_pct: Option<f64>,
    tolerance: Option<f64>,
    over: Option<String>,
}

/// Parses a claim name: `<tag>.<stat>`, the aliases `ttft_<stat>_ms`,
/// `latency_<stat>_ms`, `itl_<stat>_ms`, or `prefix_cache_hit_rate`.
pub fn quantity(name: &str) -> Option<Quantity> {
    match name {
        "prefix_cache_hit_rate" => return Some(Quantity::PrefixCacheHitRate),
        "output_token_throughput" => return Some(Quantity::OutputTokenThroughput),
        "request_throughput" => return Some(Quantity::RequestThroughput),
        _ => {}
    }
    let stat_of = Stat::parse;
    if let Some((tag, stat)) = name.rsplit_once('.') {
        return Some(Quantity::Record(Metric::from_tag(tag)?, stat_of(stat)?));
    }
    let rest = name.strip_suffix("_ms")?;
    let (prefix, stat) = rest.rsplit_once('_')?;
    let metric = match prefix {
        "ttft" => Metric::TimeToFirstToken,
        "latency" => Metric::RequestLatency,
        "itl" => Metric::InterTokenLatency,
        _ => return None,
    };
    Some(Quantity::Record(metric, stat_of(stat)?))
}

/// A claims file that could not be used.
#[derive(Debug, thiserror::Error)]
pub enum ClaimsError {
    /// The file could not be read.
    #[error("{}: {why}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why (shown in the message; not a `source`, so an error chain
        /// does not print it twice).
        why: std::io::Error,
    },
    /// Not valid TOML, or an unknown key (the message names it and its line).
    #[error("{}: {message}", path.display())]
    Syntax {
        /// The file.
        path: PathBuf,
        /// The parser's message.
        message: String,
    },
    /// A claim names no quantity this tool knows.
    #[error(
        "{}: unknown claim {name:?} (use <metric>.<mean|p50|p90|p99>, ttft_p99_ms, \
         latency_p50_ms, itl_mean_ms, prefix_cache_hit_rate, output_token_throughput, \
         request_throughput)",
        path.display()
    )]
    UnknownClaim {
        /// The file.
        path: PathBuf,
        /// The claim's name.
        name: String,
    },
    /// A value or tolerance that is not a finite number, or a negative
    /// tolerance: nothing could be held to it.
    #[error("{}: claim {name:?}: {key} = {value} must be a finite number{}", path.display(),
        if *key == "value" { "" } else { " >= 0" })]
    BadNumber {
        /// The file.
        path: PathBuf,
        /// The claim's name.
        name: String,
        /// `value`, `tolerance` or `tolerance-pct`.
        key: &'static str,
        /// What it is.
        value: f64,
    },
    /// A claim without a tolerance cannot be held to anything.
    #[error("{}: claim {name:?} has no tolerance or tolerance-pct", path.display())]
    NoTolerance {
        /// The file.
        path: PathBuf,
        /// The claim's name.
        name: String,
    },
    /// More claims than [`MAX_CLAIMS`].
    #[error("{}: {count} claims; at most {MAX_CLAIMS} are checked (a report publishes tens)", path.display())]
    TooMany {
        /// The file.
        path: PathBuf,
        /// How many it holds.
        count: usize,
    },
    /// `over` is neither `all` nor `steady-state`.
    #[error("{}: claim {name:?}: over = {over:?} is not \"all\" or \"steady-state\"", path.display())]
    BadOver {
        /// The file.
        path: PathBuf,
        /// The claim's name.
        name: String,
        /// What it is.
        over: String,
    },
}

/// At most this many claims are held to a run: each is evaluated over the
/// run's records, and a report publishes tens of numbers.
pub const MAX_CLAIMS: usize = 1000;

/// Reads a claims file; any unknown name or key is an error naming it.
pub fn read(path: &Path) -> Result<Vec<Claim>, ClaimsError> {
    let text = crate::files::read_regular_to_string(path, crate::files::MAX_SETTINGS_BYTES)
        .map_err(|why| ClaimsError::Read {
            path: path.to_path_buf(),
            why,
        })?;
    parse(&text, path)
}

/// The claims of the text of the claims file `path`.
pub fn parse(text: &str, path: &Path) -> Result<Vec<Claim>, ClaimsError> {
    let file: ClaimsFile = toml::from_str(text).map_err(|e| ClaimsError::Syntax {
        path: path.to_path_buf(),
        message: e.to_string(),
    })?;
    if file.claim.len() > MAX_CLAIMS {
        return Err(ClaimsError::TooMany {
            path: path.to_path_buf(),
            count: file.claim.len(),
        });
    }
    file.claim
        .into_iter()
        .map(|c| {
            let quantity = quantity(&c.name).ok_or_else(|| ClaimsError::UnknownClaim {
                path: path.to_path_buf(),
                name: c.name.clone(),
            })?;
            let numbers = [
                ("value", Some(c.value)),
                ("tolerance", c.tolerance),
                ("tolerance-pct", c.tolerance_pct),
            ];
            for (key, v) in numbers {
                let Some(v) = v else { continue };
                if !v.is_finite() || (key != "value" && v < 0.0) {
                    return Err(ClaimsError::BadNumber {
                        path: path.to_path_buf(),
                        name: c.name,
                        key,
                        value: v,
                    });
                }
            }
            let steady_state = match c.over.as_deref() {
                None | Some("all") => false,
                Some("steady-state") => true,
                Some(other) => {
                    return Err(ClaimsError::BadOver {
                        path: path.to_path_buf(),
                        name: c.name,
                        over: other.to_string(),
                    })
                }
            };
            if c.tolerance.is_none() && c.tolerance_pct.is_none() {
                return Err(ClaimsError::NoTolerance {
                    path: path.to_path_buf(),
                    name: c.name,
                });
            }
            Ok(Claim {
                name: c.name,
                quantity,
                value: c.value,
                tolerance_pct: c.tolerance_pct,
                tolerance: c.tolerance,
                steady_state,
            })
        })
        .collect()
}

/// A throughput as AIPerf computes it: the successful profiling requests'
/// output tokens (or requests) over the profiling window (`window_ns`,
/// AIPerf's observation duration; the records' span when the export has
/// none). Over every successful request, cold ones included: leaving
/// requests out of a count over the same time is no cleaning. Over the
/// steady state (`steady`), over its window instead (`model::steady::rate`).
fn throughput(
    records: &[Record],
    window_ns: Option<(u64, u64)>,
    steady: Option<&crate::model::steady::SteadyState>,
    per: Per,
) -> Option<f64> {
    let ok: Vec<&Record> = records
        .iter()
        .filter(|r| r.phase == Phase::Profiling && r.is_success())
        .collect();
    if let Some(st) = steady {
        return crate::model::steady::rate(&ok, st.window_ns, per, true);
    }
    let span = window_ns.or_else(|| {
        let a = ok.iter().map(|r| r.request_start_ns).min()?;
        let b = ok.iter().map(|r| r.request_end_ns).max()?;
        Some((a, b))
    });
    crate::model::steady::rate(&ok, span, per, false)
}

/// Evaluates the claims on a run's records.
pub fn evaluate(
    claims: &[Claim],
    records: Option<&[Record]>,
    model: &crate::model::RunModel,
) -> (Vec<ClaimResult>, Vec<Finding>) {
    let window_ns = model.profiling.server_window_ns;
    let ex = |steady_state| Exclusions {
        cold: true,
        errors: true,
        first_turns: false,
        steady_state,
    };
    // The steady state is found once, for every claim over it.
    let state = records
        .filter(|_| claims.iter().any(|c| c.steady_state))
        .map(|r| model.steady(r));
    let stats_over = |steady: bool| {
        records.map(|r| {
            let sel = selection::select_with(r, &model.temperatures, ex(steady), state);
            selection::statistics(&sel.kept)
        })
    };
    let (stats, steady_stats) = (
        stats_over(false),
        state.as_ref().and_then(|_| stats_over(true)),
    );
    let results: Vec<ClaimResult> = claims
        .iter()
        .map(|c| {
            let st = state.as_ref().filter(|_| c.steady_state);
            let record_stats = if c.steady_state { &steady_stats } else { &stats };
            let supported = match c.quantity {
                Quantity::Record(m, stat) => record_stats
                    .as_ref()
                    .and_then(|s| s.get(m.tag()))
                    .and_then(|s| s.get(stat)),
                Quantity::PrefixCacheHitRate => records.and_then(|rs| {
                    let ok = rs.iter().enumerate().filter(|(i, r)| {
                        r.phase == Phase::Profiling
                            && r.is_success()
                            && st.is_none_or(|s| !s.excludes(*i))
                    });
                    client_rate(ok.map(|(_, r)| r)).hit_rate
                }),
                Quantity::OutputTokenThroughput => {
                    records.and_then(|rs| throughput(rs, window_ns, st.copied(), Per::Tokens))
                }
                Quantity::RequestThroughput => {
                    records.and_then(|rs| throughput(rs, window_ns, st.copied(), Per::Requests))
                }
            };
            let over = match (c.quantity, c.steady_state) {
                (Quantity::OutputTokenThroughput | Quantity::RequestThroughput, false) => {
                    "the successful profiling requests over the profiling window, as AIPerf counts them"
                }
                (Quantity::OutputTokenThroughput | Quantity::RequestThroughput, true) => {
                    "the successful profiling requests over the steady window, between the opening wave and the drain"
                }
                (Quantity::PrefixCacheHitRate, false) => "the successful profiling requests",
                (Quantity::PrefixCacheHitRate, true) => {
                    "the successful profiling requests of the steady state"
                }
                (Quantity::Record(..), false) => "warmup, cold and failed requests dropped",
                (Quantity::Record(..), true) => {
                    "warmup, cold and failed requests, the opening wave and the drain tail dropped"
                }
            };
            ClaimResult {
                over,
                ..c.against(supported)
            }
        })
        .collect();
    let findings = results.iter().filter_map(ClaimResult::finding).collect();
    (results, findings)
}

impl Claim {
    /// The claim held to what the artifacts support.
    fn against(&self, supported: Option<f64>) -> ClaimResult {
        let v = self.value;
        let difference_pct = supported.filter(|s| *s != 0.0).map(|s| (v - s) / s * 100.0);
        let within = supported.map(|s| {
            let abs_ok = self.tolerance.is_some_and(|t| (v - s).abs() <= t);
            let rel_ok = self
                .tolerance_pct
                .is_some_and(|t| s != 0.0 && ((v - s) / s * 100.0).abs() <= t);
            abs_ok || rel_ok
        });
        ClaimResult {
            name: self.name.clone(),
            claimed: v,
            supported,
            difference: supported.map(|s| v - s),
            difference_pct,
            within,
            over: "",
        }
    }
}

impl ClaimResult {
    /// A claim outside its tolerance, or one the artifacts cannot check.
    fn finding(&self) -> Option<Finding> {
        match self.within {
            Some(true) => None,
            Some(false) => Some(
                Finding::new(
                    CLAIM_MISMATCH,
                    format!(
                        "claim {} = {} but the artifacts ({}) give {}: {}",
                        self.name,
                        self.claimed,
                        self.over,
                        self.supported
                            .map_or("nothing".to_string(), |s| format!("{s:.6}")),
                        // No percentage of 0: the absolute difference instead.
                        match (self.difference_pct, self.difference) {
                            (Some(p), _) if p.is_finite() => format!("{p:+.2} %"),
                            (_, Some(d)) =>
                                format!("{d:+.6} (absolute; a percentage of 0 is undefined)"),
                            _ => "off".to_string(),
                        }
                    ),
                )
                .field(self.name.clone())
                .expected_found(self.supported, self.claimed)
                .effect(
                    "difference",
                    self.difference.unwrap_or(f64::NAN),
                    Unit::Value,
                )
                .effect(
                    "difference_pct",
                    self.difference_pct.unwrap_or(f64::NAN),
                    Unit::Percent,
                ),
            ),
            None => Some(
                Finding::new(
                    CLAIM_UNSUPPORTED,
                    format!(
                        "claim {}: cannot tell, the artifacts do not carry what it measures",
                        self.name
                    ),
                )
                .field(self.name.clone()),
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_aliases_parse() {
        assert_eq!(
            quantity("ttft_p99_ms"),
            Some(Quantity::Record(Metric::TimeToFirstToken, Stat::P99))
        );
        assert_eq!(
            quantity("request_latency.mean"),
            Some(Quantity::Record(Metric::RequestLatency, Stat::Mean))
        );
        assert_eq!(
            quantity("prefix_cache_hit_rate"),
            Some(Quantity::PrefixCacheHitRate)
        );
        assert_eq!(
            quantity("output_token_throughput"),
            Some(Quantity::OutputTokenThroughput)
        );
        assert_eq!(
            quantity("request_throughput"),
            Some(Quantity::RequestThroughput)
        );
        assert_eq!(quantity("ttft_p42_ms"), None);
        assert_eq!(quantity("nonsense.p99"), None);
    }
}
