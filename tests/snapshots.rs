//! Every output format pinned on the sample runs (insta snapshots in
//! `tests/snapshots/`): a wording or layout change shows in review as a
//! snapshot diff. Regenerate deliberately with `INSTA_UPDATE=always cargo
//! test --test snapshots` (or `cargo insta review`) and read the diff.

mod common;

use common::*;

const FORMATS: &[&str] = &[
    "concise", "table", "json", "markdown", "junit", "github", "ndjson", "sarif", "gitlab", "html",
];

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
    for run in RUNS {
        for format in FORMATS {
            let path = sample_path(run);
            let text = output(&["--format", format, &path]);
            insta::assert_snapshot!(format!("{run}.{format}"), text);
        }
    }
}

/// Every sample run in one invocation, in every format. The JSON of each
/// run is pinned above; here only what the invocation adds (the order of
/// the runs, their statuses, the summary) is.
#[test]
fn every_format_of_all_sample_runs() {
    // The HTML of each run is pinned above; all of them in one page would
    // only repeat it.
    for format in FORMATS.iter().filter(|f| **f != "html") {
        let text = output(&["--format", format, "sample-artifacts/runs"]);
        if *format == "json" {
            let json = text.split_once("stdout:\n").map_or("", |x| x.1);
            let report: serde_json::Value = serde_json::from_str(json).expect("json");
            let runs: Vec<serde_json::Value> = report["runs"]
                .as_array()
                .expect("runs")
                .iter()
                .map(|r| serde_json::json!({"path": r["path"], "status": r["status"]}))
                .collect();
            let outline = serde_json::json!({"runs": runs, "summary": report["summary"]});
            let pretty = serde_json::to_string_pretty(&outline).expect("json");
            insta::assert_snapshot!("all-runs.json", pretty);
        } else {
            insta::assert_snapshot!(format!("all-runs.{format}"), text);
        }
    }
}

/// Every fixture run's findings (the concise format: one line per finding,
/// with its numbers), one snapshot per fixture folder: a change in a
/// reader, the model or a check that moves any report shows in review
/// (issue 17: reports identical on every sample and fixture run).
#[test]
fn every_fixture_run_concise() {
    let mut folders = vec![
        "fixtures/steady-state".to_string(),
        "fixtures/compare".to_string(),
        "fixtures/parquet".to_string(),
        "fixtures/accounting".to_string(),
    ];
    let mut versions: Vec<String> = std::fs::read_dir(root().join("fixtures/aiperf-versions"))
        .expect("versions")
        .flatten()
        .filter(|e| e.path().is_dir())
        .map(|e| {
            format!(
                "fixtures/aiperf-versions/{}",
                e.file_name().to_string_lossy()
            )
        })
        .collect();
    versions.sort();
    folders.extend(versions);
    for folder in &folders {
        let text = output(&["--format", "concise", folder]);
        let name = folder.trim_start_matches("fixtures/").replace('/', "-");
        insta::assert_snapshot!(format!("fixtures-{name}.concise"), text);
    }
}
