//! Times each stage of auditing one run (load, the raw scrapes' state
//! order, model, each check, JSON; and, alone, the steady state's detection
//! the model makes beside its other walks), on the calling thread (the
//! model's own walks on the pool): where the time of `benches/bench.sh`
//! goes; and what one walk over the record vector costs.
//!
//!     cargo run --release --example stage_times -- RUN_DIR
// The binary's allocator and `out!` (examples/common).
#[macro_use]
mod common;
use common::alloc;

use std::time::Instant;

use artifact_check::checks::{self, Ctx};
use artifact_check::config::Settings;
use artifact_check::model::RunModel;

fn main() {
    alloc::configure();
    let dir = std::env::args().nth(1).expect("usage: stage_times RUN_DIR");
    let dir = std::path::Path::new(&dir);
    let settings = Settings::default();
    let t = Instant::now();
    let run = artifact_check::artifacts::load(dir);
    let mut last = t.elapsed();
    out!("load                {:8.3} s", last.as_secs_f64());
    // The raw scrapes' state order (computed once, on first use: here,
    // so the model's time below is without it).
    if let Some(sc) = run.scrapes.as_ref() {
        std::hint::black_box(sc.by_endpoint());
        let now = t.elapsed();
        out!("state order         {:8.3} s", (now - last).as_secs_f64());
        last = now;
    }
    let model = RunModel::build(&run, &settings);
    let ctx = Ctx {
        run: &run,
        model: &model,
        settings: &settings,
    };
    let mut lap = |name: &str| {
        let now = t.elapsed();
        out!("{name:20}{:8.3} s", (now - last).as_secs_f64());
        last = now;
    };
    lap("model");
    let mut reports = Vec::new();
    for check in checks::ALL {
        reports.push((check.run)(&ctx).report);
        lap(check.name);
    }
    let views: Vec<&dyn checks::CheckReport> = reports.iter().map(|r| r.as_ref()).collect();
    let json = serde_json::to_string(&views).expect("json");
    lap("report json");
    // The steady state's detection (made while the model is built, beside
    // its other walks, and inside the model's time above), timed alone.
    if let Some(read) = run.records.as_ref() {
        let t = Instant::now();
        std::hint::black_box(artifact_check::model::steady::detect(
            &read.records,
            &settings.steady,
        ));
        out!(
            "{:20}{:8.3} s",
            "steady state alone",
            t.elapsed().as_secs_f64()
        );
    }
    out!("report: {} bytes", json.len());
    out!(
        "record: {} bytes inline",
        std::mem::size_of::<artifact_check::artifacts::records::Record>()
    );
    // What one walk over the record vector costs (the checks make many):
    // the fastest of five, reading one metric of every record.
    if let Some(read) = run.records.as_ref() {
        use artifact_check::artifacts::records::Metric;
        let best = (0..5)
            .map(|_| {
                let t = Instant::now();
                let sum: f64 = read
                    .records
                    .iter()
                    .filter_map(|r| r.values.get(Metric::TimeToFirstToken))
                    .sum();
                std::hint::black_box(sum);
                t.elapsed().as_secs_f64()
            })
            .fold(f64::INFINITY, f64::min);
        out!(
            "one walk over {} records: {:.1} ms",
            read.records.len(),
            best * 1e3
        );
    }
    let t = Instant::now();
    drop(run);
    out!("drop of the run      {:8.3} s", t.elapsed().as_secs_f64());
}
