//! The serde path: one line of `profile_export.jsonl` read by serde into a
//! [`Record`], the reference the record scanner (`fast.rs`) must agree with,
//! and the finding for a line that is not a record, naming its field.

use std::borrow::Cow;

use serde::Deserialize;

use super::{fast, Id, RawMetrics, Record, RecordError, FILE};
use crate::artifacts::records::Phase;
use crate::artifacts::ParseError;
use crate::findings::{reading, Finding};

#[derive(Deserialize)]
pub(super) struct RawValue {
    // `value` is a number or null (AIPerf writes non-finite numbers as
    // null); an array is read as `NOT_A_NUMBER`, refused by every domain.
    #[serde(deserialize_with = "number_or_skip")]
    pub(super) value: Option<f64>,
}

fn number_or_skip<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<f64>, D::Error> {
    struct V;
    impl<'de> serde::de::Visitor<'de> for V {
        type Value = Option<f64>;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("a number, null or an array of numbers")
        }
        fn visit_f64<E>(self, v: f64) -> Result<Self::Value, E> {
            Ok(v.is_finite().then_some(v))
        }
        fn visit_i64<E>(self, v: i64) -> Result<Self::Value, E> {
            Ok(Some(v as f64))
        }
        fn visit_u64<E>(self, v: u64) -> Result<Self::Value, E> {
            Ok(Some(v as f64))
        }
        fn visit_unit<E>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_none<E>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_seq<A: serde::de::SeqAccess<'de>>(
            self,
            mut seq: A,
        ) -> Result<Self::Value, A::Error> {
            // Every metric kept is one number: an array there is refused
            // by its domain (per-chunk arrays, inter_chunk_latency, are
            // not kept and never read here).
            while seq.next_element::<serde::de::IgnoredAny>()?.is_some() {}
            Ok(Some(super::NOT_A_NUMBER))
        }
    }
    d.deserialize_any(V)
}

#[derive(Deserialize)]
struct RawMeta<'a> {
    #[serde(default)]
    session_num: Option<u64>,
    request_start_ns: u64,
    request_end_ns: u64,
    #[serde(default)]
    request_ack_ns: Option<u64>,
    #[serde(borrow)]
    benchmark_phase: Cow<'a, str>,
    #[serde(default)]
    phase_index: Option<u32>,
    #[serde(default, borrow)]
    conversation_id: Option<Cow<'a, str>>,
    #[serde(default)]
    turn_index: Option<u32>,
    #[serde(default, borrow)]
    x_request_id: Option<Cow<'a, str>>,
    #[serde(default)]
    was_cancelled: bool,
}

#[derive(Deserialize)]
struct RawError<'a> {
    #[serde(default)]
    code: Option<i64>,
    #[serde(default, rename = "type", borrow)]
    kind: Option<Cow<'a, str>>,
}

#[derive(Deserialize)]
pub(super) struct RawRecord<'a> {
    #[serde(borrow)]
    metadata: RawMeta<'a>,
    #[serde(default)]
    metrics: Option<RawMetrics>,
    #[serde(default, borrow)]
    error: Option<RawError<'a>>,
}

// A `Record` is a few hundred bytes; boxing it would cost an allocation per
// line on the hot path for a transient vector, so the size difference stays.
#[allow(clippy::large_enum_variant)]
pub(super) enum LineOutcome {
    Record(Record),
    Blank,
    /// Not a record: [`bad_line_finding`] says why, once the line's number
    /// in the file is known.
    Bad,
}

