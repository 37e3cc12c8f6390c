//! Entry points shared by the fuzz targets (`tests/fuzz/`) and their
//! regression test (`tests/fuzz_regressions.rs`), so a crash input found by
//! the fuzzer is replayed through exactly the same code in CI. Built only
//! with the `fuzzing` feature: these are test hooks, not an API.
//!
//! Each returns normally on any input (problems are findings, never panics)
//! and checks what must hold whatever the input: a panic here is either a
//! crash of the reader or a broken invariant, and both are bugs.

use std::io::Write;

use crate::artifacts::{records, scrapes, server_metrics, summary};
use crate::findings::{Finding, Severity};
use crate::RunStatus;

/// A finding about a line of `file` names that file and a line in
/// `1..=lines`.
fn assert_located(findings: &[Finding], file: &str, lines: u64) {
    for f in findings {
        assert_eq!(f.file.as_deref(), Some(file), "{f:?}");
        if let Some(line) = f.line {
            assert!(
                (1..=lines.max(1)).contains(&line),
                "line {line} of {lines}: {f:?}"
            );
        }
    }
}

/// `profile_export.jsonl` bytes through the streaming reader: records and
/// bad lines never outnumber the lines, records come in file order, and
/// every finding names the file and a line of it.
pub fn records_jsonl(data: &[u8]) {
    let Ok(read) = records::read_from(&mut &data[..]) else {
        return;
    };
    let lines = read.lines;
    assert!(
        read.records.len() as u64 <= lines,
        "{} records of {lines} lines",
        read.records.len()
    );
    assert!(
        read.records.windows(2).all(|w| w[0].line < w[1].line),
        "records out of file order"
    );
    assert!(read.records.iter().all(|r| (1..=lines).contains(&r.line)));
    assert_located(&read.findings, records::FILE, lines);
}

/// One `profile_export.jsonl` line through the fast record scanner and the
/// serde path: panics if the fast path accepts a line serde rejects or reads
/// it differently (a differential target: here a panic is the finding).
pub fn record_fast_path(data: &[u8]) {
    if let Ok(text) = std::str::from_utf8(data) {
        records::assert_agrees_lines(text);
    }
}

/// `server_metrics_export.json` bytes through its typed reader and the
/// prefix-cache formulas: a rate, when defined, is a fraction.
pub fn server_metrics_json(data: &[u8]) {
    if let Ok(e) = serde_json::from_slice::<server_metrics::ServerMetricsExport>(data) {
        for r in crate::checks::prefix_cache::server_rates(&e.metrics, &Default::default()) {
            if let Some(rate) = r.hit_rate {
                assert!((0.0..=1.0).contains(&rate), "{r:?}");
            }
        }
    }
}

/// `profile_export_aiperf.json` bytes through its reader: an error names
/// where it is.
pub fn summary_json(data: &[u8]) {
    if let Err(e) = summary::Summary::parse(data) {
        assert!(e.field.is_some() || !e.message.is_empty());
    }
}

/// `server_metrics_export.jsonl` bytes through the raw-scrape reader, and
/// differentially: every line reads as serde alone reads it (scanner,
/// columns and bucket coding agree with the reference).
pub fn scrapes_jsonl(data: &[u8]) {
    scrapes::assert_agrees(data);
    let Ok(read) = scrapes::read_from(data) else {
        return;
    };
    let lines = data.iter().filter(|b| **b == b'\n').count() as u64 + 1;
    assert!(read.scrapes.len() as u64 <= lines);
    assert_located(&read.findings, scrapes::FILE, lines);
}

/// A whole run: the input is split at the first two `\0` bytes into the
/// records, the server-metrics export and the raw scrapes (the summary of a
/// real sample run completes it), written to a temporary run directory and
/// audited with every check. The verdict must follow the findings.
pub fn whole_run(data: &[u8], summary_json: &[u8]) {
    let mut parts = data.splitn(3, |b| *b == 0);
    let (a, b, c) = (parts.next().unwrap_or(&[]), parts.next(), parts.next());
    let Ok(dir) = tempfile::tempdir() else { return };
    let write = |name: &str, bytes: &[u8]| {
        if let Ok(mut f) = std::fs::File::create(dir.path().join(name)) {
            let _ = f.write_all(bytes);
        }
    };
    write(records::FILE, a);
    if let Some(b) = b {
        write(server_metrics::FILE, b);
    }
    if let Some(c) = c {
        write(scrapes::FILE, c);
    }
    write(summary::FILE, summary_json);
    audit_and_check(dir.path(), byte_sum(data));
}

