//! Check `prefix_cache`: hold the server's prefix-cache hit rate to what the
//! clients were told.
//!
//! What it checks: the client-side hit rate, token-weighted
//! `sum(usage_prompt_cache_read_tokens) / sum(usage_prompt_tokens)` over
//! successful profiling records (never a mean of ratios; a record without the
//! field is unknown, not zero), for warmup too and over warm records only;
//! AIPerf's own `overall_usage_prompt_cache_read_pct` against it; the
//! server-side rate by every framework formula whose counters exist; the gap
//! in percentage points; server vs client prompt-token totals, with the
//! difference attributed to requests that crossed the warmup/profiling
//! boundary when their prompt tokens account for it exactly; and the prefill
//! throughput over uncached tokens beside AIPerf's `prefill_throughput_per_user`.
//!
//! Why it matters: a wrongly tagged baseline scrape moved published hit rates
//! by 1 to 6 points (seed 001), and cached tokens that were never prefilled
//! inflate prefill throughput (seed 004).

use std::sync::Arc;

use serde::Serialize;

mod raw_scrapes;
pub use raw_scrapes::RawScrapeRate;

use super::{Check, CheckOutput, CheckReport, Ctx};
use crate::artifacts::records::{self, Metric, Phase, Record};
use crate::artifacts::server_metrics::{self, lookup, Families, MetricType};
use crate::artifacts::summary;
use crate::findings::{Finding, Unit};

/// The check.
pub const CHECK: Check = Check {
    name: "prefix_cache",
    codes: &[CODES],
    run,
};

crate::define_codes! { "prefix_cache";
    PREFIX_CACHE_GAP => ("prefix-cache-gap", Error,
        "The server's prefix-cache hit rate differs from the clients' cached tokens"),
    PREFIX_CACHE_INCONSISTENT => ("prefix-cache-inconsistent", Error,
        "Server cache counters contradict themselves (hits > queries, cached > prompt, ratio > 1)"),
    PREFIX_CACHE_GAUGE_ONLY => ("prefix-cache-gauge-only", Warning,
        "Only a hit-rate gauge exists; a gauge average is not a token-weighted hit rate"),
    CLIENT_CACHE_MISMATCH => ("client-cache-mismatch", Warning,
        "AIPerf's overall_usage_prompt_cache_read_pct differs from the records"),
    PROMPT_TOKEN_MISMATCH => ("prompt-token-mismatch", Warning,
        "Server prompt-token totals differ from the clients' usage_prompt_tokens"),
    PREFILL_THROUGHPUT_OVERSTATED => ("prefill-throughput-overstated", Warning,
        "prefill_throughput_per_user counts cached tokens that were never prefilled"),
    CACHE_RATE_UNKNOWN => ("cache-rate-unknown", Info,
        "A hit rate cannot be computed (no cached-token field or no cache counters)"),
}
use crate::frameworks::{role_of, PREFILL_ROLES};
use crate::model::cache::ClientRateSum;
pub use crate::model::cache::{client_rate, ClientRate};
use crate::model::connection::{classify, Temperature};
use crate::stats;

/// A server-side hit rate by one framework formula.
#[derive(Debug, Clone, Serialize)]
pub struct ServerRate {
    /// `vllm`, `sglang`, `trtllm`, `atom`, `dynamo`.
    pub framework: &'static str,
    /// The formula, naming the metrics.
    pub formula: String,
    /// numerator / denominator (0..1); `null` when undefined or above 1.
    pub hit_rate: Option<f64>,
    /// Numerator (tokens).
    pub numerator: f64,
    /// Denominator (tokens).
    pub denominator: f64,
    /// Endpoints whose series were summed.
    pub endpoints: Vec<String>,
    /// True for a gauge average (not a token-weighted rate).
    pub gauge: bool,
    /// Only prefill-role series were used.
    pub prefill_only: bool,
    /// The formula and the numerator and denominator families it used.
    #[serde(skip)]
    source: Option<(&'static Formula, &'static str, &'static str)>,
}

/// Prefill throughput over uncached tokens, for one group of requests.
#[derive(Debug, Clone, Serialize)]
pub struct PrefillGroup {
    /// `all`, `hit` (cached > 0) or `miss`.
    pub group: &'static str,
    /// Records in the group.
    pub records: usize,
    /// Mean of AIPerf's `prefill_throughput_per_user`.
    pub published_mean: Option<f64>,
    /// Mean of `(usage_prompt_tokens - cached) / TTFT` (tokens/s).
    pub uncached_mean: Option<f64>,
    /// `(published - uncached) / uncached * 100`.
    pub overstatement_pct: Option<f64>,
}

/// Figures of the `prefix_cache` check.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// Over successful profiling records.
    pub client: ClientRate,
    /// Over successful warmup records.
    pub client_warmup: Option<ClientRate>,
    /// Over warm (connection-reused) successful profiling records.
    pub client_warm_only: ClientRate,
    /// AIPerf's `overall_usage_prompt_cache_read_pct` as a fraction.
    pub aiperf_overall: Option<f64>,
    /// Server rates over the profiling phase, headline first.
    pub server: Vec<ServerRate>,
    /// Server rates over the warmup phase.
    pub server_warmup: Vec<ServerRate>,
    /// Headline server rate minus client rate, in percentage points.
    pub gap_pp: Option<f64>,
    /// Server minus client prompt tokens over profiling.
    pub prompt_token_difference: Option<f64>,
    /// What explains the gap, where the artifacts allow.
    pub explanations: Vec<String>,
    /// Server rate recomputed without the requests that crossed the boundary.
    pub server_adjusted: Option<ServerRate>,
    /// The headline formula recomputed from the raw scrapes over the true
    /// profiling requests (with `server_metrics_export.jsonl`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub server_from_raw_scrapes: Option<RawScrapeRate>,
    /// Prefill throughput under caching.
    pub prefill_throughput: Vec<PrefillGroup>,
}

