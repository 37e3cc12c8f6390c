//! Check `prefix_cache`: hold the server's prefix-cache hit rate to what the
//! clients were told.
//!
//! What it checks: the client-side hit rate, token-weighted
//! `sum(usage_prompt_cache_read_tokens) / sum(usage_prompt_tokens)` over
//! successful profiling records ([`crate::model::cache`]), for warmup too and
//! over warm records only; AIPerf's own `overall_usage_prompt_cache_read_pct`
//! against it; the server-side rate by every framework formula whose counters
//! exist (`server`); the gap in percentage points; server vs client
//! prompt-token totals, with the difference attributed to requests that
//! crossed the warmup/profiling boundary when their prompt tokens account for
//! it exactly (`boundary`); the headline rate recomputed from the raw
//! scrapes over the true profiling requests (`raw_scrapes`); and the prefill
//! throughput over uncached tokens beside AIPerf's
//! `prefill_throughput_per_user` (`prefill`).
//!
//! Why it matters: a wrongly tagged baseline scrape moved published hit rates
//! by 1 to 6 points in a user's report, and cached tokens that were never
//! prefilled inflate prefill throughput.

mod boundary;
mod prefill;
mod raw_scrapes;
mod report;
mod server;

use std::sync::Arc;

use super::{Check, CheckOutput, Ctx};
use crate::artifacts::records::{self, Metric, Phase, Record};
use crate::artifacts::server_metrics;
use crate::artifacts::summary;
use crate::config::PrefixSettings;
use crate::findings::{Finding, Moved, Unit};
use crate::frameworks::canonical;
use crate::model::cache::ClientRateSum;
pub use crate::model::cache::{client_rate, ClientRate};
use crate::model::connection::Temperature;
use crate::results::published::HIT_RATE;
pub use prefill::{PrefillGroup, PrefillGroupKind};
pub use raw_scrapes::RawScrapeRate;
pub use report::Report;
pub use server::{server_rates, ServerRate};

/// The check.
pub const CHECK: Check = Check {
    name: "prefix_cache",
    codes: &[CODES],
    run,
    timeline: false,
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
    CACHE_RATE_SPLIT => ("cache-rate-split", Error,
        "The raw scrapes over the true profiling requests give another server hit rate than AIPerf's profiling export"),
    WARMUP_CACHE_MIXED => ("warmup-cache-mixed", Warning,
        "The server's warmup hit rate differs from the warmup clients': the phases' traffic is mixed"),
    CACHE_QUERIES_LOST => ("cache-queries-lost", Warning,
        "The server's profiling cache queries fall short of the clients' prompt tokens"),
}

/// Counters of the raw scrapes that contradict themselves: between two
/// scrapes the numerator (hits) rose above the denominator (queries). The
/// raw-scrape rate is not computed from them.
fn contradiction(formula: &str, c: &raw_scrapes::Contradiction) -> Finding {
    Finding::new(
        PREFIX_CACHE_INCONSISTENT,
        format!(
            "{formula}: in the raw scrapes, {} rose by {} but its denominator by only {} \
             between the scrape before line {} and that line's, on {}: a server counts a hit \
             only among its queries, so these counters are not what a server writes; the \
             server rate is not recomputed from them",
            c.numerator, c.rise, c.denominator_rise, c.line, c.endpoint
        ),
    )
    .file(crate::artifacts::scrapes::FILE)
    .line(c.line)
    .field(c.numerator.clone())
    .metric(c.numerator.clone())
    .endpoint(c.endpoint.clone())
    .expected_found(format!("<= {}", c.denominator_rise), c.rise)
    .effect("excess", c.rise - c.denominator_rise, Unit::Tokens)
}

/// The clients' rates: profiling, warmup, warm profiling requests, and the
/// clients' profiling prompt tokens, in one walk.
struct Clients {
    profiling: ClientRate,
    warmup: Option<ClientRate>,
    warm_only: ClientRate,
    prompt_tokens: f64,
}

