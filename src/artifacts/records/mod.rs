//! `profile_export.jsonl`: one record per request, streamed.
//!
//! The file can be gigabytes. It is read in blocks of about 1 MiB cut at
//! line ends, each read and parsed by one rayon worker (see [`read_from`])
//! into compact [`Record`]s. Order is kept: records come back in file order
//! with their 1-based line numbers. Only the fields the checks use are
//! decoded: the record scanner (`fast.rs`), and serde where the scanner gives
//! up, skip the rest of each line (`inter_chunk_latency` arrays, trace data)
//! without building anything.
//!
//! A bad line never stops the read. It becomes a finding naming the line and,
//! where serde can tell, the field (found by re-parsing that one line with
//! `serde_path_to_error`, so the fast path pays nothing for it).
//!
//! Here: the record types. `reader.rs` cuts the input into blocks and merges
//! the workers' results in file order; `fast.rs` (the scanner) and
//! `serde_path.rs` (the reference) read one line each.

use std::io::{self, Read};
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::findings::Finding;
pub use reader::{read_file, read_sized};
use serde_path::RawValue;

mod fast;
mod reader;
mod serde_path;
#[cfg(any(test, feature = "fuzzing"))]
#[doc(hidden)]
pub use fast::{assert_agrees, assert_agrees_lines};

/// The file name AIPerf gives the per-request export.
pub const FILE: &str = "profile_export.jsonl";

/// Lines longer than this are skipped with a finding instead of buffered.
pub const MAX_LINE_BYTES: usize = 64 << 20;

const BLOCK_BYTES: usize = 1 << 20;

closed_set! {
    /// Which phase a record belongs to (`metadata.benchmark_phase`).
    pub enum Phase {
        /// Warmup requests (excluded from AIPerf's published metrics).
        Warmup => "warmup",
        /// Profiling requests (the published ones).
        Profiling => "profiling",
    }
}

macro_rules! record_metrics {
    ($( $variant:ident => $tag:ident, )*) => {
        /// The per-request metrics the checks use, by AIPerf tag.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum Metric { $( #[allow(missing_docs)] $variant, )* }

        impl Metric {
            /// Every metric, in column order.
            pub const ALL: &'static [Metric] = &[ $( Metric::$variant, )* ];

            /// The tag as written in `profile_export.jsonl`.
            pub fn tag(self) -> &'static str {
                match self { $( Metric::$variant => stringify!($tag), )* }
            }

            /// Looks a metric up by its tag.
            pub fn from_tag(tag: &str) -> Option<Metric> {
                match tag { $( stringify!($tag) => Some(Metric::$variant), )* _ => None }
            }
        }

        /// Serialized as its tag.
        impl Serialize for Metric {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(self.tag())
            }
        }

        #[derive(Default)]
        struct RawMetrics {
            $( $tag: Option<RawValue>, )*
        }

        // By hand, not derived: a derived struct also accepts an array (its
        // sequence form), and `"metrics": []` would read as no metrics.
        // AIPerf writes an object: anything else is not a record.
        impl<'de> Deserialize<'de> for RawMetrics {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                struct V;
                impl<'de> serde::de::Visitor<'de> for V {
                    type Value = RawMetrics;
                    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                        f.write_str("an object of metrics")
                    }
                    fn visit_map<A: serde::de::MapAccess<'de>>(
                        self,
                        mut map: A,
                    ) -> Result<RawMetrics, A::Error> {
                        let mut out = RawMetrics::default();
                        while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
                            match &*key {
                                $( stringify!($tag) => {
                                    if out.$tag.is_some() {
                                        return Err(serde::de::Error::duplicate_field(stringify!($tag)));
                                    }
                                    out.$tag = map.next_value()?;
                                } )*
                                _ => {
                                    map.next_value::<serde::de::IgnoredAny>()?;
                                }
                            }
                        }
                        Ok(out)
                    }
                }
                d.deserialize_map(V)
            }
        }

        impl RawMetrics {
            fn into_values(self) -> Values {
                let mut v = Values::default();
                $( v.set(Metric::$variant, self.$tag.and_then(|m| m.value)); )*
                v
            }
        }
    };
}

