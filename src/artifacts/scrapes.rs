//! `server_metrics_export.jsonl`: AIPerf's raw scrapes, one line per scrape
//! whose body changed, with cumulative (not delta) values. Present only when
//! the run asked for `--server-metrics-formats ... jsonl`. With it, counter and
//! histogram increments can be placed in time and attributed to requests,
//! which is what lets the phase check repair a contaminated split.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader, Read};

use serde::Deserialize;

use crate::artifacts::records::MAX_LINE_BYTES;
use crate::findings::{not_listed, reading, Finding, MAX_LISTED};

/// File name.
pub const FILE: &str = "server_metrics_export.jsonl";

objects_only!(Sample, Scrape);

/// One sample of a family in one scrape.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(remote = "Self")]
pub struct Sample {
    /// Labels (absent = none).
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    /// Counter/gauge value.
    #[serde(default)]
    pub value: Option<f64>,
    /// Histogram cumulative count.
    #[serde(default)]
    pub count: Option<f64>,
    /// Histogram cumulative sum.
    #[serde(default)]
    pub sum: Option<f64>,
    /// Histogram cumulative buckets.
    #[serde(default)]
    pub buckets: Option<BTreeMap<String, f64>>,
}

impl Sample {
    /// The cumulative quantity that counts observations: `count` for
    /// histograms, `value` for counters.
    pub fn cumulative(&self) -> Option<f64> {
        self.count.or(self.value)
    }
}

/// One scrape of one endpoint.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(remote = "Self")]
pub struct Scrape {
    /// Endpoint URL.
    pub endpoint_url: String,
    /// Scrape time (ns): when the answer's first byte arrived.
    pub timestamp_ns: u64,
    /// When the scrape request was sent (ns; AIPerf 0.13 and later).
    #[serde(default)]
    pub request_sent_ns: Option<u64>,
    /// The phase AIPerf tagged this scrape with, if any.
    #[serde(default)]
    pub benchmark_phase: Option<String>,
    /// Family name → samples.
    #[serde(default)]
    pub metrics: BTreeMap<String, Vec<Sample>>,
    /// 1-based line in the file (set by the reader).
    #[serde(skip)]
    pub line: u64,
}

impl Scrape {
    /// Send order: by the time each request was sent, where known, else by
    /// arrival ([`state_order`] decides whether it is the state order).
    pub fn order_key(&self) -> (u64, u64) {
        (self.request_sent_ns.unwrap_or(self.timestamp_ns), self.line)
    }

    /// The samples of a family, found by its name with or without `_total`
    /// (prometheus_client strips it from counter families, AIPerf keeps it).
    pub fn samples(&self, name: &str) -> Option<&Vec<Sample>> {
        let bare = crate::frameworks::canonical(name);
        self.metrics
            .get(bare)
            .or_else(|| self.metrics.get(&format!("{bare}_total")))
    }
}

/// Scrapes in file order plus per-line problems.
#[derive(Debug, Default)]
pub struct ScrapesRead {
    /// Scrapes.
    pub scrapes: Vec<Scrape>,
    /// Problems.
    pub findings: Vec<Finding>,
    /// The families the export types as counters or histograms (canonical
    /// names), set once the export is read: what only grows, and so what
    /// tells the state order. Empty: histogram counts alone tell it.
    pub cumulative: BTreeSet<String>,
    /// Per endpoint, the scrapes (indices into `scrapes`) in state order with
    /// their state times: computed once, on first use.
    order: std::sync::OnceLock<BTreeMap<String, Vec<(usize, u64)>>>,
}

impl ScrapesRead {
    /// Sets the families that only grow (before the first ordered read).
    pub fn set_cumulative(&mut self, cumulative: BTreeSet<String>) {
        self.cumulative = cumulative;
        self.order = std::sync::OnceLock::new();
    }

