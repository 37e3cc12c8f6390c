//! Evidence for a cause: what AIPerf's phase deltas of one observer can
//! hold besides their own requests, from the windows, the records and the
//! raw scrapes (or the timeslices).
//!
//! AIPerf takes a phase's delta from the last scrape answered before the
//! phase starts (its baseline) to the last answered by the phase's end.
//! The profiling delta therefore holds every warmup observation made after
//! the profiling baseline's state, and the warmup delta every profiling
//! observation made before the end-of-warmup scrape's state. Counting
//! those requests (by the record time of the metric's observation point)
//! bounds what each cause can explain, with no fixed slack.

use std::collections::BTreeMap;

use super::{Expected, Found};
use crate::artifacts::records::{Phase, Record};
use crate::artifacts::scrapes::{Scrape, ScrapePhase, ScrapesRead};
use crate::artifacts::server_metrics::ServerMetricsExport;
use crate::checks::Ctx;
use crate::frameworks::ObservedAt;
use crate::model::attribution;
use crate::model::observers::Observer;

/// What the windows, records and raw scrapes say one observer's phase
/// deltas can hold besides their own requests.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Evidence {
    /// The warmup's requests (an excess of exactly all of them needs no
    /// timing: the profiling baseline predates warmup).
    pub warmup_total: Option<f64>,
    /// At most how many warmup observations fall after AIPerf's profiling
    /// baseline, and where the baseline comes from (words).
    pub absorbed: Option<(u64, String)>,
    /// The AIPerf version, when it has no warmup split (before 0.12): the
    /// profiling delta starts at the last periodic scrape before profiling,
    /// by design, and the count after it is bounded by the configured
    /// warmup, not counted from warmup records (it writes none).
    pub no_split: Option<String>,
    /// At most how many profiling observations fall before AIPerf's
    /// end-of-warmup scrape, and which scrape (words).
    pub double: Option<(u64, String)>,
    /// Whether AIPerf's profiling baseline scrape was answered out of order
    /// (a scrape sent after it was answered before it): its state is older
    /// than the scrapes stored before it, so the profiling delta reaches
    /// further back than AIPerf's order says.
    pub baseline_out_of_order: bool,
    /// The line of AIPerf's profiling baseline scrape, when the raw scrapes
    /// say.
    pub baseline_line: Option<u64>,
}

/// The earliest and the latest event times of some requests, each sorted.
type EventTimes = (Vec<u64>, Vec<u64>);

/// Builds the evidence of each observer of one run.
pub struct Builder<'a> {
    /// The successful requests whose observations can fall near the phase
    /// boundary: every warmup request, and the profiling requests that
    /// started by the end of the warmup window (a later one's events all
    /// come after every scrape the warmup delta ends at). One walk over the
    /// records, not one per observer.
    near: Option<Vec<&'a Record>>,
    /// Per (observation point, phase): the earliest and the latest event
    /// times of `near`, each sorted, built on first use.
    times: std::cell::RefCell<BTreeMap<(ObservedAt, Phase), EventTimes>>,
    scrapes: Option<&'a ScrapesRead>,
    server: &'a ServerMetricsExport,
    exp_w: Option<Expected>,
    slack_ns: u64,
    /// The version, when it writes no warmup records ([`Evidence::no_split`]).
    unrecorded_warmup: Option<String>,
    /// Per endpoint: where AIPerf's phase deltas start and end in its raw
    /// scrapes, found on first use: every observer of the endpoint shares
    /// them, and finding them walks its scrapes (once per observer before,
    /// each time listing every endpoint's: the observers' evidence took
    /// 5.5-7.5 ms, now 1.8-2.7 ms, on a 1.18 GB file of twelve observers;
    /// docs/performance.md, ninth 2026-12-07 session).
    ends: std::cell::RefCell<BTreeMap<String, Ends>>,
}

