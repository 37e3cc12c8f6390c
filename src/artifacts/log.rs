//! `logs/aiperf.log`: the one artifact that names the requests AIPerf
//! cancelled at the end of a duration run's grace period.
//!
//! AIPerf 0.13 logs each credit phase's end as `Phase <name> (<kind>)
//! complete | completed=N, cancelled=M, errors=E | elapsed=...s` with
//! `| grace_period_timeout=True` when the grace period ran out
//! (`timing/phase/runner.py` `_format_phase_complete`). A request cut at the
//! grace period is cancelled and written to no other artifact: no record,
//! no error record, nothing in `error_summary` or `phase_manifest.json`.
//! Only the phase-end lines are read; the rest of the log is not.

use std::io::{BufRead, BufReader, Read};

/// File name, relative to the run directory.
pub const FILE: &str = "logs/aiperf.log";

/// The log is read up to this many bytes (the phase-end lines come at the
/// end of a run's log, which is rarely past a few MB).
const MAX_BYTES: u64 = 256 << 20;

/// A line longer than this is not a phase-end line: skipped without being
/// held whole.
const MAX_LINE: u64 = 64 << 10;

/// One phase-end line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PhaseEnd {
    /// Its line in the log.
    pub line: u64,
    /// `warmup` or `profiling`.
    pub kind: String,
    /// Requests completed.
    pub completed: u64,
    /// Requests cancelled (by request-cancellation testing or at the end of
    /// the grace period).
    pub cancelled: u64,
    /// Requests that failed.
    pub errors: u64,
    /// Whether the grace period ran out with requests in flight.
    pub grace_period_timeout: bool,
}

/// What the log says.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AiperfLog {
    /// Every phase-end line, in order.
    pub phase_ends: Vec<PhaseEnd>,
}

impl AiperfLog {
    /// The phase-end lines of a kind.
    pub fn ends_of<'a>(&'a self, kind: &'a str) -> impl Iterator<Item = &'a PhaseEnd> + 'a {
        self.phase_ends.iter().filter(move |p| p.kind == kind)
    }
}

/// Reads the phase-end lines; a line that does not parse is skipped (the
/// log is prose, not a format).
pub fn read(input: impl Read) -> std::io::Result<AiperfLog> {
    let mut log = AiperfLog::default();
    let mut reader = BufReader::new(input.take(MAX_BYTES));
    let mut buf = Vec::new();
    let mut line = 0u64;
    loop {
        buf.clear();
        if (&mut reader).take(MAX_LINE).read_until(b'\n', &mut buf)? == 0 {
            break;
        }
        line += 1;
        if buf.last() != Some(&b'\n') && buf.len() as u64 == MAX_LINE {
            // Too long: skip to its end, a bounded chunk at a time.
            loop {
                buf.clear();
                let n = (&mut reader).take(MAX_LINE).read_until(b'\n', &mut buf)?;
                if n == 0 || buf.last() == Some(&b'\n') {
                    break;
                }
            }
            continue;
        }
        let text = String::from_utf8_lossy(&buf);
        if let Some(end) = phase_end(&text, line) {
            log.phase_ends.push(end);
        }
    }
    Ok(log)
}

/// Parses `... Phase <name> (<kind>) complete | completed=N, cancelled=M,
/// errors=E | ...`.
fn phase_end(text: &str, line: u64) -> Option<PhaseEnd> {
    let at = text.find("Phase ")?;
    let rest = &text[at + 6..];
    let (head, tail) = rest.split_once(" complete | ")?;
    let kind = head.rsplit_once('(')?.1.strip_suffix(')')?.to_string();
    let field = |name: &str| -> Option<u64> {
        let i = tail.find(&format!("{name}="))?;
        let digits: String = tail[i + name.len() + 1..]
            .chars()
            .take_while(|c| c.is_ascii_digit() || *c == ',')
            .filter(|c| *c != ',')
            .collect();
        digits.parse().ok()
    };
    Some(PhaseEnd {
        line,
        kind,
        completed: field("completed")?,
        cancelled: field("cancelled")?,
        errors: field("errors")?,
        grace_period_timeout: tail.contains("grace_period_timeout=True"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_phase_end_lines_only() {
        let text = "12:00:01 INFO  Phase warmup (warmup) complete | completed=4, cancelled=0, errors=0 | elapsed=1.20s\n\
                    12:00:02 NOTICE Phase profiling (profiling) sending complete | sent=40, completed=36, in_flight=4\n\
                    12:00:09 INFO  Phase profiling (profiling) complete | completed=1,036, cancelled=3, errors=1 | elapsed=7.10s | grace_period_timeout=True\n";
        let log = read(text.as_bytes()).unwrap();
        assert_eq!(log.phase_ends.len(), 2);
        let p = log.ends_of("profiling").next().unwrap();
        assert_eq!(
            (p.line, p.completed, p.cancelled, p.errors),
            (3, 1036, 3, 1)
        );
        assert!(p.grace_period_timeout);
        assert!(!log.ends_of("warmup").next().unwrap().grace_period_timeout);
    }

    #[test]
    fn a_line_too_long_is_skipped_and_the_next_read() {
        let mut text = "x".repeat((MAX_LINE * 3) as usize);
        text.push('\n');
        text.push_str("Phase profiling (profiling) complete | completed=2, cancelled=1, errors=0 | grace_period_timeout=True\n");
        text.push_str(&"\u{0}".repeat(10));
        let log = read(text.as_bytes()).unwrap();
        assert_eq!(log.phase_ends.len(), 1);
        assert_eq!(log.phase_ends[0].line, 2);
    }
}
