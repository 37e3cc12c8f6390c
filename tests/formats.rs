//! Every output format on the sample runs.

mod common;

use common::*;

fn all_runs(format: &str, extra: &[&str]) -> (String, i32) {
    let paths: Vec<String> = RUNS
        .iter()
        .map(|r| run_dir(r).display().to_string())
        .collect();
    let mut args = vec!["--format", format];
    args.extend_from_slice(extra);
    args.extend(paths.iter().map(String::as_str));
    let (stdout, _, code) = cli(&args);
    (stdout, code)
}

/// JUnit parses as XML: one testsuite per run, one testcase per check and
/// one per published number, and a failure for each check with findings at
/// or above the fail level and for each published number such a finding
/// moves.
#[test]
fn junit_has_a_suite_per_run_and_the_expected_failures() {
    let (xml, _) = all_runs("junit", &[]);
    let (json, _) = all_runs("json", &[]);
    let report: serde_json::Value = serde_json::from_str(&json).expect("json");
    let doc = roxmltree::Document::parse(&xml).expect("valid XML");
    let suites: Vec<_> = doc
        .descendants()
        .filter(|n| n.has_tag_name("testsuite"))
        .collect();
    assert_eq!(suites.len(), RUNS.len());
    let mut expected_failures = 0;
    for run in report["runs"].as_array().expect("runs") {
        let checks: std::collections::BTreeSet<&str> = run["findings"]
            .as_array()
            .expect("f")
            .iter()
            .filter(|f| f["severity"] == "error")
            .map(|f| f["check"].as_str().expect("check"))
            .collect();
        // A published number fails when an error finding moves it.
        let moved_by_error = |p: &serde_json::Value| {
            p["causes"].as_array().expect("causes").iter().any(|c| {
                run["findings"]
                    .as_array()
                    .expect("f")
                    .iter()
                    .any(|f| f["code"] == *c && f["severity"] == "error")
            })
        };
        let published = run["published"].as_array().expect("published");
        let numbers_failing = published
            .iter()
            .filter(|p| p["verdict"] == "biased" || p["verdict"] == "wrong")
            .filter(|p| moved_by_error(p))
            .count();
        expected_failures += checks.len() + numbers_failing;
        let suite = suites
            .iter()
            .find(|s| s.attribute("name") == run["path"].as_str())
            .expect("a suite for the run");
        let cases = suite
            .children()
            .filter(|n| n.has_tag_name("testcase"))
            .count();
        // A testcase per check of the registry and per published number.
        assert_eq!(
            cases,
            run["checks"].as_object().expect("checks").len() + published.len()
        );
        assert_eq!(run["checks"].as_object().expect("checks").len(), 5);
        assert_eq!(
            suite
                .attribute("failures")
                .and_then(|f| f.parse::<usize>().ok()),
            Some(checks.len() + numbers_failing)
        );
    }
    let failures = doc
        .descendants()
        .filter(|n| n.has_tag_name("failure"))
        .count();
    assert_eq!(failures, expected_failures);
    assert!(expected_failures >= 3);
    let root = doc.root_element();
    assert_eq!(
        root.attribute("failures")
            .and_then(|f| f.parse::<usize>().ok()),
        Some(expected_failures)
    );
}

/// Markdown renders one table row per run.
#[test]
fn markdown_has_one_row_per_run() {
    let (md, _) = all_runs("markdown", &[]);
    for r in RUNS {
        let path = run_dir(r).display().to_string();
        let row = format!("| {} |", artifact_check::report::escape::markdown(&path));
        assert_eq!(md.lines().filter(|l| l.starts_with(&row)).count(), 1, "{r}");
    }
    assert!(md.starts_with(&format!("## artifact-check: {} run(s)", RUNS.len())));
}

