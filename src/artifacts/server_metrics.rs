//! `server_metrics_export.json`: AIPerf's phase-scoped server metrics.
//!
//! AIPerf scrapes the server's Prometheus endpoint(s) and exports, per metric
//! family, one series per (endpoint, label set) with its delta over the
//! profiling phase (`metrics`) and over warmup (`warmup_metrics`). Schemas
//! 1.0 and 1.1 share the fields read here. Counter names arrive without their
//! `_total` suffix; [`lookup`] accepts both spellings.

use std::collections::BTreeMap;

use serde::Deserialize;

use super::summary::{InputConfig, Key};

/// File name.
pub const FILE: &str = "server_metrics_export.json";

objects_only!(
    Stats,
    Timeslice,
    Series,
    Family,
    Window,
    EndpointInfo,
    Summary,
    ServerMetricsExport,
);

/// Schema versions this reader was built for.
pub const KNOWN_SCHEMAS: &[&str] = &["1.0", "1.1"];

/// Prometheus family type as AIPerf exports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum MetricType {
    /// Monotonic counter; `stats.total` is the phase delta.
    Counter,
    /// Sampled gauge; stats over scrapes.
    Gauge,
    /// Histogram; `stats.count`/`sum` are phase deltas.
    Histogram,
    /// Untyped; exported with gauge statistics.
    #[default]
    Unknown,
    /// A type AIPerf never writes (`"summary"`, `"bogus"`): the family is
    /// refused with an `impossible-value` finding and not read.
    #[serde(other)]
    Invalid,
}

/// Stats of any type: the fields the checks read, all optional (the others
/// AIPerf writes are skipped).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[allow(missing_docs)]
#[serde(remote = "Self")]
pub struct Stats {
    pub count: Option<f64>,
    pub sum: Option<f64>,
    pub avg: Option<f64>,
    pub total: Option<f64>,
    pub min: Option<f64>,
    pub max: Option<f64>,
}

/// One timeslice of a series (only with `--slice-duration`).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[allow(missing_docs)]
#[serde(remote = "Self")]
pub struct Timeslice {
    pub start_ns: Option<u64>,
    pub end_ns: Option<u64>,
    pub total: Option<f64>,
}

/// One (endpoint, label set) series.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(remote = "Self")]
pub struct Series {
    /// Full scrape URL.
    #[serde(default)]
    pub endpoint_url: Option<String>,
    /// Labels (absent = none).
    #[serde(default)]
    pub labels: super::Labels,
    /// Phase statistics.
    #[serde(default)]
    pub stats: Stats,
    /// Histogram: `le` → cumulative count delta. Absent after a reset.
    #[serde(default)]
    pub buckets: Option<Buckets>,
    /// Timeslices, if exported: the first kept, the rest counted.
    #[serde(default)]
    pub timeslices: Option<Timeslices>,
}

/// A series' exported buckets, `le` → cumulative count delta, as a map
/// keyed by the `le` strings holds them: in the order of those strings, a
/// repeated `le` with its last value. Each bound is parsed as it is read
/// (`None` where it does not parse); its string is not kept. Read with the
/// keys borrowed from the document where they have no escape: a map of
/// `String`s was a third of this file's parse.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Buckets(Vec<(Option<f64>, f64)>);

impl Buckets {
    /// `(le, count)` in the order of the `le` strings; `le` is `None` where
    /// it does not parse.
    pub fn as_slice(&self) -> &[(Option<f64>, f64)] {
        &self.0
    }
}

impl<'de> Deserialize<'de> for Buckets {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Map;
        impl<'de> serde::de::Visitor<'de> for Map {
            type Value = Buckets;
            // What serde's map visitor says, so a wrong type reads the same.
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a map")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<Buckets, A::Error> {
                let mut read: Vec<(Key<'de>, f64)> = Vec::new();
                while let Some(k) = map.next_key::<Key>()? {
                    read.push((k, map.next_value()?));
                }
                // Stable: a repeated `le` stays in document order, the last kept.
                read.sort_by(|a, b| a.0 .0.cmp(&b.0 .0));
                let mut out: Vec<(Option<f64>, f64)> = Vec::with_capacity(read.len());
                for (i, (k, c)) in read.iter().enumerate() {
                    match out.last_mut() {
                        Some(last) if i > 0 && read[i - 1].0 .0 == k.0 => last.1 = *c,
                        _ => out.push((crate::stats::le_value(&k.0), *c)),
                    }
                }
                Ok(Buckets(out))
            }
        }
        d.deserialize_map(Map)
    }
}

/// A series' timeslices as read: the first (the checks ask where the
/// slices start) and how many there are. A long run sliced finely has
/// thousands per series; they are skipped, not built.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Timeslices {
    /// The first slice.
    pub first: Option<Timeslice>,
    /// Slices in the array.
    pub len: usize,
}