/// A line as text (its block passed one UTF-8 check, so serde need not check
/// each string again) or as bytes (its block did not; serde names the bad line).
pub(super) enum LineText<'a> {
    Text(&'a str),
    Bytes(&'a [u8]),
}

pub(super) fn parse_line(text: LineText, line: u64, shapes: &mut fast::Shapes) -> LineOutcome {
    let (parsed, bytes) = match text {
        LineText::Text(t) => {
            let t = t.trim_ascii();
            if t.is_empty() {
                return LineOutcome::Blank;
            }
            if let Some(r) = fast::parse(t, line, shapes) {
                return LineOutcome::Record(r);
            }
            (serde_json::from_str::<RawRecord>(t), t.as_bytes())
        }
        LineText::Bytes(b) => {
            let b = b.trim_ascii();
            (serde_json::from_slice::<RawRecord>(b), b)
        }
    };
    if bytes.is_empty() {
        return LineOutcome::Blank;
    }
    match parsed.map(|raw| convert(raw, line)) {
        Ok(Ok(r)) => LineOutcome::Record(r),
        _ => LineOutcome::Bad,
    }
}

/// The finding for a line [`parse_line`] found bad (trimmed bytes), as line
/// `line` of the file. Serde reads it again: bad lines are rare, and reading
/// them again spares every block a count of its lines before it is parsed.
/// For valid UTF-8, reading bytes fails exactly as reading the text did.
pub(super) fn bad_line_finding(bytes: &[u8], line: u64, last_unterminated: bool) -> Finding {
    match serde_json::from_slice::<RawRecord>(bytes).map(|raw| convert(raw, line)) {
        Ok(Err(ParseError { field, message })) => {
            let f = Finding::new(reading::INVALID_RECORD, format!("line {line}: {message}"))
                .file(FILE)
                .line(line);
            match field {
                Some(field) => f.field(field),
                None => f,
            }
        }
        Err(e) => describe_error(bytes, line, e, last_unterminated),
        // Not reached: the same bytes read the same way.
        Ok(Ok(_)) => Finding::new(
            reading::INVALID_RECORD,
            format!("line {line} could not be read as a record"),
        )
        .file(FILE)
        .line(line),
    }
}

pub(super) fn convert(raw: RawRecord, line: u64) -> Result<Record, ParseError> {
    let phase = match raw.metadata.benchmark_phase.as_ref() {
        "warmup" => Phase::Warmup,
        "profiling" => Phase::Profiling,
        other => {
            return Err(ParseError {
                field: Some("metadata.benchmark_phase".into()),
                message: format!(
                    "unknown benchmark_phase {other:?} (expected warmup or profiling)"
                ),
            })
        }
    };
    Ok(Record {
        line,
        phase,
        phase_index: raw.metadata.phase_index,
        session_num: raw.metadata.session_num,
        turn_index: raw.metadata.turn_index,
        x_request_id: raw.metadata.x_request_id.as_deref().map(Id::new),
        conversation_id: raw.metadata.conversation_id.as_deref().map(Id::new),
        request_start_ns: raw.metadata.request_start_ns,
        request_end_ns: raw.metadata.request_end_ns,
        request_ack_ns: raw
            .metadata
            .request_ack_ns
            .and_then(std::num::NonZeroU64::new),
        was_cancelled: raw.metadata.was_cancelled,
        error: raw.error.map(|e| {
            Box::new(RecordError {
                code: e.code,
                kind: e.kind.map(Cow::into_owned),
            })
        }),
        values: raw.metrics.map(RawMetrics::into_values).unwrap_or_default(),
    })
}

/// Slow path: re-parse the bad line to learn which field broke it.
fn describe_error(
    bytes: &[u8],
    line: u64,
    err: serde_json::Error,
    last_unterminated: bool,
) -> Finding {
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let path = match serde_path_to_error::deserialize::<_, RawRecord>(&mut de) {
        Err(e) => e.path().to_string(),
        Ok(_) => String::from("."),
    };
    let path = if path == "." || path.is_empty() {
        None
    } else {
        Some(path)
    };
    if err.is_eof() && last_unterminated {
        return Finding::new(
            reading::TRUNCATED_RECORD,
            format!(
                "line {line} is cut off after {} bytes (the run was probably killed while \
                 writing); the record is skipped",
                bytes.len()
            ),
        )
        .file(FILE)
        .line(line);
    }
    let what = match &path {
        Some(p) => format!("line {line}, field {p}: {err}"),
        None => format!("line {line}: {err}"),
    };
    let mut f = Finding::new(
        reading::INVALID_RECORD,
        format!("{what}; the record is skipped"),
    )
    .file(FILE)
    .line(line);
    if let Some(p) = path {
        f = f.field(p);
    }
    f
}