/// Sum of a family's phase amounts over the series that pass `keep`.
fn sum_family(
    families: &Families,
    name: &str,
    keep: &dyn Fn(&server_metrics::Series) -> bool,
    endpoints: &mut Vec<String>,
) -> Option<f64> {
    let (_, fam) = lookup(families, name)?;
    let mut total = None;
    for s in fam.series.iter().filter(|s| keep(s)) {
        if let Some(v) = s.amount(fam.kind) {
            *total.get_or_insert(0.0) += v;
            if let Some(e) = &s.endpoint_url {
                if !endpoints.contains(e) {
                    endpoints.push(e.clone());
                }
            }
        }
    }
    total
}

fn has_prefill_role(families: &Families, name: &str) -> bool {
    lookup(families, name).is_some_and(|(_, f)| {
        f.series
            .iter()
            .any(|s| role_of(&s.labels).is_some_and(|r| PREFILL_ROLES.contains(&r)))
    })
}

/// Whether a series with `labels` counts for one side of a formula: its
/// label filter, and in prefill/decode deployments the prefill role. Shared
/// by the export's series and the raw scrapes' samples.
fn counts_for(
    labels: &std::collections::BTreeMap<String, String>,
    filter: Option<(&str, &[&str])>,
    prefill_only: bool,
) -> bool {
    (!prefill_only || role_of(labels).is_some_and(|r| PREFILL_ROLES.contains(&r)))
        && filter.is_none_or(|(k, v)| labels.get(k).is_some_and(|x| v.contains(&x.as_str())))
}

