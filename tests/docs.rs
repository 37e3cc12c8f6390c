//! The docs cannot drift from the code: every finding code is documented in
//! docs/checks.md, and every field the JSON report carries on the sample runs
//! is documented in docs/report-schema.md.

mod common;

use std::collections::BTreeSet;
use std::fs;

use common::*;
use serde_json::Value;

fn doc(name: &str) -> String {
    fs::read_to_string(root().join("docs").join(name)).expect("doc exists")
}

#[test]
fn every_code_is_documented_in_checks_md() {
    let text = doc("checks.md");
    for c in artifact_check::codes() {
        assert!(
            text.contains(&format!("| `{}` | {} |", c.as_str(), c.severity().as_str()))
                || text.contains(&format!("| `{}` | {} (", c.as_str(), c.severity().as_str())),
            "docs/checks.md lacks a row for `{}` with severity {}",
            c.as_str(),
            c.severity().as_str()
        );
    }
}

/// Key paths of a JSON value, with data-chosen keys generalised.
fn paths(v: &Value, prefix: &str, out: &mut BTreeSet<String>) {
    match v {
        Value::Object(map) => {
            for (k, x) in map {
                let key = match prefix.rsplit('.').next() {
                    Some("phases") if prefix.ends_with("runs[].phases") => "<kind>",
                    Some("noise") | Some("readings") => "<metric>",
                    Some("unknown_labels") => "<label>",
                    Some("findings") if prefix == "summary.findings" => "<severity>",
                    _ => k.as_str(),
                };
                let p = if prefix.is_empty() {
                    key.to_string()
                } else {
                    format!("{prefix}.{key}")
                };
                out.insert(p.clone());
                // Expected/found are free-form; buckets and a row's or a
                // finding's series labels are keyed by the data.
                let free = ["expected", "found", "buckets", "series"];
                if !free.contains(&k.as_str()) {
                    paths(x, &p, out);
                }
            }
        }
        Value::Array(items) => {
            for x in items {
                if x.is_object() {
                    paths(x, &format!("{prefix}[]"), out);
                }
            }
        }
        _ => {}
    }
}

#[test]
fn every_report_field_is_documented_in_report_schema_md() {
    let text = doc("report-schema.md");
    let mut all = BTreeSet::new();
    // The sample runs, and the accounting fixtures (cancelled requests, a
    // duration run's cut requests: fields no sample run has).
    let dirs: Vec<_> = ["sample-artifacts/runs", "fixtures/accounting"]
        .iter()
        .flat_map(|d| fs::read_dir(root().join(d)).expect("runs"))
        .map(|e| e.expect("entry").path())
        .filter(|p| p.is_dir())
        .collect();
    let mut refs: Vec<&std::path::Path> = dirs.iter().map(|p| p.as_path()).collect();
    let missing = root().join("no-such-run");
    refs.push(&missing);
    let (report, _) = json_report(&refs, &[]);
    paths(&report, "", &mut all);
    let undocumented: Vec<&String> = all
        .iter()
        .filter(|p| !text.contains(&format!("`{p}`")))
        .collect();
    assert!(
        undocumented.is_empty(),
        "not in docs/report-schema.md: {undocumented:#?}"
    );
    assert!(all.len() > 150);
}
