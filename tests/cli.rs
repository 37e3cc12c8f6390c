//! The command line: the README's commands, exit codes, filters, output
//! files, many runs at once.

mod common;

use std::fs;

use common::*;
use serde_json::Value;

/// The README's first command: every sample run gets a report and a verdict
/// (with more than ten runs, one line each).
#[test]
fn readme_command_reports_every_sample_run() {
    let paths: Vec<String> = RUNS
        .iter()
        .map(|r| run_dir(r).display().to_string())
        .collect();
    let args: Vec<&str> = paths.iter().map(String::as_str).collect();
    let (stdout, _, code) = cli(&args);
    assert!(stdout.contains(&format!("{} run(s):", RUNS.len())));
    // The same in JSON: each run has a status.
    let dirs: Vec<std::path::PathBuf> = RUNS.iter().map(|r| run_dir(r)).collect();
    let refs: Vec<&std::path::Path> = dirs.iter().map(|p| p.as_path()).collect();
    let (report, _) = json_report(&refs, &[]);
    for (r, run) in RUNS.iter().zip(report["runs"].as_array().expect("runs")) {
        assert!(run["path"].as_str().expect("path").ends_with(r), "{r}");
        assert!(run["status"].is_string(), "{r}");
    }
    assert_eq!(code, 1, "some sample runs carry error findings");
}

/// A folder is searched recursively; the servers/ and ledgers/ folders beside
/// the runs are not runs and not errors.
#[test]
fn a_folder_of_runs_is_searched_recursively() {
    let (report, code) = json_report(&[&root().join("sample-artifacts")], &[]);
    assert_eq!(report["runs"].as_array().expect("runs").len(), RUNS.len());
    assert!(report["errors"].as_array().expect("errors").is_empty());
    assert_eq!(code, 1);
}

/// A path that does not exist is named, exit 2, and the other paths are
/// still checked.
#[test]
fn missing_path_is_exit_2_and_others_are_still_checked() {
    let missing = root().join("no-such-run");
    let (report, code) = json_report(&[&missing, &run_dir("clean")], &[]);
    assert_eq!(code, 2);
    assert_eq!(report["runs"].as_array().expect("runs").len(), 1);
    let e = &report["errors"][0];
    assert!(e["path"]
        .as_str()
        .unwrap_or_default()
        .ends_with("no-such-run"));
    let (_, stderr, code) = cli(&[]);
    assert_eq!(code, 2);
    assert!(stderr.contains("give at least one PATH"));
}

/// --fail-on and --ignore change the exit code as documented.
#[test]
fn fail_on_and_ignore_change_the_exit_code() {
    let clean = run_dir("clean").display().to_string();
    let (_, _, code) = cli(&[&clean]);
    assert_eq!(code, 0, "clean has infos only");
    let (_, _, code) = cli(&["--fail-on", "warning", &clean]);
    assert_eq!(code, 0, "a clean run passes --fail-on warning");
    let (_, _, code) = cli(&["--fail-on", "info", &clean]);
    assert_eq!(code, 1, "the version advisory is info");
    // A run with warnings only: they fail --fail-on warning, and ignoring
    // every warning code it has passes it again.
    let (report, code) = json_report(&[&run_dir("cold-tls")], &[]);
    assert_eq!(code, 0, "cold-tls has warnings only");
    let mut warnings: Vec<String> = report["runs"][0]["findings"]
        .as_array()
        .expect("findings")
        .iter()
        .filter(|f| f["severity"] == "warning")
        .map(|f| f["code"].as_str().expect("code").to_string())
        .collect();
    warnings.sort();
    warnings.dedup();
    assert!(!warnings.is_empty());
    let tls = run_dir("cold-tls").display().to_string();
    let (_, _, code) = cli(&["--fail-on", "warning", &tls]);
    assert_eq!(code, 1);
    let ignore = warnings.join(",");
    let (_, _, code) = cli(&["--fail-on", "warning", "--ignore", &ignore, &tls]);
    assert_eq!(code, 0);
    let late = run_dir("late-warmup").display().to_string();
    let (_, _, code) = cli(&[&late]);
    assert_eq!(code, 1);
    let (_, _, code) = cli(&["--ignore", "late-warmup-observation", &late]);
    assert_eq!(code, 0);
    let (report, _) = json_report(
        &[&run_dir("late-warmup")],
        &["--select", "late-warmup-observation"],
    );
    let codes: Vec<&Value> = report["runs"][0]["findings"]
        .as_array()
        .expect("f")
        .iter()
        .map(|f| &f["code"])
        .collect();
    assert_eq!(codes, vec!["late-warmup-observation"]);
}

