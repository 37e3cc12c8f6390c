//! The clients' prefix-cache hit rate: token-weighted
//! `sum(usage_prompt_cache_read_tokens) / sum(usage_prompt_tokens)` over the
//! records that carry both fields, never a mean of per-request ratios. A
//! record without the cached-token field is unknown, not a miss.

use serde::Serialize;

use crate::artifacts::records::{Metric, Record};

/// A token-weighted client-side hit rate.
#[derive(Debug, Clone, Default, Serialize)]
pub struct ClientRate {
    /// cached / prompt over records with both fields (0..1); `null` if unknown.
    pub hit_rate: Option<f64>,
    /// Sum of `usage_prompt_cache_read_tokens`.
    pub cached_tokens: f64,
    /// Sum of `usage_prompt_tokens` over the same records.
    pub prompt_tokens: f64,
    /// Share of successful records that carry the cached-token field (0..1).
    pub coverage: Option<f64>,
    /// Successful records considered.
    pub records: usize,
}

/// Token-weighted client rate over `records` (pass successful ones).
pub fn client_rate<'a>(records: impl Iterator<Item = &'a Record>) -> ClientRate {
    let mut sum = ClientRateSum::default();
    for r in records {
        sum.add(r);
    }
    sum.finish()
}

/// [`client_rate`], one record at a time (several rates in one walk).
#[derive(Default)]
pub struct ClientRateSum {
    c: ClientRate,
    covered: usize,
}

impl ClientRateSum {
    /// Adds one (successful) record.
    pub fn add(&mut self, r: &Record) {
        self.c.records += 1;
        let cached = r.values.get(Metric::UsagePromptCacheReadTokens);
        let prompt = r.values.get(Metric::UsagePromptTokens);
        if let (Some(cached), Some(prompt)) = (cached, prompt) {
            self.covered += 1;
            self.c.cached_tokens += cached;
            self.c.prompt_tokens += prompt;
        }
    }

    /// The rate over the records added.
    pub fn finish(self) -> ClientRate {
        let (mut c, covered) = (self.c, self.covered);
        c.coverage = (c.records > 0).then(|| covered as f64 / c.records as f64);
        c.hit_rate =
            (covered > 0 && c.prompt_tokens > 0.0).then(|| c.cached_tokens / c.prompt_tokens);
        c
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::artifacts::records::Values;

    #[test]
    fn client_rate_is_token_weighted_and_missing_is_unknown() {
        let mk = |prompt: f64, cached: Option<f64>| {
            let mut v = Values::default();
            v.set(Metric::UsagePromptTokens, Some(prompt));
            v.set(Metric::UsagePromptCacheReadTokens, cached);
            Record::with_values(v)
        };
        // Mean of ratios would be (0.9 + 0.0) / 2 = 0.45; token-weighted is 90/1100.
        let rs = [mk(100.0, Some(90.0)), mk(1000.0, Some(0.0)), mk(50.0, None)];
        let c = client_rate(rs.iter());
        assert_eq!(c.hit_rate, Some(90.0 / 1100.0));
        assert!((c.coverage.unwrap_or(0.0) - 2.0 / 3.0).abs() < 1e-12);
        let none = client_rate(rs[2..].iter());
        assert_eq!(none.hit_rate, None);
    }
}
