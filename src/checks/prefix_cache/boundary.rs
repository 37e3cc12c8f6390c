//! Requests that crossed the warmup/profiling boundary: the shortest run of
//! requests at the boundary whose prompt tokens account exactly for a
//! server/client prompt-token difference, and the server rate without them.

use super::server::ServerRate;
use crate::artifacts::records::{Metric, Phase, Record};
use crate::model::connection::arrival_ns;

/// Requests whose prompt tokens account exactly for a server/client difference.
pub struct Crossing<'a> {
    /// The phase the requests belong to.
    pub phase: Phase,
    /// How they crossed, in words.
    pub how: String,
    /// The requests.
    pub requests: Vec<&'a Record>,
}

/// Looks for the requests that crossed the warmup/profiling boundary: for an
/// excess, the last warmup requests to finish; for a deficit, the first
/// profiling requests to start (counted in warmup) or the last to finish
/// (after the final scrape). The shortest such run of requests whose prompt
/// tokens sum to the difference exactly is the attribution.
fn shortest_run<'a>(
    rs: impl IntoIterator<Item = &'a Record>,
    key: fn(&Record) -> u64,
    latest_first: bool,
    target: f64,
) -> Option<Vec<&'a Record>> {
    let mut firsts = Firsts::new(key, latest_first);
    for r in rs {
        firsts.offer(r);
    }
    firsts.shortest_run(target)
}

/// The first records in one order, kept as they are offered: what
/// [`shortest_run`] reads, so that several orders are kept in one walk.
struct Firsts<'a> {
    key: fn(&Record) -> u64,
    latest_first: bool,
    kept: Vec<((u64, u64), &'a Record)>,
    worst_kept: Option<(u64, u64)>,
}

impl<'a> Firsts<'a> {
    /// Only the first 64 in order matter: they are kept in one pass over
    /// the records (ties broken by line, as a stable sort of the file order
    /// would), then sorted. A record's rank is unique: lines are.
    const FIRST: usize = 64;

    fn new(key: fn(&Record) -> u64, latest_first: bool) -> Firsts<'a> {
        Firsts {
            key,
            latest_first,
            kept: Vec::with_capacity(2 * Self::FIRST),
            worst_kept: None,
        }
    }

    fn offer(&mut self, r: &'a Record) {
        let (k, line) = ((self.key)(r), r.line);
        let k = if self.latest_first {
            (!k, !line)
        } else {
            (k, line)
        };
        if self.worst_kept.is_some_and(|w| k > w) {
            return;
        }
        self.kept.push((k, r));
        if self.kept.len() == 2 * Self::FIRST {
            self.kept
                .select_nth_unstable_by_key(Self::FIRST - 1, |e| e.0);
            self.kept.truncate(Self::FIRST);
            self.worst_kept = Some(self.kept[Self::FIRST - 1].0);
        }
    }

    /// The shortest run of the first records, in order, whose prompt tokens
    /// sum to `target`.
    fn shortest_run(mut self, target: f64) -> Option<Vec<&'a Record>> {
        self.kept.sort_unstable_by_key(|e| e.0);
        let mut total = 0.0;
        for (i, (_, r)) in self.kept.iter().enumerate().take(Self::FIRST) {
            total += r.values.get(Metric::UsagePromptTokens)?;
            if (total - target).abs() < 0.5 {
                return Some(self.kept[..=i].iter().map(|e| e.1).collect());
            }
        }
        None
    }
}

/// The requests whose prompt tokens account for a server/client difference
/// `diff`, if any do exactly.
pub fn boundary_requests(
    records: &[Record],
    diff: f64,
    profiling_start_ns: Option<u64>,
    warmup_end_ns: Option<u64>,
) -> Option<Crossing<'_>> {
    let find = |rs, key, rev| shortest_run(rs, key, rev, diff.abs());
    let succ = |phase| {
        records
            .iter()
            .filter(move |r| r.phase == phase && r.is_success())
    };
    if diff > 0.0 {
        let requests = find(succ(Phase::Warmup), |r| r.request_end_ns, true)?;
        // What the timestamps say about the latest of them.
        let last_end = requests.iter().map(|r| r.request_end_ns).max().unwrap_or(0);
        let how = match profiling_start_ns {
            Some(ps) if last_end > ps => format!(
                "were the last to finish in warmup, {:.1} ms after profiling started",
                (last_end - ps) as f64 / 1e6
            ),
            Some(ps) => format!(
                "were the last to finish in warmup, {:.1} ms before profiling started, yet \
                 after the scrape the profiling counters start from",
                (ps - last_end) as f64 / 1e6
            ),
            None => "were the last to finish in warmup".to_string(),
        };
        Some(Crossing {
            phase: Phase::Warmup,
            how,
            requests,
        })
    } else {
        // Both orders of the profiling requests kept in one walk: the
        // first to reach the server, else the last to finish.
        let mut by_arrival = Firsts::new(arrival_ns, false);
        let mut by_end = Firsts::new(|r| r.request_end_ns, true);
        for r in succ(Phase::Profiling) {
            // Only requests that reached the server while the warmup window
            // was open can have been counted in it; in the order the server
            // saw them (a cold request arrives a connect later than it
            // started).
            if warmup_end_ns.is_none_or(|we| arrival_ns(r) < we) {
                by_arrival.offer(r);
            }
            by_end.offer(r);
        }
        if let Some(requests) = by_arrival.shortest_run(diff.abs()) {
            return Some(Crossing {
                phase: Phase::Profiling,
                how: "were the first to reach the server in profiling, counted before the \
                      warmup window closed"
                    .into(),
                requests,
            });
        }
        let requests = by_end.shortest_run(diff.abs())?;
        Some(Crossing {
            phase: Phase::Profiling,
            how: "were the last to finish in profiling, after the final scrape".into(),
            requests,
        })
    }
}

