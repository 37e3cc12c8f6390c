//! Markdown: a summary fit for a pull-request comment or a CI step summary.
//! One row per run, failing runs first, with its published numbers'
//! verdicts; then each run's numbers that are not trusted and its findings
//! (errors first) in a collapsed section. Truncation drops passing runs
//! first.

use std::io::{self, Write};

use super::numbers;
use crate::findings::Severity;
use crate::results::published::Verdict;
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
        "| run | status | AIPerf | published numbers | errors | warnings | info |{} worst finding |",
        columns
            .iter()
            .map(|c| format!(" {c} |"))
            .collect::<String>()
    );
    let _ = writeln!(
        head,
        "|---|---|---|---|---|---|---|{}---|",
        "---|".repeat(columns.len())
    );
    // Failing runs first (stable): truncation cuts from the end.
    let mut runs: Vec<&crate::results::RunReport> = report.runs.iter().collect();
    runs.sort_by_key(|r| rank(r.status));
    let rows: Vec<String> = runs.iter().map(|r| run_row(r, &columns)).collect();
    let mut errors = String::new();
    for e in &report.errors {
        let _ = writeln!(
            errors,
            "\n**error**: {}: {}",
            cell(&e.path),
            cell(&e.message)
        );
    }
    let details: Vec<String> = runs
        .iter()
        .filter(|r| !r.findings.is_empty() || !numbers::untrusted(r).is_empty())
        .map(|r| run_details(r))
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
        "| {} | {} | {} | {} | {} | {} | {} |{numbers} {} |\n",
        cell(&run.path),
        icon(run.status),
        cell(run.aiperf_version.as_deref().unwrap_or("?")),
        verdicts(run),
        n(Severity::Error),
        n(Severity::Warning),
        n(Severity::Info),
        worst
    )
}

/// Failing runs first.
fn rank(s: RunStatus) -> u8 {
    match s {
        RunStatus::Error => 0,
        RunStatus::Fail => 1,
        RunStatus::Warn => 2,
        RunStatus::Pass => 3,
    }
}

/// A run's published numbers by verdict: `2 biased, 18 cannot tell, 42 of
/// 62 trusted`.
fn verdicts(run: &crate::results::RunReport) -> String {
    if run.published.is_empty() {
        return String::new();
    }
    let mut parts = Vec::new();
    for v in [Verdict::Wrong, Verdict::Biased, Verdict::CannotTell] {
        let n = numbers::count(run, v);
        if n > 0 {
            parts.push(format!("{n} {}", v.as_str().replace('_', " ")));
        }
    }
    parts.push(format!(
        "{} of {} trusted",
        numbers::count(run, Verdict::Trusted),
        run.published.len()
    ));
    parts.join(", ")
}

fn run_details(run: &crate::results::RunReport) -> String {
    let mut d = format!(
        "\n<details><summary>{}: {} finding(s)</summary>\n\n",
        cell(&run.path),
        run.findings.len()
    );
    let groups = numbers::untrusted(run);
    if !groups.is_empty() {
        d.push_str("| published | numbers | why |\n|---|---|---|\n");
        for g in &groups {
            let what = match g.verdict {
                Verdict::CannotTell => g.subject.clone(),
                v => format!("{} {}", v.as_str(), g.subject),
            };
            d.push_str(&format!(
                "| {} | {} | {} |\n",
                cell(&what),
                cell(&g.items_text().join(", ")),
                cell(&g.why)
            ));
        }
        d.push('\n');
    }
    d.push_str("| severity | code | where | finding |\n|---|---|---|---|\n");
    let mut findings: Vec<&crate::findings::Finding> = run.findings.iter().collect();
    findings.sort_by_key(|f| std::cmp::Reverse(f.severity));
    for f in findings {
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
