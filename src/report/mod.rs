//! Rendering a [`Report`]: one module per format behind [`render`]. The
//! renderers take the report and a writer and do no other I/O; they never
//! change what was found. Text that came from the audited files goes through
//! [`escape`] for the format it is written in.

pub mod compare;
mod concise;
pub use crate::text::escape;
mod github;
mod gitlab;
mod html;
pub mod json;
mod junit;
mod markdown;
pub mod ndjson;
mod numbers;
mod sarif;
mod table;
#[cfg(test)]
mod tests;

use std::io::{self, Write};

use crate::results::Report;

/// Output formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
#[non_exhaustive]
pub enum Format {
    /// One line per finding, most severe first, a verdict per run and the
    /// counts per code (the default).
    Concise,
    /// Every run's tables: phases, checks, their detail, findings (also
    /// `table`; `-v`).
    #[value(name = "full", alias = "table")]
    Table,
    /// One JSON document; the contract in docs/report-schema.md.
    Json,
    /// JUnit XML: a testsuite per run, a testcase per check.
    Junit,
    /// A Markdown summary for a pull request or a CI step summary.
    Markdown,
    /// GitHub Actions annotations (`::error file=...::message`).
    Github,
    /// One JSON object per line: a line per run, per finding (with its
    /// run), per path error, and the summary (fleet aggregation).
    Ndjson,
    /// SARIF 2.1.0 (GitHub code scanning): a rule per code, a result per
    /// finding.
    Sarif,
    /// GitLab Code Quality: an issue per finding.
    Gitlab,
    /// One self-contained HTML page: findings, and per run its timeline,
    /// distributions and hit rates (works offline).
    Html,
}

impl Format {
    /// The name as given to `--format` and `--report`.
    pub fn name(self) -> &'static str {
        match self {
            Format::Concise => "concise",
            Format::Table => "full",
            Format::Json => "json",
            Format::Junit => "junit",
            Format::Markdown => "markdown",
            Format::Github => "github",
            Format::Ndjson => "ndjson",
            Format::Sarif => "sarif",
            Format::Gitlab => "gitlab",
            Format::Html => "html",
        }
    }
}

/// Rendering options.
#[derive(Debug, Clone, Copy, Default)]
pub struct Options {
    /// Use colour (only on a terminal, never with `NO_COLOR`).
    pub colour: bool,
    /// Concise: only the findings at or above the fail level, and the
    /// closing line (`-q`).
    pub quiet: bool,
    /// Concise: only the counts per code (`--statistics`).
    pub statistics: bool,
}

/// Writes `report` in `format` to `out`.
pub fn render(
    format: Format,
    report: &Report,
    opts: Options,
    out: &mut dyn Write,
) -> io::Result<()> {
    if format == Format::Github {
        return github::render(report, out);
    }
    // No line of any other format starts a workflow command.
    let mut guarded = escape::NoCommands::new(out);
    render_unguarded(format, report, opts, &mut guarded)?;
    guarded.finish()
}

fn render_unguarded(
    format: Format,
    report: &Report,
    opts: Options,
    out: &mut dyn Write,
) -> io::Result<()> {
    match format {
        Format::Concise => concise::render(report, opts, out),
        Format::Table => table::render(report, opts, out),
        Format::Json => {
            escape::write_json(&mut *out, report)?;
            writeln!(out)
        }
        Format::Junit => junit::render(report, out),
        Format::Markdown => markdown::render(report, out),
        Format::Github => github::render(report, out),
        Format::Ndjson => ndjson::render(report, out),
        Format::Sarif => sarif::render(report, out),
        Format::Gitlab => gitlab::render(report, out),
        Format::Html => html::render(report, out),
    }
}

/// The closing line of the text formats: runs by status, findings by
/// severity, the fail level and the exit code.
/// A run's verdict with its counts: `FAIL (1 error, 2 warning, 3 info, 6
/// suppressed)`; every text format's run line.
pub(crate) fn verdict(run: &crate::results::RunReport) -> String {
    use crate::findings::Severity;
    let verdict = match run.status {
        crate::results::RunStatus::Error => "ERROR (the run could not be read)".to_string(),
        s => s.as_str().to_uppercase(),
    };
    let silenced = match run.suppressed.len() {
        0 => String::new(),
        n => format!(", {n} suppressed"),
    };
    format!(
        "{verdict} ({} error, {} warning, {} info{silenced})",
        run.count(Severity::Error),
        run.count(Severity::Warning),
        run.count(Severity::Info)
    )
}

pub(crate) fn closing_line(s: &crate::results::Summary) -> String {
    format!(
        "{} run(s): {} passed, {} warned, {} failed, {} errored{}; findings: {} error, {} \
         warning, {} info; fail level {}; exit {}",
        s.runs,
        s.passed,
        s.warned,
        s.failed,
        s.errored,
        if s.path_errors > 0 {
            format!(", {} path error(s)", s.path_errors)
        } else {
            String::new()
        },
        s.findings.get("error").unwrap_or(&0),
        s.findings.get("warning").unwrap_or(&0),
        s.findings.get("info").unwrap_or(&0),
        s.fail_on.as_str(),
        s.exit
    ) + &match s.skipped.len() {
        0 => String::new(),
        n => format!("; {n} symlinked director(ies) not followed (--no-follow-links)"),
    }
}
