//! How `cold_connections` gathers its values: one walk over the records in
//! as many contiguous parts as threads, each part keeping per key metric the
//! successful profiling records' values with their temperature, and per
//! thread one set of columns the statistics are taken in, refilled from the
//! parts for each metric.
//!
//! On a gigabyte run the check's time was mostly the first write to fresh
//! memory: four columns per metric, sized for every record, written by one
//! thread. Now a value is kept once (8 bytes and a byte of tag), and the
//! columns selection reorders are one set per thread.

use rayon::prelude::*;

use super::{Counts, KEY_METRICS};
use crate::artifacts::records::{Metric, Phase, Record, RequestRef};
use crate::findings::MAX_LISTED_IDS;
use crate::model::connection::{setup_ms, Temperature};

/// How a value of a column was measured: the record's temperature, and for
/// a cold one whether it has the times to be taken without its connection.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Tag {
    Warm,
    Cold,
    /// Cold, and its value without the connection is in the part's
    /// `unconnected` column, in order.
    ColdUnconnected,
    Unknown,
}

/// What one thread's walk over a contiguous part of the records found: the
/// counts, and per key metric the successful profiling records' values in
/// file order, each with its [`Tag`]. Values only (8 bytes, and a byte of
/// tag), not the three or four copies the statistics select in: those are
/// made per metric in a thread's reused [`Scratch`].
pub(super) struct Part {
    profiling: Counts,
    warmup: Counts,
    /// The part's first cold profiling ids (at most [`MAX_LISTED_IDS`]).
    cold_request_ids: Vec<RequestRef>,
    /// Cold successful profiling records.
    cold_successes: usize,
    /// Per key metric: the values, their tags, and the values without the
    /// connection of the `ColdUnconnected` ones.
    values: Vec<Vec<f64>>,
    tags: Vec<Vec<Tag>>,
    unconnected: Vec<Vec<f64>>,
}

impl Part {
    /// Walks `records`, which start at index `first` of the file's records.
    fn of(records: &[Record], first: usize, temperatures: &[Temperature]) -> Part {
        fn per_metric<T>(n: usize) -> Vec<Vec<T>> {
            KEY_METRICS.iter().map(|_| Vec::with_capacity(n)).collect()
        }
        let mut p = Part {
            profiling: Counts::default(),
            warmup: Counts::default(),
            cold_request_ids: Vec::new(),
            cold_successes: 0,
            values: per_metric(records.len()),
            tags: per_metric(records.len()),
            unconnected: KEY_METRICS.iter().map(|_| Vec::new()).collect(),
        };
        for (i, r) in records.iter().enumerate() {
            let t = crate::model::connection::temperature_at(temperatures, first + i);
            if r.phase == Phase::Warmup {
                p.warmup.add(r, t);
                continue;
            }
            p.profiling.add(r, t);
            let cold = t == Temperature::Cold;
            if cold && p.cold_request_ids.len() < MAX_LISTED_IDS {
                p.cold_request_ids.push(r.request_ref());
            }
            if !r.is_success() {
                continue;
            }
            p.cold_successes += usize::from(cold);
            for (k, &m) in KEY_METRICS.iter().enumerate() {
                let Some(v) = r.values.get(m) else {
                    continue;
                };
                let tag = match t {
                    Temperature::Warm => Tag::Warm,
                    Temperature::Unknown => Tag::Unknown,
                    Temperature::Cold => match without_connection(r, m, v) {
                        Some(u) => {
                            p.unconnected[k].push(u);
                            Tag::ColdUnconnected
                        }
                        None => Tag::Cold,
                    },
                };
                p.values[k].push(v);
                p.tags[k].push(tag);
            }
        }
        p
    }
}

/// One metric's columns, made from the parts in file order, in buffers a
/// thread reuses from metric to metric (their pages are faulted in once per
/// thread, not once per metric: on a gigabyte run that was most of the
/// check's time).
#[derive(Default)]
pub(super) struct Scratch {
    /// Every value, in file order (the mean sums them in that order); then,
    /// once their statistics are taken and only where a finding needs them,
    /// the values without the cold requests' connection time
    /// ([`Scratch::unconnected`]).
    pub all: Vec<f64>,
    /// The warm records' values, in file order.
    pub warm: Vec<f64>,
    /// The cold records' values, in file order.
    pub cold: Vec<f64>,
}

