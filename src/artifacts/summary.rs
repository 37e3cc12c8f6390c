//! `profile_export_aiperf.json`: AIPerf's summary of a run, and the
//! `input_config` (the run configuration) that several artifacts embed.
//!
//! The summary has one top-level key per metric tag, so the known keys are
//! named fields and the rest are collected and converted to [`MetricEntry`]
//! where they have its shape. The file is small, but an audit of many small
//! runs reads one per run: its statistics are read straight into a fixed
//! set of slots, with no map per entry.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::Value;

use super::ParseError;

/// File name.
pub const FILE: &str = "profile_export_aiperf.json";

/// Summary schema versions this reader was built for.
///
/// 1.0 (AIPerf 0.7), 1.1 (0.8) and 1.3 (0.9-0.11) were read from real
/// folders of those versions (`fixtures/aiperf-versions/`) and hold the
/// fields read here where those versions write them (`docs/aiperf-versions.md`).
pub const KNOWN_SCHEMAS: &[&str] = &["1.0", "1.1", "1.3", "1.4"];

/// One phase of `input_config.phases`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[allow(missing_docs)]
pub struct PhaseConfig {
    pub name: Option<String>,
    /// `warmup` or `profiling`; select phases by this, never by position.
    pub kind: Option<String>,
    #[serde(rename = "type")]
    pub load_type: Option<String>,
    pub requests: Option<u64>,
    pub duration: Option<f64>,
    pub concurrency: Option<u64>,
    pub rate: Option<f64>,
    pub sessions: Option<u64>,
    pub seamless: Option<bool>,
    /// AIPerf 0.9-0.11: set (and forced) for the warmup phase.
    pub exclude_from_results: Option<bool>,
}

impl PhaseConfig {
    /// The phase's kind: `kind` (AIPerf 0.12 on); before it (0.9-0.11,
    /// where a phase's `name` must be `warmup` or `profiling`) its name, or
    /// `warmup` for a phase excluded from the results.
    pub fn kind(&self) -> Option<&str> {
        if let Some(k) = self.kind.as_deref() {
            return Some(k);
        }
        match self.name.as_deref() {
            Some(n @ ("warmup" | "profiling")) => Some(n),
            _ => self
                .exclude_from_results
                .map(|x| if x { "warmup" } else { "profiling" }),
        }
    }
}

/// `input_config.endpoint`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[allow(missing_docs)]
pub struct EndpointConfig {
    #[serde(default)]
    pub urls: Vec<String>,
    #[serde(rename = "type")]
    pub kind: Option<String>,
    pub streaming: Option<bool>,
}

/// Legacy (pre-v2) `input_config.loadgen`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[allow(missing_docs)]
pub struct LegacyLoadgen {
    pub request_count: Option<u64>,
    pub warmup_request_count: Option<u64>,
    pub concurrency: Option<u64>,
}

/// The run configuration (only explicitly set fields are present).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[allow(missing_docs)]
pub struct InputConfig {
    #[serde(default, deserialize_with = "super::objects")]
    pub phases: Vec<PhaseConfig>,
    #[serde(default, deserialize_with = "super::object_opt")]
    pub endpoint: Option<EndpointConfig>,
    #[serde(default, deserialize_with = "super::object_opt")]
    pub loadgen: Option<LegacyLoadgen>,
}

impl InputConfig {
    /// Phases of a kind, in configuration order, with their index.
    pub fn phases_of_kind<'a>(
        &'a self,
        kind: &'a str,
    ) -> impl Iterator<Item = (usize, &'a PhaseConfig)> + 'a {
        self.phases
            .iter()
            .enumerate()
            .filter(move |(_, p)| p.kind() == Some(kind))
    }

    /// Configured request count of a phase kind, summed over its phases; falls
    /// back to the legacy `loadgen` fields. `None` when any phase of the kind
    /// is bounded by something else (duration, sessions).
    pub fn configured_requests(&self, kind: &str) -> Option<u64> {
        let phases: Vec<_> = self.phases_of_kind(kind).collect();
        if phases.is_empty() {
            let l = self.loadgen.as_ref()?;
            return match kind {
                "warmup" => l.warmup_request_count,
                "profiling" => l.request_count,
                _ => None,
            };
        }
        phases.iter().map(|(_, p)| p.requests).sum()
    }
}