/// A real run (its files as `(name, bytes)`) whose raw-scrape numbers the
/// input overwrites, then audited with every check. Each 9 bytes of input
/// are a position (a `u16` picking one number of the scrapes file, modulo
/// their count), a kind byte and 6 value bytes read as: an integer up to
/// 2^64 + 1 and past it, a float from its bits (huge, tiny, negative; a
/// non-finite one as the largest finite), or a small count. The numbers are
/// what the attribution and reset logic size their work from: a count of
/// 1e300 once panicked there.
pub fn scrape_numbers(data: &[u8], files: &[(&str, &[u8])]) {
    let Some((_, scrapes_bytes)) = files.iter().find(|(n, _)| *n == scrapes::FILE) else {
        return;
    };
    let Ok(text) = std::str::from_utf8(scrapes_bytes) else {
        return;
    };
    let mut lines: Vec<serde_json::Value> = text
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let mut positions = Vec::new();
    for (i, v) in lines.iter().enumerate() {
        number_paths(v, &mut Vec::new(), &mut |p| positions.push((i, p)));
    }
    if positions.is_empty() {
        return;
    }
    for chunk in data.chunks_exact(9) {
        let pick = u16::from_le_bytes([chunk[0], chunk[1]]) as usize % positions.len();
        let mut raw = [0u8; 8];
        raw[..6].copy_from_slice(&chunk[3..9]);
        let bits = u64::from_le_bytes(raw);
        let value = match chunk[2] % 4 {
            0 => serde_json::json!(bits),
            1 => serde_json::json!(u64::MAX - (bits & 0xffff)),
            2 => {
                let f = f64::from_bits(bits.rotate_left(16) | (u64::from(chunk[2]) << 56));
                serde_json::json!(if f.is_finite() {
                    f
                } else {
                    f64::MAX.copysign(f)
                })
            }
            _ => serde_json::json!(bits % 1000),
        };
        let (line, path) = &positions[pick];
        if let Some(slot) = path.iter().try_fold(&mut lines[*line], |v, key| match key {
            Key::Field(k) => v.get_mut(k.as_str()),
            Key::Index(i) => v.get_mut(*i),
        }) {
            *slot = value;
        }
    }
    let Ok(dir) = tempfile::tempdir() else { return };
    for (name, bytes) in files {
        let body: Vec<u8> = if *name == scrapes::FILE {
            lines
                .iter()
                .map(|l| format!("{l}\n"))
                .collect::<String>()
                .into_bytes()
        } else {
            bytes.to_vec()
        };
        if std::fs::write(dir.path().join(name), body).is_err() {
            return;
        }
    }
    audit_and_check(dir.path(), byte_sum(data));
}

/// The input's bytes summed (wrapping): which format besides the HTML page
/// [`audit_and_check`] renders, the same for the same input.
fn byte_sum(data: &[u8]) -> u8 {
    data.iter().fold(0, |a, b| a.wrapping_add(*b))
}

/// A step of a path into a JSON value.
#[derive(Clone)]
enum Key {
    Field(String),
    Index(usize),
}

/// Calls `found` with the path of every number in `v`.
fn number_paths(v: &serde_json::Value, at: &mut Vec<Key>, found: &mut dyn FnMut(Vec<Key>)) {
    match v {
        serde_json::Value::Number(_) => found(at.clone()),
        serde_json::Value::Array(a) => {
            for (i, x) in a.iter().enumerate() {
                at.push(Key::Index(i));
                number_paths(x, at, found);
                at.pop();
            }
        }
        serde_json::Value::Object(m) => {
            for (k, x) in m {
                at.push(Key::Field(k.clone()));
                number_paths(x, at, found);
                at.pop();
            }
        }
        _ => {}
    }
}

/// Audits the run in `dir` with every check: the verdict must follow the
/// findings, and every finding says something with finite effects.
///
/// Then renders the report as the HTML page with the run's timeline, and in
/// one other format picked by `pick` (every format, over the inputs): a
/// format's writing is code of its own, over what the input made of the
/// report (a timeline of scrape intervals, binned requests, numbers that
/// are not finite), and must not fail or panic either. One format besides
/// the page, not all: rendering all ten took five times the audit, and
/// `whole_run` ran a tenth as many inputs (234 in 30 s; 2,537 at `4d69e4a`,
/// before any rendering).
fn audit_and_check(dir: &std::path::Path, pick: u8) {
    use clap::ValueEnum;
    let options = crate::RunOptions {
        timeline: true,
        ..Default::default()
    };
    let report = crate::audit_with_progress(
        &[dir.to_path_buf()],
        &crate::config::Settings::default(),
        &options,
        &[],
        &|| {},
    );
    assert_eq!(report.runs.len(), 1, "{:?}", report.errors);
    check_report(&report.runs[0]);
    let formats = crate::report::Format::value_variants();
    let other = formats[usize::from(pick) % formats.len()];
    for format in [crate::report::Format::Html, other] {
        let opts = crate::report::Options::default();
        crate::report::render(format, &report, opts, &mut std::io::sink())
            .unwrap_or_else(|e| panic!("{}: {e}", format.name()));
    }
}