record_metrics! {
    TimeToFirstToken => time_to_first_token,
    RequestLatency => request_latency,
    InterTokenLatency => inter_token_latency,
    OutputTokenThroughputPerUser => output_token_throughput_per_user,
    PrefillThroughputPerUser => prefill_throughput_per_user,
    E2eOutputTokenThroughput => e2e_output_token_throughput,
    InputSequenceLength => input_sequence_length,
    OutputSequenceLength => output_sequence_length,
    UsagePromptTokens => usage_prompt_tokens,
    UsageCompletionTokens => usage_completion_tokens,
    UsagePromptCacheReadTokens => usage_prompt_cache_read_tokens,
    HttpReqDnsLookup => http_req_dns_lookup,
    HttpReqConnecting => http_req_connecting,
    HttpReqConnectionReused => http_req_connection_reused,
    HttpReqConnectionOverhead => http_req_connection_overhead,
    ErrorIsl => error_isl,
}

const N_METRICS: usize = Metric::ALL.len();

/// The largest value any per-request metric of a real run can have: more
/// milliseconds than 31 years, more tokens than any prompt, more tokens per
/// second than any server. A value beyond it (1e308, 2^64) is corrupt input.
pub const MAX_PLAUSIBLE: f64 = 1e12;

/// What values a metric can take as AIPerf writes it: the one table of
/// field domains of `profile_export.jsonl`, next to its reader, walked by
/// a test for every metric.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Domain {
    /// A duration (ms) or a rate (per s): finite, >= 0, <= [`MAX_PLAUSIBLE`].
    NonNegative,
    /// A token count: a whole number, >= 0, <= [`MAX_PLAUSIBLE`].
    Count,
    /// 0 or 1.
    Flag,
}

impl Metric {
    /// This metric's [`Domain`].
    pub fn domain(self) -> Domain {
        use Metric::*;
        match self {
            TimeToFirstToken
            | RequestLatency
            | InterTokenLatency
            | OutputTokenThroughputPerUser
            | PrefillThroughputPerUser
            | E2eOutputTokenThroughput
            | HttpReqDnsLookup
            | HttpReqConnecting
            | HttpReqConnectionOverhead => Domain::NonNegative,
            InputSequenceLength
            | OutputSequenceLength
            | UsagePromptTokens
            | UsageCompletionTokens
            | UsagePromptCacheReadTokens
            | ErrorIsl => Domain::Count,
            HttpReqConnectionReused => Domain::Flag,
        }
    }
}

impl Domain {
    /// Why `v` is outside this domain, if it is.
    pub fn refuses(self, v: f64) -> Option<&'static str> {
        if v == NOT_A_NUMBER {
            return Some("an array where AIPerf writes one number");
        }
        if v < 0.0 {
            return Some("negative: no duration, count or rate is");
        }
        if v > MAX_PLAUSIBLE {
            return Some("beyond any run (more than 1e12)");
        }
        match self {
            Domain::NonNegative => None,
            Domain::Count => (v.fract() != 0.0).then_some("not a whole number of tokens"),
            Domain::Flag => (v != 0.0 && v != 1.0).then_some("neither 0 nor 1"),
        }
    }
}

/// The value of a kept metric written as an array (AIPerf writes one
/// number, or null): both readers read it as this, and every domain
/// refuses it, so it is named and kept out like any impossible value.
pub const NOT_A_NUMBER: f64 = f64::MAX;

/// Metric values of one record; `None` = absent (not computable), never 0.
///
/// Stored as plain `f64`s with NaN for "absent" (half the size of
/// `Option<f64>`: this is the per-record column store of gigabyte runs).
/// Non-finite values never enter: AIPerf writes them as null, read as absent.
#[derive(Debug, Clone, Copy)]
pub struct Values([f64; N_METRICS]);

impl PartialEq for Values {
    fn eq(&self, other: &Self) -> bool {
        Metric::ALL.iter().all(|m| self.get(*m) == other.get(*m))
    }
}

impl Default for Values {
    fn default() -> Self {
        Values([f64::NAN; N_METRICS])
    }
}

impl Values {
    /// The value of `m`, if the record has it.
    pub fn get(&self, m: Metric) -> Option<f64> {
        let v = self.0[m as usize];
        (!v.is_nan()).then_some(v)
    }

    /// Sets a value; `None` or a non-finite value means absent.
    pub fn set(&mut self, m: Metric, v: Option<f64>) {
        self.0[m as usize] = v.filter(|x| x.is_finite()).unwrap_or(f64::NAN);
    }
}

