//! The default output: per run, the verdict line first, then the published
//! numbers that are not trusted with what to publish instead (and how many
//! were checked and trusted), then one line per root cause at warning or
//! above, each at most [`WIDTH`] characters with `explain CODE` for the
//! rest; info findings are counted (the full table, `-v`, lists them).
//! A closing summary counts findings per code. `-q` keeps only the findings
//! at or above the fail level (one line each, run first) and the closing
//! line; `--statistics` only the counts per code.

use std::collections::BTreeMap;
use std::io::{self, Write};

use super::numbers;
use super::Options;
use crate::findings::{Finding, Severity};
use crate::results::published::Verdict;
use crate::results::{Report, RunReport};
use crate::text::clip;
use crate::text::escape::visible;

/// The widest a line of a run's block is.
pub const WIDTH: usize = 160;

/// A root cause on one line: `  error[code] file: message… (explain code)`.
fn cause_line(f: &Finding) -> String {
    let at = f
        .location()
        .map(|l| format!("{}: ", visible(&l)))
        .unwrap_or_default();
    let head = format!("  {}[{}] {at}", f.severity.as_str(), f.code.as_str());
    let tail = format!(" (explain {})", f.code.as_str());
    let room = WIDTH.saturating_sub(head.chars().count() + tail.chars().count());
    let message = visible(&f.message);
    let body = clip(&message, room.max(20));
    if body.len() == message.len() {
        format!("{head}{body}")
    } else {
        format!("{head}{body}{tail}")
    }
}

/// One finding on one line, run first (`-q`: for grep and CI logs).
fn quiet_line(run: &RunReport, f: &Finding) -> String {
    let mut at = visible(&run.path).into_owned();
    if let Some(loc) = f.location() {
        at.push_str(": ");
        at.push_str(&visible(&loc));
    }
    let text = format!(
        "{at}: {}[{}] {}",
        f.severity.as_str(),
        f.code.as_str(),
        visible(&f.message)
    );
    clip(&text, 2 * WIDTH).into_owned()
}

/// The run's verdict line.
fn verdict_line(run: &RunReport) -> String {
    format!("{}: {}", visible(&run.path), super::verdict(run))
}

/// A claim with ✓ (holds), ✗ (does not) or ? (cannot tell), as k6 lists
/// its thresholds: passing ones too.
fn claim_line(c: &crate::results::ClaimResult) -> String {
    let mark = match c.within {
        Some(true) => "✓",
        Some(false) => "✗",
        None => "?",
    };
    let supported = c
        .supported
        .map_or("cannot tell".into(), crate::text::figure);
    let diff = c
        .difference_pct
        .map(|d| format!(" ({d:+.1} %)"))
        .unwrap_or_default();
    let line = format!(
        "  {mark} claim {} = {}: the artifacts give {supported}{diff}",
        visible(&c.name),
        crate::text::figure(c.claimed)
    );
    clip(&line, WIDTH).into_owned()
}

/// The published numbers that are not trusted, a group a line, and how
/// many were checked and trusted.
fn number_lines(run: &RunReport) -> Vec<String> {
    let mut lines: Vec<String> = numbers::untrusted(run)
        .iter()
        .map(|g| {
            let label = match g.verdict {
                Verdict::CannotTell => String::new(),
                v => format!("{} ", v.as_str()),
            };
            let line = g.line(WIDTH - 2 - label.len());
            format!("  {label}{}", visible(&line))
        })
        .collect();
    let trusted = numbers::count(run, Verdict::Trusted);
    if !run.published.is_empty() {
        lines.push(format!(
            "  {trusted} of {} published number(s) checked and trusted",
            run.published.len()
        ));
    }
    lines
}