/// A (numerator, denominator) formula over token counters.
#[derive(Debug)]
struct Formula {
    framework: &'static str,
    label: &'static str,
    num: &'static [&'static str],
    num_filter: Option<(&'static str, &'static [&'static str])>,
    den: &'static [&'static str],
    den_filter: Option<(&'static str, &'static [&'static str])>,
}

/// Token-weighted formulas, headline first. Names are alternatives (the
/// first that exists is used); `_total` spellings are accepted by lookup.
const FORMULAS: &[Formula] = &[
    Formula {
        framework: "vllm",
        label: "local_cache_hit / sum(prompt_tokens_by_source)",
        num: &["vllm:prompt_tokens_by_source"],
        num_filter: Some(("source", &["local_cache_hit"])),
        den: &["vllm:prompt_tokens_by_source"],
        den_filter: None,
    },
    Formula {
        framework: "vllm",
        label: "prefix_cache_hits / prefix_cache_queries",
        num: &["vllm:prefix_cache_hits"],
        num_filter: None,
        den: &["vllm:prefix_cache_queries"],
        den_filter: None,
    },
    Formula {
        framework: "sglang",
        label: "cached_tokens (all cache_source) / prompt_tokens",
        num: &["sglang:cached_tokens"],
        num_filter: None,
        den: &["sglang:prompt_tokens"],
        den_filter: None,
    },
    Formula {
        framework: "trtllm",
        label: "prompt_cached_tokens / prompt_tokens",
        num: &["trtllm_prompt_cached_tokens", "trtllm:prompt_cached_tokens"],
        num_filter: None,
        den: &["trtllm_prompt_tokens", "trtllm:prompt_tokens"],
        den_filter: None,
    },
    Formula {
        framework: "atom",
        label: "prefix_cache_cached_tokens / prefix_cache_full_tokens",
        num: &[
            "atom:prefix_cache_cached_tokens",
            "atom_prefix_cache_cached_tokens",
        ],
        num_filter: None,
        den: &[
            "atom:prefix_cache_full_tokens",
            "atom_prefix_cache_full_tokens",
        ],
        den_filter: None,
    },
    Formula {
        framework: "dynamo",
        label: "frontend cached_tokens / input_sequence_tokens",
        num: &["dynamo_frontend_cached_tokens"],
        num_filter: None,
        den: &["dynamo_frontend_input_sequence_tokens"],
        den_filter: None,
    },
];

/// Secondary (external / KV-transfer) rates, reported but never the headline.
const EXTERNAL: &[Formula] = &[
    Formula {
        framework: "vllm",
        label: "external_kv_transfer / sum(prompt_tokens_by_source)",
        num: &["vllm:prompt_tokens_by_source"],
        num_filter: Some(("source", &["external_kv_transfer"])),
        den: &["vllm:prompt_tokens_by_source"],
        den_filter: None,
    },
    Formula {
        framework: "vllm",
        label: "external_prefix_cache_hits / external_prefix_cache_queries",
        num: &["vllm:external_prefix_cache_hits"],
        num_filter: None,
        den: &["vllm:external_prefix_cache_queries"],
        den_filter: None,
    },
    Formula {
        framework: "sglang",
        label: "cached_tokens{cache_source=device} / prompt_tokens",
        num: &["sglang:cached_tokens"],
        num_filter: Some(("cache_source", &["device"])),
        den: &["sglang:prompt_tokens"],
        den_filter: None,
    },
];

/// Hit-rate gauges: averages of a rolling ratio, used only when no token
/// counters exist.
const GAUGES: &[(&str, &str)] = &[
    ("trtllm", "trtllm_kv_cache_hit_rate"),
    ("trtllm", "trtllm:kv_cache_hit_rate"),
    ("sglang", "sglang:cache_hit_rate"),
    (
        "dynamo",
        "dynamo_component_kvstats_gpu_prefix_cache_hit_rate",
    ),
    ("vllm", "vllm:gpu_prefix_cache_hit_rate"),
];

fn evaluate(families: &Families, f: &'static Formula) -> Option<ServerRate> {
    let num_name: &'static str = f.num.iter().find(|n| lookup(families, n).is_some())?;
    let den_name: &'static str = f.den.iter().find(|n| lookup(families, n).is_some())?;
    // In prefill/decode deployments, decode workers count KV received from
    // prefill as hits: use prefill-role series when any exist.
    let prefill_only = has_prefill_role(families, num_name);
    let num_keep = |s: &server_metrics::Series| counts_for(&s.labels, f.num_filter, prefill_only);
    let den_keep = |s: &server_metrics::Series| counts_for(&s.labels, f.den_filter, prefill_only);
    let mut endpoints = Vec::new();
    let numerator = sum_family(families, num_name, &num_keep, &mut endpoints)?;
    let denominator = sum_family(families, den_name, &den_keep, &mut endpoints)?;
    if denominator <= 0.0 && f.num_filter.is_some() {
        return None;
    }
    let ratio = (denominator > 0.0).then(|| numerator / denominator);
    let untyped = [num_name, den_name]
        .iter()
        .any(|n| lookup(families, n).is_some_and(|(_, f)| f.kind == MetricType::Unknown));
    let mut formula = format!("{}: {}", f.framework, f.label);
    if untyped {
        formula.push_str(" (untyped families: max - min over the phase's scrapes, a lower bound)");
    }
    if prefill_only {
        formula.push_str(" (prefill-role series only)");
    }
    Some(ServerRate {
        framework: f.framework,
        formula,
        hit_rate: ratio.filter(|r| *r <= 1.0),
        numerator,
        denominator,
        endpoints,
        gauge: false,
        prefill_only,
        source: Some((f, num_name, den_name)),
    })
}

fn gauge_rate(families: &Families) -> Option<ServerRate> {
    for (framework, name) in GAUGES {
        let Some((found, fam)) = lookup(families, name) else {
            continue;
        };
        let avgs: Vec<f64> = fam.series.iter().filter_map(|s| s.stats.avg).collect();
        let mean = stats::mean(&avgs)?;
        let rate = if mean > 1.5 { mean / 100.0 } else { mean };
        let endpoints: Vec<String> = fam
            .series
            .iter()
            .filter_map(|s| s.endpoint_url.clone())
            .collect();
        return Some(ServerRate {
            framework,
            formula: format!(
                "{framework}: unweighted mean over {} series of the {found} gauge's average \
                 (not token-weighted)",
                avgs.len()
            ),
            hit_rate: Some(rate).filter(|r| (0.0..=1.0).contains(r)),
            numerator: rate,
            denominator: 1.0,
            endpoints,
            gauge: true,
            prefill_only: false,
            source: None,
        });
    }
    None
}

/// Every server rate available in `families`, headline first.
pub fn server_rates(families: &Families) -> Vec<ServerRate> {
    let mut out: Vec<ServerRate> = FORMULAS
        .iter()
        .filter_map(|f| evaluate(families, f))
        .collect();
    // The by-source vLLM formula overrides hits/queries only when it has data.
    out.retain(|r| !(r.formula.contains("prompt_tokens_by_source") && r.denominator <= 0.0));
    if out.is_empty() {
        out.extend(gauge_rate(families));
    }
    out.extend(
        EXTERNAL
            .iter()
            .filter_map(|f| evaluate(families, f))
            .map(|mut r| {
                r.formula = format!("{} [secondary]", r.formula);
                r
            }),
    );
    out
}

/// Server prompt-token counters, most specific first.
const PROMPT_TOKENS: &[&str] = &[
    "vllm:prompt_tokens",
    "sglang:prompt_tokens",
    "trtllm_prompt_tokens",
    "dynamo_frontend_input_sequence_tokens",
];

impl CheckReport for Report {
    fn summary(&self, _reason: Option<&str>) -> String {
        use crate::report::pct;
        let head = self.server.first();
        let coverage = self
            .client
            .coverage
            .map(|c| format!(" (coverage {:.0} %)", c * 100.0))
            .unwrap_or_default();
        let formula = head
            .map(|h| format!(" ({})", h.formula))
            .unwrap_or_default();
        let gap = self
            .gap_pp
            .map(|g| format!("; gap {g:+.2} pp"))
            .unwrap_or_default();
        format!(
            "client {}{coverage}; server {}{formula}{gap}",
            pct(self.client.hit_rate),
            pct(head.and_then(|h| h.hit_rate)),
        )
    }
}

/// Runs the check.
pub fn run(ctx: &Ctx) -> CheckOutput {
    let p = &ctx.settings.prefix;
    let mut findings = Vec::new();
    let mut explanations = Vec::new();
    let records = ctx.records().unwrap_or(&[]);
    let ok = |phase| {
        records
            .iter()
            .filter(move |r| r.phase == phase && r.is_success())
    };
    // One walk for the client rates of profiling, warmup and warm profiling
    // requests, and the clients' profiling prompt tokens (each summed in
    // file order, as separate walks would).
    let mut profiling = ClientRateSum::default();
    let mut warmup = ClientRateSum::default();
    let mut warm_only = ClientRateSum::default();
    // Started where `Iterator::sum` starts, so the total is bit for bit the
    // one a `.sum()` over the same values gave.
    let mut client_prompt: f64 = std::iter::empty::<f64>().sum();
    for r in records.iter().filter(|r| r.is_success()) {
        match r.phase {
            Phase::Profiling => {
                profiling.add(r);
                if let Some(p) = r.values.get(Metric::UsagePromptTokens) {
                    client_prompt += p;
                }
                if classify(r, &ctx.settings.cold) == Temperature::Warm {
                    warm_only.add(r);
                }
            }
            Phase::Warmup => warmup.add(r),
        }
    }
    let client = profiling.finish();
    let client_warmup = ctx.model.warmup.as_ref().map(|_| warmup.finish());
    let client_warm_only = warm_only.finish();
    let summary = ctx.run.summary.as_ref();
    let aiperf_overall = summary.and_then(|s| s.scalar("overall_usage_prompt_cache_read_pct"));
    let server = ctx.run.server.as_ref();
    let server_rates_p = server.map(|s| server_rates(&s.metrics)).unwrap_or_default();
    let server_rates_w = server
        .and_then(|s| s.warmup_metrics.as_ref())
        .map(server_rates)
        .unwrap_or_default();

    if ctx.run.records.is_some() && client.hit_rate.is_none() && client.records > 0 {
        findings.push(
            Finding::new(
                CACHE_RATE_UNKNOWN,
                format!(
                    "client hit rate unknown: none of the {} successful profiling records has \
                     usage_prompt_cache_read_tokens (the server did not report cached tokens: \
                     vLLM needs --enable-prompt-tokens-details, SGLang --enable-cache-report)",
                    client.records
                ),
            )
            .file(records::FILE)
            .field("metrics.usage_prompt_cache_read_tokens"),
        );
    }
    if server.is_some() && server_rates_p.is_empty() {
        findings.push(
            Finding::new(
                CACHE_RATE_UNKNOWN,
                "server hit rate unknown: server_metrics_export.json has no prefix-cache \
                 counters or gauges of a known framework",
            )
            .file(server_metrics::FILE),
        );
    }

    // AIPerf's own client-side figure against the records.
    if let (Some(pct), Some(rate)) = (aiperf_overall, client.hit_rate) {
        let gap = pct - rate * 100.0;
        if gap.abs() > p.client_summary_pp {
            findings.push(
                Finding::new(
                    CLIENT_CACHE_MISMATCH,
                    format!(
                        "overall_usage_prompt_cache_read_pct is {pct:.3} % but the profiling \
                         records give {:.3} %",
                        rate * 100.0
                    ),
                )
                .file(summary::FILE)
                .field("overall_usage_prompt_cache_read_pct.avg")
                .expected_found(rate * 100.0, pct)
                .effect("gap", gap, Unit::Pp),
            );
        }
    }

    sanity(&server_rates_p, &mut findings);

    let headline = server_rates_p
        .iter()
        .find(|r| !r.formula.ends_with("[secondary]"));
    if let Some(h) = headline.filter(|h| h.gauge) {
        findings.push(
            Finding::new(
                PREFIX_CACHE_GAUGE_ONLY,
                format!(
                    "the only server hit rate is a gauge ({}); a time average of a rolling \
                     ratio, averaged again across series, is not a token-weighted hit rate",
                    h.formula
                ),
            )
            .file(server_metrics::FILE),
        );
    }
    let gap_pp = match (headline.and_then(|h| h.hit_rate), client.hit_rate) {
        (Some(s), Some(c)) => Some((s - c) * 100.0),
        _ => None,
    };

    // Prompt tokens: server vs client over profiling.
    let server_prompt = server.and_then(|s| {
        PROMPT_TOKENS
            .iter()
            .find_map(|n| sum_family(&s.metrics, n, &|_| true, &mut Vec::new()))
    });
    let prompt_token_difference = server_prompt
        .filter(|_| client.records > 0)
        .map(|s| s - client_prompt);
    let mut server_adjusted = None;
    if let (Some(diff), Some(sp)) = (prompt_token_difference, server_prompt) {
        if client_prompt > 0.0 && (diff / client_prompt * 100.0).abs() > p.prompt_tokens_pct {
            let crossing = boundary_requests(
                records,
                diff,
                ctx.model.profiling.server_window_ns.map(|w| w.0),
            );
            let attribution = match &crossing {
                Some(c) => {
                    let ids: Vec<String> = c.requests.iter().map(|r| r.id_or_line()).collect();
                    format!(
                        "; exactly the prompt tokens of {} {} request(s) that {} ({})",
                        c.requests.len(),
                        c.phase.as_str(),
                        c.how,
                        ids.join(", ")
                    )
                }
                None => String::new(),
            };
            explanations.push(format!(
                "server prompt tokens over profiling are {sp:.0}, the clients' \
                 sum(usage_prompt_tokens) is {client_prompt:.0}: a difference of {diff:+.0}{attribution}"
            ));
            findings.push(
                Finding::new(
                    PROMPT_TOKEN_MISMATCH,
                    format!(
                        "server counted {sp:.0} prompt tokens in profiling, the clients \
                         {client_prompt:.0} ({diff:+.0}){attribution}"
                    ),
                )
                .file(server_metrics::FILE)
                .expected_found(client_prompt, sp)
                .effect("difference", diff, Unit::Tokens)
                .effect(
                    "difference_pct",
                    diff / client_prompt * 100.0,
                    Unit::Percent,
                ),
            );
            if let (Some(c), Some(h)) = (&crossing, headline.filter(|h| !h.gauge)) {
                server_adjusted = Some(adjust(h, c, diff));
                if let Some(a) = server_adjusted.as_ref().and_then(|a| a.hit_rate) {
                    explanations.push(format!(
                        "without those requests the server rate is {:.2} % ({} the client's)",
                        a * 100.0,
                        match client.hit_rate {
                            Some(cr) if ((a - cr) * 100.0).abs() <= p.gap_pp =>
                                format!("within {} pp of", p.gap_pp),
                            Some(cr) => format!("{:+.2} pp from", (a - cr) * 100.0),
                            None => "no client rate to compare with".into(),
                        }
                    ));
                }
            }
        }
    }
    // The headline rate over the true profiling requests, from the raw
    // scrapes: independent of how AIPerf tagged its scrapes.
    let mut server_from_raw_scrapes = None;
    let mut gap_after_raw_pp = None;
    if let (Some(sc), Some(h)) = (ctx.run.scrapes.as_ref(), headline.filter(|h| !h.gauge)) {
        let slack_ns = (ctx.settings.phase.match_slack_ms * 1e6) as u64;
        let first_start = ctx.model.first_request_start_ns();
        match raw_scrapes::recompute(h, &sc.scrapes, records, first_start, slack_ns) {
            Ok(r) => {
                let client_pct = client.hit_rate.map(|c| c * 100.0);
                let (lo, hi) = (
                    r.hit_rate_low.map(|x| x * 100.0),
                    r.hit_rate_high.map(|x| x * 100.0),
                );
                // How far the clients' rate is from what the server's
                // counters allow over the true profiling requests.
                if let (Some(c), Some(lo), Some(hi)) = (client_pct, lo, hi) {
                    gap_after_raw_pp = Some(if c < lo {
                        lo - c
                    } else if c > hi {
                        hi - c
                    } else {
                        0.0
                    });
                }
                let span = match (r.hit_rate, lo, hi) {
                    (Some(x), _, _) => format!("{:.2} % (exact)", x * 100.0),
                    (None, Some(lo), Some(hi)) => format!(
                        "between {lo:.2} % and {hi:.2} % ({} of {} scrape intervals could \
                             hold either phase's requests)",
                        r.ambiguous_intervals, r.intervals
                    ),
                    _ => "not defined".into(),
                };
                let gap_seen = gap_pp.is_some_and(|g| g.abs() > p.gap_pp);
                let verdict = match (client_pct, gap_after_raw_pp) {
                    (Some(c), Some(g)) if g.abs() <= p.gap_pp && gap_seen => format!(
                        "; the clients' {c:.2} % is consistent with it, so the gap comes \
                             from how the counters were split between phases"
                    ),
                    (Some(c), Some(g)) if g.abs() <= p.gap_pp => {
                        format!("; the clients' {c:.2} % is consistent with it")
                    }
                    (Some(c), Some(g)) => format!(
                        "; the clients' {c:.2} % is {g:+.2} pp away from it, so the \
                             difference is not only the phase split"
                    ),
                    _ => String::new(),
                };
                explanations.push(format!(
                    "from the raw scrapes, over the requests that really were profiling, \
                         the server rate is {span}{verdict}"
                ));
                server_from_raw_scrapes = Some(r);
            }
            Err(why) => explanations.push(format!(
                "the raw scrapes cannot recompute the server rate by request: {why}"
            )),
        }
    }

    // Warmup: a cold warmup with server-side warmup hits means profiling
    // traffic was counted in warmup (or the reverse).
    if let (Some(cw), Some(sw)) = (
        client_warmup.as_ref().and_then(|c| c.hit_rate),
        server_rates_w.first().and_then(|r| r.hit_rate),
    ) {
        if ((sw - cw) * 100.0).abs() > p.gap_pp {
            explanations.push(format!(
                "warmup: the server's warmup hit rate is {:.2} % but the warmup clients saw \
                 {:.2} %, so warmup and profiling traffic are mixed in the server's split",
                sw * 100.0,
                cw * 100.0
            ));
        }
    }

    if let (Some(gap), Some(h)) = (gap_pp, headline) {
        if gap.abs() > p.gap_pp {
            let why = if explanations.is_empty() {
                String::new()
            } else {
                format!(" Explanation: {}", explanations.join("; "))
            };
            findings.push(
                Finding::new(
                    PREFIX_CACHE_GAP,
                    format!(
                        "server hit rate ({}) is {:.2} %, the clients' cached tokens give \
                         {:.2} %: {gap:+.2} pp.{why}",
                        h.formula,
                        h.hit_rate.unwrap_or(f64::NAN) * 100.0,
                        client.hit_rate.unwrap_or(f64::NAN) * 100.0
                    ),
                )
                .file(server_metrics::FILE)
                .expected_found(client.hit_rate, h.hit_rate)
                .effect("gap", gap, Unit::Pp)
                .effect(
                    "gap_after_raw_scrape_attribution",
                    gap_after_raw_pp.unwrap_or(f64::NAN),
                    Unit::Pp,
                ),
            );
        }
    }

    let prefill_throughput = prefill_groups(ok(Phase::Profiling));
    let all_records = prefill_throughput.first().map_or(0, |g| g.records);
    // The hit group is reported only when it is not the whole run.
    let flagged = prefill_throughput
        .iter()
        .filter(|g| g.group == "all" || (g.group == "hit" && g.records < all_records));
    for g in flagged {
        if let Some(o) = g
            .overstatement_pct
            .filter(|o| *o > p.prefill_overstatement_pct)
        {
            findings.push(
                Finding::new(
                    PREFILL_THROUGHPUT_OVERSTATED,
                    format!(
                        "prefill_throughput_per_user over {} {} requests averages {:.0} \
                         tokens/s, but over the uncached tokens actually prefilled it is {:.0} \
                         tokens/s: overstated by {o:.1} %",
                        g.records,
                        if g.group == "hit" {
                            "cache-hit"
                        } else {
                            "successful"
                        },
                        g.published_mean.unwrap_or(f64::NAN),
                        g.uncached_mean.unwrap_or(f64::NAN)
                    ),
                )
                .file(records::FILE)
                .field("metrics.prefill_throughput_per_user")
                .expected_found(g.uncached_mean, g.published_mean)
                .effect("overstatement", o, Unit::Percent),
            );
        }
    }

    let reason = match (client.hit_rate, headline.and_then(|h| h.hit_rate)) {
        (None, None) => Some("neither a client nor a server hit rate can be computed".to_string()),
        (None, Some(_)) => Some("no client-side cached tokens to compare the server with".into()),
        (Some(_), None) => Some("no server-side cache counters to compare the clients with".into()),
        _ => None,
    };
    let report = Report {
        client,
        client_warmup,
        client_warm_only,
        aiperf_overall: aiperf_overall.map(|p| p / 100.0),
        server: server_rates_p,
        server_warmup: server_rates_w,
        gap_pp,
        prompt_token_difference,
        explanations,
        server_adjusted,
        server_from_raw_scrapes,
        prefill_throughput,
    };
    // cache-rate-unknown is info: the reason says why the status is unknown.
    CheckOutput {
        report: Arc::new(report),
        findings,
        cannot_tell: reason,
    }
}

fn sanity(rates: &[ServerRate], findings: &mut Vec<Finding>) {
    for r in rates {
        if !r.gauge && r.denominator > 0.0 && r.numerator > r.denominator {
            findings.push(
                Finding::new(
                    PREFIX_CACHE_INCONSISTENT,
                    format!(
                        "{}: numerator {} exceeds denominator {} (a ratio above 1): the hit and \
                         query counters' windows do not line up, or series are double-counted; \
                         the rate is reported as null",
                        r.formula, r.numerator, r.denominator
                    ),
                )
                .file(server_metrics::FILE)
                .expected_found(format!("<= {}", r.denominator), r.numerator)
                .effect("excess", r.numerator - r.denominator, Unit::Tokens),
            );
        }
        if r.gauge && r.endpoints.len() > 1 {
            findings.push(
                Finding::new(
                    PREFIX_CACHE_GAUGE_ONLY,
                    format!(
                        "{} averages a gauge across {} endpoints without weighting by traffic",
                        r.formula,
                        r.endpoints.len()
                    ),
                )
                .file(server_metrics::FILE),
            );
        }
    }
}

/// Requests whose prompt tokens account exactly for a server/client difference.
struct Crossing<'a> {
    phase: Phase,
    how: String,
    requests: Vec<&'a Record>,
}

/// Looks for the requests that crossed the warmup/profiling boundary: for an
/// excess, the last warmup requests to finish; for a deficit, the first
/// profiling requests to start (counted in warmup) or the last to finish
/// (after the final scrape). The shortest such run of requests whose prompt
/// tokens sum to the difference exactly is the attribution.
fn shortest_run<'a>(
    rs: impl IntoIterator<Item = &'a Record>,
    key: fn(&Record) -> u64,
    latest_first: bool,
    target: f64,
) -> Option<Vec<&'a Record>> {
    // Only the first 64 in order matter: keep them in one pass over the
    // records (ties broken by line, as a stable sort of the file order
    // would), then sort those. A record's rank is unique: lines are.
    const FIRST: usize = 64;
    let rank = |r: &Record| {
        let (k, line) = (key(r), r.line);
        if latest_first {
            (!k, !line)
        } else {
            (k, line)
        }
    };
    let mut kept: Vec<((u64, u64), &Record)> = Vec::with_capacity(2 * FIRST);
    let mut worst_kept: Option<(u64, u64)> = None;
    for r in rs {
        let k = rank(r);
        if worst_kept.is_some_and(|w| k > w) {
            continue;
        }
        kept.push((k, r));
        if kept.len() == 2 * FIRST {
            kept.select_nth_unstable_by_key(FIRST - 1, |e| e.0);
            kept.truncate(FIRST);
            worst_kept = Some(kept[FIRST - 1].0);
        }
    }
    kept.sort_unstable_by_key(|e| e.0);
    let mut total = 0.0;
    for (i, (_, r)) in kept.iter().enumerate().take(FIRST) {
        total += r.values.get(Metric::UsagePromptTokens)?;
        if (total - target).abs() < 0.5 {
            return Some(kept[..=i].iter().map(|e| e.1).collect());
        }
    }
    None
}

