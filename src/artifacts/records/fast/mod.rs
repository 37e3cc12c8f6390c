//! The fast path for one `profile_export.jsonl` line.
//!
//! A scanner that knows the record's shape: it walks the line once, keeps the
//! fields the checks use and skips the rest, validating the JSON grammar as
//! it goes (strings are scanned eight bytes at a time). It accepts a strict
//! subset of what the serde path accepts and, for every line it accepts,
//! builds exactly the record the serde path builds; on anything else (an
//! escape sequence, a wrong type, a missing or duplicate field, an error
//! object, a number it would have to round differently, deep nesting) it
//! gives up and returns `None`, and the caller parses the line with serde,
//! which also produces the finding. So the fast path changes speed, never
//! results: `tests/fuzz` holds a differential target that checks exactly
//! that, and the unit tests below check it on the sample runs and on
//! mutations of them.
//!
//! Most lines do not even need the scanner's walk: a line it read teaches
//! the block its shape ([`LineShape`]), and a next line of the same shape is
//! read by comparing the bytes between its values and scanning each value,
//! with the same checks the scanner makes at that place.

mod scanner;
mod shape;

use std::num::NonZeroU64;

use super::{Id, Metric, Phase, Record, Values};
use scanner::{Keys, Scanner};
use shape::LineShape;

/// Nesting deeper than this inside a skipped value: give up (serde's own
/// limit is 128, and the fallback reports it).
use crate::artifacts::cursor::MAX_DEPTH;

/// Parses a trimmed, non-empty line; `None` means "ask serde". `shapes`
/// carries what the lines before taught (see [`Shapes`]).
pub(super) fn parse(line: &str, line_no: u64, shapes: &mut Shapes) -> Option<Record> {
    // Shapes pay while most lines have one of them; in a block whose lines
    // keep changing shape, trying and learning them costs more than it saves.
    let use_shapes = shapes.misses < MIN_MISSES || shapes.misses <= shapes.hits;
    if use_shapes {
        // The shapes seen last, most recent first.
        for k in 0..shapes.lines.len() {
            let mut s = Scanner::new(line, &mut shapes.keys);
            if let Some(r) = shapes.lines[k].read(&mut s, line_no) {
                shapes.lines[..=k].rotate_right(1);
                shapes.hits += 1;
                return Some(r);
            }
        }
    }
    let rec = {
        let mut s = Scanner::new(line, &mut shapes.keys);
        let rec = s.record(line_no);
        s.ws();
        rec.filter(|_| s.i == s.b.len())
    }?;
    if use_shapes {
        shapes.misses += 1;
        if let Some(t) = LineShape::learn(line) {
            shapes.lines.truncate(LINE_SHAPES - 1);
            shapes.lines.insert(0, t);
        }
    }
    Some(rec)
}

impl Shapes {
    /// Lines read through a shape so far.
    pub(super) fn hits(&self) -> u64 {
        u64::from(self.hits)
    }
}

/// Line shapes kept per block: two, so that a run whose lines alternate
/// between two shapes (successes and errors, say) reads both through them.
const LINE_SHAPES: usize = 2;

/// Lines of a block that no shape read (the scanner's lines) before the
/// block may stop using shapes: it does once they outnumber the lines a
/// shape read. A run's records change shape rarely (its first line, a change
/// of phase, an error), so a block where they do has lines of many shapes.
const MIN_MISSES: u32 = 16;

/// What the lines of a block read so far teach about the next ones.
///
/// Whole line shapes first ([`LineShape`]): AIPerf writes every record with
/// the same keys in the same order, so a line is usually the line before
/// with other values. Failing that, the keys of the previous lines' objects
/// by position ([`Keys`]).
#[derive(Default)]
pub(super) struct Shapes {
    keys: Keys,
    lines: Vec<LineShape>,
    /// Lines of the block read through a shape.
    hits: u32,
    /// Lines of the block the scanner read while shapes were in use.
    misses: u32,
}