impl Timeslices {
    /// The first slice.
    pub fn first(&self) -> Option<&Timeslice> {
        self.first.as_ref()
    }
}

impl<'de> Deserialize<'de> for Timeslices {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Seq;
        impl<'de> serde::de::Visitor<'de> for Seq {
            type Value = Timeslices;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("an array of timeslices")
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> Result<Timeslices, A::Error> {
                let first: Option<Timeslice> = seq.next_element()?;
                let mut len = usize::from(first.is_some());
                while seq.next_element::<serde::de::IgnoredAny>()?.is_some() {
                    len += 1;
                }
                Ok(Timeslices { first, len })
            }
        }
        d.deserialize_seq(Seq)
    }
}

impl Series {
    /// Observations in the phase: a histogram's `count` delta or a counter's
    /// `total`. `None` for gauges and untyped families, and when absent.
    pub fn observations(&self, kind: MetricType) -> Option<f64> {
        match kind {
            MetricType::Histogram => self.stats.count,
            MetricType::Counter => self.stats.total,
            _ => None,
        }
    }

    /// The amount a cumulative family grew by in the phase: a counter's
    /// `total`, a histogram's `sum`; for an untyped family (exported with
    /// gauge statistics over the phase's scrapes) `max - min`, which misses
    /// the growth before the first scrape of the phase: a lower bound.
    pub fn amount(&self, kind: MetricType) -> Option<f64> {
        match kind {
            MetricType::Counter => self.stats.total,
            MetricType::Histogram => self.stats.sum.or(self.stats.count.map(|_| 0.0)),
            MetricType::Unknown => Some(self.stats.max? - self.stats.min?),
            MetricType::Gauge | MetricType::Invalid => None,
        }
    }
}

/// One metric family.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(remote = "Self")]
pub struct Family {
    /// Type.
    #[serde(rename = "type", default)]
    pub kind: MetricType,
    /// Unit AIPerf inferred.
    #[serde(default)]
    pub unit: Option<String>,
    /// Series.
    #[serde(default)]
    pub series: Vec<Series>,
}

/// `metrics` or `warmup_metrics`: family name → family.
pub type Families = BTreeMap<String, Family>;

/// Finds a family by name, accepting the exposition name with `_total` too.
pub fn lookup<'a>(families: &'a Families, name: &str) -> Option<(&'a str, &'a Family)> {
    let bare = crate::frameworks::canonical(name);
    if let Some((k, f)) = families.get_key_value(bare) {
        return Some((k.as_str(), f));
    }
    families
        .get_key_value(&format!("{bare}_total"))
        .map(|(k, f)| (k.as_str(), f))
}

/// A phase window in `summary.phase_time_ranges`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(remote = "Self")]
pub struct Window {
    /// Start (ns).
    pub start_ns: u64,
    /// End (ns).
    pub end_ns: u64,
}

/// Per-endpoint scrape statistics.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[allow(missing_docs)]
#[serde(remote = "Self")]
pub struct EndpointInfo {
    pub total_fetches: Option<u64>,
    pub unique_updates: Option<u64>,
    pub first_update_ns: Option<u64>,
    pub last_update_ns: Option<u64>,
}

/// `summary`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[allow(missing_docs)]
#[serde(remote = "Self")]
pub struct Summary {
    #[serde(default)]
    pub endpoints_configured: Vec<String>,
    #[serde(default)]
    pub endpoints_successful: Vec<String>,
    #[serde(default)]
    pub endpoint_info: BTreeMap<String, EndpointInfo>,
    #[serde(default)]
    pub phase_time_ranges: BTreeMap<String, Window>,
    /// Before AIPerf 0.12 the profiling window's only record: naive local
    /// times ([`super::legacy`]).
    #[serde(default)]
    pub start_time: Option<String>,
    #[serde(default)]
    pub end_time: Option<String>,
}

/// The whole file.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[allow(missing_docs)]
#[serde(remote = "Self")]
pub struct ServerMetricsExport {
    pub schema_version: Option<String>,
    pub aiperf_version: Option<String>,
    pub benchmark_id: Option<String>,
    #[serde(default)]
    pub summary: Summary,
    #[serde(default)]
    pub metrics: Families,
    #[serde(default)]
    pub warmup_metrics: Option<Families>,
    #[serde(default)]
    pub input_config: Option<InputConfig>,
}

impl ServerMetricsExport {
    /// The families of a phase: `metrics` for profiling, `warmup_metrics` for warmup.
    pub fn phase(&self, warmup: bool) -> Option<&Families> {
        if warmup {
            self.warmup_metrics.as_ref()
        } else {
            Some(&self.metrics)
        }
    }

    /// Whether a counter or histogram family of this name (with or without
    /// `_total`) is in either phase's section.
    pub fn has_cumulative(&self, name: &str) -> bool {
        [Some(&self.metrics), self.warmup_metrics.as_ref()]
            .into_iter()
            .flatten()
            .filter_map(|f| lookup(f, name))
            .any(|(_, f)| matches!(f.kind, MetricType::Counter | MetricType::Histogram))
    }