/// A metric entry in the summary (record metrics have all fields; scalars
/// only `unit` and `avg`).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[allow(missing_docs)]
pub struct MetricEntry {
    pub unit: Option<String>,
    pub avg: Option<f64>,
    pub min: Option<f64>,
    pub max: Option<f64>,
    pub std: Option<f64>,
    pub p50: Option<f64>,
    pub p90: Option<f64>,
    pub p99: Option<f64>,
    pub count: Option<f64>,
    pub sum: Option<f64>,
}

/// The JSON type of `v`, for a message.
fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

impl MetricEntry {
    /// The quoted statistic named as AIPerf names it (`avg`, `p50`, `p90`,
    /// `p99`; anything else is `None`).
    pub fn quoted(&self, stat: &str) -> Option<f64> {
        match stat {
            "avg" => self.avg,
            "p50" => self.p50,
            "p90" => self.p90,
            "p99" => self.p99,
            _ => None,
        }
    }

    /// The entry at `path` read statistic by statistic: one of the wrong
    /// type is left out and becomes a problem, the others are kept.
    fn read(path: &str, v: &Shallow<Stats>, problems: &mut Vec<ParseError>) -> Option<MetricEntry> {
        match v {
            Shallow::Object(stats) => Some(Self::of_stats(path, stats, problems)),
            Shallow::Other(v) => {
                problems.push(ParseError {
                    field: Some(path.to_string()),
                    message: format!("expected a metric object, found {}", kind(v)),
                });
                None
            }
        }
    }

    /// [`MetricEntry::read`] of an object's statistics.
    fn of_stats(path: &str, map: &Stats, problems: &mut Vec<ParseError>) -> MetricEntry {
        let mut num = |name: &str| -> Option<f64> {
            match map.get(name)? {
                Value::Null => None,
                Value::Number(n) => n.as_f64(),
                other => {
                    problems.push(ParseError {
                        field: Some(format!("{path}.{name}")),
                        message: format!("expected a number, found {}", kind(other)),
                    });
                    None
                }
            }
        };
        let entry = MetricEntry {
            unit: None,
            avg: num("avg"),
            min: num("min"),
            max: num("max"),
            std: num("std"),
            p50: num("p50"),
            p90: num("p90"),
            p99: num("p99"),
            count: num("count"),
            sum: num("sum"),
        };
        let unit = match map.get("unit") {
            Some(Value::String(u)) => Some(u.clone()),
            None | Some(Value::Null) => None,
            Some(other) => {
                problems.push(ParseError {
                    field: Some(format!("{path}.unit")),
                    message: format!("expected a string, found {}", kind(other)),
                });
                None
            }
        };
        MetricEntry { unit, ..entry }
    }
}

/// One entry of `error_summary`: failed requests of one kind.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[allow(missing_docs)]
pub struct ErrorEntry {
    #[serde(default)]
    pub error_details: ErrorDetails,
    pub count: Option<f64>,
}

/// `error_summary[].error_details`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[allow(missing_docs)]
pub struct ErrorDetails {
    /// An HTTP status, usually; any JSON value is kept as text.
    pub code: Option<serde_json::Value>,
    #[serde(rename = "type")]
    pub kind: Option<String>,
    pub message: Option<String>,
}

/// `run_info`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[allow(missing_docs)]
pub struct RunInfo {
    pub benchmark_id: Option<String>,
    pub cli_command: Option<String>,
}

/// The summary as read: the known keys typed, and of every other key only
/// what a metric entry is made of ([`Shallow`]), so an unknown key holding
/// 200 MB costs no DOM.
#[derive(Default)]
struct RawSummary {
    schema_version: Option<String>,
    aiperf_version: Option<String>,
    benchmark_id: Option<String>,
    input_config: Option<InputConfig>,
    run_info: Option<RunInfo>,
    was_cancelled: Option<bool>,
    is_complete: Option<bool>,
    incomplete_reason: Option<String>,
    error_summary: Option<Vec<ErrorEntry>>,
    rest: BTreeMap<String, Member>,
}