impl Clients {
    fn of(ctx: &Ctx, records: &[Record]) -> Clients {
        // Each summed in file order, as separate walks would.
        let mut profiling = ClientRateSum::default();
        let mut warmup = ClientRateSum::default();
        let mut warm_only = ClientRateSum::default();
        // Started where `Iterator::sum` starts, so the total is bit for bit
        // the one a `.sum()` over the same values gave.
        let mut prompt_tokens: f64 = std::iter::empty::<f64>().sum();
        for (i, r) in records.iter().enumerate().filter(|(_, r)| r.is_success()) {
            match r.phase {
                Phase::Profiling => {
                    profiling.add(r);
                    if let Some(p) = r.values.get(Metric::UsagePromptTokens) {
                        prompt_tokens += p;
                    }
                    if ctx.model.temperature(i) == Temperature::Warm {
                        warm_only.add(r);
                    }
                }
                Phase::Warmup => warmup.add(r),
            }
        }
        Clients {
            profiling: profiling.finish(),
            // Unknown, not empty, when the version writes no warmup records.
            warmup: ctx
                .model
                .warmup
                .as_ref()
                .filter(|_| ctx.model.layout.warmup_records)
                .map(|_| warmup.finish()),
            warm_only: warm_only.finish(),
            prompt_tokens,
        }
    }
}

/// One run of the check: what it has read and what it has found so far.
struct Pass<'a> {
    ctx: &'a Ctx<'a>,
    p: &'a PrefixSettings,
    records: &'a [Record],
    clients: Clients,
    server: Vec<ServerRate>,
    server_warmup: Vec<ServerRate>,
    findings: Vec<Finding>,
    explanations: Vec<String>,
}

/// Runs the check.
pub fn run(ctx: &Ctx) -> CheckOutput {
    let records = ctx.records().unwrap_or(&[]);
    let export = ctx.run.server.as_ref();
    let mut pass = Pass {
        ctx,
        p: &ctx.settings.prefix,
        records,
        clients: Clients::of(ctx, records),
        server: export
            .map(|s| server_rates(&s.metrics, &ctx.model.endpoint_roles))
            .unwrap_or_default(),
        server_warmup: export
            .and_then(|s| s.warmup_metrics.as_ref())
            .map(|w| server_rates(w, &ctx.model.endpoint_roles))
            .unwrap_or_default(),
        findings: Vec::new(),
        explanations: Vec::new(),
    };
    pass.unknown_rates();
    let aiperf_overall = pass.aiperf_overall();
    server::sanity(&pass.server, &mut pass.findings);
    pass.gauge_only();
    let gap_pp = match (
        pass.headline().and_then(|h| h.hit_rate),
        pass.clients.profiling.hit_rate,
    ) {
        (Some(s), Some(c)) => Some((s - c) * 100.0),
        _ => None,
    };
    let (prompt_token_difference, server_adjusted) = pass.prompt_tokens();
    let (server_from_raw_scrapes, gap_after_raw_pp) = pass.raw_scrapes(gap_pp);
    pass.warmup_mix();
    pass.queries();
    pass.gap(gap_pp, gap_after_raw_pp);
    let prefill_throughput = pass.prefill();
    let reason = match (
        pass.clients.profiling.hit_rate,
        pass.headline().and_then(|h| h.hit_rate),
    ) {
        (None, None) => Some("neither a client nor a server hit rate can be computed".to_string()),
        (None, Some(_)) => Some("no client-side cached tokens to compare the server with".into()),
        (Some(_), None) => Some("no server-side cache counters to compare the clients with".into()),
        _ => None,
    };
    let Pass {
        clients,
        server,
        server_warmup,
        findings,
        explanations,
        ..
    } = pass;
    let report = Report {
        client: clients.profiling,
        client_warmup: clients.warmup,
        client_warm_only: clients.warm_only,
        aiperf_overall,
        server,
        server_warmup,
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

/// The most prompt tokens the profiling requests that ended without success
/// can have given the server: each error record's `error_isl` (else its
/// `usage_prompt_tokens`), and each request cut at the grace period at most
/// the largest prompt of the phase's records (AIPerf draws every prompt of
/// a run from one distribution); with the words that say so. `None` when
/// there are none, or one's prompt is unknown.
fn unsuccessful_prompt_tokens(ctx: &Ctx, records: &[Record]) -> Option<(f64, String)> {
    use crate::artifacts::records::{Metric, Phase};
    let mine = || records.iter().filter(|r| r.phase == Phase::Profiling);
    let prompt = |r: &Record| {
        r.values
            .get(Metric::ErrorIsl)
            .or(r.values.get(Metric::UsagePromptTokens))
            .or(r.values.get(Metric::InputSequenceLength))
    };
    let failed: Vec<&Record> = mine().filter(|r| !r.is_success()).collect();
    let failed_tokens: Option<f64> = failed.iter().map(|r| prompt(r)).sum();
    let cut = ctx
        .model
        .profiling
        .unrecorded
        .map_or(0, |u| u.logged.unwrap_or(u.at_most));
    if failed.is_empty() && cut == 0 {
        return None;
    }
    let largest = mine().filter_map(prompt).fold(0.0, f64::max);
    let bound = failed_tokens? + cut as f64 * largest;
    let mut parts = Vec::new();
    if !failed.is_empty() {
        parts.push(format!(
            "{} request(s) that ended without success hold {:.0} prompt tokens",
            failed.len(),
            failed_tokens?
        ));
    }
    if cut > 0 {
        parts.push(format!(
            "{cut} request(s) cut when the grace period ended (no record) at most {largest:.0} \
         each"
        ));
    }
    Some((
        bound,
        format!(
            "the excess is within what the server counts for requests the records do not hold \
         as successes ({}: up to {bound:.0} tokens; vLLM counts a request's prompt tokens \
         at its first token)",
            parts.join(", ")
        ),
    ))
}

/// The boundary requests whose prompt tokens make `diff`, between the
/// server's phase windows.
fn crossing<'r>(ctx: &Ctx, records: &'r [Record], diff: f64) -> Option<boundary::Crossing<'r>> {
    let profiling_start = ctx.model.profiling.server_window_ns.map(|w| w.0);
    let warmup_end = ctx
        .model
        .warmup
        .as_ref()
        .and_then(|w| w.server_window_ns)
        .map(|w| w.1);
    boundary::boundary_requests(records, diff, profiling_start, warmup_end)
}