/// A prompt-token excess a version without a warmup split explains: its
/// profiling counters start at the last periodic scrape before profiling,
/// so they hold the prompt tokens of the warmup requests after that scrape.
/// Sized by the configured warmup requests at the profiling average
/// (`client_prompt` tokens over `records` requests).
pub fn unrecorded_warmup_cause(
    model: &crate::model::RunModel,
    client_prompt: f64,
    records: usize,
    diff: f64,
) -> Option<String> {
    model.unrecorded_warmup_until()?;
    if diff <= 0.0 {
        return None;
    }
    let n = model.warmup.as_ref()?.configured_requests;
    let v = model
        .aiperf_version
        .as_deref()
        .unwrap_or("(version unknown)");
    let per = client_prompt / records.max(1) as f64;
    let size = n
        .map(|n| {
            format!(
                " (the {n} configured warmup request(s), at the profiling average of {per:.0} \
                 prompt tokens, sent about {:.0})",
                n as f64 * per
            )
        })
        .unwrap_or_default();
    Some(format!(
        "; AIPerf {v} has no warmup split: the profiling counters start at the last periodic \
         scrape before profiling started, so they hold the prompt tokens of the warmup \
         requests that came after it{size}"
    ))
}

/// What a prompt-token difference is, in words (after a `; `): a
/// counter's cause, the crossing requests by id, or the warmup a version
/// without a warmup split absorbed; empty when nothing accounts for it.
pub fn cause_words(
    model: &crate::model::RunModel,
    (client_prompt, records): (f64, usize),
    crossing: Option<&Crossing>,
    counter_cause: Option<&str>,
    diff: f64,
) -> String {
    match (crossing, counter_cause) {
        (_, Some(cause)) => format!("; {cause}"),
        (Some(c), _) => {
            let ids: Vec<String> = c.requests.iter().map(|r| r.id_or_line()).collect();
            format!(
                "; exactly the prompt tokens of {} {} request(s) that {} ({})",
                c.requests.len(),
                c.phase.as_str(),
                c.how,
                ids.join(", ")
            )
        }
        (None, None) => {
            unrecorded_warmup_cause(model, client_prompt, records, diff).unwrap_or_default()
        }
    }
}

