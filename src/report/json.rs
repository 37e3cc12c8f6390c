//! The JSON report, written run by run: the same bytes as the whole
//! [`Report`](crate::results::Report) serialized pretty at once, without holding it.

use std::io::{self, Write};

use crate::results::PathError;
use crate::results::{RunReport, Summary, REPORT_SCHEMA_VERSION};
use crate::text::escape::write_json;

/// A JSON report being written.
pub struct JsonStream<'a> {
    out: &'a mut dyn Write,
    runs: usize,
    /// The value being written, pretty-printed, then indented: kept from
    /// run to run, so a run's report does not grow new buffers.
    buf: Vec<u8>,
    shown: Vec<u8>,
}

impl<'a> JsonStream<'a> {
    /// Writes the head of the document.
    pub fn begin(out: &'a mut dyn Write) -> io::Result<JsonStream<'a>> {
        write!(
            out,
            "{{\n  \"schema_version\": {},\n  \"tool_version\": {},\n  \"runs\": [",
            serde_json::to_string(REPORT_SCHEMA_VERSION)?,
            serde_json::to_string(env!("CARGO_PKG_VERSION"))?
        )?;
        Ok(JsonStream {
            out,
            runs: 0,
            buf: Vec::new(),
            shown: Vec::new(),
        })
    }

    /// `value` pretty-printed, every line after the first indented by
    /// `indent` (a string never holds a raw newline, so this is exact).
    /// Indented in memory and written at once, one call through `dyn
    /// Write` instead of three per line.
    fn nested(
        &mut self,
        value: &impl serde::Serialize,
        indent: &str,
        first: bool,
    ) -> io::Result<()> {
        self.buf.clear();
        write_json(&mut self.buf, value)?;
        self.shown.clear();
        if first {
            self.shown.extend_from_slice(indent.as_bytes());
        }
        let mut from = 0;
        for nl in memchr::memchr_iter(b'\n', &self.buf) {
            self.shown.extend_from_slice(&self.buf[from..=nl]);
            self.shown.extend_from_slice(indent.as_bytes());
            from = nl + 1;
        }
        self.shown.extend_from_slice(&self.buf[from..]);
        self.out.write_all(&self.shown)
    }

    /// Writes one run.
    pub fn write_run(&mut self, run: &RunReport) -> io::Result<()> {
        self.out
            .write_all(if self.runs == 0 { b"\n" } else { b",\n" })?;
        self.runs += 1;
        self.nested(run, "    ", true)
    }

    /// Writes the path errors and the summary, and closes the document.
    pub fn end(mut self, errors: &[PathError], summary: &Summary) -> io::Result<()> {
        if self.runs > 0 {
            self.out.write_all(b"\n  ")?;
        }
        self.out.write_all(b"],\n  \"errors\": ")?;
        self.nested(&errors, "  ", false)?;
        self.out.write_all(b",\n  \"summary\": ")?;
        self.nested(summary, "  ", false)?;
        self.out.write_all(b"\n}\n")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Streamed, the report is byte for byte the one serialized at once:
    /// with no run, one, and several (and a path error).
    #[test]
    fn streamed_is_the_whole_report_byte_for_byte() {
        let runs = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("sample-artifacts/runs");
        let sets: Vec<Vec<std::path::PathBuf>> = vec![
            vec![],
            vec![runs.join("clean")],
            vec![
                runs.join("clean"),
                runs.join("cold-tls"),
                runs.join("no-such-run"),
            ],
        ];
        let settings = crate::config::Settings::default();
        for paths in sets {
            let whole = crate::audit(&paths, &settings, &[]);
            let mut want = Vec::new();
            super::super::render(
                super::super::Format::Json,
                &whole,
                Default::default(),
                &mut want,
            )
            .expect("render");
            let mut got = Vec::new();
            let mut stream = JsonStream::begin(&mut got).expect("begin");
            for r in &whole.runs {
                stream.write_run(r).expect("run");
            }
            stream.end(&whole.errors, &whole.summary).expect("end");
            assert_eq!(
                String::from_utf8_lossy(&got),
                String::from_utf8_lossy(&want)
            );
        }
    }
}
