//! Times `attribution::cumulative` (the walk of one family's raw scrapes on
//! one endpoint, which the phase check's repairs, the prefix-cache check and
//! the timeline make) over every (endpoint, family) pair of a run's
//! `server_metrics_export.jsonl`, one after another on the calling thread:
//! the fastest of fifteen rounds. Prints a checksum of the points, so two
//! builds can be held to the same answer.
//!
//!     cargo run --release --example cumulative_times -- RUN_DIR
// The binary's allocator and `out!` (examples/common).
#[macro_use]
mod common;
use common::alloc;

use artifact_check::model::attribution;

fn main() {
    alloc::configure();
    let dir = std::env::args()
        .nth(1)
        .expect("usage: cumulative_times RUN_DIR");
    let run = artifact_check::artifacts::load(std::path::Path::new(&dir));
    let Some(sc) = run.scrapes.as_ref() else {
        out!("no raw scrapes in {dir}");
        return;
    };
    let endpoints: Vec<String> = sc.by_endpoint().keys().map(|e| e.to_string()).collect();
    let families: Vec<String> = (0..sc.family_count() as u32)
        .map(|id| sc.family_name(id).to_string())
        .collect();
    let (mut best, mut points, mut check) = (f64::INFINITY, 0, 0u64);
    for _ in 0..15 {
        let t = std::time::Instant::now();
        (points, check) = (0, 0);
        for ep in &endpoints {
            for f in &families {
                let pts = attribution::cumulative(sc, ep, f, |_| true);
                points += pts.len();
                for p in pts.iter() {
                    let sum = p.sum.map_or(7, f64::to_bits);
                    check = check
                        .wrapping_mul(31)
                        .wrapping_add(p.count.to_bits() ^ sum ^ p.t);
                }
            }
        }
        best = best.min(t.elapsed().as_secs_f64());
    }
    out!(
        "cumulative of {} (endpoint, family) pairs: {:.1} ms, {points} points, checksum {check:x}",
        endpoints.len() * families.len(),
        best * 1e3
    );
}
