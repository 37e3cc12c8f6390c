//! Reading a run directory.
//!
//! [`load`] reads every artifact the checks use, each with its typed reader,
//! and never gives up on the run: a missing, empty, unreadable or malformed
//! file becomes a [`Finding`] naming the file (and line and field where there
//! is one), and the rest of the run is still read. Nothing here writes.

pub(crate) mod cursor;
pub mod legacy;
pub mod log;
pub mod records;
pub mod scrapes;
pub mod server_metrics;
pub mod summary;

use std::fs::{self, File};
use std::io;
use std::path::{Path, PathBuf};

use serde::de::DeserializeOwned;
use serde::Deserialize;

use crate::findings::{reading, Finding};

/// The labels of one series (name to value): what picks it out among its
/// family's series on an endpoint. Every layer names a label set this way.
pub type Labels = std::collections::BTreeMap<String, String>;

/// Files whose presence makes a directory a run directory.
pub const RUN_MARKERS: &[&str] = &[summary::FILE, records::FILE, server_metrics::FILE];

/// `phase_manifest.json`.
pub const MANIFEST_FILE: &str = "phase_manifest.json";

/// A JSON document that does not parse as the artifact it should be: the
/// field where it failed (a path such as `input_config.phases[0].requests`,
/// when the parser could tell) and why.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{message}")]
pub struct ParseError {
    /// The field path, if known.
    pub field: Option<String>,
    /// The parser's message (ending in "at line L column C").
    pub message: String,
}

impl ParseError {
    /// From a `serde_path_to_error` failure.
    pub fn of(e: serde_path_to_error::Error<serde_json::Error>) -> ParseError {
        ParseError {
            field: Some(e.path().to_string()),
            message: e.inner().to_string(),
        }
    }
}

/// Largest JSON document (not JSON lines) read into memory.
const MAX_JSON_BYTES: u64 = 512 << 20;

/// One entry of `phase_manifest.json`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[allow(missing_docs)]
pub struct ManifestPhase {
    pub phase_index: Option<u32>,
    pub phase_name: Option<String>,
    pub phase_kind: Option<String>,
    pub start_ns: Option<u64>,
    pub end_ns: Option<u64>,
    pub was_cancelled: Option<bool>,
    pub successful_request_count: Option<u64>,
    pub error_request_count: Option<u64>,
    pub total_request_count: Option<u64>,
}

/// `phase_manifest.json`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct Manifest {
    /// Phases in index order.
    #[serde(default)]
    pub phases: Vec<ManifestPhase>,
}

/// Everything read from one run directory.
#[derive(Debug, Default)]
pub struct RunArtifacts {
    /// The directory.
    pub dir: PathBuf,
    /// `profile_export_aiperf.json`.
    pub summary: Option<summary::Summary>,
    /// `profile_export.jsonl`.
    pub records: Option<records::RecordsRead>,
    /// `server_metrics_export.json`.
    pub server: Option<server_metrics::ServerMetricsExport>,
    /// `server_metrics_export.jsonl`.
    pub scrapes: Option<scrapes::ScrapesRead>,
    /// `phase_manifest.json`.
    pub manifest: Option<Manifest>,
    /// `logs/aiperf.log`: its phase-end lines.
    pub log: Option<log::AiperfLog>,
    /// Problems met while reading.
    pub findings: Vec<Finding>,
    /// True when no artifact at all could be read: the run cannot be audited.
    pub unreadable: bool,
}

/// Is `dir` a run directory (holds at least one marker file)?
pub fn is_run_dir(dir: &Path) -> bool {
    // A marker that is a dangling symlink still marks a run (one whose
    // artifact cannot be read: said, exit 2), never a folder to look into.
    RUN_MARKERS
        .iter()
        .any(|f| fs::symlink_metadata(dir.join(f)).is_ok())
}

enum Opened {
    Missing,
    File(File, u64),
    Problem(Box<Finding>),
}

