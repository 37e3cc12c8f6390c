//! Resets of cumulative server series, found in the raw scrapes.
//!
//! Only families the export types as counters or histograms are cumulative:
//! a gauge (`vllm:num_requests_running`, `sglang:cache_hit_rate`) goes down
//! all the time. A drop needs evidence before it is called a reset: two
//! scrapes in flight together can be answered out of order, so scrapes are
//! read in the order they were sent
//! ([`crate::artifacts::scrapes::Scrape::order_key`]), and a drop is a reset
//! when the process start time changed or the drop persists (the series'
//! next scrape is still below its old value). Every check that reads server
//! counters gets the same list.
//!
//! Series born mid-run ([`births`]): a labelled series exists only from its
//! first observation on (SGLang's `cached_tokens` at the first cache hit,
//! TensorRT-LLM's request histograms at the first finished request). AIPerf
//! computes a phase's delta from the phase's first value of a series its
//! baseline lacks, so the increments that created the series are lost.

use std::collections::{BTreeMap, BTreeSet};

/// Whether each family (by id) is cumulative: typed so by the export.
struct Cumulative;

impl Cumulative {
    fn of(read: &ScrapesRead, names: &BTreeSet<String>) -> Vec<bool> {
        (0..read.family_count() as u32)
            .map(|id| names.contains(canonical(read.family_name(id))))
            .collect()
    }
}

use rayon::prelude::*;

use crate::artifacts::scrapes::{self, Scrape, ScrapesRead};
use crate::artifacts::server_metrics::{ServerMetricsExport, Window};
use crate::frameworks::{canonical, PROCESS_START};

/// A drop: a value below the one before by more than this fraction of it
/// (of 1 below 1); the walk visits only such falls.
const FALL: f64 = 1e-9;

use crate::artifacts::Labels;

/// One series that fell at a reset.
#[derive(Debug, Clone, PartialEq)]
pub struct Drop {
    /// Family, as in the scrapes.
    pub family: String,
    /// Its labels.
    pub labels: Labels,
    /// Value in the scrape before.
    pub before: f64,
    /// Value in the scrape after.
    pub after: f64,
}

/// A reset of one endpoint's counters.
#[derive(Debug, Clone, PartialEq)]
pub struct Reset {
    /// Endpoint URL.
    pub endpoint: String,
    /// Lines (in the raw-scrape file) of the scrapes before and after it.
    pub lines: (u64, u64),
    /// The latest state times of those scrapes: the reset happened in
    /// between (ns).
    pub between_ns: (u64, u64),
    /// The process start time before and after, when it changed.
    pub restart: Option<(f64, f64)>,
    /// Every series that fell.
    pub drops: Vec<Drop>,
    /// Whether the evidence makes it a reset (the process start time
    /// changed, or the drop persists); otherwise a drop that cannot be told
    /// from a stale answer or a reset followed by fast growth.
    pub confirmed: bool,
}

impl Reset {
    /// Whether it can have happened inside `w`.
    pub fn within(&self, w: Window) -> bool {
        self.between_ns.1 > w.start_ns && self.between_ns.0 < w.end_ns
    }

    /// The distinct families that fell.
    pub fn families(&self) -> BTreeSet<&str> {
        self.drops.iter().map(|d| d.family.as_str()).collect()
    }
}

/// A cumulative series that first appears after its endpoint was already
/// scraped without it.
#[derive(Debug, Clone, PartialEq)]
pub struct Birth {
    /// Endpoint URL.
    pub endpoint: String,
    /// Family, as in the scrapes.
    pub family: String,
    /// Its labels.
    pub labels: Labels,
    /// Lines of the last scrape without it and the first with it.
    pub lines: (u64, u64),
    /// Their state times: it was created in between (ns).
    pub between_ns: (u64, u64),
    /// Its first value: what a delta from it loses.
    pub first_value: f64,
}

