//! Configuration file, flags over file, claims (--expect), and the documented
//! defaults matching the binary.

mod common;

use std::fs;
use std::path::Path;

use assert_cmd::Command;
use common::*;
use serde_json::Value;

fn in_dir(dir: &Path, args: &[&str]) -> (String, String, i32) {
    let out = Command::cargo_bin("artifact-check")
        .expect("binary")
        .current_dir(dir)
        .args(args)
        .output()
        .expect("runs");
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
        out.status.code().unwrap_or(-1),
    )
}

/// docs/configuration.md shows exactly what `artifact-check config` prints
/// without a file.
#[test]
fn documented_defaults_are_the_binarys() {
    let t = tempfile::tempdir().expect("tempdir");
    let (stdout, _, code) = in_dir(t.path(), &["config"]);
    assert_eq!(code, 0);
    let doc = fs::read_to_string(root().join("docs/configuration.md")).expect("doc");
    let block = doc
        .split("```toml\n")
        .nth(1)
        .and_then(|b| b.split("```").next())
        .expect("block");
    let printed: String = stdout.lines().skip(1).map(|l| format!("{l}\n")).collect();
    assert_eq!(printed, block);
}

/// The file is found in a parent directory; flags win over it.
#[test]
fn file_in_a_parent_applies_and_flags_win() {
    let t = tempfile::tempdir().expect("tempdir");
    fs::write(t.path().join("artifact-check.toml"), "fail-on = \"info\"\n").expect("write");
    let sub = t.path().join("a/b");
    fs::create_dir_all(&sub).expect("mkdir");
    let clean = run_dir("clean").display().to_string();
    let (_, _, code) = in_dir(&sub, &[&clean]);
    assert_eq!(code, 1, "fail-on = info from the file");
    let (_, _, code) = in_dir(&sub, &["--fail-on", "error", &clean]);
    assert_eq!(code, 0, "the flag wins");
    let (stdout, _, _) = in_dir(&sub, &["config"]);
    assert!(stdout.contains("fail-on = \"info\""));
    fs::write(
        t.path().join("artifact-check.toml"),
        "fail-on = \"info\"\nignore = [\"aiperf-version-advisory\", \"phase-window-overlap\", \
         \"cache-rate-unknown\"]\n",
    )
    .expect("write");
    let (_, _, code) = in_dir(&sub, &[&clean]);
    assert_eq!(code, 0, "ignore from the file");
}

/// Unknown keys, unknown codes and bad values in the file are errors naming them.
#[test]
fn bad_config_is_exit_2_naming_the_key() {
    let t = tempfile::tempdir().expect("tempdir");
    let clean = run_dir("clean").display().to_string();
    for (text, needle) in [
        ("[cold-connections]\nbias = 3.0\n", "unknown field `bias`"),
        ("ignore = [\"no-such-code\"]\n", "no-such-code"),
        ("[prefix-cache]\ngap-pp = -1.0\n", "prefix-cache.gap-pp"),
        ("fail-on = \"sometimes\"\n", "sometimes"),
    ] {
        fs::write(t.path().join("artifact-check.toml"), text).expect("write");
        let (_, stderr, code) = in_dir(t.path(), &[&clean]);
        assert_eq!(code, 2, "{text}");
        assert!(stderr.contains(needle), "{text}: {stderr}");
        assert!(stderr.contains("artifact-check.toml"), "{stderr}");
    }
}

/// A request-scoped metric named by the user that exists in no run is an
/// error; one that exists is compared.
#[test]
fn user_metric_must_exist_in_some_run() {
    let clean = run_dir("clean").display().to_string();
    let (_, _, code) = cli(&[
        "--request-scoped-metric",
        "vllm:no_such_metric=completion",
        &clean,
    ]);
    assert_eq!(code, 2);
    let (report, code) = json_report(
        &[&run_dir("clean")],
        &["--request-scoped-metric", "vllm:prompt_tokens=completion"],
    );
    assert_ne!(code, 2);
    let rows = report["runs"][0]["checks"]["phase_contamination"]["metrics"]
        .as_array()
        .expect("rows");
    assert!(rows
        .iter()
        .any(|r| r["metric"] == "vllm:prompt_tokens" && r["framework"] == "user"));
}

