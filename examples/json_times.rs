//! Times the parse of a run's two JSON exports, `profile_export_aiperf.json`
//! (`Summary::parse`) and `server_metrics_export.json` (serde into
//! `ServerMetricsExport`, as the loader's first try): each parsed 1,000
//! times from memory, the best of five rounds. What a run among many small
//! ones pays for these files, for work on their readers.
//!
//!     cargo run --release --example json_times -- RUN_DIR
// The binary's allocator and `out!` (examples/common).
#[macro_use]
mod common;
use common::alloc;

use artifact_check::artifacts::server_metrics::ServerMetricsExport;
use artifact_check::artifacts::summary::Summary;

fn best(bytes: &[u8], parse: impl Fn(&[u8]) -> bool) -> f64 {
    let mut best = f64::INFINITY;
    for _ in 0..5 {
        let t = std::time::Instant::now();
        for _ in 0..1000 {
            assert!(std::hint::black_box(parse(bytes)), "does not parse");
        }
        best = best.min(t.elapsed().as_secs_f64() / 1000.0);
    }
    best
}

fn main() {
    alloc::configure();
    let dir = std::path::PathBuf::from(std::env::args().nth(1).expect("usage: json_times RUN_DIR"));
    let read = |name: &str| std::fs::read(dir.join(name)).ok();
    if let Some(b) = read(artifact_check::artifacts::summary::FILE) {
        let t = best(&b, |b| Summary::parse(b).is_ok());
        out!(
            "summary         {:>8} bytes  {:.3} ms  {:.0} MB/s",
            b.len(),
            t * 1e3,
            b.len() as f64 / t / 1e6
        );
    }
    if let Some(b) = read(artifact_check::artifacts::server_metrics::FILE) {
        let t = best(&b, |b| {
            serde_json::from_slice::<ServerMetricsExport>(b).is_ok()
        });
        out!(
            "server metrics  {:>8} bytes  {:.3} ms  {:.0} MB/s",
            b.len(),
            t * 1e3,
            b.len() as f64 / t / 1e6
        );
    }
}