/// Opens `name` in the run directory. A symlink is followed, but one that
/// leads out of the run directory is reported, so the audit never reads
/// outside the tree it was given without saying so.
fn open_noting_links(dir: &Path, name: &str, findings: &mut Vec<Finding>) -> Opened {
    let path = dir.join(name);
    if fs::symlink_metadata(&path).is_ok_and(|m| m.file_type().is_symlink()) {
        if let (Ok(target), Ok(root)) = (path.canonicalize(), dir.canonicalize()) {
            if !target.starts_with(&root) {
                findings.push(
                    Finding::new(
                        reading::SYMLINK_OUTSIDE_RUN,
                        format!(
                            "{name} is a symlink to {}, outside the run directory; it was read",
                            target.display()
                        ),
                    )
                    .file(name),
                );
            }
        }
    }
    open(dir, name)
}

fn open(dir: &Path, name: &str) -> Opened {
    let path = dir.join(name);
    let meta = match fs::symlink_metadata(&path) {
        Ok(m) => m,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Opened::Missing,
        Err(e) => return Opened::Problem(Box::new(unreadable(name, &e.to_string()))),
    };
    if meta.file_type().is_symlink() {
        // Follow it, but say so: the audit then reads outside the run directory.
        let target = fs::read_link(&path)
            .map(|t| t.display().to_string())
            .unwrap_or_default();
        if fs::metadata(&path).is_err() {
            let why = format!("dangling symlink to {target}");
            return Opened::Problem(Box::new(unreadable(name, &why)));
        }
    }
    match crate::files::open_regular(&path) {
        Ok(f) => {
            let len = f.metadata().map(|m| m.len()).unwrap_or(0);
            if len == 0 {
                return Opened::Problem(Box::new(
                    Finding::new(reading::EMPTY_FILE, format!("{name} is empty")).file(name),
                ));
            }
            Opened::File(f, len)
        }
        Err(e) => Opened::Problem(Box::new(unreadable(name, &e.to_string()))),
    }
}

fn unreadable(name: &str, why: &str) -> Finding {
    Finding::new(
        reading::UNREADABLE_FILE,
        format!("cannot read {name}: {why}"),
    )
    .file(name)
}

/// Reads a JSON-lines artifact with `read`; a missing file is `None`, an
/// unreadable one a finding.
fn read_lines<T>(
    dir: &Path,
    name: &str,
    findings: &mut Vec<Finding>,
    read: impl FnOnce(&mut File, u64) -> io::Result<T>,
) -> Option<T> {
    match open_noting_links(dir, name, findings) {
        Opened::Missing => None,
        Opened::Problem(p) => {
            findings.push(*p);
            None
        }
        Opened::File(mut file, len) => match read(&mut file, len) {
            Ok(r) => Some(r),
            Err(e) => {
                findings.push(unreadable(name, &e.to_string()));
                None
            }
        },
    }
}

/// A JSON document's file, open, and its size; `None` (with the finding)
/// when it is missing, cannot be opened, or is larger than this tool reads.
fn open_json(dir: &Path, name: &str, findings: &mut Vec<Finding>) -> Option<(File, u64)> {
    let (file, len) = match open_noting_links(dir, name, findings) {
        Opened::Missing => return None,
        Opened::Problem(f) => {
            findings.push(*f);
            return None;
        }
        Opened::File(f, len) => (f, len),
    };
    if len > MAX_JSON_BYTES {
        findings.push(unreadable(
            name,
            &format!("{len} bytes is larger than this tool reads"),
        ));
        return None;
    }
    Some((file, len))
}

fn read_json<T>(
    dir: &Path,
    name: &str,
    findings: &mut Vec<Finding>,
    parse: impl FnOnce(&[u8]) -> Result<T, ParseError>,
) -> Option<T> {
    let (mut file, len) = open_json(dir, name, findings)?;
    let mut bytes = Vec::with_capacity(len as usize);
    if let Err(e) = io::Read::read_to_end(&mut file, &mut bytes) {
        findings.push(unreadable(name, &e.to_string()));
        return None;
    }
    let parsed = parse(&bytes);
    match parsed {
        Ok(v) => Some(v),
        Err(e) => {
            findings.push(invalid_json(name, e));
            None
        }
    }
}

/// A JSON document of type `T`: as [`read_json`] with [`typed`], except that
/// a large one (a long run's timeslices) is parsed from the file as it is
/// read, never held whole.
fn read_typed<T: DeserializeOwned>(
    dir: &Path,
    name: &str,
    findings: &mut Vec<Finding>,
) -> Option<T> {
    read_typed_streaming_above(dir, name, findings, STREAM_JSON_BYTES)
}