/// A request or conversation id, kept without a heap allocation when it can
/// be: a canonical UUID (lowercase, hyphenated, what AIPerf writes) in 16
/// bytes, a short id (up to 22 bytes) inline, anything longer as text. It
/// displays as exactly the text it was read from.
#[derive(Clone, PartialEq, Eq)]
pub enum Id {
    /// A lowercase hyphenated UUID.
    Uuid([u8; 16]),
    /// Text of up to 22 bytes.
    Short {
        /// Bytes used.
        len: u8,
        /// UTF-8 text, zero-padded.
        bytes: [u8; 22],
    },
    /// Anything else.
    Text(Box<str>),
}

impl Id {
    /// The id of `text`.
    pub fn new(text: &str) -> Id {
        if let Some(u) = parse_uuid(text.as_bytes()) {
            return Id::Uuid(u);
        }
        if text.len() <= 22 {
            let mut bytes = [0u8; 22];
            bytes[..text.len()].copy_from_slice(text.as_bytes());
            return Id::Short {
                len: text.len() as u8,
                bytes,
            };
        }
        Id::Text(text.into())
    }
}

/// Hashes a UUID as one `u128` write (duplicate-id detection hashes every
/// record's id); equal ids hash equally, as `Eq` requires.
impl std::hash::Hash for Id {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        match self {
            Id::Uuid(u) => state.write_u128(u128::from_le_bytes(*u)),
            Id::Short { len, bytes } => state.write(&bytes[..usize::from(*len)]),
            Id::Text(t) => state.write(t.as_bytes()),
        }
    }
}

fn parse_uuid(b: &[u8]) -> Option<[u8; 16]> {
    // Where each byte's two hex digits start in `8-4-4-4-12`.
    const AT: [usize; 16] = [0, 2, 4, 6, 9, 11, 14, 16, 19, 21, 24, 26, 28, 30, 32, 34];
    if b.len() != 36 || b[8] != b'-' || b[13] != b'-' || b[18] != b'-' || b[23] != b'-' {
        return None;
    }
    let hex = |c: u8| match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        _ => None,
    };
    let mut out = [0u8; 16];
    for (o, &i) in out.iter_mut().zip(&AT) {
        *o = (hex(b[i])? << 4) | hex(b[i + 1])?;
    }
    Some(out)
}

impl std::fmt::Display for Id {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Id::Uuid(u) => {
                // Into one buffer, then one write: formatting 16 bytes one by
                // one is slow when a report lists a hundred thousand ids.
                const HEX: &[u8; 16] = b"0123456789abcdef";
                let mut text = [b'-'; 36];
                let mut at = 0;
                for (i, byte) in u.iter().enumerate() {
                    if matches!(i, 4 | 6 | 8 | 10) {
                        at += 1;
                    }
                    text[at] = HEX[usize::from(byte >> 4)];
                    text[at + 1] = HEX[usize::from(byte & 0xf)];
                    at += 2;
                }
                f.write_str(std::str::from_utf8(&text).unwrap_or_default())
            }
            Id::Short { len, bytes } => {
                f.write_str(std::str::from_utf8(&bytes[..*len as usize]).unwrap_or_default())
            }
            Id::Text(t) => f.write_str(t),
        }
    }
}

impl std::fmt::Debug for Id {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}", self.to_string())
    }
}

/// The error of a failed request, as much as the checks need.
#[derive(Debug, Clone, PartialEq)]
pub struct RecordError {
    /// Usually the HTTP status.
    pub code: Option<i64>,
    /// E.g. `RequestCancellationError`.
    pub kind: Option<String>,
}

/// One request, compacted.
#[derive(Debug, Clone, PartialEq)]
pub struct Record {
    /// 1-based line in the file.
    pub line: u64,
    /// Phase kind.
    pub phase: Phase,
    /// Position of the phase in `input_config.phases`.
    pub phase_index: Option<u32>,
    /// Credit number within the phase.
    pub session_num: Option<u64>,
    /// Turn within the conversation (0 = first).
    pub turn_index: Option<u32>,
    /// The X-Request-ID AIPerf sent.
    pub x_request_id: Option<Id>,
    /// Conversation (session) id.
    pub conversation_id: Option<Id>,
    /// Wall clock when sent (ns).
    pub request_start_ns: u64,
    /// Wall clock of the last response or the error (ns).
    pub request_end_ns: u64,
    /// Streaming: when the first response bytes arrived (ns).
    pub request_ack_ns: Option<std::num::NonZeroU64>,
    /// Cancelled by AIPerf.
    pub was_cancelled: bool,
    /// Present for failed requests (boxed: rare, and records are many).
    pub error: Option<Box<RecordError>>,
    /// Per-request metrics.
    pub values: Values,
}