/// TTFT of the successful profiling records on reused connections.
fn warm_ttfts(recs: &[Value]) -> Vec<f64> {
    recs.iter()
        .filter(|r| is_profiling_ok(r))
        .filter(|r| metric(r, "http_req_connection_reused") == Some(1.0))
        .filter_map(|r| metric(r, "time_to_first_token"))
        .collect()
}

/// --expect: a claim that matches the cleaned artifacts passes, one that does
/// not fails with its difference; unknown claim names are usage errors.
#[test]
fn claims_are_held_to_the_cleaned_artifacts() {
    let recs = records("cold-tls");
    let warm = warm_ttfts(&recs);
    let all: Vec<f64> = recs
        .iter()
        .filter(|r| is_profiling_ok(r))
        .filter_map(|r| metric(r, "time_to_first_token"))
        .collect();
    let (warm_p99, all_p99) = (percentile(&warm, 99.0), percentile(&all, 99.0));
    let t = tempfile::tempdir().expect("tempdir");
    let claims = t.path().join("claims.toml");
    let run = run_dir("cold-tls");
    // The warm figure passes.
    fs::write(
        &claims,
        format!("[[claim]]\nname = \"ttft_p99_ms\"\nvalue = {warm_p99}\ntolerance-pct = 1.0\n"),
    )
    .expect("write");
    let (report, _) = json_report(
        &[&run],
        &[
            "--expect",
            claims.to_str().expect("utf8"),
            "--select",
            "claim-mismatch",
        ],
    );
    let c = &report["runs"][0]["claims"][0];
    assert_eq!(c["within"], true);
    assert!((c["supported"].as_f64().expect("s") - warm_p99).abs() < 1e-9);
    // AIPerf's published all-records p99 is what the cold requests inflate.
    fs::write(&claims, format!("[[claim]]\nname = \"time_to_first_token.p99\"\nvalue = {all_p99}\ntolerance-pct = 5.0\n"))
        .expect("write");
    let (report, code) = json_report(
        &[&run],
        &[
            "--expect",
            claims.to_str().expect("utf8"),
            "--select",
            "claim-mismatch",
        ],
    );
    assert_eq!(code, 1);
    let f = findings(&report["runs"][0], "claim-mismatch");
    assert_eq!(f.len(), 1);
    assert_eq!(report["runs"][0]["claims"][0]["within"], false);
    // Unknown names are a usage error.
    fs::write(
        &claims,
        "[[claim]]\nname = \"ttft_p42_ms\"\nvalue = 1\ntolerance = 1\n",
    )
    .expect("write");
    let (_, stderr, code) = cli(&[
        "--expect",
        claims.to_str().expect("utf8"),
        run.to_str().expect("utf8"),
    ]);
    assert_eq!(code, 2);
    assert!(stderr.contains("unknown claim \"ttft_p42_ms\""), "{stderr}");
    // The prefix-cache claim is the clients' rate.
    let pc = run_dir("prefix-cache");
    let (r, _) = json_report(&[&pc], &[]);
    let rate = r["runs"][0]["checks"]["prefix_cache"]["client"]["hit_rate"]
        .as_f64()
        .expect("rate");
    fs::write(
        &claims,
        format!("[[claim]]\nname = \"prefix_cache_hit_rate\"\nvalue = {rate}\ntolerance = 0.001\n"),
    )
    .expect("write");
    let (report, _) = json_report(&[&pc], &["--expect", claims.to_str().expect("utf8")]);
    assert_eq!(report["runs"][0]["claims"][0]["within"], Value::Bool(true));
}

