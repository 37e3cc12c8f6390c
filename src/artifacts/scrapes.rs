//! `server_metrics_export.jsonl`: AIPerf's raw scrapes, one line per scrape
//! whose body changed, with cumulative (not delta) values. Present only when
//! the run asked for `--server-metrics-formats ... jsonl`. With it, counter and
//! histogram increments can be placed in time and attributed to requests,
//! which is what lets the phase check repair a contaminated split.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read};

use serde::Deserialize;

use crate::findings::{reading, Finding};

/// File name.
pub const FILE: &str = "server_metrics_export.jsonl";

/// One sample of a family in one scrape.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
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
pub struct Scrape {
    /// Endpoint URL.
    pub endpoint_url: String,
    /// Scrape time (ns).
    pub timestamp_ns: u64,
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
}

/// Reads the raw-scrape JSON lines. Bad lines become findings.
pub fn read_from(input: impl Read) -> std::io::Result<ScrapesRead> {
    let mut out = ScrapesRead::default();
    let mut reader = BufReader::new(input);
    let mut buf = Vec::new();
    let mut line = 0u64;
    loop {
        buf.clear();
        let n = reader.read_until(b'\n', &mut buf)?;
        if n == 0 {
            break;
        }
        line += 1;
        let text = buf.trim_ascii();
        if text.is_empty() {
            continue;
        }
        let mut de = serde_json::Deserializer::from_slice(text);
        match serde_path_to_error::deserialize::<_, Scrape>(&mut de) {
            Ok(mut s) => {
                s.line = line;
                out.scrapes.push(s);
            }
            Err(e) => {
                let truncated = e.inner().is_eof() && !buf.ends_with(b"\n");
                let code = if truncated {
                    reading::TRUNCATED_RECORD
                } else {
                    reading::INVALID_RECORD
                };
                let path = e.path().to_string();
                let mut f = Finding::new(code, format!("line {line}: {}; skipped", e.inner()))
                    .file(FILE)
                    .line(line);
                if path != "." {
                    f = f.field(path);
                }
                out.findings.push(f);
            }
        }
    }
    Ok(out)
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