impl Record {
    /// A successful profiling record with the given values and nothing else
    /// (for tests of one function).
    pub fn with_values(values: Values) -> Record {
        Record {
            line: 1,
            phase: Phase::Profiling,
            phase_index: None,
            session_num: None,
            turn_index: None,
            x_request_id: None,
            conversation_id: None,
            request_start_ns: 0,
            request_end_ns: 1,
            request_ack_ns: None,
            was_cancelled: false,
            error: None,
            values,
        }
    }

    /// Succeeded: no error and not cancelled.
    pub fn is_success(&self) -> bool {
        self.error.is_none() && !self.was_cancelled
    }

    /// The request id, or `line N` when the record has none.
    pub fn id_or_line(&self) -> String {
        self.request_ref().to_string()
    }

    /// [`Record::id_or_line`] without formatting it yet.
    pub fn request_ref(&self) -> RequestRef {
        match &self.x_request_id {
            Some(id) => RequestRef::Id(id.clone()),
            None => RequestRef::Line(self.line),
        }
    }

    /// Time of first token, from the record's own timestamps and TTFT.
    pub fn first_token_ns(&self) -> Option<u64> {
        let ttft = self.values.get(Metric::TimeToFirstToken)?;
        if !(0.0..1e12).contains(&ttft) {
            return None;
        }
        Some(self.request_start_ns.saturating_add((ttft * 1e6) as u64))
    }
}

/// A request named in a report: its `x_request_id`, or `line N` when it has
/// none. Serializes as that text; kept compact until then, since a report
/// can name every cold request of a million-record run.
#[derive(Debug, Clone, PartialEq)]
pub enum RequestRef {
    /// The record's `x_request_id`.
    Id(Id),
    /// The record's line, for a record without an id.
    Line(u64),
}

impl std::fmt::Display for RequestRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RequestRef::Id(id) => id.fmt(f),
            RequestRef::Line(n) => write!(f, "line {n}"),
        }
    }
}

