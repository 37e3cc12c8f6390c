//! The run's steady state: the opening wave, the drain tail, and the window
//! between them, found from the per-request times (start, first token, end)
//! alone. Shared by the `steady_state` check, `clean --steady-state` and the
//! claims over steady state.
//!
//! **The opening wave**, by its effect. The successful profiling requests in
//! the order they reached the server (start plus DNS and connect), each
//! valued by its TTFT (its latency without streaming) less the DNS + connect
//! it paid, so that a new connection is never taken for a slow server (that
//! is `cold_connections`' finding). On the logarithm of those values, the
//! one split of the sequence into a prefix (at most half of it) and the rest
//! that leaves the least squared deviation from the two means (a single
//! least-squares change point). The prefix is a wave when its median is at
//! least `wave-ratio` times the rest's median and more than 3 robust
//! standard deviations (1.4826 x MAD) above it; the wave then ends at its
//! last request that is itself that far above. This works at concurrency 1
//! and at thousands, with or without warmup, for concurrency- and
//! rate-driven runs, because it asks the requests, not the load generator.
//!
//! **The drain tail**, by the load: after the last profiling request is sent
//! nothing replaces a finished one, so in-flight requests fall to zero. A
//! request is in the tail when at least half of its generation (first token
//! to end) ran after that instant. Whether the tail changed a published
//! number is the check's question.
//!
//! SGLang's `steady_state_serving` (the longest interval with in-flight
//! requests >= ratio x peak) is computed from the load alone; at small
//! concurrency every completion drops below the ratio (at concurrency 8 and
//! ratio 0.9, one completion is 7/8 < 0.9), so its spans are single waves,
//! and the longest can be the opening wave itself. Here the load only bounds
//! the tail; the wave is found by what it did.

use serde::Serialize;

use super::connection::arrival_ns;
use crate::artifacts::records::{Metric, Phase, Record};
use crate::config::SteadySettings;

/// A wave request is more than this many robust standard deviations above
/// the steady median (on the log scale).
const ROBUST_Z: f64 = 3.0;
/// 1.4826 x MAD estimates the standard deviation of a normal sample.
const MAD_SCALE: f64 = 1.4826;
/// A request is in the tail when this share of its generation ran after the
/// last request was sent.
const TAIL_SHARE: f64 = 0.5;

/// The wave, the tail and the steady window of one run.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct SteadyState {
    /// Successful profiling records considered.
    pub records: usize,
    /// The per-request value the wave is found by: `time_to_first_token`,
    /// or `request_latency` without streaming.
    pub basis: Option<Metric>,
    /// Indices (into the records) of the opening wave, in arrival order.
    #[serde(skip)]
    pub wave: Vec<usize>,
    /// Indices of the drain tail, in arrival order.
    #[serde(skip)]
    pub tail: Vec<usize>,
    /// Per record (file order): in the wave or the tail. Empty when
    /// neither holds a request.
    #[serde(skip)]
    excluded: Vec<bool>,
    /// Median basis value (less DNS + connect) of the wave (ms).
    pub wave_median_ms: Option<f64>,
    /// Median basis value (less DNS + connect) after the wave (ms).
    pub steady_median_ms: Option<f64>,
    /// Arrival of the first request after the wave (ns).
    pub wave_end_ns: Option<u64>,
    /// When the last profiling request was sent: the drain starts (ns).
    pub drain_start_ns: Option<u64>,
    /// From the end of the wave to the start of the drain (ns).
    pub window_ns: Option<(u64, u64)>,
    /// Most profiling requests in flight at once.
    pub inflight_peak: usize,
    /// Requests in flight when the last one was sent.
    pub inflight_at_drain: usize,
    /// Why the wave (or everything) cannot be told.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

impl SteadyState {
    /// Whether the record at `index` is in the wave or the tail.
    pub fn excludes(&self, index: usize) -> bool {
        self.excluded.get(index).copied().unwrap_or(false)
    }
}

/// The basis value of a record less the DNS + connect it paid (ms).
fn server_ms(r: &Record, basis: Metric) -> Option<f64> {
    let v = r.values.get(basis)?;
    let paid = super::connection::setup_ms(r).unwrap_or(0.0);
    Some((v - paid).max(1e-3))
}

/// Median and robust standard deviation of `x`.
#[cfg(test)]
fn robust(x: &[f64]) -> (f64, f64) {
    robust_in(&mut Vec::new(), x)
}

/// [`robust`], selecting in `scratch` (reused from call to call: the wave's
/// medians allocate, and fault in, one buffer, not one each).
fn robust_in(scratch: &mut Vec<f64>, x: &[f64]) -> (f64, f64) {
    let m = median_in(scratch, x.iter().copied());
    (
        m,
        MAD_SCALE * median_in(scratch, x.iter().map(|v| (v - m).abs())),
    )
}