fn read_typed_streaming_above<T: DeserializeOwned>(
    dir: &Path,
    name: &str,
    findings: &mut Vec<Finding>,
    stream_above: u64,
) -> Option<T> {
    let len = fs::metadata(dir.join(name)).map(|m| m.len()).unwrap_or(0);
    if len <= stream_above {
        return read_json(dir, name, findings, typed);
    }
    let (file, _) = open_json(dir, name, findings)?;
    // From the file's start each time (the second parse of a failure).
    let parsed = parse_document(|| {
        io::Seek::seek(&mut &file, io::SeekFrom::Start(0))?;
        Ok(serde_json::Deserializer::from_reader(
            io::BufReader::with_capacity(1 << 20, &file),
        ))
    });
    match parsed {
        Ok(v) => Some(v),
        Err(Unread::Io(e)) => {
            findings.push(unreadable(name, &e));
            None
        }
        Err(Unread::Parse(e)) => {
            findings.push(invalid_json(name, e));
            None
        }
    }
}

/// JSON documents larger than this are parsed as they are read: peak memory
/// stays a few MB instead of the file's size, at about 1.6 times the time
/// (an 85 MB export with 3,600 timeslices per series: 0.50 s and 7 MB
/// against 0.32 s and 88 MB; docs/performance.md).
const STREAM_JSON_BYTES: u64 = 64 << 20;

/// The finding of a document that does not parse.
fn invalid_json(name: &str, e: ParseError) -> Finding {
    let ParseError {
        field: path,
        message: msg,
    } = e;
    let (line, msg) = split_serde_position(&msg);
    let path = path.as_deref().and_then(crate::findings::known_path);
    let mut f = Finding::new(
        reading::INVALID_JSON,
        match &path {
            Some(p) => format!("{name}: field {p}: {msg}"),
            None => format!("{name}: {msg}"),
        },
    )
    .file(name);
    if let Some(line) = line {
        f = f.line(line);
    }
    if let Some(p) = path.filter(|p| p != ".") {
        f = f.field(p);
    }
    f
}

/// serde_json messages end in "at line L column C"; keep the line as data.
fn split_serde_position(msg: &str) -> (Option<u64>, String) {
    if let Some(i) = msg.rfind(" at line ") {
        let tail = &msg[i + " at line ".len()..];
        let line = tail.split_whitespace().next().and_then(|l| l.parse().ok());
        return (line, msg.to_string());
    }
    (None, msg.to_string())
}

/// A `T` from the JSON document `bytes` ([`parse_document`]).
pub(crate) fn typed<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ParseError> {
    parse_document(|| Ok(serde_json::Deserializer::from_slice(bytes))).map_err(|e| match e {
        Unread::Parse(e) => e,
        // A slice is never an input that fails.
        Unread::Io(message) => ParseError {
            field: None,
            message,
        },
    })
}

/// Why a JSON document was not read.
enum Unread {
    /// Its input failed (the message).
    Io(String),
    /// It does not parse as the artifact it should be.
    Parse(ParseError),
}

/// A `T` from the JSON document `open` gives a parser of (nothing but
/// whitespace after it). Parsed first without tracking where it is:
/// `serde_path_to_error` keeps every key it passes as a `String`, and
/// parsing without it took 13 % less CPU over 2,000 small runs
/// (`940890e`, docs/performance.md). Only a document that fails is opened
/// again and parsed with the path tracked, for the error to name its
/// field: the same parser on the same bytes fails at the same place.
fn parse_document<'de, R, T>(
    mut open: impl FnMut() -> io::Result<serde_json::Deserializer<R>>,
) -> Result<T, Unread>
where
    R: serde_json::de::Read<'de>,
    T: DeserializeOwned,
{
    let mut de = open().map_err(|e| Unread::Io(e.to_string()))?;
    match T::deserialize(&mut de).and_then(|v| de.end().map(|()| v)) {
        Ok(v) => return Ok(v),
        Err(e) if e.is_io() => return Err(Unread::Io(e.to_string())),
        Err(_) => {}
    }
    let mut de = open().map_err(|e| Unread::Io(e.to_string()))?;
    match serde_path_to_error::deserialize(&mut de) {
        Ok(v) => end(&mut de).map(|()| v).map_err(Unread::Parse),
        Err(e) if e.inner().is_io() => Err(Unread::Io(e.inner().to_string())),
        Err(e) => Err(Unread::Parse(ParseError::of(e))),
    }
}

