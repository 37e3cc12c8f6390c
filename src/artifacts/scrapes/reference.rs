//! The reference reading of one raw-scrape line: serde, with the path of
//! the field that failed. The scanner ([`super::scan`]) reads the usual
//! lines without it; every line it gives up on comes here, so a bad line's
//! finding (file, line, field) is serde's, and a line the scanner cannot
//! read is still read.

use std::collections::BTreeMap;

use serde::Deserialize;

use super::block::{Block, Interest, Problem};
use crate::findings::reading;

objects_only!(RawSample, RawScrape);

/// One sample of a family in one scrape, as written.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(remote = "Self")]
pub struct RawSample {
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
    /// The phase AIPerf tagged this scrape with (not used by the checks).
    #[serde(default)]
    #[allow(dead_code)]
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
        Ok(s) => block.push_raw(s, line, interest),
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