/// [`crate::stats::median_in`]; NaN when `x` has no finite value.
fn median_in(scratch: &mut Vec<f64>, x: impl Iterator<Item = f64>) -> f64 {
    crate::stats::median_in(scratch, x).unwrap_or(f64::NAN)
}

/// The prefix length `m` in `1..=n/2` that minimises the squared deviation
/// of `x[..m]` and `x[m..]` from their means (running sums: linear time, no
/// memory; the sums are added in the order prefix-sum arrays would hold
/// them, so the costs compared are the same numbers); the first such `m`.
fn change_point(x: &[f64]) -> Option<usize> {
    let n = x.len();
    if n < 4 {
        return None;
    }
    let (total, total_sq) = x.iter().fold((0.0, 0.0), |(s, q), v| (s + v, q + v * v));
    let sse = |sum: f64, sq: f64, len: usize| sq - sum * sum / len as f64;
    let (mut s, mut q) = (0.0, 0.0);
    let mut best: Option<(usize, f64)> = None;
    for (i, v) in x[..n / 2].iter().enumerate() {
        s += v;
        q += v * v;
        let m = i + 1;
        let cost = sse(s, q, m) + sse(total - s, total_sq - q, n - m);
        if best.is_none_or(|(_, b)| cost.total_cmp(&b).is_lt()) {
            best = Some((m, cost));
        }
    }
    best.map(|(m, _)| m)
}

/// Finds the wave, the tail and the steady window of `records`.
pub fn detect(records: &[Record], s: &SteadySettings) -> SteadyState {
    let mut walk = Walk::of(records);
    let basis = basis(&walk, s);
    let (starts, ends) = (
        std::mem::take(&mut walk.starts),
        std::mem::take(&mut walk.ends),
    );
    // The in-flight count (two sorts) and the wave need nothing of each
    // other: both at once.
    let (load, wave) = rayon::join(
        || Load::of(starts, ends),
        || (basis.as_ref().ok()).map(|&b| Wave::of(&walk.requests, b, s)),
    );
    let order = walk.requests;
    let mut st = SteadyState {
        records: order.len(),
        ..SteadyState::default()
    };
    st.inflight_peak = load.peak;
    st.inflight_at_drain = load.at_drain;
    st.drain_start_ns = load.drain;
    let basis = match basis {
        Ok(b) => b,
        Err(reason) => {
            st.reason = Some(reason);
            return st;
        }
    };
    // Looked for whenever there is a basis.
    let wave = wave.unwrap_or_default();
    st.basis = Some(basis);
    st.steady_median_ms = wave.steady_median_ms;
    st.wave_median_ms = wave.wave_median_ms;
    st.wave_end_ns = wave.end_ns;
    st.wave = wave.indices;
    tail(records, &order, &mut st);
    if !st.wave.is_empty() || !st.tail.is_empty() {
        st.excluded = vec![false; records.len()];
        for &i in st.wave.iter().chain(&st.tail) {
            st.excluded[i] = true;
        }
    }
    st
}

/// The value the wave is found by (module doc), or why there is none.
fn basis(walk: &Walk, s: &SteadySettings) -> Result<Metric, String> {
    let n = walk.requests.len();
    if n < s.min_records.max(4) {
        Err(format!(
            "{n} successful profiling record(s), fewer than {}: too few to tell a wave or a tail \
             from the rest",
            s.min_records.max(4)
        ))
    } else if walk.with_ttft * 10 >= n * 9 {
        Ok(Metric::TimeToFirstToken)
    } else if walk.with_latency * 10 >= n * 9 {
        Ok(Metric::RequestLatency)
    } else {
        Err(
            "fewer than 90 % of the successful profiling records have time_to_first_token or \
             request_latency"
                .into(),
        )
    }
}

/// What [`detect`] reads of a successful profiling record.
struct Request {
    /// When it reached the server ([`arrival_ns`]).
    arrival: u64,
    /// Its index in the records.
    index: usize,
    /// Its TTFT and request latency less DNS + connect ([`server_ms`]);
    /// NaN when it has none (a 48-byte row: 405k of them per GB are
    /// written, then sorted).
    ttft_ms: f64,
    latency_ms: f64,
    /// Its first token (or start; never after the end), its end.
    first: u64,
    end: u64,
}

/// What one walk over the records gives [`detect`].
struct Walk {
    /// The successful profiling records, by arrival, then file order (the
    /// records are in it).
    requests: Vec<Request>,
    /// Of those, how many have a TTFT, a request latency.
    with_ttft: usize,
    with_latency: usize,
    /// Every profiling record's start and end (unsorted).
    starts: Vec<u64>,
    ends: Vec<u64>,
}