impl Pass<'_> {
    /// The headline server rate: the first that is not secondary.
    fn headline(&self) -> Option<&ServerRate> {
        self.server.iter().find(|r| !r.secondary)
    }

    /// A rate that cannot be computed is unknown, never 0 %.
    fn unknown_rates(&mut self) {
        let client = &self.clients.profiling;
        if self.ctx.run.records.is_some() && client.hit_rate.is_none() && client.records > 0 {
            // A version that never records the field says nothing about the
            // server: name the version, not a server flag.
            let why = if self.ctx.model.layout.cached_tokens {
                "the server did not report cached tokens: vLLM needs \
                 --enable-prompt-tokens-details, SGLang --enable-cache-report"
                    .to_string()
            } else {
                format!(
                    "AIPerf {} does not record them, whatever the server reported (0.9.0 on \
                     does)",
                    self.ctx
                        .model
                        .aiperf_version
                        .as_deref()
                        .unwrap_or("of this run")
                )
            };
            self.findings.push(
                Finding::new(
                    CACHE_RATE_UNKNOWN,
                    format!(
                        "client hit rate unknown: none of the {} successful profiling records \
                         has usage_prompt_cache_read_tokens ({why})",
                        client.records
                    ),
                )
                .file(records::FILE)
                .field("metrics.usage_prompt_cache_read_tokens"),
            );
        }
        if self.ctx.run.server.is_some() && self.server.is_empty() {
            self.findings.push(
                Finding::new(
                    CACHE_RATE_UNKNOWN,
                    "server hit rate unknown: server_metrics_export.json has no prefix-cache \
                     counters or gauges of a known framework",
                )
                .file(server_metrics::FILE),
            );
        }
    }

    /// AIPerf's own client-side figure (as a fraction), held to the records.
    fn aiperf_overall(&mut self) -> Option<f64> {
        let summary = self.ctx.run.summary.as_ref();
        let pct = summary.and_then(|s| s.scalar("overall_usage_prompt_cache_read_pct"));
        if let (Some(pct), Some(rate)) = (pct, self.clients.profiling.hit_rate) {
            let gap = pct - rate * 100.0;
            if gap.abs() > self.p.client_summary_pp {
                self.findings.push(
                    Finding::new(
                        CLIENT_CACHE_MISMATCH,
                        format!(
                            "overall_usage_prompt_cache_read_pct is {pct:.3} % but the \
                             profiling records give {:.3} %",
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
        pct.map(|p| p / 100.0)
    }

    fn gauge_only(&mut self) {
        if let Some(h) = self.headline().filter(|h| h.gauge) {
            let f = Finding::new(
                PREFIX_CACHE_GAUGE_ONLY,
                format!(
                    "the only server hit rate is a gauge ({}); a time average of a rolling \
                     ratio, averaged again across series, is not a token-weighted hit rate",
                    h.formula
                ),
            )
            .file(server_metrics::FILE);
            self.findings.push(f);
        }
    }

    /// Server vs client prompt tokens over profiling; the difference, and
    /// the server rate without the requests that crossed the boundary when
    /// their tokens account for it exactly.
    fn prompt_tokens(&mut self) -> (Option<f64>, Option<ServerRate>) {
        let client_prompt = self.clients.prompt_tokens;
        let roles = &self.ctx.model.endpoint_roles;
        let server_prompt = self
            .ctx
            .run
            .server
            .as_ref()
            .and_then(|s| server::prompt_tokens(&s.metrics, roles));
        let difference = server_prompt
            .filter(|_| self.clients.profiling.records > 0)
            .map(|s| s - client_prompt);
        let (Some(diff), Some(sp)) = (difference, server_prompt) else {
            return (difference, None);
        };
        if client_prompt <= 0.0 || (diff / client_prompt * 100.0).abs() <= self.p.prompt_tokens_pct
        {
            return (difference, None);
        }
        // A reset or a series born in profiling explains the counters, not
        // requests crossing the boundary.
        let counter_cause = self.counter_cause();
        let crossing = match counter_cause {
            Some(_) => None,
            None => crossing(self.ctx, self.records, diff),
        };
        let attribution = boundary::cause_words(
            self.ctx.model,
            (self.clients.prompt_tokens, self.clients.profiling.records),
            crossing.as_ref(),
            counter_cause.as_deref(),
            diff,
        );
        // Requests that ended without success, which the server may have
        // counted (vLLM counts prompt tokens at the first token).
        let unsuccessful = (counter_cause.is_none() && crossing.is_none() && diff > 0.0)
            .then(|| unsuccessful_prompt_tokens(self.ctx, self.records))
            .flatten()
            .filter(|(bound, _)| diff <= bound + 0.5);
        self.explanations.push(format!(
            "server prompt tokens over profiling are {sp:.0}, the clients' \
             sum(usage_prompt_tokens) is {client_prompt:.0}: a difference of {diff:+.0}{attribution}"
        ));
        let mut mismatch = Finding::new(
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
        );
        if let Some((_, why)) = &unsuccessful {
            mismatch = mismatch.harmless(why);
        }
        self.findings.push(mismatch);
        let (Some(c), Some(h)) = (&crossing, self.headline().filter(|h| !h.gauge)) else {
            return (difference, None);
        };
        let adjusted = boundary::adjust(h, c, diff);
        if let Some(a) = adjusted.hit_rate {
            let gap_pp = self.p.gap_pp;
            let relation = match self.clients.profiling.hit_rate {
                Some(cr) if ((a - cr) * 100.0).abs() <= gap_pp => format!("within {gap_pp} pp of"),
                Some(cr) => format!("{:+.2} pp from", (a - cr) * 100.0),
                None => "no client rate to compare with".into(),
            };
            self.explanations.push(format!(
                "without those requests the server rate is {:.2} % ({relation} the client's)",
                a * 100.0
            ));
        }
        (difference, Some(adjusted))
    }

    /// The headline rate over the true profiling requests, from the raw
    /// scrapes: independent of how AIPerf tagged its scrapes. Also how far
    /// the clients' rate is from what it allows (pp, 0 inside its bounds).
    fn raw_scrapes(&mut self, gap_pp: Option<f64>) -> (Option<RawScrapeRate>, Option<f64>) {
        let scrapes = self.ctx.run.scrapes.as_ref();
        let Some((sc, h)) = scrapes.zip(self.headline().filter(|h| !h.gauge).cloned()) else {
            return (None, None);
        };
        let slack_ns = (self.ctx.settings.phase.match_slack_ms * 1e6) as u64;
        let requests = raw_scrapes::Requests {
            records: self.records,
            first_start: self.ctx.model.first_request_start_ns(),
            unrecorded_warmup_until: self.ctx.model.unrecorded_warmup_until(),
        };
        let roles = &self.ctx.model.endpoint_roles;
        let r = match raw_scrapes::recompute(&h, sc, &requests, slack_ns, roles) {
            Ok(r) => r,
            Err(why) => {
                if let Some(c) = &why.contradiction {
                    self.findings.push(contradiction(&h.formula, c));
                }
                self.explanations.push(format!(
                    "the raw scrapes cannot recompute the server rate by request: {}",
                    why.text
                ));
                return (None, None);
            }
        };
        let client_pct = self.clients.profiling.hit_rate.map(|c| c * 100.0);
        let (lo, hi) = (
            r.hit_rate_low.map(|x| x * 100.0),
            r.hit_rate_high.map(|x| x * 100.0),
        );
        let gap_after = match (client_pct, lo, hi) {
            (Some(c), Some(lo), Some(_)) if c < lo => Some(lo - c),
            (Some(c), Some(_), Some(hi)) if c > hi => Some(hi - c),
            (Some(_), Some(_), Some(_)) => Some(0.0),
            _ => None,
        };
        let span = match (r.hit_rate, lo, hi) {
            (Some(x), _, _) => format!("{:.2} % (exact)", x * 100.0),
            (None, Some(lo), Some(hi)) => format!(
                "between {lo:.2} % and {hi:.2} % ({} of {} scrape intervals could hold either \
                 phase's requests)",
                r.ambiguous_intervals, r.intervals
            ),
            _ => "not defined".into(),
        };
        let gap_seen = gap_pp.is_some_and(|g| g.abs() > self.p.gap_pp);
        let verdict = match (client_pct, gap_after) {
            (Some(c), Some(g)) if g.abs() <= self.p.gap_pp && gap_seen => format!(
                "; the clients' {c:.2} % is consistent with it, so the gap comes from how the \
                 counters were split between phases"
            ),
            (Some(c), Some(g)) if g.abs() <= self.p.gap_pp => {
                format!("; the clients' {c:.2} % is consistent with it")
            }
            (Some(c), Some(g)) => format!(
                "; the clients' {c:.2} % is {g:+.2} pp away from it, so the difference is not \
                 only the phase split"
            ),
            _ => String::new(),
        };
        self.explanations.push(format!(
            "from the raw scrapes, over the requests that really were profiling, the server \
             rate is {span}{verdict}"
        ));
        self.split_finding(&h, &r, &span);
        (Some(r), gap_after)
    }

    /// The export's own profiling rate against what the raw scrapes allow:
    /// outside by more than the tolerance, the phase split moved it.
    fn split_finding(&mut self, h: &ServerRate, r: &RawScrapeRate, span: &str) {
        let export_pct = h.hit_rate.map(|x| x * 100.0);
        let (lo, hi) = (
            r.hit_rate_low.map(|x| x * 100.0),
            r.hit_rate_high.map(|x| x * 100.0),
        );
        let off = match (export_pct, lo, hi) {
            (Some(e), Some(lo), Some(_)) if e < lo => Some(e - lo),
            (Some(e), Some(_), Some(hi)) if e > hi => Some(e - hi),
            _ => None,
        };
        let (Some(d), Some(e)) = (off.filter(|d| d.abs() > self.p.gap_pp), export_pct) else {
            return;
        };
        self.findings.push(
            Finding::new(
                CACHE_RATE_SPLIT,
                format!(
                    "{}: AIPerf's profiling export gives {e:.2} %, but over the requests that \
                     really were profiling the raw scrapes give {span}: the phase split moved \
                     the published server rate by {d:+.2} pp",
                    h.formula
                ),
            )
            .file(crate::artifacts::scrapes::FILE)
            .expected_found(
                serde_json::json!({"low": r.hit_rate_low, "high": r.hit_rate_high}),
                h.hit_rate,
            )
            .effect("split_error", d, Unit::Pp)
            .moves(
                Moved::new(HIT_RATE, "server", h.hit_rate, None)
                    .expected(None)
                    .bounds(r.hit_rate_low, r.hit_rate_high),
            ),
        );
    }

    /// A cold warmup with server-side warmup hits means profiling traffic
    /// was counted in warmup (or the reverse).
    fn warmup_mix(&mut self) {
        let client = self.clients.warmup.as_ref().and_then(|c| c.hit_rate);
        let server = self.server_warmup.first().and_then(|r| r.hit_rate);
        if let (Some(cw), Some(sw)) = (client, server) {
            let d = (sw - cw) * 100.0;
            if d.abs() > self.p.gap_pp {
                let text = format!(
                    "warmup: the server's warmup hit rate is {:.2} % but the warmup clients saw \
                     {:.2} %, so warmup and profiling traffic are mixed in the server's split",
                    sw * 100.0,
                    cw * 100.0
                );
                self.findings.push(
                    Finding::new(WARMUP_CACHE_MIXED, format!("{text} ({d:+.2} pp)"))
                        .file(server_metrics::FILE)
                        .field("warmup_metrics")
                        .expected_found(cw, sw)
                        .effect("gap", d, Unit::Pp),
                );
                self.explanations.push(text);
            }
        }
    }

    /// A reset or a counter series born during profiling on the endpoints
    /// of the headline rate, in words: what the profiling counters suffer
    /// besides the phase split.
    fn counter_cause(&self) -> Option<String> {
        let w = self.ctx.run.server.as_ref()?.window("profiling")?;
        let eps: Vec<&String> = self
            .headline()
            .map(|h| h.endpoints.iter().collect())
            .unwrap_or_default();
        let on = |ep: &str| eps.is_empty() || eps.iter().any(|e| e.as_str() == ep);
        let reset = self.ctx.model.resets.iter();
        if let Some(r) = reset
            .filter(|r| r.confirmed)
            .find(|r| r.within(w) && on(&r.endpoint))
        {
            return Some(format!(
                "the counters on {} reset during profiling (counter-reset), and AIPerf clamps \
                 the negative delta at 0, so its profiling totals undercount",
                r.endpoint
            ));
        }
        let h = self.headline()?;
        let (_, num, den) = h.source?;
        let born: Vec<String> = self
            .ctx
            .model
            .births
            .iter()
            .filter(|b| b.within(w) && on(&b.endpoint))
            .filter(|b| {
                [num, den]
                    .iter()
                    .any(|n| canonical(n) == canonical(&b.family))
            })
            .map(|b| format!("{} (its first {})", b.family, b.first_value))
            .collect();
        (!born.is_empty()).then(|| {
            format!(
                "{} first appeared during profiling (series-created-mid-phase), and AIPerf's \
                 delta from a new series' first value misses what created it",
                born.join(", ")
            )
        })
    }

    /// The formula's lost tokens: numerator and denominator values of its
    /// series born during profiling.
    fn born_tokens(&self) -> (f64, f64) {
        let (Some(h), Some(w)) = (
            self.headline(),
            self.ctx
                .run
                .server
                .as_ref()
                .and_then(|s| s.window("profiling")),
        ) else {
            return (0.0, 0.0);
        };
        let Some((_, num, den)) = h.source else {
            return (0.0, 0.0);
        };
        let lost = |name: &str| {
            self.ctx
                .model
                .births
                .iter()
                .filter(|b| b.within(w) && canonical(&b.family) == canonical(name))
                .filter(|b| h.endpoints.is_empty() || h.endpoints.contains(&b.endpoint))
                .map(|b| b.first_value)
                .sum::<f64>()
        };
        (
            lost(num),
            if canonical(num) == canonical(den) {
                0.0
            } else {
                lost(den)
            },
        )
    }

    /// Lost profiling queries: the headline's denominator short of the
    /// clients' prompt tokens by more than the prompt-token tolerance.
    fn queries(&mut self) {
        let client_prompt = self.clients.prompt_tokens;
        let Some(h) = self.headline().filter(|h| !h.gauge && h.source.is_some()) else {
            return;
        };
        let short = client_prompt - h.denominator;
        if client_prompt <= 0.0 || short / client_prompt * 100.0 <= self.p.prompt_tokens_pct {
            return;
        }
        let f = Finding::new(
            CACHE_QUERIES_LOST,
            format!(
                "{}: the server's profiling denominator is {:.0} tokens, the clients sent \
                 {client_prompt:.0} prompt tokens: {short:.0} queried tokens are missing from \
                 the profiling window (counted in warmup, lost to a series created mid-phase \
                 or to a reset), so the rate is computed over the wrong queries",
                h.formula, h.denominator
            ),
        )
        .file(server_metrics::FILE)
        .expected_found(client_prompt, h.denominator)
        .effect("missing", short, Unit::Tokens)
        .effect("missing_pct", short / client_prompt * 100.0, Unit::Percent);
        let f = match h.source {
            Some((_, _, den)) => f.metric(den),
            None => f,
        };
        self.findings.push(f);
    }

    fn gap(&mut self, gap_pp: Option<f64>, gap_after_raw_pp: Option<f64>) {
        let (Some(gap), Some(h)) = (gap_pp, self.headline().cloned()) else {
            return;
        };
        if gap.abs() <= self.p.gap_pp {
            return;
        }
        let (lost_num, lost_den) = self.born_tokens();
        if lost_num + lost_den > 0.0 {
            let (n, d) = (h.numerator + lost_num, h.denominator + lost_den);
            if d > 0.0 {
                let relation = match self.clients.profiling.hit_rate {
                    Some(c) if ((n / d - c) * 100.0).abs() <= self.p.gap_pp => {
                        "within tolerance of the clients'".to_string()
                    }
                    Some(c) => format!("{:+.2} pp from the clients'", (n / d - c) * 100.0),
                    None => "no client rate to compare".into(),
                };
                self.explanations.push(format!(
                    "with the {:.0} numerator and {:.0} denominator tokens that created series \
                     during profiling, the server rate is {:.2} % ({relation})",
                    lost_num + 0.0,
                    lost_den + 0.0,
                    n / d * 100.0
                ));
            }
        }
        let why = if self.explanations.is_empty() {
            String::new()
        } else {
            format!(" Explanation: {}", self.explanations.join("; "))
        };
        let client = self.clients.profiling.hit_rate;
        let f = Finding::new(
            PREFIX_CACHE_GAP,
            format!(
                "server hit rate ({}) is {:.2} %, the clients' cached tokens give {:.2} %: \
                 {gap:+.2} pp.{why}",
                h.formula,
                h.hit_rate.unwrap_or(f64::NAN) * 100.0,
                client.unwrap_or(f64::NAN) * 100.0
            ),
        )
        .file(server_metrics::FILE)
        .expected_found(client, h.hit_rate)
        .moves(Moved::new(HIT_RATE, "server", h.hit_rate, client))
        .effect("gap", gap, Unit::Pp)
        .effect(
            "gap_after_raw_scrape_attribution",
            gap_after_raw_pp.unwrap_or(f64::NAN),
            Unit::Pp,
        );
        self.findings.push(f);
    }
}
