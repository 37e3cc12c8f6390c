//! The accounting of one observer's two phase deviations: every cause that
//! can move observations across the warmup/profiling boundary or out of
//! the windows, each with the interval its evidence allows, combined so
//! that both phases' deviations are explained exactly.
//!
//! A phase's deviation is what its server count holds beyond one
//! observation per successful request. Each cause is a [`Term`]: a number
//! of observations `v` in `[low, high]` that moves the profiling and the
//! warmup count by `effect * v` (a late warmup observation `(+1, -1)`, a
//! warmup observation absorbed by an early profiling baseline `(+1, 0)`, a
//! profiling observation lost to warmup `(-1, +1)`, counted in both
//! `(0, +1)`, lost to a reset `(-1, 0)`, a failed request the server
//! observed `(+1, 0)` ...). [`account`] finds every combination of the
//! terms that gives both deviations, and among them the most parsimonious
//! (the fewest moved observations): each cause gets its count in that
//! combination and its range over every combination. When none exists the
//! nearest is taken and what remains is unexplained, with its size.
//!
//! Every term moves profiling and warmup by opposite amounts or only one of
//! them, so the terms reduce to three sums: `T` (the net transfer from
//! warmup to profiling), `P` (profiling only) and `W` (warmup only), with
//! `dp = T + P` and `dw = W - T`. A sum of integer intervals is an
//! interval, so which `T` is feasible is an interval too, and each cause's
//! range follows in closed form: no search over combinations.

use serde::Serialize;

/// A count large enough to stand for "no bound" without overflow.
pub const UNBOUNDED: i64 = 1 << 40;

/// One cause in one observer's accounting.
#[derive(Debug, Clone, PartialEq)]
pub struct Term<C> {
    /// What it is.
    pub cause: C,
    /// How one of its observations moves (profiling, warmup): each -1, 0
    /// or +1, never the same sign in both.
    pub effect: [i8; 2],
    /// At least this many (certain from the evidence).
    pub low: i64,
    /// At most this many ([`UNBOUNDED`] when nothing bounds it).
    pub high: i64,
    /// What the bounds come from, in words.
    pub evidence: String,
}

/// One cause's place in the accounting, per phase: signed, so that a
/// row's causes sum to its deviation.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Share<C> {
    /// The cause.
    pub cause: C,
    /// Its count in the most parsimonious combination (signed for this
    /// phase's row).
    pub count: i64,
    /// The lowest (signed) it can be in any combination that explains both
    /// deviations.
    pub low: i64,
    /// The highest; `null` when nothing bounds it.
    pub high: Option<i64>,
    /// What the evidence says.
    pub evidence: String,
}

/// The accounting of one observer.
#[derive(Debug, Clone, PartialEq)]
pub struct Accounting<C> {
    /// Each term's count in the chosen combination, its range, in term
    /// order (unsigned).
    pub values: Vec<(i64, i64, i64)>,
    /// What no combination explains, per phase (profiling, warmup): 0 when
    /// the accounting closes.
    pub remainder: [i64; 2],
    /// Whether more than one most-parsimonious combination exists.
    pub ambiguous: bool,
    /// The terms.
    pub terms: Vec<Term<C>>,
}

#[derive(Debug, Clone, Copy, PartialEq)]
struct Interval(i64, i64);

impl Interval {
    fn sum(items: impl Iterator<Item = Interval>) -> Interval {
        items.fold(Interval(0, 0), |a, b| {
            Interval(a.0.saturating_add(b.0), a.1.saturating_add(b.1))
        })
    }
    fn neg(self) -> Interval {
        Interval(-self.1, -self.0)
    }
    fn intersect(self, o: Interval) -> Option<Interval> {
        let i = Interval(self.0.max(o.0), self.1.min(o.1));
        (i.0 <= i.1).then_some(i)
    }
    fn clamp(self, x: i64) -> i64 {
        x.clamp(self.0, self.1)
    }
    fn distance(self, x: i64) -> i64 {
        (self.0 - x).max(0) + (x - self.1).max(0)
    }
}

