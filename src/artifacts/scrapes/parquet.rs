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

use std::collections::{BTreeMap, HashMap};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::rc::Rc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Once, OnceLock};

use polars::prelude::*;
use serde_json::{Map, Value};

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

/// One scrape's samples: per family, per label set (by its JSON text).
type Scrape = BTreeMap<String, BTreeMap<Vec<u8>, (Rc<Map<String, Value>>, Sample)>>;

fn strings<'a>(df: &'a DataFrame, name: &str) -> Result<&'a StringChunked, String> {
    df.column(name)
        .and_then(|c| c.str())
        .map_err(|e| format!("column {name}: {e}"))
}

/// A row's place: its chunk and its index there. Every column read has the
/// chunks of the frame's first column (checked by [`Col::of`]), so a row is placed
/// once and read from every column by its place: `ChunkedArray::get` finds
/// the chunk of an index by walking the chunks' lengths, a call per chunk
/// (the file of 2.1 M rows reads to 25 chunks a column), which was a third
/// of the parquet reader's samples (docs/performance.md, 2026-12-08).
type Row = (usize, usize);

/// A column's chunks, read by a row's place.
struct Col<'a, T: PolarsDataType>(Vec<&'a T::Array>);

impl<'a, T: PolarsDataType> Col<'a, T> {
    /// `ca`'s chunks, which must have the lengths `layout` gives.
    fn of(ca: &'a ChunkedArray<T>, layout: &[usize]) -> Result<Self, String> {
        if !ca.chunk_lengths().eq(layout.iter().copied()) {
            return Err(format!(
                "column {}: its chunks are not the first column's",
                ca.name()
            ));
        }
        Ok(Col(ca.downcast_iter().collect()))
    }

    #[inline]
    fn get(&self, (chunk, at): Row) -> Option<T::Physical<'a>> {
        self.0.get(chunk)?.get(at)
    }
}

fn floats(df: &DataFrame, name: &str) -> Result<Float64Chunked, String> {
    df.column(name)
        .and_then(|c| c.cast(&DataType::Float64))
        .and_then(|c| c.f64().cloned())
        .map_err(|e| format!("column {name}: {e}"))
}

/// The file's scrapes as raw-scrape JSON lines (endpoint, then time
/// order), each endpoint's led by the synthetic baseline at
/// `reference_ns`. A damaged file is an error, never a panic: polars'
/// parquet reader asserts on some damaged files (a flipped byte in a
/// page or in the footer), so its panics become this error. Some damage
/// makes it abort the process instead (a page header's negative value
/// count taken as a size: an allocation of about 2^61 bytes), which no
/// process survives: after [`read_in_child_processes`], each file is read
/// in a child process, and an abort there is this error too.
pub fn to_lines(path: &Path, reference_ns: Option<u64>) -> Result<Vec<u8>, String> {
    match CHILD
        .get()
        .and_then(|exe| in_child(exe, path, reference_ns))
    {
        Some(read) => read,
        None => guarded(|| lines_of(path, reference_ns)),
    }
}

/// The first argument of a child process that reads a parquet file (with
/// [`CHILD_ENV`] set: a directory of runs named like it is never taken for
/// it).
pub const CHILD_ARG: &str = "__read-parquet-scrapes";

/// The variable that marks a child process reading a parquet file.
pub const CHILD_ENV: &str = "ARTIFACT_CHECK_PARQUET_CHILD";

/// The executable that reads each parquet file, in a child process.
static CHILD: OnceLock<PathBuf> = OnceLock::new();

/// Reads every parquet file from now on in a child process running `exe`,
/// which must run [`child_main`] before anything else (the binary does).
/// Called once; later calls change nothing.
pub fn read_in_child_processes(exe: PathBuf) {
    let _ = CHILD.set(exe);
}

