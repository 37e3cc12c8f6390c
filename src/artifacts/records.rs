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

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fs::File;
use std::io::{self, Read};
use std::path::Path;
use std::sync::{Mutex, PoisonError};

use serde::{Deserialize, Serialize};

use crate::findings::{reading, Finding};

mod fast;
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

        #[derive(Deserialize, Default)]
        struct RawMetrics {
            $( #[serde(default)] $tag: Option<RawValue>, )*
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
}

const N_METRICS: usize = Metric::ALL.len();

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

#[derive(Deserialize)]
struct RawValue {
    // `value` may be a number, an array (inter_chunk_latency) or null
    // (AIPerf writes non-finite numbers as null). Only numbers are kept.
    #[serde(deserialize_with = "number_or_skip")]
    value: Option<f64>,
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
            // Per-chunk arrays (inter_chunk_latency): not a scalar the checks use.
            while seq.next_element::<serde::de::IgnoredAny>()?.is_some() {}
            Ok(None)
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
struct RawRecord<'a> {
    #[serde(borrow)]
    metadata: RawMeta<'a>,
    #[serde(default)]
    metrics: Option<RawMetrics>,
    #[serde(default, borrow)]
    error: Option<RawError<'a>>,
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
}

// A `Record` is a few hundred bytes; boxing it would cost an allocation per
// line on the hot path for a transient vector, so the size difference stays.
#[allow(clippy::large_enum_variant)]
enum LineOutcome {
    Record(Record),
    Blank,
    /// Not a record: [`bad_line_finding`] says why, once the line's number
    /// in the file is known.
    Bad,
}

/// A line as text (its block passed one UTF-8 check, so serde need not check
/// each string again) or as bytes (its block did not; serde names the bad line).
enum LineText<'a> {
    Text(&'a str),
    Bytes(&'a [u8]),
}

fn parse_line(text: LineText, line: u64, shapes: &mut fast::Shapes) -> LineOutcome {
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
fn bad_line_finding(bytes: &[u8], line: u64, last_unterminated: bool) -> Finding {
    match serde_json::from_slice::<RawRecord>(bytes).map(|raw| convert(raw, line)) {
        Ok(Err((field, msg))) => {
            Finding::new(reading::INVALID_RECORD, format!("line {line}: {msg}"))
                .file(FILE)
                .line(line)
                .field(field)
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

fn convert(raw: RawRecord, line: u64) -> Result<Record, (String, String)> {
    let phase = match raw.metadata.benchmark_phase.as_ref() {
        "warmup" => Phase::Warmup,
        "profiling" => Phase::Profiling,
        other => {
            return Err((
                "metadata.benchmark_phase".into(),
                format!("unknown benchmark_phase {other:?} (expected warmup or profiling)"),
            ))
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

/// Reads `path`, which must be a `profile_export.jsonl`.
///
/// Errors only when the file cannot be opened or read; everything wrong with
/// its content comes back as findings.
pub fn read(path: &Path) -> io::Result<RecordsRead> {
    let mut file = File::open(path)?;
    let size = file.metadata().map(|m| m.len()).ok();
    read_sized(&mut file, size)
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

/// [`read_from`], told the input's size so the record vector is sized once
/// (from the first block's bytes per line) instead of doubling: doubling a
/// vector of hundreds of thousands of records briefly holds two of them.
pub fn read_sized(input: &mut (dyn Read + Send), size: Option<u64>) -> io::Result<RecordsRead> {
    // On a rayon worker (many runs audited at once, one per worker), parse
    // on this thread: blocking a worker while it waits for the pool could
    // leave no worker to do the waiting-for work. The runs are the parallelism.
    if rayon::current_thread_index().is_some() {
        return read_sequential(input);
    }
    let shared = Mutex::new(Shared {
        blocks: BlockReader::new(input),
        error: None,
    });
    let merging = Mutex::new(Merging {
        merge: Merge::default(),
        waiting: BTreeMap::new(),
        next_seq: 0,
        size,
    });
    // Every worker of the pool takes the next block under the lock, reads it
    // itself and parses it (the kernel's copy lands in the cache of the core
    // that parses it), then merges what is next in file order under a second
    // lock: no thread only reads or only merges, and none wakes another per
    // block.
    rayon::broadcast(|_| {
        let mut spare: Option<Vec<u8>> = None;
        loop {
            let block = {
                let mut g = shared.lock().unwrap_or_else(PoisonError::into_inner);
                if let Some(b) = spare.take() {
                    g.blocks.recycle(b);
                }
                if g.blocks.eof || g.error.is_some() {
                    break;
                }
                match g.blocks.next_block() {
                    Ok(Some(b)) => b,
                    Ok(None) => continue,
                    Err(e) => {
                        g.error = Some(e);
                        break;
                    }
                }
            };
            let parsed = parse_block(&block);
            merging.lock().unwrap_or_else(PoisonError::into_inner).put(
                block.seq,
                block.text().len() as u64,
                parsed,
            );
            spare = Some(block.bytes);
        }
    });
    let merge = merging
        .into_inner()
        .unwrap_or_else(PoisonError::into_inner)
        .merge;
    let shared = shared.into_inner().unwrap_or_else(PoisonError::into_inner);
    if let Some(e) = shared.error {
        return Err(e);
    }
    Ok(merge.finish(&shared.blocks))
}

/// Parsed blocks on their way into the records, in file order.
struct Merging {
    merge: Merge,
    /// Blocks parsed before the ones ahead of them in the file.
    waiting: BTreeMap<u64, (u64, Parsed)>,
    /// The block merged next.
    next_seq: u64,
    /// The input's size, if known (see [`read_sized`]).
    size: Option<u64>,
}

impl Merging {
    /// Takes block `seq` (`len` bytes) and merges every block now next.
    fn put(&mut self, seq: u64, len: u64, parsed: Parsed) {
        self.waiting.insert(seq, (len, parsed));
        while let Some((len, parsed)) = self.waiting.remove(&self.next_seq) {
            self.next_seq += 1;
            self.merge.add(parsed);
            let records = &mut self.merge.out.records;
            // After the first block, size the records from its bytes per
            // record.
            if self.next_seq == 1 {
                if let Some(size) = self.size.filter(|_| !records.is_empty()) {
                    let per_record = len as f64 / records.len() as f64;
                    let estimate = (size as f64 / per_record.max(1.0) * 1.02) as usize + 64;
                    records.reserve(estimate.saturating_sub(records.len()));
                }
            }
        }
    }
}

/// The block reader the workers share, and its error.
struct Shared<'a> {
    blocks: BlockReader<'a>,
    error: Option<io::Error>,
}

/// The same reading, block by block on the calling thread.
fn read_sequential(input: &mut (dyn Read + Send)) -> io::Result<RecordsRead> {
    let mut merge = Merge::default();
    let mut blocks = BlockReader::new(input);
    while !blocks.eof {
        if let Some(b) = blocks.next_block()? {
            merge.add(parse_block(&b));
            blocks.recycle(b.bytes);
        }
    }
    Ok(merge.finish(&blocks))
}

/// Puts parsed blocks together, in file order, and numbers their lines: a
/// block's lines are numbered from 1 while it is parsed (nobody has counted
/// the lines before it yet).
#[derive(Default)]
struct Merge {
    out: RecordsRead,
    /// Lines of the blocks merged so far.
    lines: u64,
    /// For each block merged, the lines of the blocks before it.
    lines_before: Vec<u64>,
}

impl Merge {
    fn add(&mut self, mut parsed: Parsed) {
        // Line 1 of the block is this line of the file.
        let first = 1 + self.lines + parsed.skipped_before;
        for r in &mut parsed.records {
            r.line += first - 1;
        }
        self.out.records.append(&mut parsed.records);
        self.out.through_shapes += parsed.through_shapes;
        for bad in parsed.bad {
            self.out.findings.push(bad_line_finding(
                &bad.bytes,
                first + bad.line - 1,
                bad.last_unterminated,
            ));
        }
        self.lines_before.push(self.lines);
        self.lines += parsed.lines;
    }

    fn finish(mut self, blocks: &BlockReader) -> RecordsRead {
        for &(seq, skipped_before) in &blocks.oversized {
            // The first line after the blocks before it and the long lines
            // skipped before it.
            let before = usize::try_from(seq)
                .ok()
                .and_then(|i| self.lines_before.get(i))
                .copied()
                .unwrap_or(self.lines);
            let line = 1 + before + skipped_before;
            self.out.findings.push(
                Finding::new(
                    reading::OVERSIZED_LINE,
                    format!(
                        "line {line} is longer than {} MiB; it is skipped",
                        MAX_LINE_BYTES >> 20
                    ),
                )
                .file(FILE)
                .line(line),
            );
        }
        self.out.findings.sort_by_key(|f| f.line);
        self.out.lines = self.lines + blocks.skipped;
        self.out.bytes = blocks.bytes;
        self.out
    }
}

struct Block {
    /// Position in the file, to restore order after parallel parsing.
    seq: u64,
    /// Lines longer than [`MAX_LINE_BYTES`] skipped before this block.
    skipped_before: u64,
    /// The input ended with this block: its last line may be cut off.
    last: bool,
    /// A reusable buffer; the block is `bytes[start..end]`.
    bytes: Vec<u8>,
    start: usize,
    end: usize,
}

impl Block {
    fn text(&self) -> &[u8] {
        &self.bytes[self.start..self.end]
    }
}

/// Where reads land in a buffer. The kernel copies from the page cache
/// about twice as fast to a 64-byte-aligned address as to one 16 bytes off
/// (`examples/read_alignment.rs`: 0.060 s against 0.123 s per GB here), and
/// a read lands right after the carried start of a line, at any offset,
/// unless placed.
const READ_ALIGN: usize = 64;

/// Cuts the input into blocks that end at a line end.
struct BlockReader<'a> {
    input: &'a mut (dyn Read + Send),
    seq: u64,
    /// The start of a line the last block did not finish.
    carry: Vec<u8>,
    /// Buffers to reuse, each fully initialized (`len()` is their size), so
    /// reads go straight into them without zeroing.
    pool: Vec<Vec<u8>>,
    bytes: u64,
    eof: bool,
    skipping_long_line: bool,
    /// Lines longer than [`MAX_LINE_BYTES`] skipped so far.
    skipped: u64,
    /// Each such line: the block that follows it and the long lines skipped
    /// before it (its line number is known once the blocks are counted).
    oversized: Vec<(u64, u64)>,
}

impl<'a> BlockReader<'a> {
    fn new(input: &'a mut (dyn Read + Send)) -> Self {
        BlockReader {
            input,
            seq: 0,
            carry: Vec::new(),
            pool: Vec::new(),
            bytes: 0,
            eof: false,
            skipping_long_line: false,
            skipped: 0,
            oversized: Vec::new(),
        }
    }

    /// Reads into `buf` until it is full or the input ends; returns the bytes
    /// read.
    fn fill(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let mut n = 0;
        while n < buf.len() {
            match self.input.read(&mut buf[n..]) {
                Ok(0) => break,
                Ok(k) => n += k,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(n)
    }

    /// The next block, or `None` when this read produced no complete line yet.
    fn next_block(&mut self) -> io::Result<Option<Block>> {
        let (mut buf, mut start, read_at);
        if self.carry.len() >= BLOCK_BYTES {
            // A long line in progress: read on after it in place rather
            // than copy it into a fresh buffer per read.
            buf = std::mem::take(&mut self.carry);
            start = 0;
            read_at = buf.len();
            buf.resize(read_at + BLOCK_BYTES, 0);
        } else {
            let size = BLOCK_BYTES + self.carry.len() + READ_ALIGN;
            buf = match self.pool.pop() {
                Some(b) if b.len() >= size => b,
                // A new buffer comes zeroed from the allocator (`calloc`:
                // fresh pages, no fill), not filled here: a small file
                // would pay for filling 1.5 MiB it never uses.
                _ => vec![0u8; size.max(BLOCK_BYTES + BLOCK_BYTES / 2)],
            };
            // Put the carried bytes where the read after them is aligned.
            let base = buf.as_ptr() as usize + self.carry.len();
            start = (READ_ALIGN - base % READ_ALIGN) % READ_ALIGN;
            read_at = start + self.carry.len();
            buf[start..read_at].copy_from_slice(&self.carry);
            self.carry.clear();
        }
        let n = self.fill(&mut buf[read_at..read_at + BLOCK_BYTES])?;
        let mut end = read_at + n;
        self.bytes += n as u64;
        self.eof = n == 0;
        if self.skipping_long_line {
            match memchr::memchr(b'\n', &buf[start..end]) {
                Some(i) => {
                    self.skipping_long_line = false;
                    self.skipped += 1;
                    start += i + 1;
                }
                None => {
                    self.recycle(buf);
                    return Ok(None);
                }
            }
        }
        let cut = if self.eof {
            Some(end)
        } else {
            memchr::memrchr(b'\n', &buf[start..end]).map(|i| start + i + 1)
        };
        match cut {
            Some(cut) => {
                self.carry.extend_from_slice(&buf[cut..end]);
                end = cut;
                if end == start {
                    self.recycle(buf);
                    return Ok(None);
                }
                let block = Block {
                    seq: self.seq,
                    skipped_before: self.skipped,
                    last: self.eof,
                    bytes: buf,
                    start,
                    end,
                };
                self.seq += 1;
                Ok(Some(block))
            }
            None if end - start > MAX_LINE_BYTES => {
                self.oversized.push((self.seq, self.skipped));
                self.skipping_long_line = true;
                self.recycle(buf);
                Ok(None)
            }
            None => {
                // No line end yet: keep everything for the next read.
                if start == 0 && self.carry.is_empty() {
                    buf.truncate(end);
                    self.carry = buf;
                } else {
                    self.carry.extend_from_slice(&buf[start..end]);
                    self.recycle(buf);
                }
                Ok(None)
            }
        }
    }

    /// Keeps a block-sized buffer for reuse; drops one grown for a long line.
    fn recycle(&mut self, buf: Vec<u8>) {
        if buf.len() <= 2 * BLOCK_BYTES {
            self.pool.push(buf);
        }
    }
}

/// One block's records and bad lines, in line order, its lines numbered
/// from 1.
#[derive(Default)]
struct Parsed {
    records: Vec<Record>,
    bad: Vec<BadLine>,
    /// Lines in the block.
    lines: u64,
    /// The block's [`Block::skipped_before`].
    skipped_before: u64,
    /// Records read through a line shape.
    through_shapes: u64,
}

/// A line that is not a record, kept until its number is known.
struct BadLine {
    /// Line within its block, from 1.
    line: u64,
    /// The line, trimmed.
    bytes: Vec<u8>,
    /// The last line of the input, without a line end: it may be cut off.
    last_unterminated: bool,
}

fn parse_block(b: &Block) -> Parsed {
    let block = b.text();
    // One UTF-8 check for the whole block; the lines of a block that fails it
    // are parsed as bytes, so only the bad line is reported.
    let text = simdutf8::basic::from_utf8(block).ok();
    let mut out = Parsed {
        records: Vec::with_capacity(block.len() / 1024 + 1),
        skipped_before: b.skipped_before,
        ..Parsed::default()
    };
    let mut line = 1;
    let mut start = 0;
    let mut shapes = fast::Shapes::default();
    while start < block.len() {
        let (end, next, terminated) = match memchr::memchr(b'\n', &block[start..]) {
            Some(i) => (start + i, start + i + 1, true),
            None => (block.len(), block.len(), false),
        };
        // A '\n' byte is always a char boundary, so slicing the text is safe.
        let this = match text {
            Some(t) => LineText::Text(&t[start..end]),
            None => LineText::Bytes(&block[start..end]),
        };
        match parse_line(this, line, &mut shapes) {
            LineOutcome::Record(r) => out.records.push(r),
            LineOutcome::Blank => {}
            LineOutcome::Bad => out.bad.push(BadLine {
                line,
                bytes: block[start..end].trim_ascii().to_vec(),
                last_unterminated: b.last && !terminated,
            }),
        }
        line += 1;
        start = next;
    }
    out.lines = line - 1;
    out.through_shapes = shapes.hits();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

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
        }
        text.push_str(GOOD);
        lines += 1;
        let plain = read_str(&text);
        assert_eq!(plain.lines, lines);
        assert_eq!(plain.records.len(), 6002);
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