/// A `T` read only from a JSON object. A derived struct also accepts an
/// array (serde's sequence form of a struct: `"run_info": []` would read as
/// every field absent); AIPerf writes objects, so an array is an error
/// naming the field, like any other wrong type.
pub(crate) struct Object<T>(pub T);

/// For `#[serde(deserialize_with)]`: an optional [`Object`].
pub(crate) fn object_opt<'de, D, T>(d: D) -> Result<Option<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de>,
{
    Option::<Object<T>>::deserialize(d).map(|o| o.map(|o| o.0))
}

/// For `#[serde(deserialize_with)]`: an array of [`Object`]s.
pub(crate) fn objects<'de, D, T>(d: D) -> Result<Vec<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de>,
{
    Vec::<Object<T>>::deserialize(d).map(|v| v.into_iter().map(|o| o.0).collect())
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Object<T> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<T>(std::marker::PhantomData<T>);
        impl<'de, T: Deserialize<'de>> serde::de::Visitor<'de> for V<T> {
            type Value = T;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("an object")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, map: A) -> Result<T, A::Error> {
                T::deserialize(serde::de::value::MapAccessDeserializer::new(map))
            }
        }
        d.deserialize_map(V(std::marker::PhantomData)).map(Object)
    }
}

/// Nothing but whitespace may follow the document: bytes after it (garbage,
/// NUL padding, a second document) are an error, never ignored.
pub(crate) fn end<'de, R: serde_json::de::Read<'de>>(
    de: &mut serde_json::Deserializer<R>,
) -> Result<(), ParseError> {
    de.end().map_err(|e| ParseError {
        field: None,
        message: format!("{e} (after the end of the document)"),
    })
}

/// Each summary statistic of the wrong type, as a finding.
fn summary_problems(summary: &summary::Summary, f: &mut Vec<Finding>) {
    for p in &summary.problems {
        let field = p.field.clone().unwrap_or_default();
        f.push(
            Finding::new(
                reading::INVALID_JSON,
                format!(
                    "{}: field {field}: {}; that statistic is not read, so no check compares it",
                    summary::FILE,
                    p.message
                ),
            )
            .file(summary::FILE)
            .field(field),
        );
    }
}

/// A window that ends before it starts is corrupt: it is dropped (the
/// checks then cannot tell), never read as a negative overlap.
fn reversed_windows(server: &mut server_metrics::ServerMetricsExport, f: &mut Vec<Finding>) {
    // A window that ends before it starts is corrupt: it is dropped (the
    // checks then cannot tell), never read as a negative overlap.
    // An empty one too: AIPerf 0.13 writes a window only when it starts
    // before it ends (json_exporter._build_phase_time_ranges skips the
    // others, which its TimeRangeFilter rejects).
    server.summary.phase_time_ranges.retain(|phase, w| {
        if w.end_ns > w.start_ns {
            return true;
        }
        let what = if w.end_ns == w.start_ns {
            "is empty (it ends at the nanosecond it starts)".to_string()
        } else {
            format!(
                "ends {:.1} ms before it starts",
                (w.start_ns - w.end_ns) as f64 / 1e6
            )
        };
        f.push(
            Finding::new(
                reading::INVALID_JSON,
                format!(
                    "{}: the {phase} window {what}; it is not used",
                    server_metrics::FILE,
                ),
            )
            .file(server_metrics::FILE)
            .field(format!("summary.phase_time_ranges.{phase}")),
        );
        false
    });
}