/// A child process's work, when this process is one (`None` otherwise):
/// `exe CHILD_ARG PATH [REFERENCE_NS]` writes the file's lines to standard
/// output and returns 0, or writes why it could not to standard error and
/// returns 1.
pub fn child_main() -> Option<u8> {
    std::env::var_os(CHILD_ENV)?;
    let mut args = std::env::args_os().skip(1);
    if args.next()? != CHILD_ARG {
        return None;
    }
    let path = PathBuf::from(args.next()?);
    let reference_ns = args.next().and_then(|r| r.to_str()?.parse().ok());
    let written = guarded(|| lines_of(&path, reference_ns)).and_then(|lines| {
        (std::io::stdout().lock().write_all(&lines)).map_err(|e| format!("writing the lines: {e}"))
    });
    Some(match written {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("{e}");
            1
        }
    })
}

/// The file read by a child process running `exe`; `None` when the child
/// could not be started (the caller reads it in this process).
fn in_child(exe: &Path, path: &Path, reference_ns: Option<u64>) -> Option<Result<Vec<u8>, String>> {
    let mut child = Command::new(exe);
    child.arg(CHILD_ARG).arg(path);
    if let Some(r) = reference_ns {
        child.arg(r.to_string());
    }
    let out = (child.env(CHILD_ENV, "1").env("RUST_BACKTRACE", "0"))
        .stdin(Stdio::null())
        .output()
        .ok()?;
    let said = String::from_utf8_lossy(&out.stderr);
    Some(match out.status.code() {
        Some(0) => Ok(out.stdout),
        Some(1) if !said.trim().is_empty() => Err(said.trim().to_string()),
        _ => Err(format!(
            "the parquet reader stopped ({}{}): the file is probably damaged",
            out.status,
            (said.lines().next()).map_or(String::new(), |l| format!(": {}", l.trim()))
        )),
    })
}

/// The file's data frame, every column as long as the frame: a damaged
/// file can read to columns of different lengths, and [`lines_of`] reads
/// each row by index.
fn read(path: &Path) -> Result<DataFrame, String> {
    let file = std::fs::File::open(path).map_err(|e| e.to_string())?;
    let df = ParquetReader::new(file)
        .finish()
        .map_err(|e| e.to_string())?;
    let height = df.height();
    if let Some(c) = df.columns().iter().find(|c| c.len() != height) {
        return Err(format!(
            "column {} has {} rows where the file has {height}: the file is damaged",
            c.name(),
            c.len()
        ));
    }
    Ok(chunked_alike(df))
}

/// `df` with every column in the same chunks: columns chunked alike are
/// read by one place per row ([`Row`]); a frame whose columns are not
/// (no file read here was) is made one chunk a column.
fn chunked_alike(mut df: DataFrame) -> DataFrame {
    let chunks = |c: &Column| {
        c.as_materialized_series()
            .chunk_lengths()
            .collect::<Vec<_>>()
    };
    if let Some(first) = df.columns().first().map(chunks) {
        if df.columns().iter().any(|c| chunks(c) != first) {
            df.rechunk_mut();
        }
    }
    df
}