/// The headline rate with the crossing requests' tokens taken out (excess)
/// or put back (deficit), using the cached tokens the clients saw for them.
pub fn adjust(h: &ServerRate, c: &Crossing, diff: f64) -> ServerRate {
    let sign = if diff > 0.0 { -1.0 } else { 1.0 };
    let prompt: f64 = c
        .requests
        .iter()
        .filter_map(|r| r.values.get(Metric::UsagePromptTokens))
        .sum();
    let cached: f64 = c
        .requests
        .iter()
        .filter_map(|r| r.values.get(Metric::UsagePromptCacheReadTokens))
        .sum();
    let numerator = h.numerator + sign * cached;
    let denominator = h.denominator + sign * prompt;
    ServerRate {
        framework: h.framework,
        formula: format!(
            "{} adjusted for {} boundary request(s)",
            h.formula,
            c.requests.len()
        ),
        hit_rate: (denominator > 0.0)
            .then(|| numerator / denominator)
            .filter(|r| *r <= 1.0),
        numerator,
        denominator,
        endpoints: h.endpoints.clone(),
        gauge: false,
        prefill_only: h.prefill_only,
        role: h.role.clone(),
        role_filter: h.role_filter.clone(),
        secondary: false,
        source: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::artifacts::records::Values;

    #[test]
    fn shortest_run_takes_requests_in_stable_order_among_many_with_ties() {
        // 200 requests whose end times tie in pairs; prompt tokens 1, 2, 3, ...
        let records: Vec<Record> = (0..200u64)
            .map(|i| {
                let mut v = Values::default();
                v.set(Metric::UsagePromptTokens, Some((i + 1) as f64));
                let mut r = Record::with_values(v);
                r.line = i + 1;
                r.request_start_ns = 1_000 - i / 2;
                r.request_end_ns = 10_000 + i / 2;
                r
            })
            .collect();
        let refs = || records.iter();
        let lines = |rs: Option<Vec<&Record>>| rs.map(|v| v.iter().map(|r| r.line).collect());
        // Latest end first: lines 200, 199 (tie, later line first), 198, ...
        let got: Option<Vec<u64>> = lines(shortest_run(
            refs(),
            |r| r.request_end_ns,
            true,
            200.0 + 199.0 + 198.0,
        ));
        assert_eq!(got, Some(vec![200, 199, 198]));
        // Earliest start first: lines 199, 200 (start 901 both; earlier line first), 197, 198.
        let got = lines(shortest_run(
            refs(),
            |r| r.request_start_ns,
            false,
            199.0 + 200.0 + 197.0,
        ));
        assert_eq!(got, Some(vec![199, 200, 197]));
        // Nothing within the first 64 sums to the target.
        assert_eq!(
            lines(shortest_run(refs(), |r| r.request_end_ns, true, 0.25)),
            None
        );
    }

    #[test]
    fn shortest_run_agrees_with_a_stable_sort_of_every_record() {
        // 1,000 requests with keys drawn from few values (many ties), in
        // both orders, against the definition: a stable sort of all of them.
        let mut x = 12345u64;
        let mut next = || {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            x >> 33
        };
        let records: Vec<Record> = (0..1000u64)
            .map(|i| {
                let mut v = Values::default();
                v.set(Metric::UsagePromptTokens, Some((1 + next() % 50) as f64));
                let mut r = Record::with_values(v);
                r.line = i + 1;
                r.request_start_ns = next() % 40;
                r.request_end_ns = 100 + next() % 40;
                r
            })
            .collect();
        for latest_first in [false, true] {
            let key: fn(&Record) -> u64 = if latest_first {
                |r| r.request_end_ns
            } else {
                |r| r.request_start_ns
            };
            let mut sorted: Vec<&Record> = records.iter().collect();
            sorted.sort_by_key(|r| key(r));
            if latest_first {
                sorted.reverse(); // a stable sort of the reversed file order
                sorted.sort_by_key(|r| std::cmp::Reverse(key(r)));
            }
            for n in [1, 2, 7, 63, 64] {
                let target: f64 = sorted[..n]
                    .iter()
                    .map(|r| r.values.get(Metric::UsagePromptTokens).unwrap())
                    .sum();
                let got = shortest_run(records.iter(), key, latest_first, target)
                    .expect("a run sums to the target");
                // The shortest prefix reaching the target is the answer.
                let want_len = (1..=n)
                    .find(|&m| {
                        let t: f64 = sorted[..m]
                            .iter()
                            .map(|r| r.values.get(Metric::UsagePromptTokens).unwrap())
                            .sum();
                        (t - target).abs() < 0.5
                    })
                    .unwrap();
                let got: Vec<u64> = got.iter().map(|r| r.line).collect();
                let want: Vec<u64> = sorted[..want_len].iter().map(|r| r.line).collect();
                assert_eq!(got, want, "latest_first {latest_first}, n {n}");
            }
        }
    }

    fn rec(line: u64, start: u64, prompt: f64) -> Record {
        let mut values = Values::default();
        values.set(Metric::UsagePromptTokens, Some(prompt));
        let mut r = Record::with_values(values);
        r.line = line;
        r.request_start_ns = start;
        r.request_end_ns = start + 10;
        r
    }

    #[test]
    fn a_deficit_is_only_blamed_on_requests_that_started_while_warmup_was_open() {
        // Profiling starts at 100, warmup closes at 150: only the request
        // that started at 120 can have been counted in warmup.
        let records = [rec(1, 120, 30.0), rec(2, 200, 40.0), rec(3, 300, 50.0)];
        let c = boundary_requests(&records, -30.0, Some(100), Some(150)).expect("found");
        assert_eq!(c.requests.len(), 1);
        assert!(c.how.contains("before the warmup window closed"));
        // 70 tokens would need the request of 200, which started after the
        // window closed: not "counted before it closed".
        let c = boundary_requests(&records, -70.0, Some(100), Some(150));
        assert!(c.is_none_or(|c| !c.how.contains("before the warmup window closed")));
    }

    #[test]
    fn the_first_requests_are_the_first_the_server_saw_not_the_first_sent() {
        // Two profiling requests started together; the one at 100 paid a
        // 40 ms connect (cold), so the server saw the one at 101 first. A
        // deficit of the warm one's 25 tokens names it, not the cold one.
        let mut cold = rec(1, 100, 30.0);
        cold.values.set(Metric::HttpReqConnecting, Some(40.0));
        let warm = rec(2, 101, 25.0);
        let records = [cold, warm];
        let c = boundary_requests(&records, -25.0, Some(90), Some(20_000_000)).expect("found");
        assert_eq!(c.requests.iter().map(|r| r.line).collect::<Vec<_>>(), [2]);
        assert!(c.how.contains("first to reach the server"), "{}", c.how);
        // By send time the cold request would come first and 25 could not
        // be matched by a prefix: the first to start holds 30.
        assert!(
            boundary_requests(&records, -30.0, Some(90), Some(20_000_000)).is_none_or(|c| c
                .requests
                .iter()
                .map(|r| r.line)
                .collect::<Vec<_>>()
                != [1])
        );
    }
}
