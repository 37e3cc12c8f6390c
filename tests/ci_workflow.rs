//! The GitHub Actions workflow of docs/ci.md, run: its `run:` commands,
//! under `bash -e` as on the runner, on a folder with a failing and a clean
//! run. The audit step fails (exit 1) and has still written every report;
//! the summary step then appends the Markdown to the step summary.

mod common;

use std::fs;
use std::process::Command;

use common::*;

/// The `run:` scripts of the workflow's steps, in order (`run: |` blocks
/// joined, line continuations kept for bash).
fn workflow_steps() -> Vec<(String, String)> {
    let doc = fs::read_to_string(root().join("docs/ci.md")).expect("docs/ci.md");
    let start = doc.find("name: audit-benchmarks").expect("the workflow");
    let yaml = &doc[start..start + doc[start..].find("```").expect("block end")];
    let mut steps = Vec::new();
    let mut name = String::new();
    let mut lines = yaml.lines().peekable();
    while let Some(line) = lines.next() {
        let t = line.trim_start();
        if let Some(n) = t.strip_prefix("- name: ") {
            name = n.to_string();
        } else if let Some(cmd) = t.strip_prefix("run: ") {
            let indent = line.len() - t.len();
            let script = if cmd == "|" {
                let mut body = Vec::new();
                while let Some(next) = lines.peek() {
                    let ni = next.len() - next.trim_start().len();
                    if next.trim().is_empty() || ni <= indent {
                        break;
                    }
                    body.push(next.trim_start().to_string());
                    lines.next();
                }
                body.join("\n")
            } else {
                cmd.to_string()
            };
            steps.push((name.clone(), script));
        }
    }
    steps
}

#[test]
fn the_documented_workflow_writes_every_report_when_the_audit_fails() {
    let steps = workflow_steps();
    let names: Vec<&str> = steps.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        [
            "Install artifact-check",
            "Audit result folders",
            "Step summary"
        ]
    );
    let t = tempfile::tempdir().expect("tempdir");
    for run in ["clean", "late-warmup"] {
        copy_dir(&run_dir(run), &t.path().join("results").join(run));
    }
    let bin = assert_cmd::cargo::cargo_bin("artifact-check");
    let path = format!(
        "{}:{}",
        bin.parent().expect("bin dir").display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let summary = t.path().join("step-summary.md");
    let step = |script: &str| {
        Command::new("bash")
            .args(["-e", "-c", script])
            .current_dir(t.path())
            .env("PATH", &path)
            .env("GITHUB_STEP_SUMMARY", &summary)
            .output()
            .expect("bash runs")
    };
    // The install step needs the network; the binary under test stands in.
    let audit = step(&steps[1].1);
    assert_eq!(
        audit.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&audit.stderr)
    );
    let annotations = String::from_utf8_lossy(&audit.stdout);
    assert!(annotations.lines().any(|l| l.starts_with("::error file=")));
    let out = t.path().join("out");
    let junit = fs::read_to_string(out.join("junit.xml")).expect("junit written");
    roxmltree::Document::parse(&junit).expect("valid XML");
    let json: serde_json::Value =
        serde_json::from_str(&fs::read_to_string(out.join("report.json")).expect("json written"))
            .expect("valid JSON");
    let sarif: serde_json::Value = serde_json::from_str(
        &fs::read_to_string(t.path().join("out/artifact-check.sarif")).expect("sarif written"),
    )
    .expect("sarif json");
    assert_eq!(sarif["version"], "2.1.0");
    assert_eq!(json["summary"]["runs"], 2);
    assert_eq!(json["summary"]["exit_code"], 1);
    let md = fs::read_to_string(out.join("summary.md")).expect("markdown written");
    assert!(md.starts_with("## artifact-check: 2 run(s)"));
    let s = step(&steps[2].1);
    assert!(s.status.success());
    assert_eq!(fs::read_to_string(&summary).expect("step summary"), md);
}

#[test]
fn a_report_path_inside_a_run_is_refused_before_anything_is_written() {
    let (t, dir) = copy_run("clean");
    let md = t.path().join("out/summary.md");
    let inside = dir.join("junit.xml");
    let (_, err, code) = cli(&[
        dir.to_str().expect("utf8"),
        "--report",
        &format!("markdown={}", md.display()),
        "--report",
        &format!("junit={}", inside.display()),
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("inside the audited run directory"), "{err}");
    assert!(!md.exists() && !inside.exists());
    let (_, err, code) = cli(&[dir.to_str().expect("utf8"), "--report", "yaml=x"]);
    assert_eq!(code, 2);
    assert!(err.contains("not a format"), "{err}");
}
