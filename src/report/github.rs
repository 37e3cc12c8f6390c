//! GitHub Actions workflow commands: one annotation per finding, pointing at
//! the run's file (`::error file=...,line=...,title=...::message`).

use std::io::{self, Write};

use crate::findings::Severity;
use crate::Report;

/// Escapes annotation data: control and bidi characters made visible (so no
/// input starts a log line or a terminal sequence), then `%`, CR and LF.
fn data(s: &str) -> String {
    super::escape::visible(s)
        .replace('%', "%25")
        .replace('\r', "%0D")
        .replace('\n', "%0A")
}

/// Escapes an annotation property: as data, plus `:` and `,`.
fn property(s: &str) -> String {
    data(s).replace(':', "%3A").replace(',', "%2C")
}

/// Writes the annotations.
pub fn render(report: &Report, out: &mut dyn Write) -> io::Result<()> {
    for run in &report.runs {
        for f in &run.findings {
            let level = match f.severity {
                Severity::Error => "error",
                Severity::Warning => "warning",
                Severity::Info => "notice",
            };
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
            writeln!(out, "::{level} {}::{}", props.join(","), data(&f.message))?;
        }
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
        s.runs, s.passed, s.warned, s.failed, s.errored, s.exit_code
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
