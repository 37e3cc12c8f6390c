//! SARIF 2.1.0 (GitHub code scanning, and every SARIF viewer): one SARIF
//! run for the audit, a rule per finding code found (its summary, default level,
//! and its docs/checks.md entry as the description and help), a result per finding at
//! `<run directory>/<file>` (line 1 when the finding names none: a result
//! needs a region to be shown), with a fingerprint that stays the same
//! from audit to audit of the same run, and the finding's metric, endpoint,
//! series, expected, found and effect as properties.

use std::collections::BTreeMap;
use std::io::{self, Write};

use serde_json::{json, Value};

use crate::findings::{Finding, Severity};
use crate::results::Report;
use crate::text::escape::write_json;

fn level(s: Severity) -> &'static str {
    match s {
        Severity::Error => "error",
        Severity::Warning => "warning",
        Severity::Info => "note",
    }
}

/// The artifact a finding points at, relative to where the audit ran.
pub(crate) fn location(run: &str, f: &Finding) -> String {
    let file = f.file.as_deref().unwrap_or("profile_export_aiperf.json");
    let run = run.trim_end_matches('/');
    if run.is_empty() || run == "." {
        file.to_string()
    } else {
        format!("{run}/{file}")
    }
}

/// The finding's fingerprint: its [`crate::findings::Identity`]'s in the
/// run of identity `run` (`runs[].id`).
pub(crate) fn fingerprint(run: &str, f: &Finding) -> String {
    f.identity(run).fingerprint()
}

/// The rule of a code: its summary, default level, and its docs/checks.md
/// row as description and help.
fn rule(c: crate::findings::Code) -> Value {
    let doc = crate::findings::explanation(c.as_str()).unwrap_or_default();
    let column = |name: &str| doc.iter().find(|(h, _)| h == name).map(|x| x.1.clone());
    let mut rule = json!({
        "id": c.as_str(),
        "name": c.as_str(),
        "shortDescription": {"text": c.summary()},
        "defaultConfiguration": {"level": level(c.severity())},
        "properties": {"check": c.check()},
    });
    if let Some(m) = column("meaning").or_else(|| column("when")) {
        rule["fullDescription"] = json!({"text": m});
    }
    // The whole docs/checks.md row, as `artifact-check explain` prints it.
    if !doc.is_empty() {
        let text: Vec<String> = doc.iter().map(|(h, t)| format!("{h}: {t}")).collect();
        rule["help"] = json!({"text": text.join("\n")});
    }
    rule
}

/// The result of one finding of the run at `run`.
fn result(run: &str, id: &str, f: &Finding, rule_index: Option<usize>) -> Value {
    let mut region = json!({"startLine": f.line.unwrap_or(1).max(1)});
    if f.line.is_none() {
        region["message"] = json!({"text": "the file as a whole"});
    }
    let mut props = serde_json::Map::new();
    props.insert("run".into(), json!(run));
    props.insert("check".into(), json!(f.check));
    for (k, v) in [
        ("field", f.field.as_ref().map(|x| json!(x))),
        ("metric", f.metric.as_ref().map(|x| json!(x))),
        ("endpoint", f.endpoint.as_ref().map(|x| json!(x))),
        ("series", f.series.as_ref().map(|x| json!(x))),
        ("expected", f.expected.clone()),
        ("found", f.found.clone()),
    ] {
        if let Some(v) = v {
            props.insert(k.into(), v);
        }
    }
    if !f.effect.is_empty() {
        props.insert("effect".into(), json!(f.effect));
    }
    let mut result = json!({
        "ruleId": f.code.as_str(),
        "level": level(f.severity),
        "message": {"text": f.message},
        "locations": [{
            "physicalLocation": {
                "artifactLocation": {"uri": location(run, f)},
                "region": region,
            }
        }],
        "partialFingerprints": {"artifactCheck/v1": fingerprint(id, f)},
        "properties": props,
    });
    if let Some(i) = rule_index {
        result["ruleIndex"] = json!(i);
    }
    result
}

/// Writes the SARIF log.
pub fn render(report: &Report, out: &mut dyn Write) -> io::Result<()> {
    // The rules of the codes found, in registry order.
    let found: std::collections::BTreeSet<&str> = report
        .runs
        .iter()
        .flat_map(|r| {
            let silenced = r.suppressed.iter().map(|s| &s.finding);
            r.findings.iter().chain(silenced).map(|f| f.code.as_str())
        })
        .collect();
    let codes: Vec<crate::findings::Code> = report
        .codes
        .iter()
        .copied()
        .filter(|c| found.contains(c.as_str()))
        .collect();
    let index: BTreeMap<&str, usize> = codes
        .iter()
        .enumerate()
        .map(|(i, c)| (c.as_str(), i))
        .collect();
    let rules: Vec<Value> = codes.iter().map(|c| rule(*c)).collect();
    let results: Vec<Value> = report
        .runs
        .iter()
        .flat_map(|r| r.findings.iter().map(move |f| (r, f)))
        .map(|(r, f)| result(&r.path, &r.id, f, index.get(f.code.as_str()).copied()))
        .chain(report.runs.iter().flat_map(|r| {
            r.suppressed.iter().map(|s| {
                let rule = index.get(s.finding.code.as_str()).copied();
                let mut v = result(&r.path, &r.id, &s.finding, rule);
                // SARIF's suppression: kept, marked, with its justification.
                v["suppressions"] = json!([{
                    "kind": "external",
                    "justification": format!("{}: {}", s.rule, s.reason),
                }]);
                v
            })
        }))
        .collect();
    let log = json!({
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {
                "name": "artifact-check",
                "version": report.tool_version,
                "rules": rules,
            }},
            "results": results,
            "invocations": [{
                "executionSuccessful": report.summary.exit != crate::results::ExitStatus::Error,
                "exitCode": report.summary.exit.code(),
            }],
        }],
    });
    write_json(&mut *out, &log)?;
    writeln!(out)
}