/// Which of the three sums a term feeds: `T` (moves profiling and warmup
/// oppositely; its sign is the profiling one), `P` (profiling only) or `W`
/// (warmup only).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Slot {
    Transfer = 0,
    Profiling = 1,
    Warmup = 2,
}

/// A term's slot and sign; `None` for an effect of `(0, 0)`.
fn slot_of(effect: [i8; 2]) -> Option<(Slot, i64)> {
    match (effect[0], effect[1]) {
        (0, 0) => None,
        (p, 0) => Some((Slot::Profiling, i64::from(p.signum()))),
        (0, w) => Some((Slot::Warmup, i64::from(w.signum()))),
        (p, _) => Some((Slot::Transfer, i64::from(p.signum()))),
    }
}

/// A slot's terms: the `+` and `-` totals' bounds.
#[derive(Clone, Copy)]
struct Totals {
    pos: Interval,
    neg: Interval,
}

impl Totals {
    fn of<C>(terms: &[Term<C>], slot: Slot) -> Totals {
        let side = |sign: i64| {
            Interval::sum(
                terms
                    .iter()
                    .filter(|t| slot_of(t.effect) == Some((slot, sign)))
                    .map(|t| Interval(t.low, t.high.max(t.low))),
            )
        };
        Totals {
            pos: side(1),
            neg: side(-1),
        }
    }
    /// The values `pos - neg` can take.
    fn range(&self) -> Interval {
        Interval(self.pos.0 - self.neg.1, self.pos.1 - self.neg.0)
    }
    /// The least `pos + neg` giving `pos - neg = x`, with that `(pos, neg)`;
    /// `None` when `x` is out of range.
    fn cheapest(&self, x: i64) -> Option<(i64, i64, i64)> {
        let neg = self.neg.0.max(self.pos.0 - x);
        let pos = x + neg;
        (neg <= self.neg.1 && pos >= self.pos.0 && pos <= self.pos.1).then_some((
            pos + neg,
            pos,
            neg,
        ))
    }
}

/// The three slots' totals and the deviations they must give.
struct Problem {
    totals: [Totals; 3],
    dp: Option<i64>,
    dw: Option<i64>,
}

impl Problem {
    fn range(&self, slot: Slot) -> Interval {
        self.totals[slot as usize].range()
    }

    /// What the profiling-only and warmup-only sums must be for a transfer
    /// `t` (clamped to what they can be; an unknown deviation asks for
    /// nothing beyond the cheapest).
    fn targets(&self, t: i64) -> (i64, i64) {
        let (p, w) = (self.range(Slot::Profiling), self.range(Slot::Warmup));
        (
            self.dp.map_or(p.clamp(0), |d| p.clamp(d - t)),
            self.dw.map_or(w.clamp(0), |d| w.clamp(d + t)),
        )
    }

    /// How far a transfer `t` leaves the deviations from what the other
    /// slots can hold.
    fn miss(&self, t: i64) -> i64 {
        let by_p = self
            .dp
            .map_or(0, |d| self.range(Slot::Profiling).distance(d - t));
        let by_w = self
            .dw
            .map_or(0, |d| self.range(Slot::Warmup).distance(d + t));
        by_p + by_w
    }

    /// The observations a transfer `t` moves at the least.
    fn cost(&self, t: i64) -> i64 {
        let (p, w) = self.targets(t);
        [(Slot::Transfer, t), (Slot::Profiling, p), (Slot::Warmup, w)]
            .iter()
            .map(|&(slot, x)| {
                self.totals[slot as usize]
                    .cheapest(x)
                    .map_or(UNBOUNDED, |c| c.0)
            })
            .fold(0i64, |a, b| a.saturating_add(b))
    }

    /// The candidate transfers: the range's ends and every kink of the
    /// miss and cost functions, clamped, sorted.
    fn candidates(&self) -> Vec<i64> {
        let [tr, pr, wa] = self.totals;
        let t_range = tr.range();
        let (p_range, w_range) = (pr.range(), wa.range());
        let mut kinks = vec![t_range.0, t_range.1, 0, tr.pos.0 - tr.neg.0];
        if let Some(d) = self.dp {
            kinks.extend([d - p_range.0, d - p_range.1, d - pr.pos.0 + pr.neg.0]);
        }
        if let Some(d) = self.dw {
            kinks.extend([w_range.0 - d, w_range.1 - d, wa.pos.0 - wa.neg.0 - d]);
        }
        let mut cands: Vec<i64> = kinks.into_iter().map(|t| t_range.clamp(t)).collect();
        cands.sort_unstable();
        cands.dedup();
        cands
    }