impl Walk {
    fn of(records: &[Record]) -> Walk {
        // Reserved for every record (not touched beyond what is pushed):
        // grown by doubling they were copied at every step.
        let mut w = Walk {
            requests: Vec::with_capacity(records.len()),
            with_ttft: 0,
            with_latency: 0,
            starts: Vec::with_capacity(records.len()),
            ends: Vec::with_capacity(records.len()),
        };
        for (i, r) in records.iter().enumerate() {
            if r.phase != Phase::Profiling {
                continue;
            }
            w.starts.push(r.request_start_ns);
            w.ends.push(r.request_end_ns);
            if r.is_success() {
                let q = Request {
                    arrival: arrival_ns(r),
                    index: i,
                    ttft_ms: server_ms(r, Metric::TimeToFirstToken).unwrap_or(f64::NAN),
                    latency_ms: server_ms(r, Metric::RequestLatency).unwrap_or(f64::NAN),
                    first: (r.first_token_ns())
                        .unwrap_or(r.request_start_ns)
                        .min(r.request_end_ns),
                    end: r.request_end_ns,
                };
                w.with_ttft += usize::from(!q.ttft_ms.is_nan());
                w.with_latency += usize::from(!q.latency_ms.is_nan());
                w.requests.push(q);
            }
        }
        w.requests.sort_unstable_by_key(|q| (q.arrival, q.index));
        w
    }
}

/// The opening wave (module doc).
#[derive(Default)]
struct Wave {
    /// Its requests' indices (into the records), ascending.
    indices: Vec<usize>,
    /// Its median and the median after it (ms).
    wave_median_ms: Option<f64>,
    steady_median_ms: Option<f64>,
    /// Arrival of the first request after it.
    end_ns: Option<u64>,
}

impl Wave {
    /// The wave of `order` (by arrival) by its `basis` value.
    fn of(order: &[Request], basis: Metric, s: &SteadySettings) -> Wave {
        let value = |q: &Request| match basis {
            Metric::TimeToFirstToken => q.ttft_ms,
            _ => q.latency_ms,
        };
        // The log values in arrival order, and where each is in `order`:
        // reserved, since collected through a filter they would grow by
        // doubling.
        let mut x: Vec<f64> = Vec::with_capacity(order.len());
        let mut at: Vec<usize> = Vec::with_capacity(order.len());
        for (k, q) in order.iter().enumerate() {
            let v = value(q);
            if !v.is_nan() {
                x.push(v.ln());
                at.push(k);
            }
        }
        let mut w = Wave::default();
        let Some(m) = change_point(&x) else {
            return w;
        };
        let mut scratch = Vec::with_capacity(x.len());
        let (rest_median, rest_sd) = robust_in(&mut scratch, &x[m..]);
        let head_median = median_in(&mut scratch, x[..m].iter().copied());
        let bar = s.wave_ratio.max(1.0).ln().max(ROBUST_Z * rest_sd);
        w.steady_median_ms = Some(rest_median.exp());
        if head_median - rest_median < bar || head_median <= rest_median {
            return w;
        }
        let Some(end) = (0..m).rev().find(|&i| x[i] - rest_median >= bar) else {
            return w;
        };
        w.indices = at[..=end].iter().map(|&k| order[k].index).collect();
        w.indices.sort_unstable();
        let wave_median = median_in(&mut scratch, x[..=end].iter().copied());
        w.wave_median_ms = Some(wave_median.exp());
        w.steady_median_ms = Some(median_in(&mut scratch, x[end + 1..].iter().copied()).exp());
        w.end_ns = at.get(end + 1).map(|&k| order[k].arrival);
        w
    }
}

/// The drain tail (module doc) and the steady window, into `st`.
fn tail(records: &[Record], order: &[Request], st: &mut SteadyState) {
    let Some(drain) = st.drain_start_ns else {
        return;
    };
    let mut in_wave = vec![false; records.len()];
    for &i in &st.wave {
        in_wave[i] = true;
    }
    for q in order {
        if in_wave[q.index] {
            continue;
        }
        let len = q.end - q.first;
        let after = q.end.saturating_sub(drain.max(q.first));
        let share = if len == 0 {
            f64::from(u8::from(q.end > drain))
        } else {
            after as f64 / len as f64
        };
        if share >= TAIL_SHARE {
            st.tail.push(q.index);
        }
    }
    st.tail.sort_unstable();
    let from = st.wave_end_ns.unwrap_or_else(|| {
        order
            .first()
            .map_or(drain, |q| records[q.index].request_start_ns)
    });
    st.window_ns = (drain > from).then_some((from, drain));
}