/// `clean` reads the configuration file too (its thresholds classify the
/// connections): a bad value there is an error naming the key, as for an audit.
#[test]
fn clean_reads_the_configuration_file() {
    let t = tempfile::tempdir().expect("tempdir");
    let file = t.path().join("strict.toml");
    fs::write(&file, "[cold-connections]\nconnect-ms = -3.0\n").expect("write");
    let run = run_dir("cold-tls").display().to_string();
    let out = t.path().join("out").display().to_string();
    let args = ["clean", &run, "--out", &out, "--exclude-cold"];
    let (_, stderr, code) = in_dir(
        t.path(),
        &[&args[..], &["--config", file.to_str().expect("utf8")]].concat(),
    );
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("cold-connections.connect-ms"), "{stderr}");
    assert!(
        !t.path().join("out").exists(),
        "nothing written on a bad configuration"
    );
    // Found from the current directory, as for an audit.
    fs::write(
        t.path().join("artifact-check.toml"),
        "[cold-connections]\ndns-ms = -1.0\n",
    )
    .expect("write");
    let (_, stderr, code) = in_dir(t.path(), &args);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("cold-connections.dns-ms"), "{stderr}");
    fs::remove_file(t.path().join("artifact-check.toml")).expect("rm");
    let (stdout, stderr, code) = in_dir(t.path(), &args);
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("kept 20 record(s)"), "{stdout}");
}

/// JUnit has a testcase per claim (classname `artifact-check.claims`): the
/// warm p99 passes, AIPerf's all-records p99 held to a 1 % tolerance of the
/// warm figure fails.
#[test]
fn junit_has_a_testcase_per_claim() {
    let warm = warm_ttfts(&records("cold-tls"));
    let warm_p99 = percentile(&warm, 99.0);
    let t = tempfile::tempdir().expect("tempdir");
    let claims = t.path().join("claims.toml");
    fs::write(
        &claims,
        format!(
            "[[claim]]\nname = \"ttft_p99_ms\"\nvalue = {warm_p99}\ntolerance-pct = 1.0\n\n\
             [[claim]]\nname = \"time_to_first_token.p99\"\nvalue = {}\ntolerance-pct = 1.0\n",
            warm_p99 * 3.0
        ),
    )
    .expect("write");
    let run = run_dir("cold-tls");
    let (xml, _, _) = cli(&[
        "--format",
        "junit",
        "--expect",
        claims.to_str().expect("utf8"),
        run.to_str().expect("utf8"),
    ]);
    let doc = roxmltree::Document::parse(&xml).expect("xml");
    let cases: Vec<roxmltree::Node> = doc
        .descendants()
        .filter(|n| {
            n.has_tag_name("testcase") && n.attribute("classname") == Some("artifact-check.claims")
        })
        .collect();
    assert_eq!(cases.len(), 2, "{xml}");
    let failed = |n: &roxmltree::Node| n.children().any(|c| c.has_tag_name("failure"));
    assert_eq!(cases[0].attribute("name"), Some("claim ttft_p99_ms"));
    assert!(!failed(&cases[0]));
    assert_eq!(
        cases[1].attribute("name"),
        Some("claim time_to_first_token.p99")
    );
    assert!(failed(&cases[1]));
    // Every check's testcase has a classname too.
    assert!(doc
        .descendants()
        .filter(|n| n.has_tag_name("testcase"))
        .all(|n| n.attribute("classname").is_some()));
}