fn lines_of(path: &Path, reference_ns: Option<u64>) -> Result<Vec<u8>, String> {
    let df = read(path)?;
    let ep = strings(&df, "endpoint_url")?;
    let layout: Vec<usize> = ep.chunk_lengths().collect();
    let l = &layout[..];
    let (name, kind, le) = (
        Col::of(strings(&df, "metric_name")?, l)?,
        Col::of(strings(&df, "metric_type")?, l)?,
        Col::of(strings(&df, "bucket_le")?, l)?,
    );
    let ts = df
        .column("timestamp_ns")
        .and_then(|c| c.cast(&DataType::Int64))
        .map_err(|e| format!("column timestamp_ns: {e}"))?;
    let ts = Col::of(
        ts.i64().map_err(|e| format!("column timestamp_ns: {e}"))?,
        l,
    )?;
    let numbers = [
        floats(&df, "value")?,
        floats(&df, "sum")?,
        floats(&df, "count")?,
        floats(&df, "bucket_count")?,
    ];
    let [value, sum, count, bucket] = [0, 1, 2, 3].map(|k| Col::of(&numbers[k], l));
    let (value, sum, count, bucket) = (value?, sum?, count?, bucket?);
    let label_cols = LabelColumns::of(&df, l)?;
    // Each scrape's rows turned into its line as soon as they are read:
    // every scrape's samples held at once, as JSON maps, took 1.8 GB for a
    // 0.58 MB file of 2.1 M rows (docs/performance.md, 2026-12-07, tenth
    // session).
    let keys = scrape_order(&Col::of(ep, l)?, &name, &ts, l)?;
    let mut out = Vec::new();
    let mut scrape = Scrape::new();
    let mut key = Vec::new();
    // Every label set seen, by its JSON text: a scrape's series are mostly
    // the ones before it.
    let mut label_sets: HashMap<Vec<u8>, Rc<Map<String, Value>>> = HashMap::new();
    let mut seen_endpoint: Option<&str> = None;
    for (k, &(e, t, i)) in keys.iter().enumerate() {
        let Some(n) = name.get(i) else {
            return Err(null_key(i.0, i.1, l));
        };
        // A histogram has a row per bucket, each with the same label set,
        // whose map is made once per file, the first time it is seen.
        label_cols.key(i, &mut key);
        let series = (scrape.entry(n.to_string()).or_default())
            .entry(key.clone())
            .or_insert_with(|| {
                let labels = (label_sets.entry(key.clone()))
                    .or_insert_with(|| Rc::new(label_cols.labels(i)));
                (Rc::clone(labels), Sample::default())
            });
        let s = &mut series.1;
        let this_kind = kind.get(i).unwrap_or("");
        if s.kind != this_kind {
            s.kind = this_kind.to_string();
        }
        s.value = value.get(i).or(s.value);
        s.sum = sum.get(i).or(s.sum);
        s.count = count.get(i).or(s.count);
        if let (Some(l), Some(c)) = (le.get(i), bucket.get(i)) {
            s.buckets.push((l.to_string(), c));
        }
        if keys.get(k + 1).is_some_and(|x| (x.0, x.1) == (e, t)) {
            continue; // the scrape goes on
        }
        if seen_endpoint != Some(e) {
            seen_endpoint = Some(e);
            if let Some(r) = reference_ns.filter(|r| (*r as i64) < t) {
                line(&mut out, e, r as i64, &scrape, true);
            }
        }
        line(&mut out, e, t, &scrape, false);
        scrape.clear();
    }
    Ok(out)
}

/// The rows by scrape: (endpoint, time, row), sorted (a scrape's rows in
/// file order); AIPerf's rows are not in time order.
fn scrape_order<'a>(
    ep: &Col<'a, StringType>,
    name: &Col<StringType>,
    ts: &Col<Int64Type>,
    layout: &[usize],
) -> Result<Vec<(&'a str, i64, Row)>, String> {
    let mut keys = Vec::new();
    for (chunk, &len) in layout.iter().enumerate() {
        for at in 0..len {
            let r = (chunk, at);
            let (Some(e), Some(_), Some(t)) = (ep.get(r), name.get(r), ts.get(r)) else {
                return Err(null_key(chunk, at, layout));
            };
            keys.push((e, t, r));
        }
    }
    keys.sort_unstable();
    Ok(keys)
}

/// The error of a row without one of the columns that place it.
fn null_key(chunk: usize, at: usize, layout: &[usize]) -> String {
    let i = layout[..chunk].iter().sum::<usize>() + at;
    format!("row {i}: endpoint_url, metric_name or timestamp_ns is null")
}