impl Scratch {
    /// Fills the columns with key metric `k` of the parts.
    pub fn fill(&mut self, k: usize, parts: &[Part]) {
        self.all.clear();
        self.warm.clear();
        self.cold.clear();
        for p in parts {
            self.all.extend_from_slice(&p.values[k]);
            for (&v, &tag) in p.values[k].iter().zip(&p.tags[k]) {
                match tag {
                    Tag::Warm => self.warm.push(v),
                    Tag::Cold | Tag::ColdUnconnected => self.cold.push(v),
                    Tag::Unknown => {}
                }
            }
        }
    }

    /// Refills `all` with key metric `k`'s values, each cold one taken
    /// without its DNS + connect time where the record has the times: what
    /// the connection alone did. `None` (and `all` untouched) when no cold
    /// value could be taken so.
    pub fn unconnected(&mut self, k: usize, parts: &[Part]) -> Option<&mut Vec<f64>> {
        if parts.iter().all(|p| p.unconnected[k].is_empty()) {
            return None;
        }
        self.all.clear();
        for p in parts {
            let mut without = p.unconnected[k].iter();
            for (&v, &tag) in p.values[k].iter().zip(&p.tags[k]) {
                let u = match tag {
                    Tag::ColdUnconnected => without.next().copied().unwrap_or(v),
                    _ => v,
                };
                self.all.push(u);
            }
        }
        Some(&mut self.all)
    }
}

/// A record's value of `m` had it not paid for its connection (DNS +
/// connect taken off the time to first token it is part of); `None` when
/// the record lacks the times, or the metric holds no connection time.
fn without_connection(r: &Record, m: Metric, v: f64) -> Option<f64> {
    let c = setup_ms(r)?;
    let scaled = |span: f64| (span > c).then(|| v * span / (span - c));
    match m {
        Metric::TimeToFirstToken | Metric::RequestLatency => Some((v - c).max(0.0)),
        // Tokens over the time to first token, over the request latency.
        Metric::PrefillThroughputPerUser => scaled(r.values.get(Metric::TimeToFirstToken)?),
        Metric::E2eOutputTokenThroughput => scaled(r.values.get(Metric::RequestLatency)?),
        _ => None,
    }
}

/// The walk over the records, in as many contiguous parts as threads (a
/// part per thread; a small run in one part), and their counts summed.
pub(super) struct Walk {
    /// The profiling records' counts.
    pub profiling: Counts,
    /// The warmup records' counts.
    pub warmup: Counts,
    /// The first cold profiling ids, in file order (at most
    /// [`MAX_LISTED_IDS`]).
    pub cold_request_ids: Vec<RequestRef>,
    /// Cold successful profiling records.
    pub cold_successes: usize,
    /// The parts, in file order.
    pub parts: Vec<Part>,
}

impl Walk {
    /// Parts of fewer records are not worth a thread.
    const MIN_PART: usize = 1 << 14;

    pub fn of(records: &[Record], temperatures: &[Temperature]) -> Walk {
        let threads = rayon::current_num_threads().max(1);
        let part = records.len().div_ceil(threads).max(Self::MIN_PART);
        Walk::in_parts(records, temperatures, part)
    }

    /// The walk in parts of `part` records (the last may be shorter).
    pub fn in_parts(records: &[Record], temperatures: &[Temperature], part: usize) -> Walk {
        let part = part.max(1);
        let parts: Vec<Part> = records
            .par_chunks(part)
            .enumerate()
            .map(|(k, chunk)| Part::of(chunk, k * part, temperatures))
            .collect();
        let mut w = Walk {
            profiling: Counts::default(),
            warmup: Counts::default(),
            cold_request_ids: Vec::new(),
            cold_successes: 0,
            parts: Vec::new(),
        };
        for mut p in parts {
            w.profiling.merge(&p.profiling);
            w.warmup.merge(&p.warmup);
            w.cold_successes += p.cold_successes;
            let room = MAX_LISTED_IDS - w.cold_request_ids.len();
            p.cold_request_ids.truncate(room);
            w.cold_request_ids.append(&mut p.cold_request_ids);
            w.parts.push(p);
        }
        w
    }
}
