//! Markdown: a summary fit for a pull-request comment or a CI step summary.
//! One row per run, then each run's findings in a collapsed section.

use std::io::{self, Write};

use crate::findings::Severity;
use crate::results::{Report, RunStatus};

/// Makes text safe inside a Markdown table cell (and as inline text).
fn cell(s: &str) -> String {
    crate::text::escape::markdown(s)
}

fn icon(s: RunStatus) -> &'static str {
    match s {
        RunStatus::Pass => "✅ pass",
        RunStatus::Warn => "⚠️ warn",
        RunStatus::Fail => "❌ fail",
        RunStatus::Error => "💥 error",
    }
}

/// GitHub refuses a comment (and truncates a step summary) longer than
/// 65,536 characters: the summary stays under this many, leaving room for a
/// note of what was left out.
pub const MAX_CHARS: usize = 64_000;

/// Writes the Markdown summary: the headline, a row per run, then each
/// run's findings folded, in that order until [`MAX_CHARS`]; what does not
/// fit is counted in a closing note.
pub fn render(report: &Report, out: &mut dyn Write) -> io::Result<()> {
    use std::fmt::Write as _;
    let s = &report.summary;
    let mut head = String::new();
    let _ = writeln!(
        head,
        "## artifact-check: {} run(s): {} passed, {} warned, {} failed, {} errored\n",
        s.runs, s.passed, s.warned, s.failed, s.errored
    );
    let columns = headline_columns(report);
    let _ = writeln!(
        head,
        "| run | status | AIPerf | errors | warnings | info |{} worst finding |",
        columns
            .iter()
            .map(|c| format!(" {c} |"))
            .collect::<String>()
    );
    let _ = writeln!(
        head,
        "|---|---|---|---|---|---|{}---|",
        "---|".repeat(columns.len())
    );
    let rows: Vec<String> = report.runs.iter().map(|r| run_row(r, &columns)).collect();
    let mut errors = String::new();
    for e in &report.errors {
        let _ = writeln!(
            errors,
            "\n**error**: {}: {}",
            cell(&e.path),
            cell(&e.message)
        );
    }
    let details: Vec<String> = report
        .runs
        .iter()
        .filter(|r| !r.findings.is_empty())
        .map(run_details)
        .collect();
    let footer = format!(
        "\nExit code {} (fail level {}).\n",
        s.exit,
        s.fail_on.as_str()
    );
    // Room kept for the note and the footer.
    let budget = MAX_CHARS - 400 - footer.len();
    let mut text = head;
    let mut rows_cut = 0;
    for r in &rows {
        if text.len() + r.len() + errors.len() > budget / 2 {
            rows_cut += 1;
        } else {
            text.push_str(r);
        }
    }
    text.push_str(&errors);
    let mut details_cut = 0;
    for d in &details {
        if details_cut > 0 || text.len() + d.len() > budget {
            details_cut += 1;
        } else {
            text.push_str(d);
        }
    }
    if rows_cut + details_cut > 0 {
        let _ = write!(
            text,
            "\n> **Truncated** to stay under GitHub's 65,536-character limit: {rows_cut} run \
             row(s) and the findings of {details_cut} run(s) are not shown. The full report: \
             `artifact-check ... --report json=report.json` (or `--report markdown=FILE` as an \
             artifact).\n"
        );
    }
    text.push_str(&footer);
    out.write_all(text.as_bytes())
}

/// The headline numbers' names over every run, in check order: the
/// columns after the counts.
fn headline_columns(report: &Report) -> Vec<&'static str> {
    let mut names = Vec::new();
    for run in &report.runs {
        for c in run.checks.iter() {
            for h in c.report.headline() {
                if !names.contains(&h.name) {
                    names.push(h.name);
                }
            }
        }
    }
    names
}

fn run_row(run: &crate::results::RunReport, columns: &[&'static str]) -> String {
    let headline: Vec<_> = run
        .checks
        .iter()
        .flat_map(|c| c.report.headline())
        .collect();
    let numbers: String = columns
        .iter()
        .map(|name| {
            let v = headline.iter().find(|h| h.name == *name);
            format!(" {} |", v.map_or(String::new(), |h| cell(&h.value_text())))
        })
        .collect();
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
    let worst = match run.suppressed.len() {
        0 => worst,
        n => format!("{worst} ({n} suppressed)").trim_start().to_string(),
    };
    format!(
        "| {} | {} | {} | {} | {} | {} |{numbers} {} |\n",
        cell(&run.path),
        icon(run.status),
        cell(run.aiperf_version.as_deref().unwrap_or("?")),
        n(Severity::Error),
        n(Severity::Warning),
        n(Severity::Info),
        worst
    )
}

fn run_details(run: &crate::results::RunReport) -> String {
    let mut d = format!(
        "\n<details><summary>{}: {} finding(s)</summary>\n\n| severity | code | where | finding |\n|---|---|---|---|\n",
        cell(&run.path),
        run.findings.len()
    );
    for f in &run.findings {
        let at = f.location().unwrap_or_default();
        d.push_str(&format!(
            "| {} | `{}` | {} | {} |\n",
            f.severity.as_str(),
            f.code.as_str(),
            cell(&at),
            cell(&f.message)
        ));
    }
    d.push_str("\n</details>\n");
    d
}