/// An unknown code or a bad threshold is a usage error (exit 2).
#[test]
fn unknown_code_or_bad_threshold_is_exit_2() {
    let clean = run_dir("clean").display().to_string();
    let (_, stderr, code) = cli(&["--ignore", "no-such-code", &clean]);
    assert_eq!(code, 2);
    assert!(
        stderr.contains("unknown finding code \"no-such-code\""),
        "{stderr}"
    );
    let (_, stderr, code) = cli(&["--cold-bias-pct=-3", &clean]);
    assert_eq!(code, 2);
    assert!(stderr.contains("--cold-bias-pct"), "{stderr}");
    let (_, stderr, code) = cli(&["--request-scoped-metric", "foo=sometime", &clean]);
    assert_eq!(code, 2);
    assert!(
        stderr.contains("arrival, first_token or completion"),
        "{stderr}"
    );
}

/// --output writes the report to a file.
#[test]
fn output_file_holds_the_report() {
    let t = tempfile::tempdir().expect("tempdir");
    let out = t.path().join("report.json");
    let (stdout, _, code) = cli(&[
        "--format",
        "json",
        "--output",
        out.to_str().expect("utf8"),
        run_dir("clean").to_str().expect("utf8"),
    ]);
    assert_eq!(code, 0);
    assert!(stdout.is_empty());
    let r: Value = serde_json::from_str(&fs::read_to_string(&out).expect("read")).expect("json");
    assert_eq!(r["summary"]["runs"], 1);
    // Nothing else was left in the directory (no temporary file).
    assert_eq!(fs::read_dir(t.path()).expect("list").count(), 1);
}

/// 200 copies of the samples: the same output with 1 and 2 worker threads.
#[test]
fn parallel_output_is_identical_to_serial() {
    let t = tempfile::tempdir().expect("tempdir");
    for i in 0..200 {
        let name = RUNS[i % RUNS.len()];
        copy_dir(&run_dir(name), &t.path().join(format!("run-{i:03}-{name}")));
    }
    let dir = t.path().to_str().expect("utf8");
    let (a, _, ca) = cli(&["--format", "json", "--jobs", "1", dir]);
    let (b, _, cb) = cli(&["--format", "json", "--jobs", "2", dir]);
    assert_eq!(ca, cb);
    assert_eq!(a, b);
    let r: Value = serde_json::from_str(&a).expect("json");
    assert_eq!(r["summary"]["runs"], 200);
    // The table for many runs: a line per run and the worst findings.
    let (table, _, _) = cli(&["--format", "full", "--jobs", "2", dir]);
    assert_eq!(table.lines().filter(|l| l.contains("run-")).count(), 200);
    assert!(table.contains("late-warmup-observation"));
}

/// The concise default: a clean run fits one screen with no warning line;
/// a contaminated run's first line is its verdict, then its numbers that
/// are not trusted (with what to publish), then its worst root cause; every
/// line within 200 characters; -q and --statistics.
#[test]
fn concise_output_is_short_and_worst_first() {
    let (clean, _, code) = cli(&[run_dir("clean").to_str().expect("utf8")]);
    assert_eq!(code, 0);
    assert!(clean.lines().count() < 15, "{clean}");
    assert!(!clean.contains("warning["), "{clean}");
    let late = run_dir("late-warmup");
    let (out, _, code) = cli(&[late.to_str().expect("utf8")]);
    assert_eq!(code, 1);
    let mut lines = out.lines();
    let first = lines.next().expect("a line");
    assert!(
        first.ends_with(": FAIL (1 error, 2 warning, 3 info)"),
        "{first}"
    );
    let second = lines.next().expect("a line");
    assert!(
        second.starts_with("  biased server on ")
            && second.contains("vllm:request_prefill_time_seconds count 6 → 5"),
        "{second}"
    );
    let cause = out
        .lines()
        .find(|l| l.contains("[late-warmup-observation] "))
        .expect("the root cause");
    assert!(cause.starts_with("  error["), "{cause}");
    // Info is counted, not listed (the full table lists it).
    assert!(!out.contains("  info["), "{out}");
    let (all, _, _) = cli(&[run_dir("").to_str().expect("utf8")]);
    assert!(all.lines().all(|l| l.chars().count() <= 200), "{all}");
    assert!(!out.contains(" +0 "), "no zero-valued effect: {out}");
    let (q, _, _) = cli(&["-q", late.to_str().expect("utf8")]);
    assert!(
        q.lines()
            .all(|l| l.contains(": error[") || l.contains(" run(s): ")),
        "{q}"
    );
    let (st, _, _) = cli(&["--statistics", run_dir("").to_str().expect("utf8")]);
    assert!(
        st.lines().any(|l| l
            .trim_start()
            .starts_with("3  error    late-warmup-observation")),
        "{st}"
    );
    assert!(!st.contains("sample-artifacts"), "{st}");
}

/// `artifact-check codes` lists every code once.
#[test]
fn codes_subcommand_lists_every_code() {
    let (stdout, _, code) = cli(&["codes"]);
    assert_eq!(code, 0);
    for c in artifact_check::codes() {
        assert_eq!(
            stdout
                .lines()
                .filter(|l| l.split_whitespace().next() == Some(c.as_str()))
                .count(),
            1
        );
    }
}

