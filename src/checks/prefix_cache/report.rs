//! The `prefix_cache` check's figures as the report data holds them: the
//! rates it compared, the gap, what explains it, and the prefill
//! throughput, with the one-line summary, the headline and the hit rates
//! the renderers show.

use serde::Serialize;

use super::{ClientRate, PrefillGroup, RawScrapeRate, ServerRate};
use crate::checks::CheckReport;
use crate::results::published::{Figure, Looked, HIT_RATE};
use crate::results::{Headline, HeadlineUnit, HitRate, HitSource};

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

impl CheckReport for Report {
    /// The clients' hit rate and the headline server rate, each vouched for
    /// when known.
    fn figures(&self, reason: Option<&str>) -> Vec<Figure> {
        let looked = |v: Option<f64>, why: &str| match (reason, v) {
            (Some(r), _) => Looked::CannotTell(r.to_string()),
            (None, Some(_)) => Looked::Vouches,
            (None, None) => Looked::CannotTell(why.to_string()),
        };
        let unit = Some("ratio".to_string());
        let mut out = vec![Figure::client(
            HIT_RATE,
            "client",
            looked(
                self.client.hit_rate,
                "no successful record carries cached tokens (usage_prompt_cache_read_tokens)",
            ),
        )
        .value(self.client.hit_rate, unit.clone())];
        if let Some(h) = self.server.first() {
            let why = if self.client.hit_rate.is_none() {
                "the clients' cached tokens are unknown, so the server rate cannot be checked \
                 against them"
            } else {
                "the server's counters give no rate"
            };
            let v = h.hit_rate.filter(|_| self.client.hit_rate.is_some());
            out.push(Figure::client(HIT_RATE, "server", looked(v, why)).value(h.hit_rate, unit));
        }
        out
    }

    fn summary(&self, _reason: Option<&str>) -> String {
        use crate::text::pct;
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

    fn headline(&self) -> Vec<Headline> {
        let client = self.client.hit_rate;
        let server = self.server.first().and_then(|h| h.hit_rate);
        if client.is_none() && server.is_none() {
            return Vec::new();
        }
        vec![Headline {
            name: "hit rate client / server",
            values: vec![client, server],
            unit: HeadlineUnit::Fraction,
            change_pct: None,
        }]
    }

    fn hit_rates(&self) -> Vec<HitRate> {
        let client = self.client.hit_rate.map(|rate| HitRate {
            source: HitSource::Clients {
                records: self.client.records,
            },
            rate,
        });
        let servers = self.server.iter().filter_map(|s| {
            Some(HitRate {
                source: HitSource::Server {
                    formula: s.formula.clone(),
                    endpoints: s.endpoints.clone(),
                },
                rate: s.hit_rate?,
            })
        });
        client.into_iter().chain(servers).collect()
    }
}
