//! How a metric's per-phase deviations are classified.

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
        /// Over, with no matching deficit in the other phase.
        UnexplainedExcess => "unexplained_excess",
        /// Under, with no matching excess in the other phase.
        UnexplainedDeficit => "unexplained_deficit",
        /// The expected or found count is unknown.
        Unknown => "unknown",
        /// A per-endpoint row of an endpoint with traffic: which endpoint
        /// served which request is not in the artifacts.
        NotCompared => "not_compared",
        /// A per-endpoint row of an endpoint no request-scoped metric moved on.
        NoTraffic => "no_traffic",
    }
}

impl Classification {
    /// Whether the row is a mismatch (not `ok`, and compared).
    pub fn is_mismatch(self) -> bool {
        !matches!(
            self,
            Classification::Ok
                | Classification::NotCompared
                | Classification::NoTraffic
                | Classification::Unknown
        )
    }
}

/// Classifies the deviations of profiling (`dp`) and warmup (`dw`); an
/// unknown deviation classifies its phase as `unknown`, never `ok`.
pub fn classify(dp: Option<f64>, dw: Option<f64>) -> (Classification, Classification) {
    use Classification::*;
    match (dp, dw) {
        (None, None) => (Unknown, Unknown),
        (Some(p), None) => (side(p), Unknown),
        (None, Some(w)) => (Unknown, side(w)),
        (Some(p), Some(w)) if p > 0.0 && w < 0.0 => (LateWarmupObservation, LateWarmupObservation),
        (Some(p), Some(w)) if p < 0.0 && w > 0.0 => (ProfilingLostToWarmup, ProfilingLostToWarmup),
        (Some(p), Some(w)) => (side(p), side(w)),
    }
}

fn side(d: f64) -> Classification {
    if d > 0.0 {
        Classification::UnexplainedExcess
    } else if d < 0.0 {
        Classification::UnexplainedDeficit
    } else {
        Classification::Ok
    }
}

#[cfg(test)]
mod tests {
    use super::Classification::*;
    use super::*;

    #[test]
    fn classification_matches_the_mirror_cases() {
        assert_eq!(classify(Some(1.0), Some(-1.0)).0, LateWarmupObservation);
        assert_eq!(classify(Some(-2.0), Some(2.0)).1, ProfilingLostToWarmup);
        assert_eq!(classify(Some(0.0), Some(4.0)), (Ok, UnexplainedExcess));
        assert_eq!(classify(Some(-1.0), Some(0.0)), (UnexplainedDeficit, Ok));
        assert_eq!(classify(Some(0.0), None), (Ok, Unknown));
        assert_eq!(classify(None, Some(1.0)), (Unknown, UnexplainedExcess));
        assert_eq!(classify(None, None).0, Unknown);
    }
}