/// The label columns (every string column not a fixed one), in name order
/// (a label set's key is its JSON text, names sorted), each with its name
/// as JSON.
struct LabelColumns<'a>(Vec<(String, String, Col<'a, StringType>)>);

impl<'a> LabelColumns<'a> {
    fn of(df: &'a DataFrame, layout: &[usize]) -> Result<Self, String> {
        let mut cols = Vec::new();
        for c in df.get_column_names() {
            if FIXED.contains(&c.as_str()) {
                continue;
            }
            let Some(ca) = df.column(c).ok().and_then(|c| c.str().ok()) else {
                continue; // not a string column: no label
            };
            let json_name = Value::from(c.as_str()).to_string();
            cols.push((c.to_string(), json_name, Col::of(ca, layout)?));
        }
        cols.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        Ok(LabelColumns(cols))
    }

    /// Row `i`'s label set as `Value::Object(labels).to_string()` writes
    /// it, into `key`.
    fn key(&self, i: Row, key: &mut Vec<u8>) {
        key.clear();
        key.push(b'{');
        for (_, json_col, ca) in &self.0 {
            if let Some(v) = ca.get(i) {
                if key.len() > 1 {
                    key.push(b',');
                }
                key.extend_from_slice(json_col.as_bytes());
                key.push(b':');
                json(key, v);
            }
        }
        key.push(b'}');
    }

    /// Row `i`'s label set.
    fn labels(&self, i: Row) -> Map<String, Value> {
        (self.0.iter())
            .filter_map(|(col, _, ca)| Some((col.clone(), Value::from(ca.get(i)?))))
            .collect()
    }
}

/// One scrape as a JSON line; `zero`: every cumulative series at 0 (the
/// baseline), gauges left out. Written as serde_json writes the line's
/// `Value` (keys sorted, a number not finite as `null`), without building
/// it: the values of every sample of every scrape, built and dropped, were
/// a third of a whole check's samples on a parquet file of 2.1 M rows
/// (docs/performance.md, 2026-12-07, tenth session).
fn line(out: &mut Vec<u8>, endpoint: &str, t: i64, families: &Scrape, zero: bool) {
    out.extend_from_slice(b"{\"endpoint_url\":");
    json(out, endpoint);
    out.extend_from_slice(b",\"metrics\":{");
    let mut first_family = true;
    for (family, series) in families {
        let mut kept = (series.iter()).filter(|(_, (_, s))| !(zero && s.kind == "gauge"));
        let Some(mut next) = kept.next() else {
            continue;
        };
        if !std::mem::take(&mut first_family) {
            out.push(b',');
        }
        json(out, family);
        out.extend_from_slice(b":[");
        loop {
            let (key, (labels, s)) = next;
            let z = |v: Option<f64>| if zero { v.map(|_| 0.0) } else { v };
            out.push(b'{');
            if s.buckets.is_empty() {
                if !labels.is_empty() {
                    out.extend_from_slice(b"\"labels\":");
                    out.extend_from_slice(key);
                    out.push(b',');
                }
                out.extend_from_slice(b"\"value\":");
                json(out, &z(s.value));
            } else {
                // A bound written twice keeps its last count, in the
                // bounds' text order, as a map of them does.
                let buckets: BTreeMap<&str, f64> = (s.buckets.iter())
                    .map(|(le, c)| (le.as_str(), if zero { 0.0 } else { *c }))
                    .collect();
                out.extend_from_slice(b"\"buckets\":{");
                for (j, (le, c)) in buckets.iter().enumerate() {
                    if j > 0 {
                        out.push(b',');
                    }
                    json(out, le);
                    out.push(b':');
                    json(out, c);
                }
                out.extend_from_slice(b"},\"count\":");
                json(out, &z(s.count));
                if !labels.is_empty() {
                    out.extend_from_slice(b",\"labels\":");
                    out.extend_from_slice(key);
                }
                out.extend_from_slice(b",\"sum\":");
                json(out, &z(s.sum));
            }
            out.push(b'}');
            match kept.next() {
                Some(n) => {
                    out.push(b',');
                    next = n;
                }
                None => break,
            }
        }
        out.push(b']');
    }
    out.extend_from_slice(b"},\"timestamp_ns\":");
    json(out, &t);
    out.extend_from_slice(b"}\n");
}

