//! Entry points shared by the fuzz targets (`tests/fuzz/`) and their
//! regression test (`tests/fuzz_regressions.rs`), so a crash input found by
//! the fuzzer is replayed through exactly the same code in CI. Each must
//! return normally on any input: problems are findings, never panics.

use std::io::Write;

use crate::artifacts::{records, scrapes, server_metrics, summary};

/// `profile_export.jsonl` bytes through the streaming reader.
pub fn records_jsonl(data: &[u8]) {
    let _ = records::read_from(&mut &data[..]);
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
/// prefix-cache formulas.
pub fn server_metrics_json(data: &[u8]) {
    if let Ok(e) = serde_json::from_slice::<server_metrics::ServerMetricsExport>(data) {
        let _ = crate::checks::prefix_cache::server_rates(&e.metrics);
    }
}

/// `profile_export_aiperf.json` bytes through its reader.
pub fn summary_json(data: &[u8]) {
    let _ = summary::Summary::parse(data);
}

/// `server_metrics_export.jsonl` bytes through the raw-scrape reader.
pub fn scrapes_jsonl(data: &[u8]) {
    let _ = scrapes::read_from(data);
}

/// A whole run: the input is split at the first two `\0` bytes into the
/// records, the server-metrics export and the raw scrapes (the summary of a
/// real sample run completes it), written to a temporary run directory and
/// audited with every check.
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
    let _ = crate::audit_run(
        dir.path(),
        &crate::config::Settings::default(),
        &Default::default(),
    );
}
