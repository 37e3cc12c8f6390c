//! The reference reading of one raw-scrape line: serde, with the path of
//! the field that failed. The scanner ([`super::scan`]) reads the usual
//! lines without it; every line it gives up on comes here, so a bad line's
//! finding (file, line, field) is serde's, and a line the scanner cannot
//! read is still read.

use std::collections::BTreeMap;

use serde::Deserialize;

use super::block::{Block, Interest, LineRow, LineScrape, Problem};
use super::rows::{ScrapePhase, NONE};
use crate::findings::reading;

objects_only!(RawSample, RawScrape);

/// One sample of a family in one scrape, as written.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(remote = "Self")]
pub struct RawSample {
    /// Labels (absent = none).
    #[serde(default)]
    pub labels: crate::artifacts::Labels,
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

/// One scrape of one endpoint, as written.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(remote = "Self")]
pub struct RawScrape {
    /// Endpoint URL.
    pub endpoint_url: String,
    /// Scrape time (ns).
    pub timestamp_ns: u64,
    /// When the scrape request was sent (ns; AIPerf 0.13 and later).
    #[serde(default)]
    pub request_sent_ns: Option<u64>,
    /// The phase AIPerf tagged this scrape with.
    #[serde(default)]
    pub benchmark_phase: Option<String>,
    /// Family name -> samples.
    #[serde(default)]
    pub metrics: BTreeMap<String, Vec<RawSample>>,
}

/// Reads line `line` of the block (its text without the line end;
/// `terminated` when a line end followed it) into `block`, or notes there
/// why it cannot be read.
pub fn read_line(text: &[u8], line: u64, terminated: bool, block: &mut Block, interest: &Interest) {
    let mut de = serde_json::Deserializer::from_slice(text);
    let parsed = serde_path_to_error::deserialize::<_, RawScrape>(&mut de);
    if parsed.is_ok() {
        if let Err(e) = de.end() {
            // Garbage, or a second scrape, after the first on one line.
            block.problems.push(Problem {
                line,
                code: reading::INVALID_RECORD,
                message: format!("{e} after the scrape; the line is skipped"),
                field: None,
            });
            return;
        }
    }
    match parsed {
        Ok(s) => push_raw(block, s, line, interest),
        Err(e) => {
            // A truncation when the input ended inside the line.
            let code = if e.inner().is_eof() && !terminated {
                reading::TRUNCATED_RECORD
            } else {
                reading::INVALID_RECORD
            };
            block.problems.push(Problem {
                line,
                code,
                message: format!("{}; skipped", e.inner()),
                field: Some(e.path().to_string()),
            });
        }
    }
}

/// Adds a scrape read by serde (families in name order, as the map
/// holds them; the gauges the checks do not read dropped).
fn push_raw(block: &mut Block, s: RawScrape, line: u64, interest: &Interest) {
    let Some(endpoint) = block.endpoint(&s.endpoint_url) else {
        // Past the endpoints' cap: the block stops at this line.
        return;
    };
    let first_group = block.groups.len() as u32;
    for (name, samples) in s.metrics {
        let Some(fam) = block.family(&name, interest) else {
            if block.names_full() {
                // Past the families' cap: the block stops at this line.
                return;
            }
            continue;
        };
        let start = block.rows.len() as u32;
        for x in samples {
            if block.names_full() {
                // Past the cap: the block stops at this line.
                return;
            }
            let labels = block.add_labels(x.labels, None);
            let (bounds, counts) = match x.buckets {
                None => (NONE, (0, 0)),
                Some(b) => {
                    let les: Vec<&str> = b.keys().map(String::as_str).collect();
                    let id = block.bounds_id(fam, &les).unwrap_or(NONE);
                    let from = block.counts.len() as u32;
                    block.counts.extend(b.values());
                    (id, (from, block.counts.len() as u32))
                }
            };
            block.rows.push(LineRow {
                labels,
                value: x.value,
                count: x.count,
                sum: x.sum,
                bounds,
                counts,
                series: NONE,
            });
        }
        block.groups.push((fam, start, block.rows.len() as u32));
    }
    block.scrapes.push(LineScrape {
        line,
        endpoint,
        timestamp_ns: s.timestamp_ns,
        request_sent_ns: s.request_sent_ns,
        groups: (first_group, block.groups.len() as u32),
        layout: 0,
        phase: ScrapePhase::of(s.benchmark_phase.as_deref()),
    });
    block.name_series();
    block.layout_last();
}