/// The table output never carries colour codes when not on a terminal.
#[test]
fn no_colour_when_not_a_terminal() {
    let (stdout, _, _) = cli(&[run_dir("late-warmup").to_str().expect("utf8")]);
    assert!(!stdout.contains('\u{1b}'));
}

/// The huge-page advice and the reuse of freed memory (src/alloc.rs) change
/// how memory is backed, never a result: with either forced on and forced
/// off, a run large enough for its record vector to be advised and its
/// columns to be reused (the cold-tls records repeated to 20,000) gets the
/// same report.
#[test]
fn huge_pages_or_memory_reuse_on_or_off_give_the_same_report() {
    let (_dir, run) = copy_run("cold-tls");
    let lines = fs::read_to_string(run.join("profile_export.jsonl")).expect("records");
    let per_copy = lines.lines().count();
    let big = lines.repeat(20_000usize.div_ceil(per_copy));
    fs::write(run.join("profile_export.jsonl"), big).expect("write");
    let report = |huge: &str, reuse: &str| {
        let out = assert_cmd::Command::cargo_bin("artifact-check")
            .expect("binary builds")
            .args(["--format", "json"])
            .arg(&run)
            .env("ARTIFACT_CHECK_HUGE_PAGES", huge)
            .env("ARTIFACT_CHECK_REUSE_MEMORY", reuse)
            .output()
            .expect("binary runs");
        (
            String::from_utf8(out.stdout).expect("UTF-8"),
            out.status.code(),
        )
    };
    let on = report("on", "on");
    assert!(on.0.contains("\"records_parsed\""), "a report: {}", on.0);
    assert_eq!(on, report("off", "on"));
    assert_eq!(on, report("on", "off"));
    assert_eq!(on, report("off", "off"));
}

/// A report's size follows its findings, not the records: the cold-tls
/// records repeated to 2,000 and to 20,000 give JSON reports within 10 %
/// of each other, each listing the first 100 cold request ids and counting
/// the rest.
#[test]
fn report_size_does_not_grow_with_the_records() {
    let report = |n: usize| {
        let (dir, run) = copy_run("cold-tls");
        let lines = fs::read_to_string(run.join("profile_export.jsonl")).expect("records");
        let per_copy = lines.lines().count();
        fs::write(
            run.join("profile_export.jsonl"),
            lines.repeat(n.div_ceil(per_copy)),
        )
        .expect("write");
        let out = assert_cmd::Command::cargo_bin("artifact-check")
            .expect("binary builds")
            .args(["--format", "json"])
            .arg(&run)
            .output()
            .expect("binary runs");
        drop(dir);
        String::from_utf8(out.stdout).expect("UTF-8")
    };
    let (small, big) = (report(2_000), report(20_000));
    assert!(
        big.len() < small.len() * 11 / 10,
        "{} bytes at 20,000 records against {} at 2,000",
        big.len(),
        small.len()
    );
    let v: serde_json::Value = serde_json::from_str(&big).expect("JSON");
    let cold = &v["runs"][0]["checks"]["cold_connections"];
    let listed = cold["cold_request_ids"].as_array().expect("a list").len();
    assert_eq!(listed, 100);
    assert_eq!(
        cold["cold_request_ids_unlisted"].as_u64(),
        cold["cold"].as_u64().map(|c| c - 100)
    );
}

/// `artifact-check explain CODE` prints every code's row of docs/checks.md;
/// an unknown code is exit 2.
#[test]
fn explain_prints_every_code_from_the_documentation() {
    let (codes, _, _) = cli(&["codes"]);
    let names: Vec<&str> = codes
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    assert!(names.len() > 30);
    for name in names {
        let (out, err, code) = cli(&["explain", name]);
        assert_eq!(code, 0, "{name}: {err}");
        assert!(out.starts_with(&format!("{name} (")), "{out}");
        assert!(
            out.contains("\nMeaning: ") || out.contains("\nWhen: "),
            "{name}: {out}"
        );
    }
    let (_, err, code) = cli(&["explain", "no-such-code"]);
    assert_eq!(code, 2);
    assert!(err.contains("unknown finding code"));
}

/// Shell completions and the man page come from the clap definition: they
/// name every subcommand and the audit flags.
#[test]
fn completions_and_man_page_are_generated() {
    for shell in ["bash", "zsh", "fish"] {
        let (out, err, code) = cli(&["completions", shell]);
        assert_eq!(code, 0, "{shell}: {err}");
        for word in ["explain", "report", "baseline", "statistics"] {
            assert!(out.contains(word), "{shell} completion lacks {word}");
        }
    }
    let (man, _, code) = cli(&["man"]);
    assert_eq!(code, 0);
    assert!(man.contains(".TH artifact-check 1"), "{man}");
    assert!(man.contains("baseline"));
}
