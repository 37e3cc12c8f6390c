//! GitHub Actions workflow commands: one annotation per finding at warning
//! or above (info too with `--fail-on info`), pointing at the run's file
//! (`::error file=...,line=...,title=...::message`).

use std::io::{self, Write};

use crate::findings::Severity;
use crate::results::Report;

/// Escapes annotation data: control and bidi characters made visible (so no
/// input starts a log line or a terminal sequence), then `%`, CR and LF.
fn data(s: &str) -> String {
    crate::text::escape::visible(s)
        .replace('%', "%25")
        .replace('\r', "%0D")
        .replace('\n', "%0A")
}

/// Escapes an annotation property: as data, plus `:` and `,`.
fn property(s: &str) -> String {
    data(s).replace(':', "%3A").replace(',', "%2C")
}

/// GitHub shows at most 10 annotations of each level per step (and 50 per
/// job); more are dropped silently. So at most this many of each level are
/// written, most severe findings first, and one more annotation says what
/// was left out and where the whole report is.
pub const MAX_PER_LEVEL: usize = 9;

fn level(s: Severity) -> &'static str {
    match s {
        Severity::Error => "error",
        Severity::Warning => "warning",
        Severity::Info => "notice",
    }
}

/// The findings to annotate, most severe first; within a severity, in run
/// and check order. A notice is posted only when asked (`--fail-on info`):
/// a clean run posts nothing.
fn annotated(report: &Report) -> Vec<(&crate::results::RunReport, &crate::findings::Finding)> {
    let mut all: Vec<_> = report
        .runs
        .iter()
        .flat_map(|run| run.findings.iter().map(move |f| (run, f)))
        .filter(|(_, f)| {
            f.severity >= Severity::Warning || report.summary.fail_on == Severity::Info
        })
        .collect();
    all.sort_by_key(|(_, f)| std::cmp::Reverse(f.severity));
    all
}

/// Writes the annotations.
pub fn render(report: &Report, out: &mut dyn Write) -> io::Result<()> {
    let all = annotated(report);
    let mut shown = [0usize; 3];
    let mut left_out = [0usize; 3];
    for (run, f) in all {
        let i = f.severity as usize;
        if shown[i] >= MAX_PER_LEVEL {
            left_out[i] += 1;
            continue;
        }
        shown[i] += 1;
        let mut props = Vec::new();
        let file = match &f.file {
            Some(file) => format!("{}/{file}", run.path.trim_end_matches('/')),
            None => run.path.clone(),
        };
        props.push(format!("file={}", property(&file)));
        if let Some(line) = f.line {
            props.push(format!("line={line}"));
        }
        props.push(format!(
            "title={}",
            property(&format!("artifact-check {}", f.code.as_str()))
        ));
        writeln!(
            out,
            "::{} {}::{}",
            level(f.severity),
            props.join(","),
            data(&f.message)
        )?;
    }
    let cut: usize = left_out.iter().sum();
    if cut > 0 {
        // At the level of the most severe finding left out: one slot of it
        // is still free.
        let worst = [Severity::Error, Severity::Warning, Severity::Info]
            .into_iter()
            .find(|s| left_out[*s as usize] > 0)
            .unwrap_or(Severity::Info);
        let counts: Vec<String> = [Severity::Error, Severity::Warning, Severity::Info]
            .into_iter()
            .filter(|s| left_out[*s as usize] > 0)
            .map(|s| format!("{} {}", left_out[s as usize], s.as_str()))
            .collect();
        writeln!(
            out,
            "::{} title=artifact-check::{}",
            level(worst),
            data(&format!(
                "{cut} more finding(s) not annotated ({}; GitHub shows about 10 of each level \
                 per step): see the full report (--report json=FILE or --report markdown=FILE)",
                counts.join(", ")
            ))
        )?;
    }
    for e in &report.errors {
        writeln!(
            out,
            "::error title=artifact-check::{}",
            data(&format!("{}: {}", e.path, e.message))
        )?;
    }
    let s = &report.summary;
    writeln!(
        out,
        "artifact-check: {} run(s): {} passed, {} warned, {} failed, {} errored; exit {}",
        s.runs, s.passed, s.warned, s.failed, s.errored, s.exit
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_data_and_properties() {
        assert_eq!(data("50% done"), "50%25 done");
        assert_eq!(data("a\n::error::x"), "a\\u{a}::error::x");
        assert_eq!(property("a:b,c%"), "a%3Ab%2Cc%25");
    }
}