    /// The canonical names of the families either phase types as counters
    /// or histograms: what only grows.
    pub fn cumulative_families(&self) -> std::collections::BTreeSet<String> {
        [Some(&self.metrics), self.warmup_metrics.as_ref()]
            .into_iter()
            .flatten()
            .flat_map(|fams| fams.iter())
            .filter(|(_, f)| matches!(f.kind, MetricType::Counter | MetricType::Histogram))
            .map(|(name, _)| crate::frameworks::canonical(name).to_string())
            .collect()
    }

    /// What the raw-scrape reader keeps: every family but those typed as
    /// gauges in every phase that has them (the process start time, which
    /// tells a restart, is kept whatever its type).
    pub fn scrape_interest(&self) -> crate::artifacts::scrapes::Interest {
        let cumulative = self.cumulative_families();
        let dropped = [Some(&self.metrics), self.warmup_metrics.as_ref()]
            .into_iter()
            .flatten()
            .flat_map(|fams| fams.iter())
            .filter(|(_, f)| f.kind == MetricType::Gauge)
            .map(|(name, _)| crate::frameworks::canonical(name).to_string())
            .filter(|name| !cumulative.contains(name))
            .filter(|name| name != crate::frameworks::PROCESS_START)
            .collect();
        crate::artifacts::scrapes::Interest { dropped }
    }

    /// A window from `summary.phase_time_ranges`.
    pub fn window(&self, phase: &str) -> Option<Window> {
        self.summary.phase_time_ranges.get(phase).copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_every_type_and_looks_counters_up_with_or_without_total() {
        let json = r#"{"schema_version":"1.1","metrics":{
            "vllm:prefix_cache_hits":{"type":"counter","series":[{"endpoint_url":"u","stats":{"total":5.0,"rate":1.0}}]},
            "vllm:ttft":{"type":"histogram","series":[{"endpoint_url":"u","labels":{"engine":"0"},"stats":{"count":3,"sum":0.3},"buckets":{"0.1":3,"+Inf":3}}]},
            "g":{"type":"gauge","series":[{"stats":{"avg":null,"max":2}}]},
            "odd":{"type":"summary","series":[]}},
            "summary":{"phase_time_ranges":{"profiling":{"start_ns":1,"end_ns":2}}}}"#;
        let e: ServerMetricsExport = serde_json::from_str(json).expect("parses");
        let (name, fam) = lookup(&e.metrics, "vllm:prefix_cache_hits_total").expect("found");
        assert_eq!(name, "vllm:prefix_cache_hits");
        assert_eq!(fam.series[0].stats.total, Some(5.0));
        assert_eq!(e.metrics["odd"].kind, MetricType::Invalid);
        assert_eq!(e.metrics["g"].series[0].stats.avg, None);
        assert_eq!(
            e.window("profiling"),
            Some(Window {
                start_ns: 1,
                end_ns: 2
            })
        );
        assert!(e.phase(true).is_none());
    }

    /// The buckets read as a map keyed by the `le` strings reads them: the
    /// same pairs in the same order (a repeated `le` with its last value, an
    /// escaped key, a bound that does not parse), and a bad map fails with
    /// the same message, through a reader as from a slice.
    #[test]
    fn buckets_read_as_a_map_of_strings_reads_them() {
        let cases = [
            r#"{"0.1":3,"+Inf":5,"1":4}"#,
            r#"{"1":1,"0.5":2,"1":7,"+Inf":9,"1":8}"#,
            r#"{"\u0031":2,"1":3,"x":4,"+Inf":5}"#,
            r#"{}"#,
            r#"{"1":"2"}"#,
            r#"{"1":null}"#,
            r#"{"1":2,}"#,
            r#"[1,2]"#,
            r#""buckets""#,
        ];
        for json in cases {
            let reads = [
                (
                    serde_json::from_str::<Buckets>(json),
                    serde_json::from_str::<BTreeMap<String, f64>>(json),
                ),
                (
                    serde_json::from_reader::<_, Buckets>(json.as_bytes()),
                    serde_json::from_reader::<_, BTreeMap<String, f64>>(json.as_bytes()),
                ),
            ];
            for (read, map) in reads {
                let expected = map.as_ref().map(|m| {
                    m.iter()
                        .map(|(le, c)| (crate::stats::le_value(le), *c))
                        .collect::<Vec<_>>()
                });
                match (&read, &expected) {
                    (Ok(b), Ok(e)) => assert_eq!(b.as_slice(), &e[..], "{json}"),
                    (Err(a), Err(b)) => assert_eq!(a.to_string(), b.to_string(), "{json}"),
                    _ => panic!("{json}: {read:?} against {expected:?}"),
                }
            }
        }
    }
}