impl<'de> Deserialize<'de> for RawSummary {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = RawSummary;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("the summary object")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<RawSummary, A::Error> {
                let mut r = RawSummary::default();
                while let Some(key) = map.next_key::<String>()? {
                    match key.as_str() {
                        "schema_version" => r.schema_version = map.next_value()?,
                        "aiperf_version" => r.aiperf_version = map.next_value()?,
                        "benchmark_id" => r.benchmark_id = map.next_value()?,
                        "input_config" => {
                            r.input_config =
                                map.next_value::<Option<super::Object<_>>>()?.map(|o| o.0)
                        }
                        "run_info" => {
                            r.run_info = map.next_value::<Option<super::Object<_>>>()?.map(|o| o.0)
                        }
                        "was_cancelled" => r.was_cancelled = map.next_value()?,
                        "is_complete" => r.is_complete = map.next_value()?,
                        "incomplete_reason" => r.incomplete_reason = map.next_value()?,
                        "error_summary" => {
                            r.error_summary = map
                                .next_value::<Option<Vec<super::Object<_>>>>()?
                                .map(|v| v.into_iter().map(|o| o.0).collect())
                        }
                        "warmup_metrics" => {
                            r.rest.insert(key, Member::Warmup(map.next_value()?));
                        }
                        _ => {
                            r.rest.insert(key, Member::Entry(map.next_value()?));
                        }
                    }
                }
                Ok(r)
            }
        }
        d.deserialize_map(V)
    }
}

/// A member read shallowly: an object through `O` ([`FromObject`]), or,
/// for anything else, a stand-in of its type (a scalar as itself, an array
/// as `[]`, the content skipped).
enum Shallow<O> {
    Object(O),
    Other(Value),
}

/// What an object read by [`Shallow`] becomes.
trait FromObject<'de>: Sized {
    fn from_object<A: serde::de::MapAccess<'de>>(map: A) -> Result<Self, A::Error>;
}

impl<'de, O: FromObject<'de>> Deserialize<'de> for Shallow<O> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<O>(std::marker::PhantomData<O>);
        impl<'de, O: FromObject<'de>> serde::de::Visitor<'de> for V<O> {
            type Value = Shallow<O>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_bool<E>(self, v: bool) -> Result<Shallow<O>, E> {
                Ok(Shallow::Other(Value::Bool(v)))
            }
            fn visit_i64<E>(self, v: i64) -> Result<Shallow<O>, E> {
                Ok(Shallow::Other(Value::from(v)))
            }
            fn visit_u64<E>(self, v: u64) -> Result<Shallow<O>, E> {
                Ok(Shallow::Other(Value::from(v)))
            }
            fn visit_f64<E>(self, v: f64) -> Result<Shallow<O>, E> {
                Ok(Shallow::Other(Value::from(v)))
            }
            fn visit_str<E>(self, v: &str) -> Result<Shallow<O>, E> {
                Ok(Shallow::Other(Value::String(v.to_string())))
            }
            fn visit_unit<E>(self) -> Result<Shallow<O>, E> {
                Ok(Shallow::Other(Value::Null))
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> Result<Shallow<O>, A::Error> {
                while seq.next_element::<serde::de::IgnoredAny>()?.is_some() {}
                Ok(Shallow::Other(Value::Array(Vec::new())))
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                map: A,
            ) -> Result<Shallow<O>, A::Error> {
                O::from_object(map).map(Shallow::Object)
            }
        }
        d.deserialize_any(V::<O>(std::marker::PhantomData))
    }
}

/// A statistic: a scalar as itself; an array or object skipped, as an
/// empty one.
struct Scalar(Value);

/// An object inside a statistic: its members read (as any value, skipped)
/// and dropped.
struct Skipped;

impl<'de> FromObject<'de> for Skipped {
    fn from_object<A: serde::de::MapAccess<'de>>(mut map: A) -> Result<Self, A::Error> {
        while map.next_key::<Key>()?.is_some() {
            map.next_value::<serde::de::IgnoredAny>()?;
        }
        Ok(Skipped)
    }
}

impl<'de> Deserialize<'de> for Scalar {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Ok(Scalar(match Shallow::<Skipped>::deserialize(d)? {
            Shallow::Object(Skipped) => Value::Object(serde_json::Map::new()),
            Shallow::Other(v) => v,
        }))
    }
}