/// Where AIPerf's phase deltas start and end in one endpoint's raw scrapes
/// (all `None` without any).
#[derive(Debug, Clone, Copy, Default)]
struct Ends {
    /// The profiling baseline ([`Builder::baseline`]).
    baseline: Option<(u64, u64)>,
    /// Whether the baseline was answered out of order.
    out_of_order: bool,
    /// AIPerf's end-of-warmup scrape ([`warmup_end`]; `None` without a
    /// warmup window too).
    warmup_end: Option<(u64, u64)>,
}

/// The earliest and latest time a request's observation at `at` can be
/// made (ns). Scheduling lies between arrival and the first token.
fn event(r: &Record, at: ObservedAt) -> (u64, u64) {
    let first = r.first_token_ns().unwrap_or(r.request_end_ns);
    match at {
        ObservedAt::Arrival => (r.request_start_ns, r.request_start_ns),
        ObservedAt::Scheduled => (r.request_start_ns, first),
        ObservedAt::FirstToken => (first, first),
        ObservedAt::Completion => (r.request_end_ns, r.request_end_ns),
    }
}

/// The earliest a scrape's state can be: its request was sent then (a
/// server answering late, out of order, took its snapshot in between).
fn earliest_state(s: &Scrape, state: u64) -> u64 {
    s.request_sent_ns.map_or(state, |sent| sent.min(state))
}

/// The latest a scrape's state can be: its answer arrived then.
fn latest_state(s: &Scrape, state: u64) -> u64 {
    state.max(s.timestamp_ns)
}

/// Whether the scrape at `line` was answered after a scrape sent after it.
fn answered_out_of_order(list: &[(&Scrape, u64)], line: u64) -> bool {
    let Some((me, _)) = list.iter().find(|(s, _)| s.line == line) else {
        return false;
    };
    let Some(sent) = me.request_sent_ns else {
        return false;
    };
    list.iter().any(|(s, _)| {
        s.request_sent_ns.is_some_and(|x| x > sent) && s.timestamp_ns < me.timestamp_ns
    })
}

/// AIPerf's end-of-warmup scrape: the last stored with the warmup tag
/// (0.12 on: the warmup delta ends there, whenever it was answered), else
/// the last answered by warmup's end `we`; its line and the latest its
/// state can be.
fn warmup_end(we: u64, list: &[(&Scrape, u64)]) -> Option<(u64, u64)> {
    let tagged = list
        .iter()
        .filter(|(s, _)| s.phase == ScrapePhase::Warmup)
        .max_by_key(|(s, _)| s.line);
    tagged
        .or_else(|| {
            list.iter()
                .filter(|(s, _)| s.timestamp_ns <= we)
                .max_by_key(|(s, _)| s.timestamp_ns)
        })
        .map(|(s, t)| (s.line, latest_state(s, *t)))
}

fn ms(a: u64, b: u64) -> f64 {
    (a as f64 - b as f64) / 1e6
}

impl Evidence {
    /// The builder for one run.
    pub fn builder<'a>(
        ctx: &'a Ctx<'a>,
        server: &'a ServerMetricsExport,
        exp_w: Option<Expected>,
    ) -> Builder<'a> {
        let ps = server.window("profiling").map(|w| w.start_ns);
        let we = server.window("warmup").map(|w| w.end_ns);
        let slack_ns = (ctx.settings.phase.match_slack_ms * 1e6) as u64;
        let horizon = ps.max(we).unwrap_or(u64::MAX).saturating_add(slack_ns);
        let near = ctx.records().map(|rs| {
            rs.iter()
                .filter(|r| r.is_success())
                .filter(|r| r.phase == Phase::Warmup || r.request_start_ns <= horizon)
                .collect()
        });
        let layout = ctx.model.layout;
        let unrecorded_warmup = (!layout.warmup_records).then(|| {
            ctx.model
                .aiperf_version
                .clone()
                .unwrap_or_else(|| "(version unknown)".into())
        });
        Builder {
            near,
            times: Default::default(),
            scrapes: ctx.run.scrapes.as_ref(),
            server,
            exp_w,
            slack_ns,
            unrecorded_warmup,
            ends: Default::default(),
        }
    }
}