    fn order(&self) -> &BTreeMap<String, Vec<(usize, u64)>> {
        self.order.get_or_init(|| {
            let mut per: BTreeMap<&str, Vec<(&Scrape, u64)>> = BTreeMap::new();
            for s in &self.scrapes {
                per.entry(s.endpoint_url.as_str())
                    .or_default()
                    .push((s, s.timestamp_ns));
            }
            let index: BTreeMap<u64, usize> = self
                .scrapes
                .iter()
                .enumerate()
                .map(|(i, s)| (s.line, i))
                .collect();
            per.into_iter()
                .map(|(ep, mut list)| {
                    state_order(&mut list, &self.cumulative);
                    let ids = list.iter().map(|(s, t)| (index[&s.line], *t)).collect();
                    (ep.to_string(), ids)
                })
                .collect()
        })
    }

    /// The scrapes of each endpoint in state order ([`state_order`]), with
    /// the latest time each one's state can be from.
    pub fn by_endpoint(&self) -> BTreeMap<&str, Vec<(&Scrape, u64)>> {
        self.order()
            .iter()
            .map(|(ep, ids)| {
                let list = ids.iter().map(|(i, t)| (&self.scrapes[*i], *t)).collect();
                (ep.as_str(), list)
            })
            .collect()
    }

    /// One endpoint's scrapes in state order.
    pub fn of_endpoint(&self, endpoint: &str) -> Vec<(&Scrape, u64)> {
        self.order()
            .get(endpoint)
            .map(|ids| ids.iter().map(|(i, t)| (&self.scrapes[*i], *t)).collect())
            .unwrap_or_default()
    }
}

/// Whether a family only grows: typed so by the export, or (without types)
/// a histogram.
fn grows(cumulative: &BTreeSet<String>, family: &str, sample: &Sample) -> bool {
    if cumulative.is_empty() {
        sample.count.is_some()
    } else {
        cumulative.contains(crate::frameworks::canonical(family))
    }
}

/// How many cumulative series go down along an order.
fn drops(list: &[(&Scrape, u64)], cumulative: &BTreeSet<String>) -> usize {
    list.windows(2)
        .map(|w| {
            let (a, b) = (w[0].0, w[1].0);
            b.metrics
                .iter()
                .flat_map(|(fam, samples)| samples.iter().map(move |x| (fam, x)))
                .filter(|(fam, x)| grows(cumulative, fam, x))
                .filter(|(fam, x)| {
                    let before = a
                        .metrics
                        .get(*fam)
                        .and_then(|ys| ys.iter().find(|y| y.labels == x.labels)?.cumulative());
                    matches!((before, x.cumulative()), (Some(p), Some(v)) if v < p)
                })
                .count()
        })
        .sum()
}

/// Sorts one endpoint's scrapes into state order and sets each one's state
/// time. A server snapshots its state somewhere between receiving a scrape
/// and answering it, so two scrapes in flight together can be answered out
/// of order either way: a server that snapshots on receipt and answers
/// late puts the later-sent one first; one that is slow to start handling
/// snapshots late. Counters and histograms only grow, so of the two orders
/// (by the answer's arrival, by send time) the one along which fewer of
/// their series go down is the state order; ties keep arrival order. In
/// send order a scrape's state time is lowered to the earliest answer of
/// any scrape sent after it.
pub fn state_order(list: &mut [(&Scrape, u64)], cumulative: &BTreeSet<String>) {
    list.sort_by_key(|(s, _)| (s.timestamp_ns, s.line));
    let mut sent: Vec<(&Scrape, u64)> = list.to_vec();
    sent.sort_by_key(|(s, _)| s.order_key());
    let differs = sent
        .iter()
        .zip(list.iter())
        .any(|(a, b)| a.0.line != b.0.line);
    if differs && drops(&sent, cumulative) < drops(list, cumulative) {
        list.copy_from_slice(&sent);
        let mut earliest_after = u64::MAX;
        for (s, t) in list.iter_mut().rev() {
            *t = s.timestamp_ns.min(earliest_after);
            earliest_after = *t;
        }
    } else {
        for (s, t) in list.iter_mut() {
            *t = s.timestamp_ns;
        }
    }
}