/// A scoped ignore silences its code for one metric (or endpoint, or runs
/// matching a glob) and no other; it needs a reason and a scope.
#[test]
fn a_scoped_ignore_silences_one_metric_and_not_another() {
    let run = run_dir("prefix-cache-boundary");
    // The metrics the out-of-order-baseline findings move.
    let count = |report: &Value| {
        findings(&report["runs"][0], "out-of-order-baseline")
            .iter()
            .flat_map(|f| f["metrics"].as_array().cloned().unwrap_or_default())
            .map(|m| m["metric"].as_str().unwrap_or("").to_string())
            .collect::<Vec<String>>()
    };
    let others = |report: &Value| {
        report["runs"][0]["findings"]
            .as_array()
            .expect("findings")
            .iter()
            .filter(|f| f["code"] != "out-of-order-baseline")
            .count()
    };
    let (before, _) = json_report(&[&run], &[]);
    let metrics = count(&before);
    assert!(metrics.contains(&"vllm:time_to_first_token_seconds".to_string()));
    assert!(metrics.len() > 1);
    let t = tempfile::tempdir().expect("tempdir");
    let cfg = t.path().join("artifact-check.toml");
    // A metric the cause does not move silences nothing.
    fs::write(
        &cfg,
        "[[scoped-ignore]]\ncode = \"out-of-order-baseline\"\nmetric = \"vllm:num_requests_running\"\n\
         reason = \"not moved\"\n",
    )
    .expect("write");
    let (other, _) = json_report(&[&run], &["--config", cfg.to_str().expect("utf8")]);
    assert_eq!(count(&other), metrics);
    fs::write(
        &cfg,
        "[[scoped-ignore]]\ncode = \"out-of-order-baseline\"\nmetric = \"vllm:time_to_first_token_seconds\"\n\
         reason = \"TTFT is taken from the clients in our reports\"\n",
    )
    .expect("write");
    let (after, _) = json_report(&[&run], &["--config", cfg.to_str().expect("utf8")]);
    // The one root-cause finding that moves it is silenced whole; the
    // other codes stay.
    assert!(count(&after).is_empty(), "{:?}", count(&after));
    assert_eq!(others(&after), others(&before));
    // Silenced, not lost: the finding is in `suppressed`, with the rule and
    // its reason, and SARIF marks it suppressed with that justification.
    let silenced = after["runs"][0]["suppressed"]
        .as_array()
        .expect("suppressed");
    assert_eq!(silenced.len(), 1, "{silenced:?}");
    assert_eq!(silenced[0]["rule"], "scoped-ignore");
    assert_eq!(
        silenced[0]["reason"],
        "TTFT is taken from the clients in our reports"
    );
    assert!(silenced[0]["finding"]["metrics"]
        .as_array()
        .expect("metrics")
        .iter()
        .any(|m| m["metric"] == "vllm:time_to_first_token_seconds"));
    let (sarif, _, _) = cli(&[
        run.to_str().expect("utf8"),
        "--config",
        cfg.to_str().expect("utf8"),
        "--format",
        "sarif",
    ]);
    let sarif: Value = serde_json::from_str(&sarif).expect("sarif");
    let marked: Vec<&Value> = sarif["runs"][0]["results"]
        .as_array()
        .expect("results")
        .iter()
        .filter(|r| r["suppressions"].is_array())
        .collect();
    assert_eq!(marked.len(), 1);
    assert!(marked[0]["suppressions"][0]["justification"]
        .as_str()
        .is_some_and(|j| j.contains("TTFT is taken from the clients")));
    let (text, _, _) = cli(&[
        run.to_str().expect("utf8"),
        "--config",
        cfg.to_str().expect("utf8"),
    ]);
    assert!(text.contains(", 1 suppressed)"), "{text}");
    for format in ["table", "markdown"] {
        let (text, _, _) = cli(&[
            run.to_str().expect("utf8"),
            "--config",
            cfg.to_str().expect("utf8"),
            "--format",
            format,
        ]);
        assert!(text.contains("1 suppressed"), "{format}: {text}");
    }
    // A run glob: only the runs it matches.
    fs::write(
        &cfg,
        "[[scoped-ignore]]\ncode = \"out-of-order-baseline\"\nrun = \"*/prefix-cache-*\"\nreason = \"known\"\n",
    )
    .expect("write");
    let other = run_dir("vllm-dp");
    let (after, _) = json_report(&[&run, &other], &["--config", cfg.to_str().expect("utf8")]);
    assert!(findings(&after["runs"][0], "out-of-order-baseline").is_empty());
    // Without a reason, or without a scope: a configuration error.
    for body in [
        "[[scoped-ignore]]\ncode = \"out-of-order-baseline\"\nmetric = \"x\"\n",
        "[[scoped-ignore]]\ncode = \"out-of-order-baseline\"\nreason = \"r\"\n",
    ] {
        fs::write(&cfg, body).expect("write");
        let (_, err, code) = cli(&[
            run.to_str().expect("utf8"),
            "--config",
            cfg.to_str().expect("utf8"),
        ]);
        assert_eq!(code, 2, "{body}");
        assert!(err.contains("scoped-ignore[0]"), "{err}");
    }
}

