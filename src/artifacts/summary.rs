//! `profile_export_aiperf.json`: AIPerf's summary of a run, and the
//! `input_config` (the run configuration) that several artifacts embed.
//!
//! The summary has one top-level key per metric tag, so the known keys are
//! named fields and the rest are collected and converted to [`MetricEntry`]
//! where they have its shape. The file is small; this is not a hot path.

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
    fn read(path: &str, v: &Value, problems: &mut Vec<ParseError>) -> Option<MetricEntry> {
        let Value::Object(map) = v else {
            problems.push(ParseError {
                field: Some(path.to_string()),
                message: format!("expected a metric object, found {}", kind(v)),
            });
            return None;
        };
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
        Some(MetricEntry { unit, ..entry })
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
    rest: BTreeMap<String, Value>,
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
                            let v: Shallow<Shallow<Scalar>> = map.next_value()?;
                            r.rest.insert(key, v.0);
                        }
                        _ => {
                            let v: Shallow<Scalar> = map.next_value()?;
                            r.rest.insert(key, v.0);
                        }
                    }
                }
                Ok(r)
            }
        }
        d.deserialize_map(V)
    }
}

/// A value read shallowly: an object with each member read as `T`, or,
/// for anything else, a stand-in of its type (a scalar as itself, an array
/// as `[]`), the content skipped.
struct Shallow<T>(Value, std::marker::PhantomData<T>);

/// A scalar as itself; an array or object skipped, as an empty one.
struct Scalar(Value);

/// What [`Shallow`] and [`Scalar`] read.
fn shallow_visitor<'de, D, T>(d: D) -> Result<Value, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de> + Into<Value>,
{
    struct V<T>(std::marker::PhantomData<T>);
    impl<'de, T: Deserialize<'de> + Into<Value>> serde::de::Visitor<'de> for V<T> {
        type Value = Value;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("any JSON value")
        }
        fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
            Ok(Value::Bool(v))
        }
        fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
            Ok(Value::from(v))
        }
        fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
            Ok(Value::from(v))
        }
        fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
            Ok(Value::from(v))
        }
        fn visit_str<E>(self, v: &str) -> Result<Value, E> {
            Ok(Value::String(v.to_string()))
        }
        fn visit_unit<E>(self) -> Result<Value, E> {
            Ok(Value::Null)
        }
        fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
            while seq.next_element::<serde::de::IgnoredAny>()?.is_some() {}
            Ok(Value::Array(Vec::new()))
        }
        fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
            let mut out = serde_json::Map::new();
            while let Some(k) = map.next_key::<String>()? {
                let v: T = map.next_value()?;
                out.insert(k, v.into());
            }
            Ok(Value::Object(out))
        }
    }
    d.deserialize_any(V::<T>(std::marker::PhantomData))
}

impl From<Scalar> for Value {
    fn from(s: Scalar) -> Value {
        s.0
    }
}

impl<T> From<Shallow<T>> for Value {
    fn from(s: Shallow<T>) -> Value {
        s.0
    }
}

impl<'de> Deserialize<'de> for Scalar {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        // An object here is skipped: a metric's statistics are scalars.
        shallow_visitor::<D, Skipped>(d).map(|v| match v {
            Value::Object(_) => Scalar(Value::Object(serde_json::Map::new())),
            v => Scalar(v),
        })
    }
}

impl<'de, T: Deserialize<'de> + Into<Value>> Deserialize<'de> for Shallow<T> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        shallow_visitor::<D, T>(d).map(|v| Shallow(v, std::marker::PhantomData))
    }
}

/// A member skipped whatever it is.
struct Skipped;

impl<'de> Deserialize<'de> for Skipped {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        serde::de::IgnoredAny::deserialize(d).map(|_| Skipped)
    }
}

impl From<Skipped> for Value {
    fn from(_: Skipped) -> Value {
        Value::Null
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
            Some(Value::String(t)) => Some(t.clone()),
            _ => None,
        };
        let (start_time, end_time) = (time("start_time"), time("end_time"));
        for (key, value) in raw.rest {
            if key == "warmup_metrics" {
                match value {
                    Value::Object(map) => {
                        for (k, v) in map {
                            let path = format!("warmup_metrics.{k}");
                            if let Some(m) = MetricEntry::read(&path, &v, &mut problems) {
                                warmup_metrics.insert(k, m);
                            }
                        }
                    }
                    Value::Null => {}
                    other => problems.push(ParseError {
                        field: Some(key.clone()),
                        message: format!("expected an object, found {}", kind(&other)),
                    }),
                }
            } else if value.is_array() {
                // Every member AIPerf writes but error_summary (read
                // above) is an object or a scalar: an array is no metric
                // with every statistic absent.
                problems.push(ParseError {
                    field: Some(key.clone()),
                    message: "expected an object or a scalar, found an array".into(),
                });
            } else if value.get("unit").is_some() {
                if let Some(m) = MetricEntry::read(&key, &value, &mut problems) {
                    metrics.insert(key, m);
                }
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