impl Birth {
    /// Whether it can have been created inside `w`.
    pub fn within(&self, w: Window) -> bool {
        self.between_ns.1 > w.start_ns && self.between_ns.0 < w.end_ns
    }
}

/// Every series of a cumulative family that appears, with a value above 0,
/// after its endpoint was scraped without it (and the family was scraped
/// there: a family that appears whole with its first series is new too).
pub fn births(read: &ScrapesRead, server: &ServerMetricsExport) -> Vec<Birth> {
    let names = server.cumulative_families();
    let cumulative = Cumulative::of(read, &names);
    let mut out = Vec::new();
    for (ep, list) in read.by_endpoint() {
        let scrapes: Vec<&Scrape> = list.iter().map(|(s, _)| *s).collect();
        let keep = |id: u32| cumulative[id as usize];
        // A series is born at a change of layout only: within a run of one
        // layout every series has a scrape before, so none is visited
        // there (`None`: the walk compares no columns for it).
        read.walk_series(
            &scrapes,
            keep,
            |_| true,
            None,
            |i, id, x, before| {
                if i == 0 || before.is_some() {
                    return;
                }
                let Some(v) = x.cumulative().filter(|v| *v > 0.0) else {
                    return;
                };
                let ((prev, t0), (s, t)) = (&list[i - 1], &list[i]);
                out.push(Birth {
                    endpoint: ep.to_string(),
                    family: read.family_name(id).to_string(),
                    labels: x.labels().clone(),
                    lines: (prev.line, s.line),
                    between_ns: (*t0, *t),
                    first_value: v,
                });
            },
        );
    }
    out
}

/// Every reset in the raw scrapes, endpoint by endpoint, in time order:
/// `confirmed` when the evidence makes it one; unconfirmed when a drop
/// comes at the end and nothing after it can tell. A drop the series climbs
/// back from is a stale answer and left out.
pub fn detect(read: &ScrapesRead, server: &ServerMetricsExport) -> Vec<Reset> {
    let names = server.cumulative_families();
    let cumulative = Cumulative::of(read, &names);
    let start_ids = read.family(PROCESS_START);
    // The endpoints at once (each its own walk), their resets in
    // endpoint order.
    let endpoints: Vec<_> = read.by_endpoint().into_iter().collect();
    let found: Vec<Vec<Reset>> = endpoints
        .par_iter()
        .map(|(ep, list)| resets_on(read, ep, list, &cumulative, start_ids))
        .collect();
    found.into_iter().flatten().collect()
}

/// [`detect`]'s resets of one endpoint, `list` its scrapes in state order.
fn resets_on(
    read: &ScrapesRead,
    ep: &str,
    list: &[(&Scrape, u64)],
    cumulative: &[bool],
    start_ids: [Option<u32>; 2],
) -> Vec<Reset> {
    let mut out = Vec::new();
    let scrapes: Vec<&Scrape> = list.iter().map(|(s, _)| *s).collect();
    let times: Vec<u64> = list.iter().map(|(_, t)| *t).collect();
    // Each scrape's drops (a series below its value in the scrape
    // before that had it), in order.
    let mut drops: Vec<(usize, Drop)> = Vec::new();
    // A series' value is compared with its last one (a sample without
    // a value is passed over).
    let keep = |id: u32| cumulative[id as usize];
    let valued = |x: &crate::artifacts::scrapes::Sample| x.cumulative().is_some();
    read.walk_series(&scrapes, keep, valued, Some(FALL), |i, id, x, before| {
        let (Some(v), Some(prev)) = (x.cumulative(), before.and_then(|b| b.cumulative())) else {
            return;
        };
        if i > 0 && scrapes::fell(v, prev, FALL) {
            drops.push((
                i,
                Drop {
                    family: read.family_name(id).to_string(),
                    labels: x.labels().clone(),
                    before: prev,
                    after: v,
                },
            ));
        }
    });
    let mut start: Option<f64> = None;
    let mut restarts: Vec<Option<(f64, f64)>> = Vec::with_capacity(scrapes.len());
    for s in &scrapes {
        let mut restart = None;
        if let Some(v) = read
            .samples_of(s, start_ids)
            .and_then(|mut x| x.next()?.value())
        {
            if let Some(prev) = start.filter(|p| (p - v).abs() > 1e-6) {
                restart = Some((prev, v));
            }
            start = Some(v);
        }
        restarts.push(restart);
    }
    let mut rest = drops.into_iter().peekable();
    while let Some((i, first)) = rest.next() {
        let mut drops = vec![first];
        while let Some((_, d)) = rest.next_if(|(j, _)| *j == i) {
            drops.push(d);
        }
        let s = scrapes[i];
        let restart = restarts[i];
        let later = &scrapes[i + 1..];
        let confirmed = restart.is_some() || persists(read, later, &drops);
        // A drop the next scrape climbs back from is a stale answer (two
        // scrapes in flight together, answered in another order than
        // either order tells): not a reset. Only one nothing comes after
        // stays undecided.
        if !confirmed && seen_again(read, later, &drops) {
            continue;
        }
        out.push(Reset {
            endpoint: ep.to_string(),
            lines: (scrapes[i - 1].line, s.line),
            between_ns: (times[i - 1], times[i]),
            restart,
            drops,
            confirmed,
        });
    }
    out
}