/// The members of a metric entry read ([`MetricEntry::read`]); AIPerf
/// writes a dozen more statistics per entry, read as [`Scalar`]s and
/// dropped, never kept in a map.
const ENTRY_KEYS: [&str; 10] = [
    "unit", "avg", "min", "max", "std", "p50", "p90", "p99", "count", "sum",
];

/// A metric entry's members of [`ENTRY_KEYS`], in that order, as read (the
/// last of a key written twice, as in a map); boxed, as entries are moved
/// about whole.
struct Stats(Box<[Option<Value>; ENTRY_KEYS.len()]>);

impl Stats {
    /// Member `name`; one not in [`ENTRY_KEYS`] was never kept (a
    /// statistic added to [`MetricEntry::read`] goes there too: debug
    /// builds, and so the tests, stop here if it did not).
    fn get(&self, name: &str) -> Option<&Value> {
        let i = ENTRY_KEYS.iter().position(|k| *k == name);
        debug_assert!(i.is_some(), "{name} is not in ENTRY_KEYS");
        self.0[i?].as_ref()
    }
}

impl<'de> FromObject<'de> for Stats {
    fn from_object<A: serde::de::MapAccess<'de>>(mut map: A) -> Result<Self, A::Error> {
        let mut stats = Stats(Box::default());
        while let Some(Key(k)) = map.next_key::<Key>()? {
            let v: Scalar = map.next_value()?;
            if let Some(i) = ENTRY_KEYS.iter().position(|x| *x == k) {
                stats.0[i] = Some(v.0);
            }
        }
        Ok(stats)
    }
}

/// `warmup_metrics`: its entries by tag.
struct Entries(BTreeMap<String, Shallow<Stats>>);

impl<'de> FromObject<'de> for Entries {
    fn from_object<A: serde::de::MapAccess<'de>>(mut map: A) -> Result<Self, A::Error> {
        let mut out = BTreeMap::new();
        while let Some(k) = map.next_key::<String>()? {
            out.insert(k, map.next_value()?);
        }
        Ok(Entries(out))
    }
}

/// A member of the summary that is not one of its known keys.
enum Member {
    Entry(Shallow<Stats>),
    Warmup(Shallow<Entries>),
}

/// A member's key, borrowed from the document where it can be (no escape):
/// a key not kept is never allocated. Read as a `String` key is. Also the
/// reader of the export's bucket bounds (`server_metrics::Buckets`).
pub(super) struct Key<'de>(pub(super) std::borrow::Cow<'de, str>);

impl<'de> Deserialize<'de> for Key<'de> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = Key<'de>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Key<'de>, E> {
                Ok(Key(std::borrow::Cow::Borrowed(v)))
            }
            fn visit_str<E>(self, v: &str) -> Result<Key<'de>, E> {
                Ok(Key(std::borrow::Cow::Owned(v.to_string())))
            }
            fn visit_string<E>(self, v: String) -> Result<Key<'de>, E> {
                Ok(Key(std::borrow::Cow::Owned(v)))
            }
        }
        d.deserialize_str(V)
    }
}

/// The parsed summary.
#[derive(Debug, Clone, Default, PartialEq)]
#[allow(missing_docs)]
pub struct Summary {
    pub schema_version: Option<String>,
    pub aiperf_version: Option<String>,
    pub benchmark_id: Option<String>,
    pub input_config: Option<InputConfig>,
    pub run_info: Option<RunInfo>,
    pub was_cancelled: Option<bool>,
    pub is_complete: Option<bool>,
    pub incomplete_reason: Option<String>,
    /// When profiling started and ended: naive local times
    /// (`datetime.fromtimestamp`), no zone ([`super::legacy`]).
    pub start_time: Option<String>,
    pub end_time: Option<String>,
    /// Failed requests by kind (`error_summary`); `None` when absent.
    pub error_summary: Option<Vec<ErrorEntry>>,
    /// Profiling metrics by tag.
    pub metrics: BTreeMap<String, MetricEntry>,
    /// Warmup metrics by tag.
    pub warmup_metrics: BTreeMap<String, MetricEntry>,
    /// Metric entries (or statistics of them) of the wrong type: each is
    /// left out, never read as absent without saying so.
    pub problems: Vec<ParseError>,
}

