//! Which records a published number should be computed over: the cleaning
//! rules shared by `artifact-check clean` and the claims (`--expect`).
//! Warmup records are always dropped; cold-connection, failed and
//! first-turn records on request.

use std::collections::BTreeMap;

use serde::Serialize;

use super::connection::Temperature;
use crate::artifacts::records::{Metric, Phase, Record};
use crate::config::Settings;
use crate::stats;

/// The per-request metrics AIPerf publishes statistics of, whose bias and
/// cleaned statistics are reported.
pub const PUBLISHED: &[Metric] = &[
    Metric::TimeToFirstToken,
    Metric::RequestLatency,
    Metric::PrefillThroughputPerUser,
    Metric::InterTokenLatency,
    Metric::OutputTokenThroughputPerUser,
    Metric::E2eOutputTokenThroughput,
];

/// What to drop besides warmup.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Exclusions {
    /// Drop records classified `cold`.
    pub cold: bool,
    /// Drop failed and cancelled records.
    pub errors: bool,
    /// Drop the first turn of every session (`turn_index` 0).
    pub first_turns: bool,
    /// Drop the opening wave and the drain tail (`model::steady`).
    pub steady_state: bool,
}

closed_set! {
    /// Why a record was dropped (in name order: the order of
    /// `dropped_by_reason`).
    pub enum DropReason {
        /// It paid for DNS or connect.
        Cold => "cold",
        /// It ran mostly after the last request was sent.
        DrainTail => "drain_tail",
        /// It failed or was cancelled.
        Error => "error",
        /// It is the first turn of its session.
        FirstTurn => "first_turn",
        /// It is in the opening wave.
        OpeningWave => "opening_wave",
        /// It is a warmup request.
        Warmup => "warmup",
    }
}

/// A dropped record and why.
#[derive(Debug, Clone, Serialize)]
pub struct Dropped {
    /// Line in `profile_export.jsonl`.
    pub line: u64,
    /// Its request id.
    pub x_request_id: Option<String>,
    /// Why, in the order the rules are applied.
    pub reasons: Vec<DropReason>,
}

/// The records a cleaning keeps, and those it drops with their reasons.
pub struct Selection<'a> {
    /// Kept records, file order.
    pub kept: Vec<&'a Record>,
    /// Dropped records.
    pub dropped: Vec<Dropped>,
    /// Dropped records per reason.
    pub by_reason: BTreeMap<DropReason, usize>,
    /// The kept records' temperatures, in the order of `kept`.
    pub kept_temperatures: Vec<Temperature>,
}

impl Selection<'_> {
    /// Kept records whose connection state is unknown.
    pub fn kept_unknown(&self) -> usize {
        self.kept_temperatures
            .iter()
            .filter(|t| **t == Temperature::Unknown)
            .count()
    }
}

/// Applies the cleaning rules: warmup always dropped, the rest on request.
pub fn select<'a>(records: &'a [Record], ex: Exclusions, settings: &Settings) -> Selection<'a> {
    let steady = ex
        .steady_state
        .then(|| super::steady::detect(records, &settings.steady));
    let temperatures = super::connection::temperatures(records, &settings.cold);
    select_with(records, &temperatures, ex, steady.as_ref())
}

/// [`select`] over records already classified (`temperatures`, in file
/// order: the model's) with the run's steady state already found
/// (`steady`, used when `ex.steady_state`).
pub fn select_with<'a>(
    records: &'a [Record],
    temperatures: &[Temperature],
    ex: Exclusions,
    steady: Option<&super::steady::SteadyState>,
) -> Selection<'a> {
    let steady = steady.filter(|_| ex.steady_state);
    let mut sel = Selection {
        kept: Vec::new(),
        dropped: Vec::new(),
        by_reason: BTreeMap::new(),
        kept_temperatures: Vec::new(),
    };
    let in_set =
        |set: Option<&Vec<usize>>, i: usize| set.is_some_and(|s| s.binary_search(&i).is_ok());
    for (i, r) in records.iter().enumerate() {
        let temp = super::connection::temperature_at(temperatures, i);
        let rules = [
            (r.phase == Phase::Warmup, DropReason::Warmup),
            (ex.cold && temp == Temperature::Cold, DropReason::Cold),
            (ex.errors && !r.is_success(), DropReason::Error),
            (
                ex.first_turns && r.turn_index == Some(0),
                DropReason::FirstTurn,
            ),
            (in_set(steady.map(|s| &s.wave), i), DropReason::OpeningWave),
            (in_set(steady.map(|s| &s.tail), i), DropReason::DrainTail),
        ];
        let reasons: Vec<DropReason> = rules.iter().filter(|x| x.0).map(|x| x.1).collect();
        if reasons.is_empty() {
            sel.kept.push(r);
            sel.kept_temperatures.push(temp);
        } else {
            for reason in &reasons {
                *sel.by_reason.entry(*reason).or_default() += 1;
            }
            let x_request_id = r.x_request_id.as_ref().map(ToString::to_string);
            sel.dropped.push(Dropped {
                line: r.line,
                x_request_id,
                reasons,
            });
        }
    }
    sel
}

/// Summary statistics of the published metrics over the kept successful
/// records, as AIPerf computes them.
pub fn statistics(kept: &[&Record]) -> BTreeMap<&'static str, stats::Summary> {
    let mut metrics = BTreeMap::new();
    for &m in PUBLISHED {
        let ok = kept.iter().filter(|r| r.is_success());
        let v = stats::sorted(ok.filter_map(|r| r.values.get(m)));
        if !v.is_empty() {
            metrics.insert(m.tag(), stats::Summary::of_sorted(&v));
        }
    }
    metrics
}