    /// The transfers that leave the least unexplained (an interval: the
    /// miss is convex), and among them those that move the fewest
    /// observations (likewise).
    fn choose(&self) -> (Interval, Interval) {
        let cands = self.candidates();
        let least = cands.iter().map(|&t| self.miss(t)).min().unwrap_or(0);
        let feasible: Vec<i64> = cands
            .into_iter()
            .filter(|&t| self.miss(t) == least)
            .collect();
        let best = feasible.iter().map(|&t| self.cost(t)).min().unwrap_or(0);
        let cheapest: Vec<i64> = feasible
            .iter()
            .copied()
            .filter(|&t| self.cost(t) == best)
            .collect();
        let ends = |v: &[i64]| {
            Interval(
                v.first().copied().unwrap_or(0),
                v.last().copied().unwrap_or(0),
            )
        };
        (ends(&feasible), ends(&cheapest))
    }
}

/// Whether the terms of one slot can share its chosen totals in more than
/// one way (more than one of them has room for what is left above their
/// lows).
fn split_varies<C>(terms: &[Term<C>], slot: Slot, totals: Totals, x: i64) -> bool {
    totals.cheapest(x).is_some_and(|(_, pos, neg)| {
        [(1, pos), (-1, neg)].into_iter().any(|(sign, total)| {
            let mine: Vec<&Term<C>> = terms
                .iter()
                .filter(|t| slot_of(t.effect) == Some((slot, sign)))
                .collect();
            let free: i64 = mine.iter().map(|t| t.high.max(t.low) - t.low).sum();
            let need = total - mine.iter().map(|t| t.low).sum::<i64>();
            need > 0 && need < free && mine.iter().filter(|t| t.high > t.low).count() > 1
        })
    })
}

/// Accounts for the deviations `dp` (profiling) and `dw` (warmup); an
/// unknown deviation constrains nothing.
pub fn account<C: Clone>(dp: Option<i64>, dw: Option<i64>, terms: Vec<Term<C>>) -> Accounting<C> {
    let slots = [Slot::Transfer, Slot::Profiling, Slot::Warmup];
    let problem = Problem {
        totals: slots.map(|slot| Totals::of(&terms, slot)),
        dp,
        dw,
    };
    let (t_feasible, t_cheapest) = problem.choose();
    let t = t_cheapest.0;
    let (p_target, w_target) = problem.targets(t);
    let remainder = [
        dp.map_or(0, |d| d - t - p_target),
        dw.map_or(0, |d| d + t - w_target),
    ];
    let targets = [t, p_target, w_target];
    let ambiguous = t_cheapest.0 != t_cheapest.1
        || slots.iter().any(|&slot| {
            split_varies(
                &terms,
                slot,
                problem.totals[slot as usize],
                targets[slot as usize],
            )
        });
    // Each slot's chosen totals, then each term's share: the terms in
    // order take what is left above their lows (the caller orders terms by
    // how much evidence backs them).
    let mut left: [[i64; 2]; 3] = [[0; 2]; 3];
    for slot in slots {
        let totals = problem.totals[slot as usize];
        let (pos, neg) = totals
            .cheapest(targets[slot as usize])
            .map_or((totals.pos.0, totals.neg.0), |c| (c.1, c.2));
        left[slot as usize] = [pos - totals.pos.0, neg - totals.neg.0];
    }
    // The sums each slot can take over every combination.
    let (p_range, w_range) = (problem.range(Slot::Profiling), problem.range(Slot::Warmup));
    let sums = [
        t_feasible,
        dp.map_or(p_range, |d| {
            Interval(d - t_feasible.1, d - t_feasible.0)
                .intersect(p_range)
                .unwrap_or(Interval(p_target, p_target))
        }),
        dw.map_or(w_range, |d| {
            Interval(d + t_feasible.0, d + t_feasible.1)
                .intersect(w_range)
                .unwrap_or(Interval(w_target, w_target))
        }),
    ];
    let values = terms
        .iter()
        .enumerate()
        .map(|(i, term)| {
            let Some((slot, sign)) = slot_of(term.effect) else {
                return (term.low, term.low, term.high);
            };
            let side = usize::from(sign < 0);
            let take = left[slot as usize][side].min(term.high.max(term.low) - term.low);
            left[slot as usize][side] -= take;
            let count = term.low + take;
            let (lo, hi) = range_of(&terms, i, sums[slot as usize]);
            (count, lo.min(count), hi.max(count))
        })
        .collect();
    Accounting {
        values,
        remainder,
        ambiguous,
        terms,
    }
}