/// A real run, written once (from the `(name, bytes)` of its files, the
/// same at every call of a target) and read once, audited by the settings
/// targets under what each input sets.
struct Loaded {
    dir: tempfile::TempDir,
    artifacts: crate::artifacts::RunArtifacts,
}

fn loaded(files: &[(&str, &[u8])]) -> Option<&'static Loaded> {
    static RUN: std::sync::OnceLock<Option<Loaded>> = std::sync::OnceLock::new();
    RUN.get_or_init(|| {
        let dir = tempfile::tempdir().ok()?;
        for (name, bytes) in files {
            std::fs::write(dir.path().join(name), bytes).ok()?;
        }
        let artifacts = crate::artifacts::load(dir.path());
        Some(Loaded { dir, artifacts })
    })
    .as_ref()
}

/// Audits the loaded run under `settings`, `options` and `claims`, and
/// checks the report.
fn audit_loaded(
    files: &[(&str, &[u8])],
    settings: &crate::config::Settings,
    options: &crate::RunOptions,
    claims: &[crate::claims::Claim],
) -> Option<crate::RunReport> {
    let run = loaded(files)?;
    let model = crate::model::RunModel::build(&run.artifacts, settings);
    let report = crate::audit_with_model(
        run.dir.path(),
        &run.artifacts,
        &model,
        settings,
        options,
        claims,
    );
    check_report(&report);
    Some(report)
}

/// `artifact-check.toml` text through its reader and over the defaults.
/// Settings it accepts: `artifact-check config` writes them as a file that
/// reads back to the same settings, and a real run audits under them with
/// the verdict following the findings.
pub fn config_toml(data: &[u8], files: &[(&str, &[u8])]) {
    use crate::config::{parse_config, Layer, Origin, Settings};
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let path = std::path::Path::new("artifact-check.toml");
    let Ok(layer) = parse_config(text, path) else {
        return;
    };
    let mut settings = Settings::default();
    let origin = Origin::File(path.to_path_buf());
    if layer.apply(&mut settings, &origin, crate::code).is_err() {
        return;
    }
    let written = toml::to_string(&Layer::effective(&settings)).expect("config writes");
    let mut again = Settings::default();
    parse_config(&written, path)
        .expect("what `config` writes reads back")
        .apply(&mut again, &origin, crate::code)
        .expect("what `config` writes applies");
    assert_eq!(again, settings, "{written}");
    audit_loaded(files, &settings, &Default::default(), &[]);
}

/// A claims file (`--expect`) through its reader, then held to a real run:
/// one result per claim, and the verdict follows the findings.
pub fn claims_toml(data: &[u8], files: &[(&str, &[u8])]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(claims) = crate::claims::parse(text, std::path::Path::new("claims.toml")) else {
        return;
    };
    assert!(claims.len() <= crate::claims::MAX_CLAIMS);
    let settings = crate::config::Settings::default();
    if let Some(report) = audit_loaded(files, &settings, &Default::default(), &claims) {
        assert_eq!(report.claims.len(), claims.len());
    }
}

/// A baseline (`--baseline`, an earlier JSON report) through its reader,
/// then applied to a real run: a finding it holds is suppressed, not
/// reported, and the verdict follows what is left.
pub fn baseline_json(data: &[u8], files: &[(&str, &[u8])]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(baseline) = crate::baseline::Baseline::parse(text, "baseline.json") else {
        return;
    };
    assert!(baseline.len() <= crate::baseline::MAX_BASELINE_ENTRIES);
    let options = crate::RunOptions {
        baseline,
        ..Default::default()
    };
    let settings = crate::config::Settings::default();
    let Some(report) = audit_loaded(files, &settings, &options, &[]) else {
        return;
    };
    let names = crate::findings::RunNames {
        shown: &report.path,
        id: &report.id,
        benchmark_id: report.benchmark_id.as_deref(),
    };
    for f in &report.findings {
        assert!(
            f.code == crate::baseline::UNUSED_SUPPRESSION || !options.baseline.contains(f, &names),
            "{f:?} is in the baseline"
        );
    }
}

/// The verdict of `run` follows its findings, and every finding says
/// something with finite effects.
fn check_report(run: &crate::RunReport) {
    let worst = run.findings.iter().map(|f| f.severity).max();
    let expected = match worst {
        _ if run.status == RunStatus::Error => RunStatus::Error,
        Some(Severity::Error) => RunStatus::Fail,
        Some(Severity::Warning) => RunStatus::Warn,
        _ => RunStatus::Pass,
    };
    assert_eq!(run.status, expected, "{:?}", run.findings);
    for f in &run.findings {
        assert!(!f.message.is_empty(), "{f:?}");
        assert!(f.effect.iter().all(|e| e.value.is_finite()), "{f:?}");
    }
}
