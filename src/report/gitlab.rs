//! GitLab Code Quality (the `codequality` report of a merge request): a
//! JSON array with an issue per finding, its description, `check_name` (the
//! code), a fingerprint that stays the same from audit to audit of the same
//! run, a severity (`critical` for errors, `minor` for warnings, `info`)
//! and the location `<run directory>/<file>` with a line (1 when the
//! finding names none).

use std::io::{self, Write};

use serde_json::{json, Value};

use super::sarif::{fingerprint, location};
use crate::findings::Severity;
use crate::results::Report;
use crate::text::escape::write_json;

fn severity(s: Severity) -> &'static str {
    match s {
        Severity::Error => "critical",
        Severity::Warning => "minor",
        Severity::Info => "info",
    }
}

/// Writes the Code Quality report.
pub fn render(report: &Report, out: &mut dyn Write) -> io::Result<()> {
    let issues: Vec<Value> = report
        .runs
        .iter()
        .flat_map(|r| r.findings.iter().map(move |f| (r, f)))
        .map(|(r, f)| {
            json!({
                "type": "issue",
                "check_name": f.code.as_str(),
                "description": format!("{}: {}", r.path, f.message),
                "categories": ["Bug Risk"],
                "severity": severity(f.severity),
                "fingerprint": fingerprint(&r.id, f),
                "location": {
                    "path": location(&r.path, f),
                    "lines": {"begin": f.line.unwrap_or(1).max(1)},
                },
            })
        })
        .collect();
    write_json(&mut *out, &issues)?;
    writeln!(out)
}
