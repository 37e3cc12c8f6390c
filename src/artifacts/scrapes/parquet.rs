//! `server_metrics_export.parquet` (AIPerf's parquet raw scrapes, behind
//! the `parquet` feature), read into the raw-scrape lines the JSONL reader
//! takes, so every check reads them through one reader.
//!
//! What the file holds (AIPerf 0.13.0, `ServerMetricsParquetExporter`): one
//! row per sample (a histogram: per bucket) of every scrape **inside the
//! profiling window**, columns `endpoint_url`, `metric_name`, `metric_type`,
//! `timestamp_ns`, one column per label, `value`, `sum`, `count`,
//! `bucket_le`, `bucket_count`. Counters and histograms are **deltas from
//! AIPerf's profiling baseline** (the scrape at the window's start), clamped
//! at 0. So each endpoint's series get a synthetic first scrape at the
//! profiling window's start (`reference_ns`) holding every cumulative series
//! at 0: the increments from it are what the deltas say, and no series
//! looks born mid-run. What came before profiling is not in the file: the
//! warmup side of a boundary cannot be repaired from it.

use std::collections::BTreeMap;
use std::path::Path;

use polars::prelude::*;
use serde_json::{json, Map, Value};

/// The file's name.
pub const FILE: &str = "server_metrics_export.parquet";

const FIXED: &[&str] = &[
    "endpoint_url",
    "metric_name",
    "metric_type",
    "unit",
    "description",
    "timestamp_ns",
    "value",
    "sum",
    "count",
    "bucket_le",
    "bucket_count",
];

#[derive(Default)]
struct Sample {
    kind: String,
    value: Option<f64>,
    sum: Option<f64>,
    count: Option<f64>,
    buckets: Vec<(String, f64)>,
}

type Scrape = BTreeMap<String, BTreeMap<String, (Map<String, Value>, Sample)>>;

fn strings<'a>(df: &'a DataFrame, name: &str) -> Result<&'a StringChunked, String> {
    df.column(name)
        .and_then(|c| c.str())
        .map_err(|e| format!("{FILE}: column {name}: {e}"))
}

fn floats(df: &DataFrame, name: &str) -> Result<Float64Chunked, String> {
    df.column(name)
        .and_then(|c| c.cast(&DataType::Float64))
        .and_then(|c| c.f64().cloned())
        .map_err(|e| format!("{FILE}: column {name}: {e}"))
}

/// The file's scrapes as raw-scrape JSON lines (endpoint, then time
/// order), each endpoint's led by the synthetic baseline at
/// `reference_ns`.
pub fn to_lines(path: &Path, reference_ns: Option<u64>) -> Result<Vec<u8>, String> {
    let file = std::fs::File::open(path).map_err(|e| format!("{FILE}: {e}"))?;
    let df = ParquetReader::new(file)
        .finish()
        .map_err(|e| format!("{FILE}: {e}"))?;
    let (ep, name, kind, le) = (
        strings(&df, "endpoint_url")?,
        strings(&df, "metric_name")?,
        strings(&df, "metric_type")?,
        strings(&df, "bucket_le")?,
    );
    let ts = df
        .column("timestamp_ns")
        .and_then(|c| c.cast(&DataType::Int64))
        .map_err(|e| format!("{FILE}: column timestamp_ns: {e}"))?;
    let ts = ts
        .i64()
        .map_err(|e| format!("{FILE}: column timestamp_ns: {e}"))?;
    let (value, sum, count, bucket) = (
        floats(&df, "value")?,
        floats(&df, "sum")?,
        floats(&df, "count")?,
        floats(&df, "bucket_count")?,
    );
    let label_cols: Vec<(String, &StringChunked)> = df
        .get_column_names()
        .into_iter()
        .filter(|c| !FIXED.contains(&c.as_str()))
        .filter_map(|c| Some((c.to_string(), df.column(c).ok()?.str().ok()?)))
        .collect();
    let mut scrapes: BTreeMap<(String, i64), Scrape> = BTreeMap::new();
    for i in 0..df.height() {
        let (Some(e), Some(n), Some(t)) = (ep.get(i), name.get(i), ts.get(i)) else {
            return Err(format!(
                "{FILE}: row {i}: endpoint_url, metric_name or timestamp_ns is null"
            ));
        };
        let mut labels = Map::new();
        for (col, ca) in &label_cols {
            if let Some(v) = ca.get(i) {
                labels.insert(col.clone(), Value::String(v.to_string()));
            }
        }
        let key = Value::Object(labels.clone()).to_string();
        let series = scrapes
            .entry((e.to_string(), t))
            .or_default()
            .entry(n.to_string())
            .or_default()
            .entry(key)
            .or_insert_with(|| (labels, Sample::default()));
        let s = &mut series.1;
        s.kind = kind.get(i).unwrap_or("").to_string();
        s.value = value.get(i).or(s.value);
        s.sum = sum.get(i).or(s.sum);
        s.count = count.get(i).or(s.count);
        if let (Some(l), Some(c)) = (le.get(i), bucket.get(i)) {
            s.buckets.push((l.to_string(), c));
        }
    }
    let mut out = Vec::new();
    let mut seen_endpoint: Option<String> = None;
    for ((endpoint, t), families) in &scrapes {
        if seen_endpoint.as_deref() != Some(endpoint) {
            seen_endpoint = Some(endpoint.clone());
            if let Some(r) = reference_ns.filter(|r| (*r as i64) < *t) {
                line(&mut out, endpoint, r as i64, families, true);
            }
        }
        line(&mut out, endpoint, *t, families, false);
    }
    Ok(out)
}

/// One scrape as a JSON line; `zero`: every cumulative series at 0 (the
/// baseline), gauges left out.
fn line(out: &mut Vec<u8>, endpoint: &str, t: i64, families: &Scrape, zero: bool) {
    let mut metrics = Map::new();
    for (family, series) in families {
        let samples: Vec<Value> = series
            .values()
            .filter(|(_, s)| !(zero && s.kind == "gauge"))
            .map(|(labels, s)| {
                let z = |v: Option<f64>| if zero { v.map(|_| 0.0) } else { v };
                let mut o = Map::new();
                if !labels.is_empty() {
                    o.insert("labels".into(), Value::Object(labels.clone()));
                }
                if s.buckets.is_empty() {
                    o.insert("value".into(), json!(z(s.value)));
                } else {
                    let b: Map<String, Value> = s
                        .buckets
                        .iter()
                        .map(|(le, c)| (le.clone(), json!(if zero { 0.0 } else { *c })))
                        .collect();
                    o.insert("buckets".into(), Value::Object(b));
                    o.insert("sum".into(), json!(z(s.sum)));
                    o.insert("count".into(), json!(z(s.count)));
                }
                Value::Object(o)
            })
            .collect();
        if !samples.is_empty() {
            metrics.insert(family.clone(), Value::Array(samples));
        }
    }
    let l = json!({"endpoint_url": endpoint, "timestamp_ns": t, "metrics": metrics});
    out.extend_from_slice(l.to_string().as_bytes());
    out.push(b'\n');
}