/// `--baseline`: an unchanged run passes against its own earlier report; a
/// new finding (a corrupt line added to the records) fails it.
#[test]
fn a_baseline_passes_an_unchanged_run_and_fails_a_new_finding() {
    let (t, dir) = copy_run("late-warmup");
    let d = dir.to_str().expect("utf8");
    let base = t.path().join("baseline.json");
    let (_, err, code) = cli(&[d, "--report", &format!("json={}", base.display())]);
    assert_eq!(code, 1, "late-warmup fails on its own: {err}");
    let b = base.to_str().expect("utf8");
    let (report, code) = json_report(&[&dir], &["--baseline", b]);
    assert_eq!(code, 0, "{report}");
    assert_eq!(
        report["runs"][0]["findings"].as_array().map(Vec::len),
        Some(0)
    );
    // Accepted, not lost: every one is in `suppressed`, by the baseline.
    let silenced = report["runs"][0]["suppressed"]
        .as_array()
        .expect("suppressed");
    assert!(!silenced.is_empty());
    assert!(silenced.iter().all(|s| s["rule"] == "baseline"));
    let p = dir.join("profile_export.jsonl");
    let mut text = fs::read_to_string(&p).expect("read");
    text.push_str("{\"metadata\": 5}\n");
    fs::write(&p, text).expect("write");
    let (report, code) = json_report(&[&dir], &["--baseline", b]);
    assert_eq!(code, 1);
    let codes: Vec<&str> = report["runs"][0]["findings"]
        .as_array()
        .expect("findings")
        .iter()
        .filter_map(|f| f["code"].as_str())
        .collect();
    assert_eq!(codes, vec!["invalid-record"]);
    // Not a report: exit 2.
    let (_, err, code) = cli(&[d, "--baseline", p.to_str().expect("utf8")]);
    assert_eq!(code, 2);
    assert!(err.contains("not an artifact-check JSON report"), "{err}");
}