/// Whether a later scrape carries any of the dropped series.
fn seen_again(read: &ScrapesRead, later: &[&Scrape], drops: &[Drop]) -> bool {
    drops.iter().any(|d| {
        later.iter().any(|s| {
            read.exactly(s, &d.family)
                .is_some_and(|mut xs| xs.any(|x| *x.labels() == d.labels))
        })
    })
}

/// Whether a drop persists: the next scrape with each series is still below
/// the old value for most of the dropped series. A drop at the last scrape
/// persists when several families fell together.
fn persists(read: &ScrapesRead, later: &[&Scrape], drops: &[Drop]) -> bool {
    let (mut below, mut seen) = (0usize, 0usize);
    for d in drops {
        let next = later.iter().find_map(|s| {
            read.exactly(s, &d.family)?
                .find(|x| *x.labels() == d.labels)?
                .cumulative()
        });
        if let Some(v) = next {
            seen += 1;
            below += usize::from(v < d.before);
        }
    }
    if seen == 0 {
        let families: BTreeSet<&str> = drops.iter().map(|d| d.family.as_str()).collect();
        return families.len() > 1;
    }
    2 * below > seen
}

/// The growth of a family on one endpoint over window `w`, read
/// reset-aware: each increment, and after a reset the value it restarted
/// to (the growth before the first scrape after the restart is not seen: a
/// lower bound). The window runs from the last scrape before it starts
/// (AIPerf's baseline) to the first at or after it ends.
pub fn growth(read: &ScrapesRead, endpoint: &str, family: &str, w: Window) -> Option<f64> {
    let by_ep = read.by_endpoint();
    let list = by_ep.get(endpoint)?;
    let times: Vec<u64> = list.iter().map(|(_, t)| *t).collect();
    let first = times.iter().rposition(|t| *t < w.start_ns).unwrap_or(0);
    let last = times
        .iter()
        .position(|t| *t >= w.end_ns)
        .unwrap_or(times.len().saturating_sub(1))
        .max(first);
    let mut prev: BTreeMap<u32, f64> = BTreeMap::new();
    let (mut growth, mut any) = (0.0, false);
    let ids = read.family(family);
    for (s, _) in &list[first..=last] {
        for x in read.samples_of(s, ids).into_iter().flatten() {
            let Some(v) = x.cumulative() else { continue };
            any = true;
            if let Some(p) = prev.insert(x.labels_id(), v) {
                growth += if v >= p { v - p } else { v };
            }
        }
    }
    any.then_some(growth)
}
