//! A comparison of two runs (`artifact-check compare A B`), as the
//! renderers read it: each run's setup, the statistics side by side with
//! their difference and its interval, and the findings that make the
//! comparison unsafe. Computed by [`crate::compare`].

use serde::Serialize;

use crate::findings::Finding;
use crate::stats::Stat;

/// What a run was: the facts a fair comparison needs equal.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Setup {
    /// AIPerf version.
    pub aiperf_version: Option<String>,
    /// Profiling concurrency.
    pub concurrency: Option<u64>,
    /// Streaming.
    pub streaming: Option<bool>,
    /// Endpoint type (`chat`, `completions`, ...).
    pub endpoint_type: Option<String>,
    /// Inference endpoints the load went to.
    pub endpoints: Option<usize>,
    /// Mean realised input tokens per kept request.
    pub input_tokens_mean: Option<f64>,
    /// Mean realised output tokens per kept request.
    pub output_tokens_mean: Option<f64>,
    /// Share of profiling records that were cold (0..1).
    pub cold_share: Option<f64>,
    /// Kept records.
    pub records: usize,
    /// Error findings of its audit.
    pub error_findings: usize,
}

/// One statistic of both runs.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    /// Metric tag, `output_token_throughput`, `request_throughput` or
    /// `prefix_cache_hit_rate`.
    pub metric: &'static str,
    /// `mean`, `p50`, `p90`, `p99` (throughputs and hit rate: `mean`).
    pub stat: Stat,
    /// Run A's value.
    pub a: Option<f64>,
    /// Run B's value.
    pub b: Option<f64>,
    /// b - a.
    pub difference: Option<f64>,
    /// (b - a) / a x 100.
    pub difference_pct: Option<f64>,
    /// 95 % bootstrap interval of b - a.
    pub interval: Option<[f64; 2]>,
    /// The interval excludes zero; `null` when it cannot tell (no interval,
    /// or fewer than 5 requests beyond a tail percentile in a run).
    pub significant: Option<bool>,
    /// How `interval` is computed: `block_bootstrap_95` or
    /// `welch_95_time_slices`.
    pub method: &'static str,
    /// Higher is better for this metric (throughputs, hit rate).
    pub higher_is_better: bool,
    /// The unit, as the runs' summary gives it (`ms`, `tokens/sec/user`;
    /// `ratio` for the hit rate); `null` when neither says.
    pub unit: Option<String>,
}

/// The comparison.
#[derive(Debug, Clone, Serialize)]
pub struct Comparison {
    /// Run A (the baseline).
    pub a: String,
    /// Run B.
    pub b: String,
    /// How the intervals are computed, in words.
    pub interval_method: &'static str,
    /// Bootstrap resamples.
    pub resamples: usize,
    /// Dropped from both besides warmup and failed records.
    pub exclude_cold: bool,
    /// The opening wave and drain tail dropped from both.
    pub steady_state: bool,
    /// Each run's setup.
    pub setup: [Setup; 2],
    /// The statistics.
    pub rows: Vec<Row>,
    /// Unsafe comparisons and regressions.
    pub findings: Vec<Finding>,
    /// 0, 1 or 2, as for an audit.
    pub exit_code: i32,
}