/// The two large files, `profile_export.jsonl` and the raw scrapes. Audited
/// off the pool (one run, from the calling thread), each reader has the
/// whole pool in turn: the records reader parses on every worker only when
/// called from outside the pool, and a `rayon::join` would run it on a
/// worker, one core. On a worker (many runs at once), both at once. Their
/// findings in this order whichever finishes first.
fn read_large(
    dir: &Path,
    interest: &scrapes::Interest,
    f: &mut Vec<Finding>,
) -> (Option<records::RecordsRead>, Option<scrapes::ScrapesRead>) {
    let (mut from_records, mut from_scrapes) = (Vec::new(), Vec::new());
    let read_records = |f: &mut Vec<Finding>| {
        read_lines(dir, records::FILE, f, |file, len| {
            records::read_file(file, Some(len))
        })
    };
    let read_scrapes = |f: &mut Vec<Finding>| {
        read_lines(dir, scrapes::FILE, f, |file, len| {
            scrapes::read_with(file, interest, Some(len))
        })
    };
    let read = if rayon::current_thread_index().is_some() {
        rayon::join(
            || read_records(&mut from_records),
            || read_scrapes(&mut from_scrapes),
        )
    } else {
        (
            read_records(&mut from_records),
            read_scrapes(&mut from_scrapes),
        )
    };
    f.append(&mut from_records);
    f.append(&mut from_scrapes);
    read
}

/// Values of the export AIPerf never writes (it clamps every phase delta at
/// 0 and writes four types): a family of another type is dropped; a
/// histogram's negative, non-whole or implausible count, a negative sum, a
/// counter's negative total are taken out (unknown, never 0); each with an
/// `impossible-value` finding naming the field.
fn impossible_stats(server: &mut server_metrics::ServerMetricsExport, f: &mut Vec<Finding>) {
    use server_metrics::MetricType;
    let finding = |field: String, what: String| {
        Finding::new(
            reading::IMPOSSIBLE_VALUE,
            format!("{field} is {what}; it is kept out of every figure"),
        )
        .file(server_metrics::FILE)
        .field(field)
    };
    type Rule = fn(f64) -> Option<&'static str>;
    let count_refuses: Rule = |v| records::Domain::Count.refuses(v);
    // Sums and totals may be large (bytes), never negative.
    let negative: Rule = |v| (v < 0.0).then_some("negative: AIPerf clamps every phase delta at 0");
    let sections = [
        ("metrics", Some(&mut server.metrics)),
        ("warmup_metrics", server.warmup_metrics.as_mut()),
    ];
    for (section, families) in sections {
        let Some(families) = families else {
            continue;
        };
        // AIPerf creates a family with its first series (accumulator's
        // compute of the endpoint summaries): one without any is not a
        // family that observed nothing, and is dropped (its figures
        // unknown, never 0).
        families.retain(|name, fam| {
            let (field, what) = if fam.kind == MetricType::Invalid {
                (
                    "type",
                    "a type AIPerf never writes (counter, gauge, histogram or unknown)",
                )
            } else if fam.series.is_empty() {
                (
                    "series",
                    "empty: AIPerf writes a family only with the series it scraped",
                )
            } else {
                return true;
            };
            f.push(finding(format!("{section}.{name}.{field}"), what.into()));
            false
        });
        for (name, fam) in families.iter_mut() {
            for (i, s) in fam.series.iter_mut().enumerate() {
                let st = &mut s.stats;
                // The stats of this type, each with the rule it must keep.
                let checked: Vec<(&str, &mut Option<f64>, Rule)> = match fam.kind {
                    MetricType::Histogram => vec![
                        ("count", &mut st.count, count_refuses),
                        ("sum", &mut st.sum, negative),
                    ],
                    MetricType::Counter => vec![("total", &mut st.total, negative)],
                    _ => Vec::new(),
                };
                for (stat, value, rule) in checked {
                    if let Some((v, why)) = value.and_then(|v| Some((v, rule(v)?))) {
                        f.push(finding(
                            format!("{section}.{name}.series[{i}].stats.{stat}"),
                            format!("{v}: {why}"),
                        ));
                        *value = None;
                    }
                }
            }
        }
    }
}

/// A manifest phase that ends before it starts: its times are not used.
fn reversed_phases(m: &mut Manifest, f: &mut Vec<Finding>) {
    for (i, p) in m.phases.iter_mut().enumerate() {
        if let (Some(s), Some(e)) = (p.start_ns, p.end_ns) {
            if e < s {
                f.push(
                    Finding::new(
                        reading::INVALID_JSON,
                        format!(
                            "{MANIFEST_FILE}: phase {i} ends {:.1} ms before it starts; its \
                             times are not used",
                            (s - e) as f64 / 1e6
                        ),
                    )
                    .file(MANIFEST_FILE)
                    .field(format!("phases[{i}]")),
                );
                p.start_ns = None;
                p.end_ns = None;
            }
        }
    }
}