/// Reads the raw-scrape JSON lines. Bad lines become findings.
pub fn read_from(input: impl Read) -> std::io::Result<ScrapesRead> {
    let mut out = ScrapesRead::default();
    let mut reader = BufReader::new(input);
    let mut buf = Vec::new();
    let mut line = 0u64;
    // Bad lines past the cap are only counted (bounded memory).
    let mut unlisted = 0u64;
    let mut listed = |out: &mut ScrapesRead, f: Finding| {
        if out.findings.len() < MAX_LISTED {
            out.findings.push(f);
        } else {
            unlisted += 1;
        }
    };
    loop {
        buf.clear();
        let (n, too_long) = read_line_capped(&mut reader, &mut buf, MAX_LINE_BYTES)?;
        if n == 0 {
            break;
        }
        line += 1;
        if too_long {
            let f = Finding::new(
                reading::OVERSIZED_LINE,
                format!(
                    "line {line} is longer than {} MiB; it is skipped",
                    MAX_LINE_BYTES >> 20
                ),
            );
            listed(&mut out, f.file(FILE).line(line));
            continue;
        }
        let text = buf.trim_ascii();
        if text.is_empty() {
            continue;
        }
        let mut de = serde_json::Deserializer::from_slice(text);
        let parsed = serde_path_to_error::deserialize::<_, Scrape>(&mut de);
        if parsed.is_ok() {
            if let Err(e) = de.end() {
                // Garbage, or a second scrape, after the first on one line.
                let f = Finding::new(
                    reading::INVALID_RECORD,
                    format!("line {line}: {e} after the scrape; the line is skipped"),
                );
                listed(&mut out, f.file(FILE).line(line));
                continue;
            }
        }
        match parsed {
            Ok(mut s) => {
                s.line = line;
                out.scrapes.push(s);
            }
            Err(e) => listed(&mut out, bad_scrape(&e, line, buf.ends_with(b"\n"))),
        }
    }
    if unlisted > 0 {
        out.findings.push(not_listed(
            reading::INVALID_RECORD,
            Some(FILE.into()),
            unlisted,
        ));
    }
    Ok(out)
}

/// The finding for a scrape line that did not parse: a truncation when the
/// input ended inside it.
fn bad_scrape(
    e: &serde_path_to_error::Error<serde_json::Error>,
    line: u64,
    terminated: bool,
) -> Finding {
    let code = if e.inner().is_eof() && !terminated {
        reading::TRUNCATED_RECORD
    } else {
        reading::INVALID_RECORD
    };
    Finding::new(code, format!("line {line}: {}; skipped", e.inner()))
        .file(FILE)
        .line(line)
        .field(e.path().to_string())
}

/// Reads one line (through its `\n`) into `buf`, keeping at most `max`
/// bytes of it: a longer line is consumed but not kept. Returns the bytes
/// consumed (0 at the end) and whether the line was too long.
fn read_line_capped(
    r: &mut impl BufRead,
    buf: &mut Vec<u8>,
    max: usize,
) -> std::io::Result<(usize, bool)> {
    let (mut total, mut long) = (0, false);
    loop {
        let avail = match r.fill_buf() {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if avail.is_empty() {
            return Ok((total, long));
        }
        let (n, done) = match memchr::memchr(b'\n', avail) {
            Some(i) => (i + 1, true),
            None => (avail.len(), false),
        };
        if !long {
            let content = buf.len() + n - usize::from(done);
            if content > max {
                long = true;
                buf.clear();
            } else {
                buf.extend_from_slice(&avail[..n]);
            }
        }
        r.consume(n);
        total += n;
        if done {
            return Ok((total, long));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_counters_and_histograms_and_reports_bad_lines() {
        let text = concat!(
            r#"{"endpoint_url":"u","timestamp_ns":5,"benchmark_phase":"warmup","metrics":{"c":[{"value":3}],"h":[{"labels":{"a":"b"},"count":2,"sum":0.5,"buckets":{"+Inf":2}}]}}"#,
            "\n",
            r#"{"endpoint_url":"u","timestamp_ns":"late"}"#,
            "\n"
        );
        let r = read_from(text.as_bytes()).expect("reads");
        assert_eq!(r.scrapes.len(), 1);
        assert_eq!(r.scrapes[0].metrics["h"][0].cumulative(), Some(2.0));
        assert_eq!(r.scrapes[0].metrics["c"][0].cumulative(), Some(3.0));
        assert_eq!(r.findings[0].line, Some(2));
        assert_eq!(r.findings[0].field.as_deref(), Some("timestamp_ns"));
    }
}
