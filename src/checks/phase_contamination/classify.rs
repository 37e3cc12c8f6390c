//! The names of what a metric's per-phase count says: each cause the
//! accounting weighs ([`super::accounting`]), and `ok`, `mixed` and
//! `unknown` for a row's whole.

closed_set! {
    /// What a metric's count in one phase (one row) says.
    pub enum Classification {
        /// The count is inside the expected range.
        Ok => "ok",
        /// Profiling over and warmup under: warmup observations published
        /// late were counted in profiling.
        LateWarmupObservation => "late_warmup_observation",
        /// Profiling under and warmup over: profiling observations published
        /// before the end-of-warmup scrape were counted in warmup.
        ProfilingLostToWarmup => "profiling_lost_to_warmup",
        /// Profiling over, warmup exact: AIPerf's profiling baseline scrape
        /// predates warmup observations, so profiling counts them too.
        WarmupAbsorbed => "warmup_absorbed",
        /// As `warmup_absorbed`, with AIPerf's profiling baseline a scrape
        /// answered out of order: its state is older than the scrapes
        /// stored before it, so the profiling delta reaches back into
        /// warmup.
        OutOfOrderBaseline => "out_of_order_baseline",
        /// Warmup over, profiling exact: profiling observations made while
        /// the warmup window was still open were counted in both phases.
        CountedInBoth => "counted_in_both",
        /// A counter reset on the endpoint during the phase explains the
        /// count (reported as `counter-reset`).
        Reset => "reset",
        /// Under by what a series born inside the phase lost (reported as
        /// `series-created-mid-phase`).
        SeriesCreatedMidPhase => "series_created_mid_phase",
        /// Observations of requests that ended without success (cancelled
        /// or failed) which the framework makes by design.
        FailedRequest => "failed_request",
        /// Observations of requests in no record: a duration run's
        /// requests cut when the grace period ended.
        RequestWithoutRecord => "request_without_record",
        /// More than one cause.
        Mixed => "mixed",
        /// Over, with no matching deficit and no evidence of a cause.
        UnexplainedExcess => "unexplained_excess",
        /// Under, with no matching excess in the other phase.
        UnexplainedDeficit => "unexplained_deficit",
        /// The expected or found count is unknown.
        Unknown => "unknown",
    }
}

impl Classification {
    /// Whether the row is a mismatch (not `ok`, and compared).
    pub fn is_mismatch(self) -> bool {
        !matches!(self, Classification::Ok | Classification::Unknown)
    }

    /// Whether the cause is what the server saw of requests the records do
    /// not hold as successes (failed, cancelled, cut at the grace period):
    /// part of the phase's truth, not a fault of the split.
    pub fn is_unsuccessful_requests(self) -> bool {
        matches!(
            self,
            Classification::FailedRequest | Classification::RequestWithoutRecord
        )
    }
}
