//! The causes one observer's accounting weighs, each bounded by its
//! evidence ([`super::accounting`] combines them): among them what the
//! server saw of requests the records do not hold as successes (the
//! model's counts of them).

use super::accounting::{Term, UNBOUNDED};
use super::classify::Classification;
use super::evidence::Evidence;
use super::Expected;
use crate::artifacts::records::Phase;
use crate::frameworks::{observes_unsuccessful, Framework, ObservedAt, Observes};
use crate::model::attribution::Attribution;
use crate::model::{PhaseModel, RunModel};

/// Both phases' models (profiling, warmup): their unsuccessful records
/// and requests without a record.
pub struct Population<'a>(pub [Option<&'a PhaseModel>; 2]);

impl Population<'_> {
    /// The run's.
    pub fn of(model: &RunModel) -> Population<'_> {
        Population([model.phase(Phase::Profiling), model.phase(Phase::Warmup)])
    }
}

/// What bounds each cause of one observer.
pub struct Inputs<'a> {
    /// The metric's framework and observation point.
    pub framework: Framework,
    /// When it is observed.
    pub at: ObservedAt,
    /// Expected (successful) counts, profiling and warmup.
    pub expected: [Option<Expected>; 2],
    /// What the windows, records and scrapes allow at the boundary.
    pub evidence: &'a Evidence,
    /// A reset on the observer's endpoint in each phase.
    pub reset: [bool; 2],
    /// The reset-aware growth of each phase with a reset (count, sum).
    pub reset_growth: [Option<(f64, Option<f64>)>; 2],
    /// The export's counts (profiling, warmup).
    pub found: [Option<f64>; 2],
    /// What series born inside each phase cost it.
    pub born: [f64; 2],
    /// The repair from the raw scrapes.
    pub corrected: Option<&'a Attribution>,
    /// The requests without success.
    pub population: &'a Population<'a>,
}

fn term(
    cause: Classification,
    effect: [i8; 2],
    low: u64,
    high: u64,
    evidence: String,
) -> Term<Classification> {
    let cap = |x: u64| i64::try_from(x).unwrap_or(UNBOUNDED).min(UNBOUNDED);
    Term {
        cause,
        effect,
        low: cap(low),
        high: cap(high.max(low)),
        evidence,
    }
}

const PHASES: [(Phase, [i8; 2]); 2] = [(Phase::Profiling, [-1, 0]), (Phase::Warmup, [0, -1])];

