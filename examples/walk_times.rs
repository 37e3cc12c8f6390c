//! Times the two ways to read many families of one endpoint's raw scrapes
//! (`server_metrics_export.jsonl`): one `attribution::cumulative` walk per
//! family (every point held), against one `attribution::each_point` walk
//! for all of them (a sink that counts the points), on the endpoint with
//! the most scrapes, over every family of the file, on the calling thread:
//! the fastest of nine interleaved rounds each. Both must count the same
//! points.
//!
//!     cargo run --release --example walk_times -- RUN_DIR
// The binary's allocator and `out!` (examples/common).
#[macro_use]
mod common;
use common::alloc;

use artifact_check::model::attribution;

fn main() {
    alloc::configure();
    let dir = std::env::args().nth(1).expect("usage: walk_times RUN_DIR");
    let run = artifact_check::artifacts::load(std::path::Path::new(&dir));
    let Some(sc) = run.scrapes.as_ref() else {
        out!("no raw scrapes in {dir}");
        return;
    };
    let by_endpoint = sc.by_endpoint();
    let Some((ep, scrapes)) = by_endpoint.iter().max_by_key(|(_, s)| s.len()) else {
        out!("no scrapes in {dir}");
        return;
    };
    let families: Vec<&str> = (0..sc.family_count() as u32)
        .map(|id| sc.family_name(id))
        .collect();
    let (mut each, mut one) = (f64::INFINITY, f64::INFINITY);
    let (mut points_each, mut points_one) = (0, 0);
    for _ in 0..9 {
        let t = std::time::Instant::now();
        points_each = (families.iter())
            .map(|f| attribution::cumulative(sc, ep, f, |_| true).len())
            .sum::<usize>();
        each = each.min(t.elapsed().as_secs_f64());
        let t = std::time::Instant::now();
        points_one = 0;
        let last = attribution::each_point(
            sc,
            ep,
            &families,
            |_, _| true,
            |_, _| {
                points_one += 1;
                true
            },
        );
        std::hint::black_box(last);
        one = one.min(t.elapsed().as_secs_f64());
    }
    assert_eq!(
        points_each, points_one,
        "the two walks counted different points"
    );
    out!(
        "{ep}: {} scrapes, {} families, {points_one} points: one walk per family {:.1} ms, one walk for all {:.1} ms",
        scrapes.len(),
        families.len(),
        each * 1e3,
        one * 1e3
    );
}