impl Serialize for RequestRef {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// What reading the file produced.
#[derive(Debug, Default)]
pub struct RecordsRead {
    /// Records in file order.
    pub records: Vec<Record>,
    /// Problems with individual lines.
    pub findings: Vec<Finding>,
    /// Lines in the file (including bad and blank ones).
    pub lines: u64,
    /// Bytes read.
    pub bytes: u64,
    /// Records read through a line shape the lines before taught, not by
    /// the record scanner or serde (for `examples/load_times.rs`: how much of
    /// a file the fast path covers).
    pub through_shapes: u64,
    /// Values refused as impossible ([`Metric::domain`]), counted by
    /// metric and phase (every one, listed as a finding or not): the
    /// statistics of a metric with refused values cannot be recomputed.
    pub refused: std::collections::BTreeMap<(Metric, Phase), u64>,
}

impl RecordsRead {
    /// Of `metrics`, those with values refused in profiling records, and
    /// how many: `(metric, records)`. Their statistics over the records
    /// are over the others only.
    pub fn refused_in_profiling(&self, metrics: &[Metric]) -> Vec<(Metric, u64)> {
        (metrics.iter())
            .map(|&m| {
                let n = self.refused.get(&(m, Phase::Profiling)).copied();
                (m, n.unwrap_or(0))
            })
            .filter(|&(_, n)| n > 0)
            .collect()
    }
}

/// Reads `path`, which must be a `profile_export.jsonl`, its blocks read by
/// position by every worker at once ([`read_file`]).
///
/// Errors only when the file cannot be opened or read; everything wrong with
/// its content comes back as findings.
pub fn read(path: &Path) -> io::Result<RecordsRead> {
    let file = crate::files::open_regular(path)?;
    let size = file.metadata().map(|m| m.len()).ok();
    read_file(&file, size)
}

/// Reads records from any reader (see [`read`]).
///
/// Every rayon worker, in turn under a lock, reads the next block of about
/// 1 MiB that ends at a line end (into a reused buffer), then parses it
/// outside the lock, then, under a second lock, appends the records of every
/// parsed block that is next in file order (a small reorder buffer holds
/// those that finished early). Nobody waits for a whole batch, and memory is
/// bounded by the blocks in flight (one per worker) plus the compact records,
/// not by the file.
pub fn read_from(input: &mut (dyn Read + Send)) -> io::Result<RecordsRead> {
    read_sized(input, None)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every metric's domain refuses what no producer writes (a negative
    /// value, 1e308, 2^64) and admits what real runs hold (0, 1).
    #[test]
    fn every_metric_has_a_domain_that_refuses_the_impossible() {
        for &m in Metric::ALL {
            let d = m.domain();
            for bad in [-1.0, -1e-9, 1e308, 2f64.powi(64), MAX_PLAUSIBLE * 2.0] {
                assert!(d.refuses(bad).is_some(), "{} admits {bad}", m.tag());
            }
            for good in [0.0, 1.0] {
                assert_eq!(d.refuses(good), None, "{} refuses {good}", m.tag());
            }
            let whole = matches!(d, Domain::Count | Domain::Flag);
            assert_eq!(d.refuses(5.5).is_some(), whole, "{} and 5.5", m.tag());
        }
        assert!(Domain::Flag.refuses(2.0).is_some());
    }
    use crate::findings::reading;

    const GOOD: &str = r#"{"metadata":{"session_num":0,"request_start_ns":100,"request_end_ns":300,"benchmark_phase":"profiling","x_request_id":"a","turn_index":0,"was_cancelled":false},"metrics":{"time_to_first_token":{"value":1.5,"unit":"ms"},"inter_chunk_latency":{"value":[1,2],"unit":"ms"},"http_req_connection_reused":{"value":0,"unit":"ratio"}}}"#;

    fn read_str(s: &str) -> RecordsRead {
        read_from(&mut s.as_bytes()).expect("in-memory read")
    }

    #[test]
    fn reads_typed_fields_and_ignores_arrays_and_unknown_fields() {
        let r = read_str(&format!("{GOOD}\n"));
        assert_eq!(r.records.len(), 1);
        let rec = &r.records[0];
        assert_eq!(rec.values.get(Metric::TimeToFirstToken), Some(1.5));
        assert_eq!(rec.values.get(Metric::HttpReqConnectionReused), Some(0.0));
        assert_eq!(rec.values.get(Metric::RequestLatency), None);
        assert_eq!(rec.first_token_ns(), Some(100 + 1_500_000));
        assert!(r.findings.is_empty());
    }

    #[test]
    fn ids_display_as_the_text_they_were_read_from() {
        for text in [
            "452f4d2b-f0e2-4bef-8578-5f9b333a4264",
            "452F4D2B-F0E2-4BEF-8578-5F9B333A4264",
            "452f4d2b-f0e2-4bef-8578-5f9b333a426",
            "452f4d2bxf0e2-4bef-8578-5f9b333a4264",
            "session_000000",
            "",
            "a-22-byte-id-exactly!!",
            "a-23-byte-id-exactly!!!",
            "ünïcödé-session-ïd",
            "gggggggg-f0e2-4bef-8578-5f9b333a4264",
        ] {
            assert_eq!(Id::new(text).to_string(), text);
        }
        assert!(matches!(
            Id::new("452f4d2b-f0e2-4bef-8578-5f9b333a4264"),
            Id::Uuid(_)
        ));
        assert!(matches!(Id::new("session_000000"), Id::Short { .. }));
        assert!(matches!(Id::new("a-23-byte-id-exactly!!!"), Id::Text(_)));
        // Equal text, equal id; different text, different id.
        assert_eq!(Id::new("session_1"), Id::new("session_1"));
        assert_ne!(Id::new("session_1"), Id::new("session_2"));
    }

    /// Hands out the input in pieces of pseudo-random size (1 byte to
    /// 300 KB), now and then failing with `Interrupted` first, as a pipe or a
    /// slow disk can.
    struct Choppy<'a> {
        data: &'a [u8],
        x: u64,
    }