/// GitHub annotations point at the run's file and line: the most severe
/// first, at most 9 of a level (GitHub shows about 10 per step), and one
/// more saying how many were left out; no notice (info) unless asked with
/// `--fail-on info`.
#[test]
fn github_annotations_point_at_files_capped_and_ranked() {
    let (gh, code) = all_runs("github", &[]);
    let (json, _) = all_runs("json", &[]);
    let report: serde_json::Value = serde_json::from_str(&json).expect("json");
    let mut per = std::collections::BTreeMap::new();
    for f in report["runs"]
        .as_array()
        .expect("runs")
        .iter()
        .flat_map(|r| r["findings"].as_array().expect("f").iter())
        .filter(|f| f["severity"] != "info")
    {
        *per.entry(f["severity"].as_str().expect("severity").to_string())
            .or_insert(0usize) += 1;
    }
    let shown: usize = per.values().map(|n| (*n).min(9)).sum();
    let cut: usize = per.values().map(|n| n.saturating_sub(9)).sum();
    assert!(
        cut > 0,
        "the sample runs have more than 9 findings of a level"
    );
    let annotations: Vec<&str> = gh.lines().filter(|l| l.starts_with("::")).collect();
    assert_eq!(annotations.len(), shown + 1);
    // Ranked: no error after a warning or notice, no warning after a notice.
    let rank = |a: &str| {
        ["::error", "::warning", "::notice"]
            .iter()
            .position(|p| a.starts_with(p))
    };
    let ranks: Vec<usize> = annotations[..shown]
        .iter()
        .filter_map(|a| rank(a))
        .collect();
    assert!(ranks.windows(2).all(|w| w[0] <= w[1]), "{gh}");
    let last = annotations[shown];
    assert!(last.starts_with("::error title=artifact-check::"), "{last}");
    assert!(
        last.contains(&format!("{cut} more finding(s) not annotated")),
        "{last}"
    );
    assert!(annotations.iter().all(|a| !a[2..].contains('\n')));
    assert!(annotations.iter().all(|a| !a.starts_with("::notice")));
    assert_eq!(code, 1);
    // Asked for: notices too.
    let (gh, _) = all_runs("github", &["--fail-on", "info"]);
    assert!(gh.lines().any(|l| l.starts_with("::notice")), "{gh}");
    // A clean run posts nothing.
    let (clean, _, code) = cli(&[
        "--format",
        "github",
        run_dir("clean").to_str().expect("utf8"),
    ]);
    assert_eq!(code, 0);
    assert!(clean.lines().all(|l| !l.starts_with("::")), "{clean}");
    // One run's annotation points at its file.
    let late = run_dir("late-warmup");
    let (gh, _, _) = cli(&["--format", "github", late.to_str().expect("utf8")]);
    let want = format!(
        "::error file={}/server_metrics_export.json,title=artifact-check late-warmup-observation::",
        late.display()
    );
    // The sample paths hold no ':' or ',', so the file property is the path itself.
    assert!(gh.lines().any(|a| a.starts_with(&want)), "{gh}");
}

/// Markdown of many runs stays under GitHub's 65,536-character limit for a
/// comment, with a note of what it left out.
#[test]
fn markdown_of_many_runs_fits_a_comment() {
    let t = tempfile::tempdir().expect("tempdir");
    for i in 0..4 {
        for r in RUNS {
            copy_dir(&run_dir(r), &t.path().join(format!("{r}-{i}")));
        }
    }
    let (md, _, code) = cli(&["--format", "markdown", t.path().to_str().expect("utf8")]);
    assert_eq!(code, 1);
    assert!(
        md.chars().count() < 65_536,
        "{} characters",
        md.chars().count()
    );
    assert!(md.starts_with(&format!("## artifact-check: {} run(s)", 4 * RUNS.len())));
    assert!(md.contains("**Truncated**"), "{md}");
    assert!(md.trim_end().ends_with("(fail level error)."));
}

/// NDJSON: a line per run and per finding (with its run), then the summary;
/// the same findings as the JSON report.
#[test]
fn ndjson_has_a_line_per_run_and_finding() {
    let (nd, code) = all_runs("ndjson", &[]);
    let (json, _) = all_runs("json", &[]);
    assert_eq!(code, 1);
    let report: serde_json::Value = serde_json::from_str(&json).expect("json");
    let lines: Vec<serde_json::Value> = nd
        .lines()
        .map(|l| serde_json::from_str(l).expect("each line is JSON"))
        .collect();
    let kind = |k: &str| lines.iter().filter(|l| l["kind"] == k).count();
    let runs = report["runs"].as_array().expect("runs");
    let findings: usize = runs
        .iter()
        .map(|r| r["findings"].as_array().expect("f").len())
        .sum();
    assert_eq!(kind("run"), runs.len());
    assert_eq!(kind("finding"), findings);
    assert_eq!(kind("summary"), 1);
    let last = lines.last().expect("summary last");
    assert_eq!(last["kind"], "summary");
    assert_eq!(last["exit_code"], report["summary"]["exit_code"]);
    assert!(lines
        .iter()
        .filter(|l| l["kind"] == "finding")
        .all(|l| l["run"].is_string() && l["code"].is_string()));
}

