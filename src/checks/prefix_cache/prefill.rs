//! Prefill throughput under caching: AIPerf's `prefill_throughput_per_user`
//! divides every input token by TTFT, cached ones included; over the
//! uncached tokens actually prefilled it is lower. The uncached share comes
//! from the server's own usage counts (`1 - cached / usage_prompt_tokens`)
//! and scales AIPerf's figure, so a client tokenizer that counts the prompt
//! differently from the server (another tokenizer, a chat template) moves
//! both alike: only caching makes them differ.

use serde::Serialize;

use super::PREFILL_THROUGHPUT_OVERSTATED;
use crate::artifacts::records::{self, Metric, Phase, Record};
use crate::findings::{Finding, Moved, Unit};
use crate::stats;

closed_set! {
    /// A group of requests by cache outcome.
    pub enum PrefillGroupKind {
        /// Every successful profiling request with the fields.
        All => "all",
        /// Those with cached tokens.
        Hit => "hit",
        /// Those without.
        Miss => "miss",
    }
}

/// Prefill throughput over uncached tokens, for one group of requests.
#[derive(Debug, Clone, Serialize)]
pub struct PrefillGroup {
    /// Which requests.
    pub group: PrefillGroupKind,
    /// Records in the group.
    pub records: usize,
    /// Mean of AIPerf's `prefill_throughput_per_user`.
    pub published_mean: Option<f64>,
    /// Mean of `prefill_throughput_per_user x (usage_prompt_tokens -
    /// cached) / usage_prompt_tokens` (tokens/s).
    pub uncached_mean: Option<f64>,
    /// `(published - uncached) / uncached * 100`.
    pub overstatement_pct: Option<f64>,
}

/// Prefill throughput over all, cache-hit and cache-miss requests.
pub fn prefill_groups<'a>(ok: impl Iterator<Item = &'a Record>) -> Vec<PrefillGroup> {
    let rows: Vec<(bool, f64, f64)> = ok
        .filter_map(|r| {
            let ttft = r.values.get(Metric::TimeToFirstToken)?;
            let prompt = r.values.get(Metric::UsagePromptTokens)?;
            let cached = r.values.get(Metric::UsagePromptCacheReadTokens)?;
            let published = r.values.get(Metric::PrefillThroughputPerUser)?;
            let share = (prompt - cached) / prompt;
            (ttft > 0.0 && prompt > 0.0).then_some((cached > 0.0, published, published * share))
        })
        .collect();
    if rows.is_empty() {
        return Vec::new();
    }
    let group = |name: PrefillGroupKind, keep: &dyn Fn(bool) -> bool| {
        // Means of the rows in place (no column is made: three groups of
        // two were six copies of the rows).
        let sel = || rows.iter().filter(|r| keep(r.0));
        let n = sel().count();
        let (published, uncached) = (
            stats::mean_of(sel().map(|r| r.1)),
            stats::mean_of(sel().map(|r| r.2)),
        );
        PrefillGroup {
            group: name,
            records: n,
            published_mean: published,
            uncached_mean: uncached,
            overstatement_pct: stats::bias_pct(published, uncached),
        }
    };
    vec![
        group(PrefillGroupKind::All, &|_| true),
        group(PrefillGroupKind::Hit, &|h| h),
        group(PrefillGroupKind::Miss, &|h| !h),
    ]
}

impl super::Pass<'_> {
    /// Prefill throughput over uncached tokens, and the groups it overstates.
    pub(super) fn prefill(&mut self) -> Vec<PrefillGroup> {
        let ok = self
            .records
            .iter()
            .filter(|r| r.phase == Phase::Profiling && r.is_success());
        let groups = prefill_groups(ok);
        let all_records = groups.first().map_or(0, |g| g.records);
        // The hit group is reported only when it is not the whole run.
        let flagged = groups.iter().filter(|g| {
            g.group == PrefillGroupKind::All
                || (g.group == PrefillGroupKind::Hit && g.records < all_records)
        });
        let mut made: Option<usize> = None;
        for g in flagged {
            let Some(o) = g
                .overstatement_pct
                .filter(|o| *o > self.p.prefill_overstatement_pct)
            else {
                continue;
            };
            let which = if g.group == PrefillGroupKind::Hit {
                "cache-hit"
            } else {
                "successful"
            };
            // One cause, one finding: the cache-hit requests' figure is
            // said inside the finding of all successful ones.
            if let Some(i) = made {
                let f: &mut Finding = &mut self.findings[i];
                f.message.push_str(&format!(
                    "; over the {} {which} requests alone, {:.0} against {:.0} tokens/s ({o:+.1} %)",
                    g.records,
                    g.published_mean.unwrap_or(f64::NAN),
                    g.uncached_mean.unwrap_or(f64::NAN)
                ));
                continue;
            }
            made = Some(self.findings.len());
            self.findings.push(
                Finding::new(
                    PREFILL_THROUGHPUT_OVERSTATED,
                    format!(
                        "prefill_throughput_per_user over {} {which} requests averages {:.0} \
                         tokens/s, but over the uncached tokens actually prefilled it is {:.0} \
                         tokens/s: overstated by {o:.1} % (it divides every prompt token, \
                         cached or not, by the time to first token)",
                        g.records,
                        g.published_mean.unwrap_or(f64::NAN),
                        g.uncached_mean.unwrap_or(f64::NAN)
                    ),
                )
                .file(records::FILE)
                .field("metrics.prefill_throughput_per_user")
                .expected_found(g.uncached_mean, g.published_mean)
                .effect("overstatement", o, Unit::Percent)
                .moves_all((g.group == PrefillGroupKind::All).then(|| {
                    Moved::new(
                        Metric::PrefillThroughputPerUser.tag(),
                        "avg",
                        g.published_mean,
                        g.uncached_mean,
                    )
                })),
            );
        }
        groups
    }
}