#[derive(Default)]
struct Meta<'a> {
    session_num: Option<u64>,
    request_start_ns: u64,
    request_end_ns: u64,
    request_ack_ns: Option<u64>,
    phase: Option<Phase>,
    phase_index: Option<u32>,
    conversation_id: Option<&'a str>,
    turn_index: Option<u32>,
    x_request_id: Option<&'a str>,
    was_cancelled: bool,
}

impl Meta<'_> {
    /// The record of a line whose metadata this is (no error object).
    #[inline(always)]
    fn into_record(self, values: Values, line: u64) -> Option<Record> {
        Some(Record {
            line,
            phase: self.phase?,
            phase_index: self.phase_index,
            session_num: self.session_num,
            turn_index: self.turn_index,
            x_request_id: self.x_request_id.map(Id::new),
            conversation_id: self.conversation_id.map(Id::new),
            request_start_ns: self.request_start_ns,
            request_end_ns: self.request_end_ns,
            request_ack_ns: self.request_ack_ns.and_then(NonZeroU64::new),
            was_cancelled: self.was_cancelled,
            error: None,
            values,
        })
    }
}

/// The phase a `benchmark_phase` names.
#[inline(always)]
fn phase(name: &str) -> Option<Phase> {
    match name {
        "warmup" => Some(Phase::Warmup),
        "profiling" => Some(Phase::Profiling),
        _ => None,
    }
}

/// The fast path against the serde path on one line (tests and fuzzing):
/// panics if the fast path accepts a line and builds a different record.
#[cfg(any(test, feature = "fuzzing"))]
pub fn assert_agrees(line: &str) {
    agrees_in(line, &mut Shapes::default());
}

/// [`assert_agrees`] for each line of `text`, with one key cache across the
/// lines, as a block is read.
#[cfg(any(test, feature = "fuzzing"))]
pub fn assert_agrees_lines(text: &str) {
    let mut shapes = Shapes::default();
    for line in text.split('\n') {
        agrees_in(line, &mut shapes);
    }
}