/// SARIF 2.1.0: the properties GitHub code scanning requires, a rule per
/// code with its documentation, a result per finding at a file that
/// exists, on its rule, with a fingerprint that is the same in a second
/// audit and differs between findings.
#[test]
fn sarif_has_a_rule_per_code_and_a_located_result_per_finding() {
    let (sarif, code) = all_runs("sarif", &[]);
    let (again, _) = all_runs("sarif", &[]);
    let (json, json_code) = all_runs("json", &[]);
    assert_eq!(
        code, json_code,
        "the exit code does not depend on the format"
    );
    let log: serde_json::Value = serde_json::from_str(&sarif).expect("json");
    let report: serde_json::Value = serde_json::from_str(&json).expect("json");
    assert_eq!(log["version"], "2.1.0");
    let run = &log["runs"][0];
    assert_eq!(run["tool"]["driver"]["name"], "artifact-check");
    let rules = run["tool"]["driver"]["rules"].as_array().expect("rules");
    assert!(rules
        .iter()
        .all(|r| r["shortDescription"]["text"].is_string()
            && r["fullDescription"]["text"].is_string()
            && r["help"]["text"].is_string()));
    let results = run["results"].as_array().expect("results");
    let findings: usize = report["runs"]
        .as_array()
        .expect("runs")
        .iter()
        .map(|r| r["findings"].as_array().expect("f").len())
        .sum();
    assert_eq!(results.len(), findings);
    let mut prints = std::collections::HashSet::new();
    for r in results {
        let i = r["ruleIndex"].as_u64().expect("ruleIndex") as usize;
        assert_eq!(rules[i]["id"], r["ruleId"]);
        assert!(["error", "warning", "note"].contains(&r["level"].as_str().expect("level")));
        let loc = &r["locations"][0]["physicalLocation"];
        let uri = loc["artifactLocation"]["uri"].as_str().expect("uri");
        assert!(std::path::Path::new(uri).is_file(), "{uri}");
        assert!(loc["region"]["startLine"].as_u64().expect("line") >= 1);
        prints.insert(
            r["partialFingerprints"]["artifactCheck/v1"]
                .as_str()
                .expect("fp")
                .to_string(),
        );
    }
    assert_eq!(sarif, again, "the same audit, the same log");
    // Findings of one code, file and subject repeat only where the audit
    // repeats them (capped invalid lines): nearly all are distinct.
    assert!(
        prints.len() * 10 >= results.len() * 9,
        "{} of {}",
        prints.len(),
        results.len()
    );
}

/// GitLab Code Quality: an issue per finding with the fields GitLab reads,
/// at a file that exists.
#[test]
fn gitlab_code_quality_has_an_issue_per_finding() {
    let (gl, code) = all_runs("gitlab", &[]);
    assert_eq!(code, 1);
    let (json, _) = all_runs("json", &[]);
    let issues: Vec<serde_json::Value> = serde_json::from_str(&gl).expect("an array");
    let report: serde_json::Value = serde_json::from_str(&json).expect("json");
    let findings: Vec<&serde_json::Value> = report["runs"]
        .as_array()
        .expect("runs")
        .iter()
        .flat_map(|r| r["findings"].as_array().expect("f"))
        .collect();
    assert_eq!(issues.len(), findings.len());
    for (i, f) in issues.iter().zip(findings) {
        assert_eq!(i["check_name"], f["code"]);
        let sev = i["severity"].as_str().expect("severity");
        let want = match f["severity"].as_str().expect("s") {
            "error" => "critical",
            "warning" => "minor",
            _ => "info",
        };
        assert_eq!(sev, want);
        assert!(i["description"]
            .as_str()
            .expect("d")
            .contains(f["message"].as_str().expect("m")));
        assert!(i["fingerprint"].as_str().expect("fp").len() == 16);
        let path = i["location"]["path"].as_str().expect("path");
        assert!(std::path::Path::new(path).is_file(), "{path}");
        assert!(i["location"]["lines"]["begin"].as_u64().expect("line") >= 1);
    }
}

/// Schema errors of `log` against the OASIS SARIF 2.1.0 schema
/// (tests/schemas), by Python's `jsonschema` (draft 4, as the schema says).
fn sarif_schema_errors(python: &str, log: &str) -> Vec<String> {
    let script = r#"
import json, sys, jsonschema
schema = json.load(open(sys.argv[1]))
for e in jsonschema.Draft4Validator(schema).iter_errors(json.load(sys.stdin)):
    print("/".join(map(str, e.absolute_path)) + ": " + e.message[:200])
"#;
    let schema = root().join("tests/schemas/sarif-schema-2.1.0.json");
    let out = run_python(
        python,
        script,
        &[schema.as_os_str()],
        &root(),
        log.as_bytes(),
        "the validator",
    );
    String::from_utf8_lossy(&out)
        .lines()
        .map(String::from)
        .collect()
}

/// Every sample run's SARIF log, and the fixtures', validates against the
/// 2.1.0 schema; a log with a level SARIF does not know does not (so the
/// validation can fail).
#[test]
fn sarif_validates_against_the_2_1_0_schema() {
    let python = match test_python(&["jsonschema"]) {
        Ok(p) => p,
        Err(why) => {
            common::missing_tool(&format!(
                "validating SARIF needs Python with jsonschema: {why}"
            ));
            return;
        }
    };
    let (sarif, _) = all_runs("sarif", &[]);
    let (fixtures, _, _) = cli(&["--format", "sarif", "fixtures"]);
    for log in [&sarif, &fixtures] {
        let errors = sarif_schema_errors(&python, log);
        assert!(errors.is_empty(), "{}", errors.join("\n"));
    }
    let broken = sarif.replacen("\"level\": \"error\"", "\"level\": \"fatal\"", 1);
    assert_ne!(broken, sarif, "the log has an error-level result");
    let errors = sarif_schema_errors(&python, &broken);
    assert!(errors.iter().any(|e| e.contains("fatal")), "{errors:?}");
}
