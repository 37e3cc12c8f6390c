//! Times loading `profile_export.jsonl` (read and parse, no checks) on one
//! core and on the whole pool, best of five each: the reader's own speed,
//! for work on the record scanner; and says how many records the line
//! shapes read.
//!
//!     cargo run --release --example load_times -- RUN_DIR [one]
//!
//! With `one`, only the one-core time (for A/B runs of two builds).
// The binary's allocator and `out!` (examples/common).
#[macro_use]
mod common;
use common::alloc;

use std::time::Instant;

use artifact_check::artifacts::records;

fn best_of_five(f: impl Fn() -> usize) -> (f64, usize) {
    let mut best = f64::INFINITY;
    let mut n = 0;
    for _ in 0..5 {
        let t = Instant::now();
        n = f();
        best = best.min(t.elapsed().as_secs_f64());
    }
    (best, n)
}

fn main() {
    alloc::configure();
    let dir = std::env::args().nth(1).expect("usage: load_times RUN_DIR");
    let path = std::path::Path::new(&dir).join(records::FILE);
    let bytes = std::fs::metadata(&path).expect("records file").len() as f64;
    let load = || records::read(&path).expect("reads").records.len();
    let one = rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build()
        .expect("pool");
    // On a pool worker the reader parses on that thread (one core).
    let (t1, n) = best_of_five(|| one.install(load));
    out!(
        "one core   {t1:.3} s  {:.2} GB/s  {n} records",
        bytes / t1 / 1e9
    );
    let read = records::read(&path).expect("reads");
    out!(
        "read through a line shape: {} of {} records",
        read.through_shapes,
        read.records.len()
    );
    if std::env::args().nth(2).as_deref() == Some("one") {
        return;
    }
    let (t, _) = best_of_five(load);
    out!("all cores  {t:.3} s  {:.2} GB/s", bytes / t / 1e9);
}