/// Term `i`'s range over every combination: what its slot's sum allows
/// once the slot's other terms take whatever they can.
fn range_of<C>(terms: &[Term<C>], i: usize, sum: Interval) -> (i64, i64) {
    let term = &terms[i];
    let Some((slot, sign)) = slot_of(term.effect) else {
        return (term.low, term.high);
    };
    let mut rest = Interval(0, 0);
    for (j, o) in terms.iter().enumerate() {
        let Some((s, sg)) = slot_of(o.effect).filter(|(s, _)| *s == slot && j != i) else {
            continue;
        };
        debug_assert_eq!(s, slot);
        let iv = Interval(o.low, o.high.max(o.low));
        let iv = if sg < 0 { iv.neg() } else { iv };
        rest = Interval(rest.0.saturating_add(iv.0), rest.1.saturating_add(iv.1));
    }
    // sign * v = sum - rest
    let signed = Interval(sum.0 - rest.1, sum.1 - rest.0);
    let v = if sign < 0 { signed.neg() } else { signed };
    match v.intersect(Interval(term.low, term.high.max(term.low))) {
        Some(r) => (r.0, r.1),
        None => (term.low, term.low),
    }
}

impl<C: Clone> Accounting<C> {
    /// Whether both deviations are explained.
    pub fn closes(&self) -> bool {
        self.remainder == [0, 0]
    }