/// Reads currently inside [`guarded`]: while there is one, a panic raised
/// in polars' own source is not printed (it becomes the read's error).
static GUARDED: AtomicUsize = AtomicUsize::new(0);

/// `read()`, with a panic inside it (in this thread or in polars' worker
/// threads, which hand it back to this one) turned into an error saying
/// what failed (the caller names the file). The panic hook is chained once: it stays silent for a panic
/// located in a polars crate while a guarded read runs, and prints every
/// other panic as before.
fn guarded(read: impl FnOnce() -> Result<Vec<u8>, String>) -> Result<Vec<u8>, String> {
    static HOOK: Once = Once::new();
    HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let in_polars = (info.location()).is_some_and(|l| l.file().contains("polars"));
            if !(in_polars && GUARDED.load(Ordering::SeqCst) > 0) {
                previous(info);
            }
        }));
    });
    GUARDED.fetch_add(1, Ordering::SeqCst);
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(read));
    GUARDED.fetch_sub(1, Ordering::SeqCst);
    r.unwrap_or_else(|panic| {
        let why = (panic.downcast_ref::<&str>().copied())
            .or_else(|| panic.downcast_ref::<String>().map(String::as_str))
            .unwrap_or("no message");
        Err(format!(
            "the parquet reader failed ({why}): the file is probably damaged"
        ))
    })
}

/// `v` as serde_json writes it.
fn json<T: serde::Serialize + ?Sized>(out: &mut Vec<u8>, v: &T) {
    // Writing into a vector cannot fail.
    let _ = serde_json::to_writer(out, v);
}

#[cfg(test)]
mod tests {
    use super::*;