/// A `missing-artifact` finding for each absent main file not already
/// reported, naming the checks its absence leaves unable to tell.
fn note_missing(
    summary: &Option<summary::Summary>,
    records: &Option<records::RecordsRead>,
    server: &Option<server_metrics::ServerMetricsExport>,
    f: &mut Vec<Finding>,
) {
    for (name, present, needed_by) in [
        (
            records::FILE,
            records.is_some(),
            "cold_connections, the clients' cache hit rate and prefill throughput, and the \
             recomputation of the summary's statistics",
        ),
        (
            summary::FILE,
            summary.is_some(),
            "the summary's agreement with the records, and claims",
        ),
        (
            server_metrics::FILE,
            server.is_some(),
            "phase_contamination and the server's cache hit rate",
        ),
    ] {
        let already = f.iter().any(|x| x.file.as_deref() == Some(name));
        if !present && !already {
            f.push(
                Finding::new(
                    reading::MISSING_ARTIFACT,
                    format!(
                        "{name} is not in the run directory, so these cannot tell: {needed_by}"
                    ),
                )
                .file(name),
            );
        }
    }
}

/// The parquet raw scrapes (`scrapes::parquet`), when the run has them
/// and no JSONL; without the `parquet` feature, a finding that says so.
fn parquet_scrapes(
    dir: &Path,
    server: Option<&server_metrics::ServerMetricsExport>,
    interest: &scrapes::Interest,
    f: &mut Vec<Finding>,
) -> Option<scrapes::ScrapesRead> {
    const PARQUET: &str = "server_metrics_export.parquet";
    let path = dir.join(PARQUET);
    if !path.is_file() {
        return None;
    }
    #[cfg(feature = "parquet")]
    {
        // The deltas are from AIPerf's profiling baseline: the window's start.
        let reference = server
            .and_then(|s| s.window("profiling"))
            .map(|w| w.start_ns);
        match scrapes::parquet::to_lines(&path, reference) {
            Ok(lines) => scrapes::read_with(std::io::Cursor::new(lines), interest, None)
                .map_err(|e| f.push(unreadable(PARQUET, &e.to_string())))
                .ok(),
            Err(e) => {
                f.push(unreadable(PARQUET, &e));
                None
            }
        }
    }
    #[cfg(not(feature = "parquet"))]
    {
        let _ = (server, interest);
        f.push(
            Finding::new(
                reading::PARQUET_SCRAPES_NOT_READ,
                format!(
                    "the raw scrapes are only in {PARQUET}, and this build reads parquet only \
                     with the `parquet` feature (cargo install --features parquet): without \
                     them phase contamination cannot be repaired"
                ),
            )
            .file(PARQUET),
        );
        None
    }
}