/// In flight: the peak, and the count when the last request was sent.
struct Load {
    peak: usize,
    at_drain: usize,
    /// When the last profiling request was sent.
    drain: Option<u64>,
}

impl Load {
    fn of(mut starts: Vec<u64>, mut ends: Vec<u64>) -> Load {
        // Each in time order, then walked together (plain integers: an
        // unstable sort gives the same vector, faster than the stable one).
        starts.sort_unstable();
        ends.sort_unstable();
        let drain = starts.last().copied();
        let (mut now, mut peak, mut at_drain) = (0_i64, 0_i64, 0_i64);
        let (mut s, mut e) = (0, 0);
        while s < starts.len() || e < ends.len() {
            // Ends before starts at the same instant: a request that ends as
            // another starts is not in flight with it.
            let (t, d) = match (starts.get(s), ends.get(e)) {
                (Some(&a), Some(&b)) if b <= a => (b, -1),
                (Some(&a), _) => (a, 1),
                (None, Some(&b)) => (b, -1),
                (None, None) => break,
            };
            if d > 0 {
                s += 1;
            } else {
                e += 1;
            }
            now += d;
            peak = peak.max(now);
            if Some(t) <= drain {
                at_drain = now;
            }
        }
        Load {
            peak: peak.max(0) as usize,
            at_drain: at_drain.max(0) as usize,
            drain,
        }
    }
}

/// What a throughput counts.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Per {
    /// Output tokens (`output_sequence_length`).
    Tokens,
    /// Requests.
    Requests,
}

/// A throughput over a window (per second). Over the whole window (`part`
/// false) every record counts whole, as AIPerf counts it; over a part of the
/// run, output tokens count by the share of their generation (first token
/// to end) inside it, requests where they end.
pub fn rate(rs: &[&Record], window: Option<(u64, u64)>, per: Per, part: bool) -> Option<f64> {
    let mut r = Rate::new(window, per, part);
    rs.iter().for_each(|x| r.add(x));
    r.finish()
}

/// [`rate`], a record at a time (so one walk can feed several).
#[derive(Debug, Clone, Copy)]
pub struct Rate {
    window: Option<(u64, u64)>,
    per: Per,
    part: bool,
    total: f64,
    records: usize,
    /// A record lacked its output tokens: the rate cannot be told.
    unknown: bool,
}

impl Rate {
    /// Over `window`, counting `per`, whole or by part ([`rate`]).
    pub fn new(window: Option<(u64, u64)>, per: Per, part: bool) -> Rate {
        Rate {
            window,
            per,
            part,
            total: 0.0,
            records: 0,
            unknown: false,
        }
    }

    /// Counts one record.
    pub fn add(&mut self, r: &Record) {
        let Some((a, b)) = self.window else {
            return;
        };
        self.records += 1;
        let inside = |t: u64| f64::from(u8::from((a..=b).contains(&t)));
        let tokens = || r.values.get(Metric::OutputSequenceLength);
        self.total += match (self.per, self.part) {
            (Per::Requests, false) => 1.0,
            (Per::Requests, true) => inside(r.request_end_ns),
            (Per::Tokens, _) if self.unknown => 0.0,
            (Per::Tokens, false) => tokens().unwrap_or_else(|| {
                self.unknown = true;
                0.0
            }),
            (Per::Tokens, true) => {
                let Some(v) = tokens() else {
                    self.unknown = true;
                    return;
                };
                let hi = r.request_end_ns;
                let lo = r.first_token_ns().unwrap_or(r.request_start_ns).min(hi);
                if hi == lo {
                    inside(hi) * v
                } else {
                    v * hi.min(b).saturating_sub(lo.max(a)) as f64 / (hi - lo) as f64
                }
            }
        };
    }

    /// Per second over the window; `None` without a window of positive
    /// length, without records, or when a record lacked its tokens.
    pub fn finish(&self) -> Option<f64> {
        let (a, b) = self.window?;
        let secs = b.checked_sub(a)? as f64 / 1e9;
        (secs > 0.0 && self.records > 0 && !self.unknown).then(|| self.total / secs)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_change_point_finds_a_prefix_step() {
        let mut x = vec![5.0; 6];
        x.extend(vec![1.0; 30]);
        assert_eq!(change_point(&x), Some(6));
        // A step later than half the sequence is not an opening.
        let mut y = vec![1.0; 10];
        y.extend(vec![5.0; 12]);
        assert!(change_point(&y).is_some_and(|m| m <= 11));
    }

    #[test]
    fn robust_spread_ignores_one_outlier() {
        let (m, sd) = robust(&[1.0, 1.0, 1.1, 0.9, 1.0, 50.0]);
        assert!((m - 1.0).abs() < 1e-9);
        assert!(sd < 0.2, "{sd}");
    }
}
