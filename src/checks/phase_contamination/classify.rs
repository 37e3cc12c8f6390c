//! How a metric's per-phase deviations are classified, from the deviations
//! and the evidence of the windows, records and scrapes.

use super::evidence::Evidence;

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
        /// Warmup over, profiling exact: profiling observations made while
        /// the warmup window was still open were counted in both phases.
        CountedInBoth => "counted_in_both",
        /// A counter reset on the endpoint during the phase explains the
        /// count (reported as `counter-reset`).
        Reset => "reset",
        /// Under by what a series born inside the phase lost (reported as
        /// `series-created-mid-phase`).
        SeriesCreatedMidPhase => "series_created_mid_phase",
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
}

/// Classifies the deviations of profiling (`dp`) and warmup (`dw`); an
/// unknown deviation classifies its phase as `unknown`, never `ok`. A
/// one-sided excess gets a cause only where the evidence can account for
/// it: a profiling excess the warmup observations after AIPerf's profiling
/// baseline can hold (or exactly all of warmup's), a warmup excess the
/// profiling observations before AIPerf's end-of-warmup scrape can.
pub fn classify(
    dp: Option<f64>,
    dw: Option<f64>,
    ev: &Evidence,
) -> (Classification, Classification) {
    use Classification::*;
    let profiling = |d: f64| {
        if d > 0.0 && ev.absorbed_explains(d) {
            WarmupAbsorbed
        } else {
            side(d)
        }
    };
    let warmup = |d: f64| {
        if d > 0.0 && ev.double_explains(d) {
            CountedInBoth
        } else {
            side(d)
        }
    };
    match (dp, dw) {
        (None, None) => (Unknown, Unknown),
        (Some(p), None) => (profiling(p), Unknown),
        (None, Some(w)) => (Unknown, warmup(w)),
        (Some(p), Some(w)) if p > 0.0 && w < 0.0 => (LateWarmupObservation, LateWarmupObservation),
        (Some(p), Some(w)) if p < 0.0 && w > 0.0 => (ProfilingLostToWarmup, ProfilingLostToWarmup),
        (Some(p), Some(w)) => (profiling(p), warmup(w)),
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
        let none = Evidence::default();
        assert_eq!(
            classify(Some(1.0), Some(-1.0), &none).0,
            LateWarmupObservation
        );
        assert_eq!(
            classify(Some(-2.0), Some(2.0), &none).1,
            ProfilingLostToWarmup
        );
        assert_eq!(
            classify(Some(0.0), Some(4.0), &none),
            (Ok, UnexplainedExcess)
        );
        assert_eq!(
            classify(Some(-1.0), Some(0.0), &none),
            (UnexplainedDeficit, Ok)
        );
        assert_eq!(classify(Some(0.0), None, &none), (Ok, Unknown));
        assert_eq!(
            classify(None, Some(1.0), &none),
            (Unknown, UnexplainedExcess)
        );
        assert_eq!(classify(None, None, &none).0, Unknown);
    }

    #[test]
    fn an_excess_gets_a_cause_only_where_the_evidence_holds_it() {
        let ev = Evidence {
            warmup_total: Some(4.0),
            absorbed: Some((3, "b".into())),
            double: Some((2, "d".into())),
            no_split: None,
        };
        assert_eq!(classify(Some(3.0), Some(0.0), &ev).0, WarmupAbsorbed);
        assert_eq!(
            classify(Some(4.0), Some(0.0), &ev).0,
            UnexplainedExcess,
            "timing says 3"
        );
        let untimed = Evidence {
            warmup_total: Some(4.0),
            ..Default::default()
        };
        assert_eq!(
            classify(Some(4.0), Some(0.0), &untimed).0,
            WarmupAbsorbed,
            "all of warmup"
        );
        assert_eq!(
            classify(Some(3.0), Some(0.0), &untimed).0,
            UnexplainedExcess
        );
        assert_eq!(classify(Some(0.0), Some(2.0), &ev).1, CountedInBoth);
        assert_eq!(classify(Some(0.0), Some(3.0), &ev).1, UnexplainedExcess);
        assert_eq!(
            classify(Some(3.0), Some(1.0), &ev),
            (WarmupAbsorbed, CountedInBoth)
        );
    }
}