    const FIXTURE: &str = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/fixtures/parquet/late-warmup/server_metrics_export.parquet"
    );

    /// The lines follow the scrapes, not the order of the file's rows
    /// (AIPerf's rows are not in time order): the fixture's rows, with a
    /// copy of them from a second endpoint at the same times, reversed give
    /// the same lines, one per scrape of each endpoint and one baseline per
    /// endpoint.
    #[test]
    fn the_lines_do_not_depend_on_the_order_of_the_rows() {
        let file = std::fs::File::open(FIXTURE).expect("fixture");
        let df = ParquetReader::new(file).finish().expect("reads");
        let times = df
            .column("timestamp_ns")
            .expect("times")
            .i64()
            .expect("i64");
        let scrapes: std::collections::BTreeSet<i64> = times.iter().flatten().collect();
        let mut other = df.clone();
        let url = vec!["http://127.0.0.2:8000/metrics"; df.height()];
        (other.with_column(Column::new("endpoint_url".into(), url))).expect("replaces the column");
        let both = df.vstack(&other).expect("stacks");
        let dir = tempfile::tempdir().expect("tempdir");
        let write = |name: &str, mut d: DataFrame| {
            let path = dir.path().join(name);
            ParquetWriter::new(std::fs::File::create(&path).expect("create"))
                .finish(&mut d)
                .expect("writes");
            path
        };
        let (forward, reversed) = (
            write("f.parquet", both.clone()),
            write("r.parquet", both.reverse()),
        );
        // The window's start: before every scrape, so each endpoint gets
        // its baseline line.
        let reference = Some(1);
        let lines = to_lines(&forward, reference).expect("lines");
        assert_eq!(to_lines(&reversed, reference).expect("lines"), lines);
        let n = lines
            .split(|b| *b == b'\n')
            .filter(|l| !l.is_empty())
            .count();
        assert_eq!(n, 2 * scrapes.len() + 2);
    }

    /// A column is read by a row's place only when its chunks are the
    /// first column's: otherwise the place would name another row.
    #[test]
    fn a_column_chunked_otherwise_is_refused() {
        let mut two = Int64Chunked::from_slice("a".into(), &[1, 2]);
        two.append(&Int64Chunked::from_slice("a".into(), &[3]))
            .expect("appends");
        assert!(Col::of(&two, &[2, 1]).is_ok());
        assert_eq!(Col::of(&two, &[2, 1]).expect("col").get((1, 0)), Some(3));
        let e = Col::of(&two, &[3]).err().expect("refused");
        assert!(e.contains("column a"), "{e}");
    }

    /// A frame whose columns are chunked unlike each other is made one
    /// chunk a column, so that every column is read by a row's place.
    #[test]
    fn columns_chunked_unlike_each_other_are_made_one_chunk() {
        let mut a = Int64Chunked::from_slice("a".into(), &[1, 2]);
        a.append(&Int64Chunked::from_slice("a".into(), &[3]))
            .expect("appends");
        let b = Int64Chunked::from_slice("b".into(), &[4, 5, 6]);
        let df = DataFrame::new(3, vec![a.into_column(), b.into_column()]).expect("frame");
        let df = chunked_alike(df);
        let layout: Vec<usize> = df
            .column("a")
            .expect("a")
            .i64()
            .expect("i64")
            .chunk_lengths()
            .collect();
        assert_eq!(layout, vec![3]);
        let b = Col::of(df.column("b").expect("b").i64().expect("i64"), &layout).expect("alike");
        assert_eq!(b.get((0, 2)), Some(6));
    }

    /// What a column that decoded short says: polars' debug assertion on
    /// the frame's heights in a debug build (`cargo test`), this module's
    /// check in a release build, where that assertion is compiled out.
    pub(crate) const SHORT_COLUMN: &str = if cfg!(debug_assertions) {
        "the parquet reader failed (assertion `left == right` failed\n  left: 3757\n right: 4284)"
    } else {
        "column count has 3757 rows where the file has 4284"
    };

    /// In this process (no child process: the library's tests never ask
    /// for one), polars' panics on a damaged file and a column that decoded
    /// short are errors naming what went wrong. The bytes are from
    /// `tests/parquet.rs`'s `DAMAGE`, which holds the binary to them.
    #[test]
    fn a_damaged_file_is_an_error_in_this_process_too() {
        let good = std::fs::read(FIXTURE).expect("fixture");
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("damaged.parquet");
        for (at, byte, says) in [
            (2463, 0x45, "the parquet reader failed (assertion failed"),
            (8444, 0x70, "the parquet reader failed (thrift bool field)"),
            (5664, 0xf3, SHORT_COLUMN),
        ] {
            let mut bad = good.clone();
            bad[at] = byte;
            std::fs::write(&path, &bad).expect("write");
            let e = to_lines(&path, Some(1)).expect_err("damaged");
            assert!(e.contains(says), "byte {at}: {e}");
        }
    }

    /// Each line is written as serde_json writes its value (keys sorted,
    /// numbers in its form), the baseline's too: the lines the reader
    /// takes are what they were when each was a `Value`.
    #[test]
    fn each_line_is_serde_json_s_text_of_its_value() {
        let lines = to_lines(Path::new(FIXTURE), Some(1)).expect("lines");
        let text = std::str::from_utf8(&lines).expect("utf-8");
        assert!(text.ends_with('\n'));
        let mut n = 0;
        for l in text.lines() {
            let v: Value = serde_json::from_str(l).expect("a JSON line");
            assert_eq!(v.to_string(), l);
            n += 1;
        }
        // A histogram's buckets and a series' labels are among them.
        assert!(text.contains("\"buckets\":{") && text.contains("\"labels\":{"));
        assert!(n > 2, "{n} lines");
    }
}