impl Inputs<'_> {
    /// The terms, in the order they take a share when several could: the
    /// losses with their own findings, the requests without success, then
    /// the boundary's causes.
    pub fn terms(&self) -> Vec<Term<Classification>> {
        use Classification::*;
        let mut out = Vec::new();
        for (i, (phase, loss)) in PHASES.into_iter().enumerate() {
            if self.reset[i] {
                // The server observed at least the reset-aware growth; the
                // export holds what AIPerf's clamped delta kept.
                let (low, why) = match (self.reset_growth[i], self.found[i]) {
                    (Some((grown, sum)), Some(found)) => (
                        (grown - found).max(0.0).round() as u64,
                        format!(
                            "a counter reset on the endpoint during {phase}: read across the \
                             reset, the raw scrapes show at least {grown:.0} observations{} \
                             there, the export {found:.0}",
                            sum.map(|s| format!(" (sum at least {s:.6})"))
                                .unwrap_or_default()
                        ),
                    ),
                    _ => (0, format!("a counter reset on the endpoint during {phase}")),
                };
                out.push(term(Reset, loss, low, u64::MAX, why));
            }
            if self.born[i] > 0.0 {
                let n = self.born[i].round() as u64;
                let why = format!("series first seen inside {phase} lost their first {n}");
                out.push(term(SeriesCreatedMidPhase, loss, 0, n, why));
            }
        }
        for (i, (phase, _)) in PHASES.into_iter().enumerate() {
            let gain = if i == 0 { [1, 0] } else { [0, 1] };
            let Some(u) = self.population.0[i] else {
                continue;
            };
            if let Some((low, high, why)) = self.failed(u, phase) {
                out.push(term(FailedRequest, gain, low, high, why));
            }
            if let Some((low, high, why)) = self.cut(u, phase) {
                out.push(term(RequestWithoutRecord, gain, low, high, why));
            }
        }
        self.boundary(&mut out);
        out
    }

    /// The error records the server may have observed.
    fn failed(&self, u: &PhaseModel, phase: Phase) -> Option<(u64, u64, String)> {
        let total: u64 = u.unsuccessful.iter().flatten().sum();
        if total == 0 {
            return None;
        }
        let (mut yes, mut maybe) = (0, 0);
        for (ft, row) in u.unsuccessful.iter().enumerate() {
            for (cancelled, n) in row.iter().enumerate() {
                match observes_unsuccessful(self.framework, self.at, ft == 1, cancelled == 1) {
                    Observes::Yes => yes += n,
                    Observes::Maybe => maybe += n,
                    Observes::No => {}
                }
            }
        }
        let cancelled = u.unsuccessful[0][1] + u.unsuccessful[1][1];
        let first = u.unsuccessful[1][0] + u.unsuccessful[1][1];
        let why = format!(
            "{total} {phase} request(s) ended without success ({cancelled} cancelled, {first} \
             after a first token); {} observes {yes} certainly and {maybe} maybe at {}",
            self.framework, self.at
        );
        Some((yes, yes + maybe, why))
    }

    /// The requests cut at the grace period the server may have observed.
    fn cut(&self, u: &PhaseModel, phase: Phase) -> Option<(u64, u64, String)> {
        let crate::model::Unrecorded {
            logged: known,
            at_most,
        } = u.unrecorded?;
        // Cut while in flight: a disconnect, which the server sees as an
        // abort; whether each had its first token no artifact says.
        let high = match observes_unsuccessful(self.framework, self.at, false, true) {
            Observes::No => 0,
            _ => at_most,
        };
        let why = match known {
            Some(n) => format!(
                "the log says {n} {phase} request(s) were cancelled when the grace period \
                 ended (no record); {} observes up to {high} of them at {}",
                self.framework, self.at
            ),
            None => format!(
                "{phase} is bounded by duration: up to {at_most} request(s) in flight when \
                 its grace period ended are in no artifact (the log, which would count them, \
                 was not read)"
            ),
        };
        (high > 0 || known.is_some_and(|n| n > 0)).then_some((0, high, why))
    }

    /// The causes at the warmup/profiling boundary.
    fn boundary(&self, out: &mut Vec<Term<Classification>>) {
        use Classification::*;
        let ev = self.evidence;
        let [exp_p, exp_w] = self.expected;
        let Some(exp_w) = exp_w else {
            // No warmup: nothing crosses.
            return;
        };
        let warmup = exp_w.max;
        let absorbed = match (&ev.absorbed, &ev.no_split) {
            (Some((n, baseline)), Some(v)) => Some((
                *n,
                format!(
                    "AIPerf {v} has no warmup split: its profiling baseline {baseline}; the \
                     {warmup} configured warmup request(s) all finished before profiling \
                     started, and up to {n} of their observations come after that scrape"
                ),
            )),
            (Some((n, baseline)), None) => Some((
                *n,
                format!("AIPerf's profiling baseline {baseline}, and up to {n} warmup observation(s) come after it"),
            )),
            (None, _) => ev.warmup_total.map(|w| {
                (w.round() as u64, "no scrape or timeslice says where AIPerf's profiling \
                    baseline lies: up to the whole warmup"
                    .to_string())
            }),
        };
        if let Some((n, why)) = absorbed {
            // The same movement, when the baseline's state is older than
            // AIPerf's order says: its answer came after a later-sent one.
            let (cause, why) = if ev.baseline_out_of_order {
                (
                    OutOfOrderBaseline,
                    format!(
                        "{why}; that scrape was answered after one sent later, so its state \
                         is older than the scrapes stored before it"
                    ),
                )
            } else {
                (WarmupAbsorbed, why)
            };
            out.push(term(cause, [1, 0], 0, n, why));
        }
        let (before_end, why) = match &ev.double {
            Some((n, scrape)) => (
                *n,
                format!("AIPerf's end-of-warmup scrape {scrape}, after up to {n} profiling observation(s)"),
            ),
            None => (
                exp_p.map_or(0, |e| e.max),
                "no scrape says when the warmup delta ends".to_string(),
            ),
        };
        out.push(term(CountedInBoth, [0, 1], 0, before_end, why.clone()));
        out.push(term(ProfilingLostToWarmup, [-1, 1], 0, before_end, why));
        let placed = self.corrected.map_or(0, |c| c.warmup_late);
        let why = if placed > 0 {
            format!("the raw scrapes place {placed} warmup observation(s) after profiling started")
        } else {
            "a warmup observation published late (after the end-of-warmup scrape) lands in \
             profiling: up to the whole warmup"
                .to_string()
        };
        out.push(term(
            LateWarmupObservation,
            [1, -1],
            placed,
            warmup.max(placed),
            why,
        ));
    }
}
