//! Every output format pinned on the sample runs (insta snapshots in
//! `tests/snapshots/`): a wording or layout change shows in review as a
//! snapshot diff. Regenerate deliberately with `INSTA_UPDATE=always cargo
//! test --test snapshots` (or `cargo insta review`) and read the diff.

mod common;

use common::*;

const FORMATS: &[&str] = &["table", "json", "markdown", "junit", "github"];

/// The binary's output for `args`, run from the crate root with relative
/// sample paths (so the snapshots hold no machine-specific path).
fn output(args: &[&str]) -> String {
    let (stdout, stderr, code) = cli(args);
    format!("exit: {code}\nstderr:\n{stderr}\nstdout:\n{stdout}")
}

fn sample_path(run: &str) -> String {
    format!("sample-artifacts/runs/{run}")
}

/// Each sample run alone, in every format.
#[test]
fn every_format_of_every_sample_run() {
    std::env::set_current_dir(root()).expect("chdir");
    for run in RUNS {
        for format in FORMATS {
            let path = sample_path(run);
            let text = output(&["--format", format, &path]);
            insta::assert_snapshot!(format!("{run}.{format}"), text);
        }
    }
}

/// All six runs in one invocation, in every format.
#[test]
fn every_format_of_all_sample_runs() {
    std::env::set_current_dir(root()).expect("chdir");
    for format in FORMATS {
        let text = output(&["--format", format, "sample-artifacts/runs"]);
        insta::assert_snapshot!(format!("all-runs.{format}"), text);
    }
}