fn boundary_requests(
    records: &[Record],
    diff: f64,
    profiling_start_ns: Option<u64>,
) -> Option<Crossing<'_>> {
    let find = |rs, key, rev| shortest_run(rs, key, rev, diff.abs());
    let succ = |phase| {
        records
            .iter()
            .filter(move |r| r.phase == phase && r.is_success())
    };
    if diff > 0.0 {
        let requests = find(succ(Phase::Warmup), |r| r.request_end_ns, true)?;
        // What the timestamps say about the latest of them.
        let last_end = requests.iter().map(|r| r.request_end_ns).max().unwrap_or(0);
        let how = match profiling_start_ns {
            Some(ps) if last_end > ps => format!(
                "were the last to finish in warmup, {:.1} ms after profiling started",
                (last_end - ps) as f64 / 1e6
            ),
            Some(ps) => format!(
                "were the last to finish in warmup, {:.1} ms before profiling started, yet \
                 after the scrape the profiling counters start from",
                (ps - last_end) as f64 / 1e6
            ),
            None => "were the last to finish in warmup".to_string(),
        };
        Some(Crossing {
            phase: Phase::Warmup,
            how,
            requests,
        })
    } else if let Some(requests) = find(succ(Phase::Profiling), |r| r.request_start_ns, false) {
        Some(Crossing {
            phase: Phase::Profiling,
            how: "were the first to start in profiling, counted before the warmup window closed"
                .into(),
            requests,
        })
    } else {
        let requests = find(succ(Phase::Profiling), |r| r.request_end_ns, true)?;
        Some(Crossing {
            phase: Phase::Profiling,
            how: "were the last to finish in profiling, after the final scrape".into(),
            requests,
        })
    }
}