/// A suppression that silenced nothing warns (`unused-suppression`, as
/// ruff's RUF100): a baseline entry whose finding is gone, and a scoped
/// ignore whose run glob names the run but silenced nothing there. One
/// that is used does not.
#[test]
fn an_unused_suppression_warns() {
    let (t, dir) = copy_run("late-warmup");
    let d = dir.to_str().expect("utf8");
    // The baseline of the broken run, applied to the same run fixed: its
    // entries match nothing.
    let base = t.path().join("baseline.json");
    let _ = cli(&[d, "--report", &format!("json={}", base.display())]);
    let b = base.to_str().expect("utf8");
    let (report, _) = json_report(&[&dir], &["--baseline", b]);
    let unused = |r: &Value| -> Vec<Value> {
        r["runs"][0]["findings"]
            .as_array()
            .expect("findings")
            .iter()
            .filter(|f| f["code"] == "unused-suppression")
            .cloned()
            .collect()
    };
    assert!(unused(&report).is_empty(), "every entry is used: {report}");
    let (_keep, clean) = copy_run("clean");
    let clean_base = t.path().join("clean-baseline.json");
    // A baseline of late-warmup's findings under the clean run's identity.
    let mut v: Value =
        serde_json::from_str(&fs::read_to_string(&base).expect("read")).expect("json");
    let (clean_report, _) = json_report(&[&clean], &[]);
    v["runs"][0]["id"] = clean_report["runs"][0]["id"].clone();
    v["runs"][0]["benchmark_id"] = Value::Null;
    fs::write(&clean_base, v.to_string()).expect("write");
    let (report, code) = json_report(
        &[&clean],
        &["--baseline", clean_base.to_str().expect("utf8")],
    );
    let u = unused(&report);
    assert_eq!(u.len(), 1, "{report}");
    assert_eq!(u[0]["severity"], "warning");
    assert!(
        u[0]["message"]
            .as_str()
            .expect("m")
            .contains("baseline late-warmup-observation"),
        "{}",
        u[0]
    );
    assert_eq!(code, 0, "a warning does not fail at the default level");
    // A scoped ignore naming the run by glob, silencing nothing there.
    let cfg = t.path().join("artifact-check.toml");
    fs::write(
        &cfg,
        "[[scoped-ignore]]\ncode = \"counter-reset\"\nrun = \"*clean*\"\nreason = \"restarts are planned\"\n",
    )
    .expect("write");
    let (report, _) = json_report(&[&clean], &["--config", cfg.to_str().expect("utf8")]);
    let u = unused(&report);
    assert_eq!(u.len(), 1, "{report}");
    assert!(u[0]["message"]
        .as_str()
        .expect("m")
        .contains("scoped-ignore counter-reset (restarts are planned)"));
    // A scoped ignore for every run that silences nothing in any: a warning
    // of the audit, which --fail-on warning fails on.
    fs::write(
        &cfg,
        "[[scoped-ignore]]\ncode = \"late-warmup-observation\"\nmetric = \"vllm:no_such_metric\"\n\
         reason = \"never matches\"\n\n[[scoped-ignore]]\ncode = \"late-warmup-observation\"\n\
         metric = \"vllm:request_prefill_time_seconds\"\nreason = \"accepted\"\n",
    )
    .expect("write");
    let c = cfg.to_str().expect("utf8");
    let (report, code) = json_report(&[&clean, &dir], &["--config", c]);
    let audit = report["summary"]["unused_suppressions"]
        .as_array()
        .expect("unused");
    assert_eq!(audit.len(), 1, "{audit:?}");
    assert!(audit[0].as_str().expect("s").contains("(never matches)"));
    assert_eq!(code, 0);
    let (_, code) = json_report(&[&clean, &dir], &["--config", c, "--fail-on", "warning"]);
    assert_eq!(code, 1);
}

/// Throughput claims are held to AIPerf's own figure: the summary's
/// `output_token_throughput` and `request_throughput` of every 0.13.0
/// sample run are supported within 0.01 %, and 10 % more is a mismatch.
#[test]
fn throughput_claims_are_held_to_aiperfs_own_figures() {
    let t = tempfile::tempdir().expect("tempdir");
    let claims = t.path().join("claims.toml");
    for name in ["clean", "cold-tls", "vllm-dp", "dynamo-disagg"] {
        let run = run_dir(name);
        let summary: serde_json::Value = serde_json::from_str(
            &fs::read_to_string(run.join("profile_export_aiperf.json")).expect("summary"),
        )
        .expect("json");
        for (scale, within) in [(1.0, true), (1.1, false)] {
            let mut text = String::new();
            for q in ["output_token_throughput", "request_throughput"] {
                let v = summary[q]["avg"].as_f64().expect(q) * scale;
                text.push_str(&format!(
                    "[[claim]]\nname = \"{q}\"\nvalue = {v}\ntolerance-pct = 0.01\n\n"
                ));
            }
            fs::write(&claims, text).expect("write");
            let (report, _) = json_report(&[&run], &["--expect", claims.to_str().expect("utf8")]);
            for c in report["runs"][0]["claims"].as_array().expect("claims") {
                assert_eq!(c["within"], within, "{name} x{scale}: {c}");
            }
        }
    }
}

