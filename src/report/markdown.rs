//! Markdown: a summary fit for a pull-request comment or a CI step summary.
//! One row per run, then each run's findings in a collapsed section.

use std::io::{self, Write};

use crate::findings::Severity;
use crate::{Report, RunStatus};

/// Makes text safe inside a Markdown table cell (and as inline text).
fn cell(s: &str) -> String {
    super::escape::markdown(s)
}

fn icon(s: RunStatus) -> &'static str {
    match s {
        RunStatus::Pass => "✅ pass",
        RunStatus::Warn => "⚠️ warn",
        RunStatus::Fail => "❌ fail",
        RunStatus::Error => "💥 error",
    }
}

/// Writes the Markdown summary.
pub fn render(report: &Report, out: &mut dyn Write) -> io::Result<()> {
    let s = &report.summary;
    writeln!(
        out,
        "## artifact-check: {} run(s): {} passed, {} warned, {} failed, {} errored\n",
        s.runs, s.passed, s.warned, s.failed, s.errored
    )?;
    writeln!(
        out,
        "| run | status | AIPerf | errors | warnings | info | worst finding |"
    )?;
    writeln!(out, "|---|---|---|---|---|---|---|")?;
    for run in &report.runs {
        let n = |sev: Severity| run.count(sev);
        let worst = run
            .worst()
            .map(|f| {
                let mut m: String = f.message.chars().take(160).collect();
                if f.message.chars().count() > 160 {
                    m.push('…');
                }
                format!("`{}`: {}", f.code.as_str(), cell(&m))
            })
            .unwrap_or_default();
        writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} | {} |",
            cell(&run.path),
            icon(run.status),
            cell(run.aiperf_version.as_deref().unwrap_or("?")),
            n(Severity::Error),
            n(Severity::Warning),
            n(Severity::Info),
            worst
        )?;
    }
    for e in &report.errors {
        writeln!(out, "\n**error**: {}: {}", cell(&e.path), cell(&e.message))?;
    }
    for run in report.runs.iter().filter(|r| !r.findings.is_empty()) {
        writeln!(
            out,
            "\n<details><summary>{}: {} finding(s)</summary>\n",
            cell(&run.path),
            run.findings.len()
        )?;
        writeln!(out, "| severity | code | where | finding |")?;
        writeln!(out, "|---|---|---|---|")?;
        for f in &run.findings {
            let at = match (&f.file, f.line) {
                (Some(file), Some(line)) => format!("{file}:{line}"),
                (Some(file), None) => file.clone(),
                _ => String::new(),
            };
            writeln!(
                out,
                "| {} | `{}` | {} | {} |",
                f.severity.as_str(),
                f.code.as_str(),
                cell(&at),
                cell(&f.message)
            )?;
        }
        writeln!(out, "\n</details>")?;
    }
    writeln!(
        out,
        "\nExit code {} (fail level {}).",
        s.exit_code,
        s.fail_on.as_str()
    )
}
