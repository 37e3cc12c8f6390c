//! Loads one run, then runs one check (or all four, as the binary does)
//! ten times and prints each time: a loop to profile a check under `perf`
//! without the load dominating the samples.
//!
//!     cargo run --release --example checks_loop -- RUN_DIR [a|p|c|x]
//!
//! `a` artifacts, `p` phase_contamination, `c` cold_connections,
//! `x` prefix_cache; anything else or nothing: all four (`checks::run_all`).
// The binary's allocator and `out!` (examples/common).
#[macro_use]
mod common;
use common::alloc;

use artifact_check::checks::{self, Ctx};
use artifact_check::config::Settings;
use artifact_check::model::RunModel;
fn main() {
    alloc::configure();
    let dir = std::env::args()
        .nth(1)
        .expect("usage: checks_loop RUN_DIR [a|p|c|x]");
    let which = std::env::args().nth(2).unwrap_or_default();
    let run = artifact_check::artifacts::load(std::path::Path::new(&dir));
    let settings = Settings::default();
    let model = RunModel::build(&run, &settings);
    let ctx = Ctx {
        run: &run,
        model: &model,
        settings: &settings,
    };
    // A check by name, or by its first letter (x: prefix_cache); else all.
    let one = checks::ALL
        .iter()
        .find(|c| c.name == which || (which == "x" && c.name == "prefix_cache"))
        .or_else(|| {
            let first = which.chars().next()?;
            checks::ALL.iter().find(|c| c.name.starts_with(first))
        });
    for _ in 0..10 {
        let t = std::time::Instant::now();
        match one {
            Some(c) => {
                std::hint::black_box((c.run)(&ctx));
            }
            None => {
                std::hint::black_box(checks::run_all(&ctx));
            }
        }
        eprintln!("{:.3}", t.elapsed().as_secs_f64());
    }
}