/// Reads every artifact of the run in `dir`.
pub fn load(dir: &Path) -> RunArtifacts {
    let mut run = RunArtifacts {
        dir: dir.to_path_buf(),
        ..Default::default()
    };
    let f = &mut run.findings;
    run.summary = read_json(dir, summary::FILE, f, summary::Summary::parse);
    if let Some(summary) = &run.summary {
        summary_problems(summary, f);
    }
    run.server = read_typed(dir, server_metrics::FILE, f);
    if let Some(server) = run.server.as_mut() {
        reversed_windows(server, f);
        impossible_stats(server, f);
    }
    run.manifest = read_json(dir, MANIFEST_FILE, f, typed);
    // A log that cannot be read is not a problem of the run: it only
    // names what no other artifact does.
    if let Opened::File(file, _) = open(dir, log::FILE) {
        run.log = log::read(file).ok();
    }
    if let Some(m) = run.manifest.as_mut() {
        reversed_phases(m, f);
    }
    // The export types the families: the gauges it names are not read.
    let interest = run
        .server
        .as_ref()
        .map(|s| s.scrape_interest())
        .unwrap_or_default();
    (run.records, run.scrapes) = read_large(dir, &interest, f);
    if run.scrapes.is_none() && !dir.join(scrapes::FILE).exists() {
        run.scrapes = parquet_scrapes(dir, run.server.as_ref(), &interest, f);
    }
    if let (Some(sc), Some(server)) = (run.scrapes.as_mut(), run.server.as_ref()) {
        sc.set_cumulative(server.cumulative_families());
    }
    if let Some(r) = run.records.as_mut() {
        f.append(&mut r.findings);
    }
    if let Some(s) = run.scrapes.as_mut() {
        f.append(&mut s.findings);
    }
    note_missing(&run.summary, &run.records, &run.server, f);
    check_schema(
        f,
        summary::FILE,
        run.summary
            .as_ref()
            .and_then(|s| s.schema_version.as_deref()),
        summary::KNOWN_SCHEMAS,
    );
    check_schema(
        f,
        server_metrics::FILE,
        run.server
            .as_ref()
            .and_then(|s| s.schema_version.as_deref()),
        server_metrics::KNOWN_SCHEMAS,
    );
    legacy::unsupported_records(&mut run);
    run.unreadable = run.summary.is_none() && run.records.is_none() && run.server.is_none();
    legacy::profiling_window(&mut run);
    run
}

fn check_schema(findings: &mut Vec<Finding>, file: &str, found: Option<&str>, known: &[&str]) {
    if let Some(v) = found {
        if !known.contains(&v) {
            findings.push(
                Finding::new(
                    reading::UNKNOWN_SCHEMA_VERSION,
                    format!(
                        "{file} declares schema_version {v:?}; this tool knows {}; fields may \
                         have moved, so figures from it are read on a best-effort basis",
                        known.join(", ")
                    ),
                )
                .file(file)
                .field("schema_version")
                .expected_found(known, v),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_streamed_document_reads_and_fails_as_a_held_one() {
        let dir = tempfile::tempdir().expect("tmp");
        let good = r#"{"schema_version":"1.1","metrics":{"c":{"type":"counter","series":[{"stats":{"total":2},"timeslices":[{"start_ns":5,"end_ns":9},{"start_ns":9},{"x":[1,2]}]}]}}}"#;
        let bad = "{\"schema_version\":\"1.1\",\n\"metrics\": {\"c\": {\"type\": 7}}}";
        for (text, ok) in [(good, true), (bad, false), ("{} trailing", false)] {
            std::fs::write(dir.path().join("x.json"), text).expect("write");
            let (mut held, mut streamed) = (Vec::new(), Vec::new());
            let a: Option<server_metrics::ServerMetricsExport> =
                read_typed_streaming_above(dir.path(), "x.json", &mut held, u64::MAX);
            let b: Option<server_metrics::ServerMetricsExport> =
                read_typed_streaming_above(dir.path(), "x.json", &mut streamed, 0);
            assert_eq!(a, b, "{text}");
            assert_eq!(a.is_some(), ok, "{text}");
            let fields = |v: &[Finding]| -> Vec<_> {
                v.iter()
                    .map(|f| (f.code, f.line, f.field.clone()))
                    .collect()
            };
            assert_eq!(fields(&held), fields(&streamed), "{text}");
            if text == bad {
                // Named by the second, tracked, parse of each.
                assert_eq!(held[0].field.as_deref(), Some("metrics.c.type"));
            }
        }
        let slices = read_typed_streaming_above::<server_metrics::ServerMetricsExport>(
            dir.path(),
            "x.json",
            &mut Vec::new(),
            0,
        );
        assert!(slices.is_none());
        std::fs::write(dir.path().join("x.json"), good).expect("write");
        let e: server_metrics::ServerMetricsExport =
            read_typed_streaming_above(dir.path(), "x.json", &mut Vec::new(), 0).expect("read");
        let t = e.metrics["c"].series[0]
            .timeslices
            .as_ref()
            .expect("slices");
        assert_eq!((t.len, t.first().and_then(|f| f.start_ns)), (3, Some(5)));
    }

    #[test]
    fn serde_position_is_kept_as_a_line_number() {
        let (line, _) = split_serde_position("expected value at line 3 column 7");
        assert_eq!(line, Some(3));
    }
}