    /// The causes of one phase's row (0 profiling, 1 warmup), signed: the
    /// terms that move it and could be nonzero, with their shares.
    pub fn shares(&self, phase: usize) -> Vec<Share<C>> {
        self.terms
            .iter()
            .zip(&self.values)
            .filter(|(t, _)| t.effect[phase] != 0)
            .filter(|(_, v)| v.2 > 0)
            .map(|(t, &(count, lo, hi))| {
                let s = i64::from(t.effect[phase]);
                let high = (hi < UNBOUNDED).then_some(hi);
                let (low, high) = if s > 0 {
                    (lo, high)
                } else {
                    // Negated: the highest is -lo, the lowest -hi (unbounded
                    // below is reported as the lowest the count allows).
                    (-hi.min(UNBOUNDED), Some(-lo))
                };
                Share {
                    cause: t.cause.clone(),
                    count: s * count,
                    low: low.max(-UNBOUNDED),
                    high,
                    evidence: t.evidence.clone(),
                }
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn term(cause: &'static str, effect: [i8; 2], low: i64, high: i64) -> Term<&'static str> {
        Term {
            cause,
            effect,
            low,
            high,
            evidence: String::new(),
        }
    }

    fn counts(a: &Accounting<&'static str>) -> Vec<(&'static str, i64)> {
        a.terms
            .iter()
            .zip(&a.values)
            .filter(|(_, v)| v.0 != 0)
            .map(|(t, v)| (t.cause, v.0))
            .collect()
    }

    /// The terms of the boundary: late (+1,-1) up to the warmup, absorbed
    /// (+1,0), lost (-1,+1), in both (0,+1).
    fn boundary(late: i64, absorbed: i64, lost: i64, both: i64) -> Vec<Term<&'static str>> {
        vec![
            term("absorbed", [1, 0], 0, absorbed),
            term("lost", [-1, 1], 0, lost),
            term("both", [0, 1], 0, both),
            term("late", [1, -1], 0, late),
        ]
    }

    #[test]
    fn a_single_cause_is_named_with_its_size() {
        let a = account(Some(1), Some(-1), boundary(4, 0, 0, 0));
        assert!(a.closes() && !a.ambiguous);
        assert_eq!(counts(&a), vec![("late", 1)]);
        let a = account(Some(-2), Some(2), boundary(4, 0, 3, 3));
        assert_eq!(counts(&a), vec![("lost", 2)]);
    }

    #[test]
    fn overlapping_causes_are_both_named() {
        // Profiling +2, warmup -1: one late observation and one absorbed.
        let a = account(Some(2), Some(-1), boundary(4, 2, 0, 0));
        assert!(a.closes());
        assert_eq!(counts(&a), vec![("absorbed", 1), ("late", 1)]);
        // Per rank: -2 lost and +1 late on one rank: profiling -1, warmup +1.
        let a = account(
            Some(-1),
            Some(1),
            vec![term("lost", [-1, 1], 2, 2), term("late", [1, -1], 1, 1)],
        );
        assert!(a.closes());
        assert_eq!(counts(&a), vec![("lost", 2), ("late", 1)]);
    }

    #[test]
    fn what_no_cause_can_hold_is_the_remainder() {
        let a = account(Some(3), Some(0), boundary(4, 1, 0, 0));
        assert_eq!(a.remainder, [2, 0]);
        assert_eq!(counts(&a), vec![("absorbed", 1)]);
        let a = account(Some(0), Some(0), boundary(4, 1, 2, 2));
        assert!(a.closes());
        assert!(counts(&a).is_empty(), "nothing moved: {:?}", counts(&a));
    }

    #[test]
    fn shares_are_signed_and_sum_to_the_deviation() {
        let a = account(Some(2), Some(-1), boundary(4, 2, 0, 0));
        let p: i64 = a.shares(0).iter().map(|s| s.count).sum();
        let w: i64 = a.shares(1).iter().map(|s| s.count).sum();
        assert_eq!((p, w), (2, -1));
        let late = a.shares(1).into_iter().find(|s| s.cause == "late").unwrap();
        assert_eq!(late.count, -1);
        assert!(late.low <= -1 && late.high.is_some_and(|h| h >= -1));
    }

    #[test]
    fn ranges_cover_every_combination_and_ambiguity_is_said() {
        // Profiling +1, warmup 0: absorbed 1, or late 1 with one counted in
        // both; the parsimonious one is absorbed, the range says late may be 1.
        let a = account(Some(1), Some(0), boundary(4, 1, 0, 1));
        assert_eq!(counts(&a), vec![("absorbed", 1)]);
        let late = a.terms.iter().position(|t| t.cause == "late").unwrap();
        assert_eq!(a.values[late], (0, 0, 1));
        // Two terms that can hold the same excess equally: ambiguous.
        let a = account(
            Some(1),
            Some(0),
            vec![
                term("absorbed", [1, 0], 0, 1),
                term("unrecorded", [1, 0], 0, 1),
            ],
        );
        assert!(a.closes() && a.ambiguous);
    }

    #[test]
    fn certain_evidence_is_kept_and_an_unknown_phase_constrains_nothing() {
        let a = account(
            Some(0),
            Some(2),
            vec![term("both", [0, 1], 2, 2), term("failed", [1, 0], 0, 3)],
        );
        assert!(a.closes());
        assert_eq!(counts(&a), vec![("both", 2)]);
        let a = account(Some(2), None, vec![term("absorbed", [1, 0], 0, 5)]);
        assert!(a.closes());
        assert_eq!(counts(&a), vec![("absorbed", 2)]);
        let a = account(None, None, vec![term("absorbed", [1, 0], 0, 5)]);
        assert!(a.closes() && counts(&a).is_empty());
    }

    #[test]
    fn unbounded_terms_do_not_overflow() {
        let a = account(
            Some(-5),
            Some(0),
            vec![term("reset", [-1, 0], 0, UNBOUNDED)],
        );
        assert!(a.closes());
        assert_eq!(counts(&a), vec![("reset", 5)]);
        let s = a.shares(0);
        assert_eq!(s[0].count, -5);
        assert_eq!(s[0].high, Some(-5));
    }
}