/// The headline rate with the crossing requests' tokens taken out (excess)
/// or put back (deficit), using the cached tokens the clients saw for them.
fn adjust(h: &ServerRate, c: &Crossing, diff: f64) -> ServerRate {
    let sign = if diff > 0.0 { -1.0 } else { 1.0 };
    let prompt: f64 = c
        .requests
        .iter()
        .filter_map(|r| r.values.get(Metric::UsagePromptTokens))
        .sum();
    let cached: f64 = c
        .requests
        .iter()
        .filter_map(|r| r.values.get(Metric::UsagePromptCacheReadTokens))
        .sum();
    let numerator = h.numerator + sign * cached;
    let denominator = h.denominator + sign * prompt;
    ServerRate {
        framework: h.framework,
        formula: format!(
            "{} adjusted for {} boundary request(s)",
            h.formula,
            c.requests.len()
        ),
        hit_rate: (denominator > 0.0)
            .then(|| numerator / denominator)
            .filter(|r| *r <= 1.0),
        numerator,
        denominator,
        endpoints: h.endpoints.clone(),
        gauge: false,
        prefill_only: h.prefill_only,
        source: None,
    }
}

fn prefill_groups<'a>(ok: impl Iterator<Item = &'a Record>) -> Vec<PrefillGroup> {
    let rows: Vec<(bool, f64, f64)> = ok
        .filter_map(|r| {
            let ttft = r.values.get(Metric::TimeToFirstToken)?;
            let prompt = r.values.get(Metric::UsagePromptTokens)?;
            let cached = r.values.get(Metric::UsagePromptCacheReadTokens)?;
            let published = r.values.get(Metric::PrefillThroughputPerUser)?;
            (ttft > 0.0).then(|| (cached > 0.0, published, (prompt - cached) / (ttft / 1000.0)))
        })
        .collect();
    if rows.is_empty() {
        return Vec::new();
    }
    let group = |name: &'static str, keep: &dyn Fn(bool) -> bool| {
        let sel: Vec<_> = rows.iter().filter(|r| keep(r.0)).collect();
        let published = stats::mean(&sel.iter().map(|r| r.1).collect::<Vec<_>>());
        let uncached = stats::mean(&sel.iter().map(|r| r.2).collect::<Vec<_>>());
        PrefillGroup {
            group: name,
            records: sel.len(),
            published_mean: published,
            uncached_mean: uncached,
            overstatement_pct: stats::bias_pct(published, uncached),
        }
    };
    vec![
        group("all", &|_| true),
        group("hit", &|h| h),
        group("miss", &|h| !h),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::artifacts::records::Values;

    #[test]
    fn shortest_run_takes_requests_in_stable_order_among_many_with_ties() {
        // 200 requests whose end times tie in pairs; prompt tokens 1, 2, 3, ...
        let records: Vec<Record> = (0..200u64)
            .map(|i| {
                let mut v = Values::default();
                v.set(Metric::UsagePromptTokens, Some((i + 1) as f64));
                let mut r = Record::with_values(v);
                r.line = i + 1;
                r.request_start_ns = 1_000 - i / 2;
                r.request_end_ns = 10_000 + i / 2;
                r
            })
            .collect();
        let refs = || records.iter();
        let lines = |rs: Option<Vec<&Record>>| rs.map(|v| v.iter().map(|r| r.line).collect());
        // Latest end first: lines 200, 199 (tie, later line first), 198, ...
        let got: Option<Vec<u64>> = lines(shortest_run(
            refs(),
            |r| r.request_end_ns,
            true,
            200.0 + 199.0 + 198.0,
        ));
        assert_eq!(got, Some(vec![200, 199, 198]));
        // Earliest start first: lines 199, 200 (start 901 both; earlier line first), 197, 198.
        let got = lines(shortest_run(
            refs(),
            |r| r.request_start_ns,
            false,
            199.0 + 200.0 + 197.0,
        ));
        assert_eq!(got, Some(vec![199, 200, 197]));
        // Nothing within the first 64 sums to the target.
        assert_eq!(
            lines(shortest_run(refs(), |r| r.request_end_ns, true, 0.25)),
            None
        );
    }

    #[test]
    fn shortest_run_agrees_with_a_stable_sort_of_every_record() {
        // 1,000 requests with keys drawn from few values (many ties), in
        // both orders, against the definition: a stable sort of all of them.
        let mut x = 12345u64;
        let mut next = || {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            x >> 33
        };
        let records: Vec<Record> = (0..1000u64)
            .map(|i| {
                let mut v = Values::default();
                v.set(Metric::UsagePromptTokens, Some((1 + next() % 50) as f64));
                let mut r = Record::with_values(v);
                r.line = i + 1;
                r.request_start_ns = next() % 40;
                r.request_end_ns = 100 + next() % 40;
                r
            })
            .collect();
        for latest_first in [false, true] {
            let key: fn(&Record) -> u64 = if latest_first {
                |r| r.request_end_ns
            } else {
                |r| r.request_start_ns
            };
            let mut sorted: Vec<&Record> = records.iter().collect();
            sorted.sort_by_key(|r| key(r));
            if latest_first {
                sorted.reverse(); // a stable sort of the reversed file order
                sorted.sort_by_key(|r| std::cmp::Reverse(key(r)));
            }
            for n in [1, 2, 7, 63, 64] {
                let target: f64 = sorted[..n]
                    .iter()
                    .map(|r| r.values.get(Metric::UsagePromptTokens).unwrap())
                    .sum();
                let got = shortest_run(records.iter(), key, latest_first, target)
                    .expect("a run sums to the target");
                // The shortest prefix reaching the target is the answer.
                let want_len = (1..=n)
                    .find(|&m| {
                        let t: f64 = sorted[..m]
                            .iter()
                            .map(|r| r.values.get(Metric::UsagePromptTokens).unwrap())
                            .sum();
                        (t - target).abs() < 0.5
                    })
                    .unwrap();
                let got: Vec<u64> = got.iter().map(|r| r.line).collect();
                let want: Vec<u64> = sorted[..want_len].iter().map(|r| r.line).collect();
                assert_eq!(got, want, "latest_first {latest_first}, n {n}");
            }
        }
    }

    fn families(json: &str) -> Families {
        serde_json::from_str(json).expect("test JSON parses")
    }

    #[test]
    fn vllm_sums_endpoints_and_label_sets() {
        let f = families(
            r#"{"vllm:prefix_cache_hits":{"type":"counter","series":[
                {"endpoint_url":"a","labels":{"engine":"0"},"stats":{"total":30}},
                {"endpoint_url":"a","labels":{"engine":"1"},"stats":{"total":10}},
                {"endpoint_url":"b","stats":{"total":20}}]},
              "vllm:prefix_cache_queries":{"type":"counter","series":[
                {"endpoint_url":"a","labels":{"engine":"0"},"stats":{"total":50}},
                {"endpoint_url":"a","labels":{"engine":"1"},"stats":{"total":50}},
                {"endpoint_url":"b","stats":{"total":100}}]}}"#,
        );
        let r = &server_rates(&f)[0];
        assert_eq!((r.numerator, r.denominator), (60.0, 200.0));
        assert_eq!(r.hit_rate, Some(0.3));
        assert_eq!(r.endpoints, vec!["a".to_string(), "b".to_string()]);
    }

    #[test]
    fn vllm_by_source_overrides_hits_over_queries_when_present() {
        let f = families(
            r#"{"vllm:prompt_tokens_by_source":{"type":"counter","series":[
                {"labels":{"source":"local_cache_hit"},"stats":{"total":60}},
                {"labels":{"source":"external_kv_transfer"},"stats":{"total":20}},
                {"labels":{"source":"local_compute"},"stats":{"total":20}}]},
              "vllm:prefix_cache_hits":{"type":"counter","series":[{"stats":{"total":1}}]},
              "vllm:prefix_cache_queries":{"type":"counter","series":[{"stats":{"total":2}}]}}"#,
        );
        let rates = server_rates(&f);
        assert_eq!(rates[0].hit_rate, Some(0.6));
        assert!(rates[0].formula.contains("local_cache_hit"));
        let ext = rates
            .iter()
            .find(|r| r.formula.contains("external_kv_transfer"))
            .expect("ext");
        assert_eq!(ext.hit_rate, Some(0.2));
    }

    #[test]
    fn sglang_uses_prompt_tokens_and_prefill_roles_only() {
        let f = families(
            r#"{"sglang:cached_tokens":{"type":"counter","series":[
                {"labels":{"cache_source":"device","disaggregation_mode":"prefill"},"stats":{"total":80}},
                {"labels":{"cache_source":"host","disaggregation_mode":"prefill"},"stats":{"total":10}},
                {"labels":{"cache_source":"device","disaggregation_mode":"decode"},"stats":{"total":100}}]},
              "sglang:prompt_tokens":{"type":"counter","series":[
                {"labels":{"disaggregation_mode":"prefill"},"stats":{"total":100}},
                {"labels":{"disaggregation_mode":"decode"},"stats":{"total":100}}]}}"#,
        );
        let rates = server_rates(&f);
        assert_eq!(rates[0].hit_rate, Some(0.9));
        assert!(rates[0].prefill_only);
        let device = rates
            .iter()
            .find(|r| r.formula.contains("device"))
            .expect("device");
        assert_eq!(device.hit_rate, Some(0.8));
    }

    #[test]
    fn trtllm_prefers_token_counters_and_falls_back_to_the_gauge() {
        let counters = families(
            r#"{"trtllm_prompt_cached_tokens":{"type":"counter","series":[{"stats":{"total":3}}]},
              "trtllm_prompt_tokens":{"type":"counter","series":[{"stats":{"total":4}}]},
              "trtllm_kv_cache_hit_rate":{"type":"gauge","series":[{"stats":{"avg":0.1}}]}}"#,
        );
        assert_eq!(server_rates(&counters)[0].hit_rate, Some(0.75));
        let gauge = families(
            r#"{"trtllm_kv_cache_hit_rate":{"type":"gauge","series":[
                {"endpoint_url":"a","stats":{"avg":50.0}},{"endpoint_url":"b","stats":{"avg":70.0}}]}}"#,
        );
        let r = &server_rates(&gauge)[0];
        assert!(r.gauge);
        assert_eq!(r.hit_rate, Some(0.6));
    }

    #[test]
    fn ratio_above_one_is_null_and_untyped_families_are_labelled() {
        let f = families(
            r#"{"atom:prefix_cache_cached_tokens":{"type":"unknown","series":[{"stats":{"min":10,"max":130,"avg":50}}]},
              "atom:prefix_cache_full_tokens":{"type":"unknown","series":[{"stats":{"min":0,"max":100,"avg":50}}]}}"#,
        );
        let r = &server_rates(&f)[0];
        assert_eq!((r.numerator, r.denominator), (120.0, 100.0));
        assert_eq!(r.hit_rate, None);
        assert!(r.formula.contains("untyped"));
    }

    #[test]
    fn dynamo_frontend_uses_histogram_sums() {
        let f = families(
            r#"{"dynamo_frontend_cached_tokens":{"type":"counter","series":[{"stats":{"total":50}}]},
              "dynamo_frontend_input_sequence_tokens":{"type":"histogram","series":[{"stats":{"count":2,"sum":200}}]}}"#,
        );
        assert_eq!(server_rates(&f)[0].hit_rate, Some(0.25));
    }
}