    impl Read for Choppy<'_> {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            self.x ^= self.x << 13;
            self.x ^= self.x >> 7;
            self.x ^= self.x << 17;
            if self.x % 11 == 0 {
                return Err(io::Error::from(io::ErrorKind::Interrupted));
            }
            let n = [1, 7, 4096, 65_537, 300_000][(self.x % 5) as usize]
                .min(buf.len())
                .min(self.data.len());
            buf[..n].copy_from_slice(&self.data[..n]);
            self.data = &self.data[n..];
            Ok(n)
        }
    }

    /// Hands out `data`, then fails: a disk error in the middle of a file.
    struct FailsAfter<'a> {
        data: &'a [u8],
    }

    impl Read for FailsAfter<'_> {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            if self.data.is_empty() {
                return Err(io::Error::other("disk on fire"));
            }
            let n = buf.len().min(self.data.len()).min(100_000);
            buf[..n].copy_from_slice(&self.data[..n]);
            self.data = &self.data[n..];
            Ok(n)
        }
    }

    #[test]
    fn a_read_error_after_many_blocks_is_returned_on_both_paths() {
        // Several blocks' worth of good lines parse, then the read fails:
        // the workers stop, the error comes back, nothing hangs.
        let text = format!("{GOOD}\n").repeat(20_000);
        assert!(text.len() > 4 * BLOCK_BYTES);
        let err = read_from(&mut FailsAfter {
            data: text.as_bytes(),
        })
        .expect_err("fails");
        assert_eq!(err.to_string(), "disk on fire");
        // The sequential path (a run audited on a rayon worker).
        let err = rayon::scope(|_| {
            read_from(&mut FailsAfter {
                data: text.as_bytes(),
            })
        })
        .expect_err("fails");
        assert_eq!(err.to_string(), "disk on fire");
    }

    #[test]
    fn records_read_through_a_shape_are_counted() {
        // A sample run fits one block: its first warmup and first profiling
        // lines teach the two shapes, the others are read through them.
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/sample-artifacts/runs/cold-tls/profile_export.jsonl"
        );
        let read = read(Path::new(path)).expect("sample run");
        assert_eq!(read.through_shapes, read.records.len() as u64 - 2);
    }

    #[test]
    fn block_boundaries_and_read_sizes_change_nothing() {
        // ~5 MiB of lines of varied length across many blocks, a 3 MiB line
        // (longer than a block: it grows in place over several reads), a
        // blank line, a bad line, and a last line without its newline.
        let mut text = String::new();
        let mut lines = 0;
        for i in 0..6000 {
            let pad = "p".repeat(i % 700);
            text.push_str(&GOOD.replace(r#""a""#, &format!(r#""id-{i}","pad":"{pad}""#)));
            text.push('\n');
            lines += 1;
            if i == 2500 {
                let long = "q".repeat(3 << 20);
                text.push_str(&GOOD.replace(r#""a""#, &format!(r#""long","pad":"{long}""#)));
                text.push_str("\n\nnot json\n");
                lines += 3;
            }
            // Lines longer than the room the file reader keeps before a
            // read for the start of a line, shorter than a block.
            if i == 4000 || i == 4001 {
                let pad = "m".repeat([100 << 10, 900 << 10][i - 4000]);
                text.push_str(&GOOD.replace(r#""a""#, &format!(r#""mid","pad":"{pad}""#)));
                text.push('\n');
                lines += 1;
            }
        }
        text.push_str(GOOD);
        lines += 1;
        let plain = read_str(&text);
        assert_eq!(plain.lines, lines);
        assert_eq!(plain.records.len(), 6004);
        assert_eq!(plain.bytes, text.len() as u64);
        assert_eq!(plain.findings.len(), 1, "{:?}", plain.findings);
        assert_eq!(plain.findings[0].line, Some(2504));
        let summary = |r: &RecordsRead| {
            let ids: Vec<(u64, String)> =
                r.records.iter().map(|x| (x.line, x.id_or_line())).collect();
            let findings: Vec<(Option<u64>, String)> = r
                .findings
                .iter()
                .map(|f| (f.line, f.message.clone()))
                .collect();
            (ids, findings, r.lines, r.bytes)
        };
        let want = summary(&plain);
        for seed in [1u64, 2, 3] {
            let mut choppy = Choppy {
                data: text.as_bytes(),
                x: 0x9e37_79b9_7f4a_7c15 ^ seed,
            };
            let got = read_from(&mut choppy).expect("reads");
            assert!(summary(&got) == want, "parallel read, seed {seed}");
            // The sequential path (a run audited on a rayon worker).
            let mut choppy = Choppy {
                data: text.as_bytes(),
                x: 0x2545_f491_4f6c_dd1d ^ seed,
            };
            let got = rayon::scope(|_| read_from(&mut choppy)).expect("reads");
            assert!(summary(&got) == want, "sequential read, seed {seed}");
        }
        // A file: its blocks read by position at once, and cut in turn.
        let dir = tempfile::tempdir().expect("temporary directory");
        let path = dir.path().join(FILE);
        std::fs::write(&path, &text).expect("written");
        assert!(summary(&read(&path).expect("reads")) == want, "file");
        // On a rayon worker, where a run is read on the calling thread.
        let got = rayon::scope(|_| read(&path)).expect("reads");
        assert!(summary(&got) == want, "file, on a worker");
    }

    #[test]
    fn a_file_read_by_position_matches_the_same_bytes_read_in_turn() {
        // Files ending just before, at and after a block's end, with a
        // newline there or not, and empty: the file reader's reads
        // by position (a short one is the end) give what reading the bytes
        // in turn gives.
        let dir = tempfile::tempdir().expect("temporary directory");
        let path = dir.path().join(FILE);
        let line = format!("{GOOD}\n");
        for blocks in [0, 1, 2] {
            for extra in [-1i64, 0, 1] {
                for newline in [true, false] {
                    let size = (blocks * BLOCK_BYTES) as i64 + extra;
                    let Ok(size) = usize::try_from(size) else {
                        continue;
                    };
                    // Whole lines cut at the size (the last one cut off,
                    // mostly), ending with a newline or not.
                    let mut text = line.repeat(size / line.len() + 1);
                    text.truncate(size);
                    if newline && size > 0 {
                        text.pop();
                        text.push('\n');
                    }
                    std::fs::write(&path, &text).expect("written");
                    let want = read_str(&text);
                    for (how, got) in [
                        ("off the pool", read(&path).expect("reads")),
                        ("on a worker", rayon::scope(|_| read(&path)).expect("reads")),
                    ] {
                        let ctx = format!("{} bytes, {how}", text.len());
                        assert_eq!(got.records, want.records, "{ctx}");
                        assert_eq!((got.lines, got.bytes), (want.lines, want.bytes), "{ctx}");
                        let codes = |r: &RecordsRead| {
                            r.findings
                                .iter()
                                .map(|f| (f.code, f.line))
                                .collect::<Vec<_>>()
                        };
                        assert_eq!(codes(&got), codes(&want), "{ctx}");
                    }
                }
            }
        }
    }

    #[test]
    fn truncated_last_line_is_a_warning_with_its_line_number() {
        let r = read_str(&format!("{GOOD}\n{}", &GOOD[..40]));
        assert_eq!(r.records.len(), 1);
        assert_eq!(r.findings.len(), 1);
        assert_eq!(r.findings[0].code, reading::TRUNCATED_RECORD);
        assert_eq!(r.findings[0].line, Some(2));
    }

    #[test]
    fn wrong_type_names_the_field() {
        let bad = GOOD.replace("\"value\":1.5", "\"value\":\"fast\"");
        let r = read_str(&format!("{GOOD}\n{bad}\n{GOOD}\n"));
        assert_eq!(r.records.len(), 2);
        let f = &r.findings[0];
        assert_eq!(f.code, reading::INVALID_RECORD);
        assert_eq!(f.line, Some(2));
        assert_eq!(
            f.field.as_deref(),
            Some("metrics.time_to_first_token.value")
        );
    }

    #[test]
    fn not_json_in_the_middle_is_an_error_not_a_truncation() {
        let r = read_str(&format!("{GOOD}\n{{oops\n{GOOD}\n"));
        assert_eq!(r.records.len(), 2);
        assert_eq!(r.findings[0].code, reading::INVALID_RECORD);
        assert_eq!(r.findings[0].line, Some(2));
        assert_eq!(r.records[1].line, 3);
    }

    #[test]
    fn null_values_are_absent_not_zero() {
        let s = GOOD.replace("\"value\":1.5", "\"value\":null");
        let r = read_str(&s);
        assert_eq!(r.records[0].values.get(Metric::TimeToFirstToken), None);
    }

    #[test]
    fn line_numbers_survive_block_boundaries() {
        let n = 3 * BLOCK_BYTES / GOOD.len() + 10;
        let mut s = String::new();
        for _ in 0..n {
            s.push_str(GOOD);
            s.push('\n');
        }
        let r = read_str(&s);
        assert_eq!(r.records.len(), n);
        assert!(r
            .records
            .iter()
            .enumerate()
            .all(|(i, rec)| rec.line == i as u64 + 1));
        assert_eq!(r.lines, n as u64);
    }
}