impl Builder<'_> {
    /// The requests of `phase` whose observation at `at` can be made after
    /// `t` (`after`), or by `t` (not `after`).
    fn count(&self, phase: Phase, at: ObservedAt, t: u64, after: bool) -> Option<u64> {
        let rs = self.near.as_ref()?;
        let mut times = self.times.borrow_mut();
        let (lo, hi) = times.entry((at, phase)).or_insert_with(|| {
            let (mut lo, mut hi): (Vec<u64>, Vec<u64>) = rs
                .iter()
                .filter(|r| r.phase == phase)
                .map(|r| event(r, at))
                .unzip();
            lo.sort_unstable();
            hi.sort_unstable();
            (lo, hi)
        });
        let slack = self.slack_ns;
        let n = if after {
            hi.len() - hi.partition_point(|x| x.saturating_add(slack) <= t)
        } else {
            lo.partition_point(|x| *x <= t.saturating_add(slack))
        };
        Some(n as u64)
    }

    /// Where the phase deltas of the observer's endpoint start and end in
    /// its raw scrapes (profiling starting at `ps`, warmup ending at `we`).
    fn ends_of(&self, o: &Observer, ps: u64, we: Option<u64>) -> Ends {
        let (Some(ep), Some(sc)) = (o.endpoint.as_deref(), self.scrapes) else {
            return Ends::default();
        };
        let mut memo = self.ends.borrow_mut();
        let ends = memo.entry(ep.to_string()).or_insert_with(|| {
            let list = sc.of_endpoint(ep);
            let baseline = Self::baseline(ps, &list);
            Ends {
                baseline,
                out_of_order: baseline.is_some_and(|(line, _)| answered_out_of_order(&list, line)),
                warmup_end: we.and_then(|we| warmup_end(we, &list)),
            }
        });
        *ends
    }

    /// The evidence of one observer of `f`.
    pub fn of(&self, f: &Found, o: &Observer, at: ObservedAt) -> Evidence {
        let Some(p) = self.server.window("profiling") else {
            return Evidence::default();
        };
        let we = self.server.window("warmup").map(|w| w.end_ns);
        let ends = self.ends_of(o, p.start_ns, we);
        let baseline = ends.baseline;
        Evidence {
            warmup_total: self.exp_w.map(|e| e.min as f64),
            no_split: self.unrecorded_warmup.clone(),
            baseline_out_of_order: ends.out_of_order,
            baseline_line: baseline.map(|b| b.0),
            absorbed: self.absorbed(f, o, at, p.start_ns, baseline),
            double: we.and_then(|we| self.double(at, p.start_ns, we, ends.warmup_end)),
        }
    }

    /// The warmup observations after AIPerf's profiling baseline
    /// ([`Builder::baseline`]). Where the
    /// raw scrapes carry AIPerf's phase tags (0.12 on), the baseline is
    /// AIPerf's own: the scrape stored just before the first one tagged
    /// profiling; otherwise the last scrape answered before profiling
    /// started (AIPerf's rule without tags), else the first timeslice. Its
    /// state is taken at the earliest it can be (when its request was sent:
    /// a late answer can hold an older state than scrapes stored before it).
    fn absorbed(
        &self,
        f: &Found,
        o: &Observer,
        at: ObservedAt,
        ps: u64,
        baseline: Option<(u64, u64)>,
    ) -> Option<(u64, String)> {
        let first_slice = [f.profiling]
            .into_iter()
            .flatten()
            .flat_map(|fam| fam.series.iter())
            .filter(|s| o.contains(s.endpoint_url.as_deref().unwrap_or(""), &s.labels))
            .filter_map(|s| s.timeslices.as_ref()?.first()?.start_ns)
            .min();
        // Without warmup records (AIPerf before 0.12) the warmup's requests
        // all finished before profiling started, so at most the configured
        // ones less those the observer had counted by the baseline (from the
        // first scrape, taken before any request) come after it.
        let after = |t: u64, line: Option<u64>| -> Option<u64> {
            if self.unrecorded_warmup.is_none() {
                return self.count(Phase::Warmup, at, t, true);
            }
            let configured = self.exp_w?.max;
            let seen = line.and_then(|l| self.counted_by(f, o, l)).unwrap_or(0);
            Some(configured.saturating_sub(seen))
        };
        match (baseline, first_slice) {
            (Some((line, t)), _) => {
                let when = if t < ps {
                    format!(
                        "is the scrape at line {line}, taken {:.1} ms before profiling started",
                        ms(ps, t)
                    )
                } else {
                    format!("(the scrape at line {line}) does not predate profiling")
                };
                Some((after(t, Some(line))?, when))
            }
            (None, Some(t)) if t < ps => {
                let when = format!(
                    "starts with its first timeslice, {:.1} ms before profiling started",
                    ms(ps, t)
                );
                Some((after(t, None)?, when))
            }
            // No scrape and no timeslice says where it starts, but without a
            // warmup split it is the last periodic scrape before profiling.
            _ if self.unrecorded_warmup.is_some() => Some((
                after(ps, None)?,
                "is the last periodic scrape before profiling started (not in the export)".into(),
            )),
            _ => None,
        }
    }

    /// How many observations the observer counted from the first raw
    /// scrape of its endpoint to the scrape at `line`.
    fn counted_by(&self, f: &Found, o: &Observer, line: u64) -> Option<u64> {
        let ep = o.endpoint.as_deref()?;
        let keep = |l: &_| o.contains(ep, l);
        let (first, at) = attribution::counts_to(self.scrapes?, ep, &f.name, keep, line)?;
        Some((at - first).max(0.0).round() as u64)
    }

    /// AIPerf's profiling baseline: where the raw scrapes carry AIPerf's
    /// phase tags, the scrape stored just before the first one tagged
    /// profiling; otherwise the last answered before profiling started.
    /// With its line and the earliest its state can be.
    fn baseline(ps: u64, list: &[(&Scrape, u64)]) -> Option<(u64, u64)> {
        let first_tagged = (list.iter())
            .filter(|(s, _)| s.phase == ScrapePhase::Profiling)
            .map(|(s, _)| s.line)
            .min();
        match first_tagged {
            // Stored just before it: the latest line before its line.
            Some(tagged) => (list.iter())
                .filter(|(s, _)| s.line < tagged)
                .max_by_key(|(s, _)| s.line)
                .map(|(s, t)| (s.line, earliest_state(s, *t))),
            None => list
                .iter()
                .filter(|(s, _)| s.timestamp_ns < ps)
                .max_by_key(|(s, _)| s.timestamp_ns)
                .map(|(s, t)| (s.line, earliest_state(s, *t))),
        }
    }

    /// The profiling observations by AIPerf's end-of-warmup scrape (`end`,
    /// [`warmup_end`]), else by warmup's end `we`.
    fn double(
        &self,
        at: ObservedAt,
        ps: u64,
        we: u64,
        end: Option<(u64, u64)>,
    ) -> Option<(u64, String)> {
        let (t, what) = match end {
            Some((line, t)) => (
                t,
                format!(
                    "(line {line}) reflects the server {:.1} ms after profiling started",
                    ms(t, ps)
                ),
            ),
            None => (
                we,
                format!(
                    "closes the window {:.1} ms after profiling started",
                    ms(we, ps)
                ),
            ),
        };
        if t <= ps {
            return Some((0, what));
        }
        Some((self.count(Phase::Profiling, at, t, false)?, what))
    }
}
