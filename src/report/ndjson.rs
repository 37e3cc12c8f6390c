//! NDJSON for fleets: one JSON object per line, written run by run. Per run,
//! a `run` line (path, version, status, counts per severity), then one
//! `finding` line per finding (the finding's JSON fields plus its run); at
//! the end a `path_error` line per path that held no run and one `summary`
//! line. Loadable as is by DuckDB (`read_json_auto`), jq or pandas.

use std::io::{self, Write};

use serde_json::{json, Value};

use crate::findings::Severity;
use crate::results::PathError;
use crate::results::{RunReport, Summary};
use crate::text::escape::JsonFormatter;

fn line(out: &mut dyn Write, v: &Value) -> io::Result<()> {
    let mut ser = serde_json::Serializer::with_formatter(
        &mut *out,
        JsonFormatter(serde_json::ser::CompactFormatter),
    );
    serde::Serialize::serialize(v, &mut ser).map_err(io::Error::from)?;
    out.write_all(b"\n")
}

/// The lines of one run.
pub fn write_run(out: &mut dyn Write, r: &RunReport) -> io::Result<()> {
    line(
        out,
        &json!({
            "kind": "run",
            "run": r.path,
            "aiperf_version": r.aiperf_version,
            "status": r.status.as_str(),
            "errors": r.count(Severity::Error),
            "warnings": r.count(Severity::Warning),
            "info": r.count(Severity::Info),
        }),
    )?;
    for f in &r.findings {
        let mut v = serde_json::to_value(f).map_err(io::Error::from)?;
        if let Value::Object(m) = &mut v {
            m.insert("kind".into(), json!("finding"));
            m.insert("run".into(), json!(r.path));
            m.insert("run_status".into(), json!(r.status.as_str()));
        }
        line(out, &v)?;
    }
    Ok(())
}

/// The closing lines: path errors and the summary.
pub fn end(out: &mut dyn Write, errors: &[PathError], summary: &Summary) -> io::Result<()> {
    for e in errors {
        line(
            out,
            &json!({"kind": "path_error", "path": e.path, "message": e.message}),
        )?;
    }
    let mut v = serde_json::to_value(summary).map_err(io::Error::from)?;
    if let Value::Object(m) = &mut v {
        m.insert("kind".into(), json!("summary"));
    }
    line(out, &v)
}

/// Writes a whole report.
pub fn render(report: &crate::results::Report, out: &mut dyn Write) -> io::Result<()> {
    for r in &report.runs {
        write_run(out, r)?;
    }
    end(out, &report.errors, &report.summary)
}