/// Each threshold is declared once (`config::with_thresholds!`); its row in
/// docs/configuration.md is that declaration's key, flag and meaning, and
/// the page documents no threshold the table lacks.
#[test]
fn every_threshold_row_of_the_docs_is_its_declaration() {
    let doc = fs::read_to_string(root().join("docs/configuration.md")).expect("doc");
    let table = artifact_check::config::THRESHOLDS;
    assert!(table.len() >= 12, "{table:?}");
    for t in table {
        let flag = t.flag.replace('_', "-");
        let row = format!("| `{}` | `--{flag}` | {} |", t.key, t.meaning);
        assert!(
            doc.contains(&row),
            "docs/configuration.md lacks the row\n{row}"
        );
        // The flag exists with that meaning and default in the help.
        let (help, _, code) = cli(&["--help"]);
        assert_eq!(code, 0);
        assert!(
            help.contains(&format!("--{flag} <")),
            "--{flag} not in --help"
        );
    }
    let documented = doc
        .lines()
        .filter(|l| l.starts_with("| `") && l.contains("` | `--"))
        .filter(|l| l.split('|').nth(1).is_some_and(|key| key.contains('.')))
        .filter(|l| !l.contains("request-scoped-metric"))
        .count();
    assert_eq!(
        documented,
        table.len(),
        "a documented threshold the table lacks"
    );
}

/// Runs the binary in `dir`; returns (stdout, stderr, exit code).
fn cli_in(dir: &std::path::Path, args: &[&str]) -> (String, String, i32) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_artifact-check"))
        .current_dir(dir)
        .args(args)
        .output()
        .expect("binary runs");
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
        out.status.code().unwrap_or(-1),
    )
}

/// A baseline matches a run by its identity (the audited folder's name and
/// the run's path below it), not by how its path was spelled: a baseline of
/// `results/` accepts `./results`, `.` from inside it, its absolute path
/// and a symlink to it; a renamed copy matches by AIPerf's benchmark_id.
/// A new finding still fails each.
#[test]
fn one_baseline_holds_for_every_spelling_of_the_runs_path() {
    let t = tempfile::tempdir().expect("tempdir");
    let results = t.path().join("results");
    for name in ["late-warmup", "boundary-race"] {
        copy_dir(&run_dir(name), &results.join(name));
    }
    let (_, err, code) = cli_in(t.path(), &["results/", "--report", "json=b.json"]);
    assert_eq!(code, 1, "the runs fail on their own: {err}");
    std::os::unix::fs::symlink(&results, t.path().join("alias")).expect("symlink");
    copy_dir(&results, &t.path().join("renamed"));
    let abs = results.to_str().expect("utf8").to_string();
    for (cwd, path, baseline) in [
        (t.path().to_path_buf(), "./results", "b.json"),
        (results.clone(), ".", "../b.json"),
        (t.path().to_path_buf(), abs.as_str(), "b.json"),
        (t.path().to_path_buf(), "alias", "b.json"),
        (t.path().to_path_buf(), "renamed/", "b.json"),
    ] {
        let (out, err, code) = cli_in(&cwd, &[path, "--baseline", baseline]);
        assert_eq!(code, 0, "{path}: {out}{err}");
    }
    // A new finding is new under every spelling.
    let p = results.join("late-warmup/profile_export.jsonl");
    let mut text = fs::read_to_string(&p).expect("read");
    text.push_str("{\"metadata\": 5}\n");
    fs::write(&p, text).expect("write");
    let (out, _, code) = cli_in(&results, &[".", "--baseline", "../b.json"]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("invalid-record"), "{out}");
}
