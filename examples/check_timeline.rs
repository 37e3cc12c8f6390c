//! One audit's timeline on the pool, as the binary runs it: the load, the
//! model (its walks over the records, the steady state's among them, at
//! once), then the checks in `checks::run_all`'s schedule, each with the
//! worker it ran on and when it started and ended. It shows where a core
//! waits: a check that starts last and runs long leaves the other idle.
//!
//!     cargo run --release --example check_timeline -- RUN_DIR
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
    let dir = std::env::args()
        .nth(1)
        .expect("usage: check_timeline RUN_DIR");
    let settings = Settings::default();
    // On the calling thread, as the binary audits a single run (the
    // reader and the model use the pool from there).
    {
        let t = Instant::now();
        let run = artifact_check::artifacts::load(std::path::Path::new(&dir));
        let loaded = t.elapsed().as_secs_f64();
        out!("load                 0.000-{loaded:.3} s");
        let model = RunModel::build(&run, &settings);
        let built = t.elapsed().as_secs_f64();
        out!("model                {loaded:.3}-{built:.3} s");
        let ctx = Ctx {
            run: &run,
            model: &model,
            settings: &settings,
        };
        // Each check of the real schedule (`checks::run_all_with`), timed.
        let spans = std::sync::Mutex::new(Vec::new());
        checks::run_all_with(|c| {
            let from = t.elapsed().as_secs_f64();
            let out = (c.run)(&ctx);
            let to = t.elapsed().as_secs_f64();
            let worker = rayon::current_thread_index();
            if let Ok(mut s) = spans.lock() {
                s.push((c.name, worker, from, to));
            }
            out
        });
        let mut spans = spans.into_inner().unwrap_or_default();
        spans.sort_by(|a, b| a.2.total_cmp(&b.2));
        for (name, worker, from, to) in &spans {
            let w = worker.map_or("-".to_string(), |w| w.to_string());
            out!("{name:20} {from:.3}-{to:.3} s  worker {w}");
        }
        let end = spans.iter().map(|s| s.3).fold(built, f64::max);
        out!("checks               {built:.3}-{end:.3} s");
    }
}
