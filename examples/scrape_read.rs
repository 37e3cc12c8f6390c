//! Times the raw-scrape reader alone on one file and prints what its
//! columns hold: where `benches/scrapes.sh`'s load time and memory go.
//!
//!     cargo run --release --example scrape_read -- server_metrics_export.jsonl [ROUNDS]
//!
//! Beside the file, the run's `server_metrics_export.json` (if there) types
//! the families, as in a full check: its gauges are not kept.
use std::time::Instant;

use artifact_check::artifacts::scrapes;

// The binary's allocator and `out!` (examples/common).
#[macro_use]
mod common;
use common::alloc;

fn main() {
    alloc::configure();
    let mut args = std::env::args().skip(1);
    let path = args.next().expect("usage: scrape_read FILE [ROUNDS]");
    let rounds: usize = args.next().map_or(3, |r| r.parse().expect("rounds"));
    let size = std::fs::metadata(&path).expect("file").len() as f64;
    let export = std::path::Path::new(&path).with_file_name("server_metrics_export.json");
    let interest = std::fs::read(&export)
        .ok()
        .and_then(|b| {
            serde_json::from_slice::<
                    artifact_check::artifacts::server_metrics::ServerMetricsExport,
                >(&b)
                .ok()
        })
        .map(|e| e.scrape_interest())
        .unwrap_or_default();
    for _ in 0..rounds {
        let t = Instant::now();
        let file = std::fs::File::open(&path).expect("open");
        let read = scrapes::read_with(file, &interest, Some(size as u64)).expect("read");
        let s = t.elapsed().as_secs_f64();
        println!(
            "{s:.3} s  {:.2} GB/s  {} scrapes  {} findings  columns {:.1} MB ({:.1} % of the file)",
            size / s / 1e9,
            read.scrapes.len(),
            read.findings.len(),
            read.bytes() as f64 / 1e6,
            read.bytes() as f64 / size * 100.0
        );
    }
}