impl Summary {
    /// Parses the summary from JSON text, with the failing field's path on error.
    pub fn parse(bytes: &[u8]) -> Result<Summary, ParseError> {
        let raw: RawSummary = super::typed(bytes)?;
        let mut metrics = BTreeMap::new();
        let mut warmup_metrics = BTreeMap::new();
        let mut problems = Vec::new();
        let time = |k: &str| match raw.rest.get(k) {
            Some(Member::Entry(Shallow::Other(Value::String(t)))) => Some(t.clone()),
            _ => None,
        };
        let (start_time, end_time) = (time("start_time"), time("end_time"));
        for (key, value) in raw.rest {
            match value {
                Member::Warmup(Shallow::Object(Entries(map))) => {
                    for (k, v) in map {
                        let path = format!("warmup_metrics.{k}");
                        if let Some(m) = MetricEntry::read(&path, &v, &mut problems) {
                            warmup_metrics.insert(k, m);
                        }
                    }
                }
                Member::Warmup(Shallow::Other(Value::Null)) => {}
                Member::Warmup(Shallow::Other(other)) => problems.push(ParseError {
                    field: Some(key.clone()),
                    message: format!("expected an object, found {}", kind(&other)),
                }),
                Member::Entry(Shallow::Other(Value::Array(_))) => {
                    // Every member AIPerf writes but error_summary (read
                    // above) is an object or a scalar: an array is no
                    // metric with every statistic absent.
                    problems.push(ParseError {
                        field: Some(key.clone()),
                        message: "expected an object or a scalar, found an array".into(),
                    });
                }
                Member::Entry(Shallow::Object(stats)) if stats.get("unit").is_some() => {
                    let m = MetricEntry::of_stats(&key, &stats, &mut problems);
                    metrics.insert(key, m);
                }
                Member::Entry(_) => {}
            }
        }
        Ok(Summary {
            schema_version: raw.schema_version,
            aiperf_version: raw.aiperf_version,
            benchmark_id: raw.benchmark_id,
            input_config: raw.input_config,
            run_info: raw.run_info,
            was_cancelled: raw.was_cancelled,
            is_complete: raw.is_complete,
            incomplete_reason: raw.incomplete_reason,
            start_time,
            end_time,
            error_summary: raw.error_summary,
            metrics,
            warmup_metrics,
            problems,
        })
    }

    /// A scalar metric's value (`avg`).
    pub fn scalar(&self, tag: &str) -> Option<f64> {
        self.metrics.get(tag).and_then(|m| m.avg)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn selects_phases_by_kind_and_collects_metric_keys() {
        let json = br#"{"schema_version":"1.4","aiperf_version":"0.13.0",
          "request_count":{"unit":"requests","avg":5.0},
          "time_to_first_token":{"unit":"ms","avg":1.0,"p99":2.0,"count":5},
          "input_config":{"phases":[
            {"name":"p","kind":"profiling","requests":5},
            {"name":"w","kind":"warmup","requests":1}]},
          "warmup_metrics":{"request_count":{"unit":"requests","avg":1.0}},
          "error_summary":[]}"#;
        let s = Summary::parse(json).expect("parses");
        let ic = s.input_config.as_ref().expect("config");
        assert_eq!(ic.configured_requests("profiling"), Some(5));
        assert_eq!(ic.configured_requests("warmup"), Some(1));
        assert_eq!(s.scalar("request_count"), Some(5.0));
        assert_eq!(s.metrics["time_to_first_token"].p99, Some(2.0));
        assert_eq!(s.warmup_metrics["request_count"].avg, Some(1.0));
    }

    #[test]
    fn wrong_type_reports_the_path() {
        let json = br#"{"input_config":{"phases":[{"kind":"profiling","requests":"five"}]}}"#;
        let e = Summary::parse(json).expect_err("must fail");
        assert_eq!(e.field.as_deref(), Some("input_config.phases[0].requests"));
    }

    #[test]
    fn duration_bound_phase_has_no_configured_count() {
        let ic: InputConfig =
            serde_json::from_str(r#"{"phases":[{"kind":"profiling","duration":60.0}]}"#)
                .expect("parses");
        assert_eq!(ic.configured_requests("profiling"), None);
    }
}