/// The advisories that hold for every run of a version, each said once for
/// the audit with how many runs it holds for.
fn advisories(report: &Report) -> Vec<String> {
    let mut seen: Vec<(&Finding, usize)> = Vec::new();
    for f in report.runs.iter().flat_map(|r| &r.findings) {
        if !f.per_version {
            continue;
        }
        match seen
            .iter_mut()
            .find(|(g, _)| g.code == f.code && g.message == f.message)
        {
            Some((_, n)) => *n += 1,
            None => seen.push((f, 1)),
        }
    }
    seen.into_iter()
        .map(|(f, n)| {
            let head = format!(
                "note: {}[{}] ({n} run(s)) ",
                f.severity.as_str(),
                f.code.as_str()
            );
            let tail = format!(" (explain {})", f.code.as_str());
            let room = 200usize.saturating_sub(head.chars().count() + tail.chars().count());
            let message = visible(&f.message);
            format!("{head}{}{tail}", clip(&message, room))
        })
        .collect()
}

/// The findings of a run, most severe first (stable within a severity).
fn ranked(run: &RunReport) -> Vec<&Finding> {
    let mut v: Vec<&Finding> = run.findings.iter().collect();
    v.sort_by_key(|f| std::cmp::Reverse(f.severity));
    v
}

/// Writes the concise report.
pub fn render(report: &Report, opts: Options, out: &mut dyn Write) -> io::Result<()> {
    let fail_on = report.summary.fail_on;
    if !opts.statistics {
        for run in &report.runs {
            if opts.quiet {
                for f in ranked(run).into_iter().filter(|f| f.severity >= fail_on) {
                    writeln!(out, "{}", quiet_line(run, f))?;
                }
                continue;
            }
            writeln!(out, "{}", verdict_line(run))?;
            for l in number_lines(run) {
                writeln!(out, "{l}")?;
            }
            for c in &run.claims {
                writeln!(out, "{}", claim_line(c))?;
            }
            let shown = fail_on.min(Severity::Warning);
            for f in ranked(run).into_iter().filter(|f| f.severity >= shown) {
                writeln!(out, "{}", cause_line(f))?;
            }
        }
        for e in &report.errors {
            writeln!(out, "{}: error: {}", visible(&e.path), visible(&e.message))?;
        }
        for u in &report.summary.unused_suppressions {
            writeln!(out, "warning[unused-suppression] {}", visible(u))?;
        }
        for s in &report.summary.skipped {
            writeln!(
                out,
                "{}: skipped: {}",
                visible(&s.path),
                visible(&s.message)
            )?;
        }
        if !opts.quiet {
            for l in advisories(report) {
                writeln!(out, "{l}")?;
            }
        }
    }
    if !opts.quiet || opts.statistics {
        // Counts per code over all runs, worst severity first, then most
        // frequent.
        let mut by_code: BTreeMap<(std::cmp::Reverse<Severity>, &str), usize> = BTreeMap::new();
        for f in report.runs.iter().flat_map(|r| &r.findings) {
            *by_code
                .entry((std::cmp::Reverse(f.severity), f.code.as_str()))
                .or_default() += 1;
        }
        let mut rows: Vec<_> = by_code.into_iter().collect();
        rows.sort_by_key(|((sev, _), n)| (*sev, std::cmp::Reverse(*n)));
        for ((sev, code), n) in rows {
            writeln!(out, "{n:>6}  {:<8} {code}", sev.0.as_str())?;
        }
    }
    writeln!(out, "{}", super::closing_line(&report.summary))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::findings::reading;

    #[test]
    fn a_long_cause_is_one_line_within_the_width_with_where_to_read_more() {
        let f = Finding::new(reading::INVALID_JSON, "word ".repeat(200)).file("f.json");
        let l = cause_line(&f);
        assert!(l.chars().count() <= WIDTH, "{l}");
        assert!(l.ends_with("(explain invalid-json)"), "{l}");
        let short = cause_line(&Finding::new(reading::INVALID_JSON, "short"));
        assert!(!short.contains("explain"), "{short}");
    }
}