#[cfg(any(test, feature = "fuzzing"))]
fn agrees_in(line: &str, shapes: &mut Shapes) {
    let line = line.trim_ascii();
    if line.is_empty() {
        return;
    }
    // Twice: the first read fills the cache, the second reads through it,
    // and both must agree with serde.
    let first = parse(line, 1, shapes);
    let second = parse(line, 1, shapes);
    assert_eq!(
        first, second,
        "the key cache changed the reading of {line:?}"
    );
    if let Some(fast) = second {
        let slow = serde_json::from_str::<super::serde_path::RawRecord>(line)
            .map_err(|e| e.to_string())
            .and_then(|raw| super::serde_path::convert(raw, 1).map_err(|e| e.message));
        match slow {
            Ok(slow) => assert!(
                fast == slow && fast.values.0.map(f64::to_bits) == slow.values.0.map(f64::to_bits),
                "fast and serde paths disagree on {line:?}:\n{fast:?}\n{slow:?}"
            ),
            Err(e) => panic!("fast path accepted a line serde rejects ({e}): {line:?}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample_lines() -> Vec<String> {
        let runs = concat!(env!("CARGO_MANIFEST_DIR"), "/sample-artifacts/runs");
        let mut lines = Vec::new();
        for run in std::fs::read_dir(runs).expect("sample runs") {
            let path = run.expect("entry").path().join("profile_export.jsonl");
            let text = std::fs::read_to_string(&path).expect("sample records");
            lines.extend(text.lines().map(str::to_owned));
        }
        lines
    }

    #[test]
    fn takes_every_sample_line_and_agrees_with_serde() {
        let lines = sample_lines();
        assert!(lines.len() > 100);
        let mut taken = 0;
        for line in &lines {
            assert_agrees(line);
            taken += usize::from(parse(line, 1, &mut Shapes::default()).is_some());
        }
        // The samples have no failed requests, so the fast path reads all.
        assert_eq!(taken, lines.len());
    }

    #[test]
    fn agrees_with_serde_on_every_truncation_and_byte_mutation_of_a_real_line() {
        let lines = sample_lines();
        let line = &lines[0];
        for cut in 0..line.len() {
            if line.is_char_boundary(cut) {
                assert_agrees(&line[..cut]);
            }
        }
        let replacements = [
            "",
            " ",
            "\"",
            "\\",
            "{",
            "}",
            "[",
            "]",
            ",",
            ":",
            "0",
            "-",
            ".",
            "e",
            "null",
            "1e999",
            "\u{1}",
            "x",
            "true",
            "01",
            "-0",
            "18446744073709551616",
            "4294967296",
        ];
        let bytes = line.as_bytes();
        for pos in (0..bytes.len()).filter(|&p| line.is_char_boundary(p)) {
            for rep in replacements {
                let end = (pos + 1..=line.len())
                    .find(|&e| line.is_char_boundary(e))
                    .unwrap_or(line.len());
                let mutated = format!("{}{}{}", &line[..pos], rep, &line[end..]);
                let inserted = format!("{}{}{}", &line[..pos], rep, &line[pos..]);
                for m in [&mutated, &inserted] {
                    // With a cold cache, and with one the real line filled
                    // (its fields cached whole), as the next line of a run.
                    assert_agrees(m);
                    let mut warm = Shapes::default();
                    agrees_in(line, &mut warm);
                    agrees_in(m, &mut warm);
                }
            }
        }
    }

    #[test]
    fn a_key_cache_filled_by_other_lines_reads_alike() {
        // Every sample line and mutations of the first, one cache across
        // all of them in turn.
        let lines = sample_lines();
        let mut text = lines.join("\n");
        let line = &lines[0];
        for (pos, _) in line.char_indices().step_by(7) {
            text.push('\n');
            text.push_str(&line[..pos]);
            text.push_str(" \"x\":1,");
            text.push_str(&line[pos..]);
            text.push('\n');
            text.push_str(&line.replacen("\"metrics\"", "\"metrics \"", 1));
        }
        text.push('\n');
        text.push_str(&line.replace("\":", "\" :"));
        assert_agrees_lines(&text);
    }

    #[test]
    fn lines_after_the_first_of_their_shape_are_read_through_it() {
        let runs = concat!(env!("CARGO_MANIFEST_DIR"), "/sample-artifacts/runs");
        for run in std::fs::read_dir(runs).expect("sample runs") {
            let path = run.expect("entry").path().join("profile_export.jsonl");
            let text = std::fs::read_to_string(&path).expect("sample records");
            let mut shapes = Shapes::default();
            let (mut through, mut lines) = (0, 0);
            for line in text.lines() {
                let mut keys = Keys::default();
                let shaped = shapes
                    .lines
                    .iter()
                    .find_map(|t| t.read(&mut Scanner::new(line, &mut keys), 7));
                let read = parse(line, 7, &mut shapes).expect("sample lines are read");
                if let Some(r) = shaped {
                    assert_eq!(r, read);
                    through += 1;
                }
                lines += 1;
            }
            // Each sample run has two shapes (its warmup and profiling
            // records differ), learned from their first lines.
            assert_eq!(through, lines - 2, "{}", path.display());
            assert_eq!(shapes.lines.len(), 2);
        }
    }

    #[test]
    fn alternating_shapes_are_both_kept_and_a_third_replaces_the_older() {
        let lines = sample_lines();
        let a = lines[0].clone();
        let b = a.replace("\"was_cancelled\":false", "\"was_cancelled\":true");
        let c = a.replace("\"unit\":\"ms\"", "\"unit\":\"s\"");
        assert!(a != b && a != c);
        let mut shapes = Shapes::default();
        for line in [&a, &b, &a, &b] {
            let r = parse(line, 1, &mut shapes).expect("read");
            assert_eq!(r.was_cancelled, line == &b);
        }
        assert_eq!(shapes.lines.len(), 2);
        // Both shapes read without learning again: the most recent first.
        assert!(shape_reads(&shapes, 0, &b) && shape_reads(&shapes, 1, &a));
        parse(&c, 1, &mut shapes).expect("read");
        assert_eq!(shapes.lines.len(), 2);
        assert!(shape_reads(&shapes, 0, &c) && shape_reads(&shapes, 1, &b));
        assert!(!shape_reads(&shapes, 1, &a));
    }

    /// Whether the `k`th shape of `shapes` reads `line`.
    fn shape_reads(shapes: &Shapes, k: usize, line: &str) -> bool {
        let mut keys = Keys::default();
        shapes.lines[k]
            .read(&mut Scanner::new(line, &mut keys), 1)
            .is_some()
    }

    #[test]
    fn a_block_whose_lines_keep_changing_shape_stops_using_shapes() {
        let lines = sample_lines();
        let a = lines[0].clone();
        let variants: Vec<String> = ["ms", "s", "us"]
            .iter()
            .map(|u| a.replace("\"unit\":\"ms\"", &format!("\"unit\":\"{u}\"")))
            .collect();
        let mut shapes = Shapes::default();
        // Three shapes in turn: two kept, so every line misses.
        for i in 0..100 {
            let line = &variants[i % 3];
            assert_agrees_lines(line);
            parse(line, 1, &mut shapes).expect("read");
        }
        assert_eq!((shapes.hits, shapes.misses), (0, MIN_MISSES));
        // Lines of one shape: all but the first read through it.
        let mut shapes = Shapes::default();
        for _ in 0..100 {
            parse(&a, 1, &mut shapes).expect("read");
        }
        assert_eq!((shapes.hits, shapes.misses), (99, 1));
    }

    /// `line` with the number after `key` (its first occurrence) passed
    /// through `f`.
    fn with_number(line: &str, key: &str, f: impl Fn(&str) -> String) -> String {
        let at = line.find(key).expect("the key") + key.len();
        let end = at
            + line[at..]
                .find(|c: char| !(c.is_ascii_digit() || c == '.'))
                .expect("the number's end");
        format!("{}{}{}", &line[..at], f(&line[at..end]), &line[end..])
    }

    #[test]
    fn a_shape_is_not_learned_where_a_kept_metric_holds_an_array() {
        let lines = sample_lines();
        let key = "\"time_to_first_token\":{\"value\":";
        let line = with_number(&lines[0], key, |n| format!("[{n}]"));
        assert_ne!(line, lines[0]);
        let mut shapes = Shapes::default();
        let r = parse(&line, 1, &mut shapes).expect("the scanner reads it");
        // Read as the sentinel the reader's domain check names and takes
        // out (an array where AIPerf writes one number).
        assert_eq!(
            r.values.get(Metric::TimeToFirstToken),
            Some(crate::artifacts::records::NOT_A_NUMBER)
        );
        assert!(shapes.lines.is_empty());
        assert_eq!(shapes.misses, 1);
        // Next to a number there, the array must not be read as absent.
        assert_agrees_lines(&format!("{line}\n{}\n{line}", lines[0]));
    }

    #[test]
    fn gives_up_on_what_serde_must_judge() {
        let lines = sample_lines();
        let line = &lines[0];
        let cases = [
            line.replace("\"warmup\"", "\"cooldown\""),
            with_number(line, "\"session_num\":", |n| format!("{n}.0")),
            line.replace("\"was_cancelled\":false", "\"was_cancelled\":null"),
            line.replace("{\"metadata\"", "{\"error\":{\"code\":500},\"metadata\""),
            line.replace("\"x_request_id\":\"", "\"x_request_id\":\"\\u0041"),
            line.replace("\"unit\":\"ms\"", "\"value\":1,\"unit\":\"ms\""),
            line.replace(
                "\"request_end_ns\"",
                "\"request_end_ns\":1,\"request_end_ns\"",
            ),
            format!("{line} x"),
        ];
        for case in &cases {
            assert_ne!(case, line, "the replacement must apply");
            assert!(
                parse(case, 1, &mut Shapes::default()).is_none(),
                "fast path took {case:?}"
            );
            assert_agrees(case);
        }
    }
}
