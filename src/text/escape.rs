//! Text from the audited files (run directory names, `aiperf_version`,
//! request ids, JSON keys, symlink targets) reaches every output format. Each
//! renderer passes it through the escaping of its format:
//!
//! - [`visible`], for every format: control characters (C0, DEL, C1, so also
//!   newlines, ESC and BEL) and the invisible characters that reorder or hide
//!   text (bidi overrides and isolates, zero-width characters, BOM) are
//!   written as `\u{..}`, so nothing from the input moves the cursor, starts a
//!   terminal sequence, starts a new CI log line or reorders what is shown;
//! - [`markdown`]: also HTML and Markdown syntax (`<`, `&`, `|`, `` ` ``,
//!   `[`, `*`, ...), so input never becomes a tag, an image, a link or a
//!   table column;
//! - the GitHub renderer adds the workflow-command encoding (`%`, `:`, `,`);
//! - JSON keeps the data exact but writes these characters as `\uXXXX`
//!   escapes ([`JsonFormatter`]).

use std::borrow::Cow;
use std::io;

/// A character that must never reach an output raw.
pub fn is_unsafe(c: char) -> bool {
    c.is_control()
        || matches!(c,
            '\u{061C}'                  // Arabic letter mark
            | '\u{200B}'..='\u{200F}'   // zero-width space .. right-to-left mark
            | '\u{2028}'..='\u{202E}'   // line/paragraph separators, bidi embeddings/overrides
            | '\u{2060}'..='\u{2069}'   // word joiner .. bidi isolates
            | '\u{FEFF}'                // BOM / zero-width no-break space
            | '\u{FFF9}'..='\u{FFFB}'   // interlinear annotation
        )
}

/// `s` with every [`is_unsafe`] character written as `\u{XX}`: one line,
/// shown as it is stored, with no effect on a terminal or a log.
pub fn visible(s: &str) -> Cow<'_, str> {
    if !s.chars().any(is_unsafe) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        if is_unsafe(c) {
            out.push_str(&format!("\\u{{{:x}}}", c as u32));
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// A line of TOML the `toml` crate wrote: it escapes control characters but
/// writes bidi and zero-width ones raw; those become TOML's `\uXXXX`.
pub fn toml_line(line: &str) -> Cow<'_, str> {
    if !line.chars().any(is_unsafe) {
        return Cow::Borrowed(line);
    }
    let mut out = String::with_capacity(line.len() + 8);
    for c in line.chars() {
        if is_unsafe(c) {
            out.push_str(&format!("\\u{:04X}", c as u32));
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// The most characters of one message on standard error (an error quoting
/// a line of a 100 MB file says its first ones and how many more).
pub const MAX_MESSAGE_CHARS: usize = 2000;

/// A message for a terminal or a log (errors, status lines): [`visible`],
/// so one line, and at most [`MAX_MESSAGE_CHARS`] characters.
pub fn message(s: &str) -> String {
    let v = visible(s);
    let mut chars = v.char_indices();
    match chars.nth(MAX_MESSAGE_CHARS) {
        None => v.into_owned(),
        Some((at, _)) => {
            let rest = v[at..].chars().count();
            format!("{} ... ({rest} more characters)", &v[..at])
        }
    }
}

/// A writer that keeps every line it writes from starting with `::`, which
/// GitHub Actions runs as a workflow command (`::error::`, and
/// `::stop-commands::`, which silences every later annotation of the job):
/// such a line gets a space first. Every format but GitHub's own goes
/// through it, so text from the input (a run folder named `::error::x`)
/// that starts a line never becomes a command. Call [`Self::finish`] last.
pub struct NoCommands<W: io::Write> {
    inner: W,
    state: LineState,
}

#[derive(Clone, Copy, PartialEq)]
enum LineState {
    /// At the start of a line.
    Start,
    /// A `:` at the start of a line, held back.
    Colon,
    /// Within a line.
    Within,
}

impl<W: io::Write> NoCommands<W> {
    /// Guards `inner`.
    pub fn new(inner: W) -> NoCommands<W> {
        NoCommands {
            inner,
            state: LineState::Start,
        }
    }

    /// Writes what is held back and flushes.
    pub fn finish(&mut self) -> io::Result<()> {
        if self.state == LineState::Colon {
            self.inner.write_all(b":")?;
            self.state = LineState::Within;
        }
        self.inner.flush()
    }
}

impl<W: io::Write> io::Write for NoCommands<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        // Only a line's first two bytes are looked at; the rest of each line
        // is passed on whole.
        let mut rest = buf;
        while let Some(&first) = rest.first() {
            match self.state {
                LineState::Start if first == b':' => {
                    self.state = LineState::Colon;
                    rest = &rest[1..];
                }
                LineState::Start => self.state = LineState::Within,
                LineState::Colon => {
                    let held: &[u8] = if first == b':' { b" :" } else { b":" };
                    self.inner.write_all(held)?;
                    self.state = LineState::Within;
                }
                LineState::Within => match memchr::memchr(b'\n', rest) {
                    Some(i) => {
                        self.inner.write_all(&rest[..=i])?;
                        rest = &rest[i + 1..];
                        self.state = LineState::Start;
                    }
                    None => {
                        self.inner.write_all(rest)?;
                        rest = &[];
                    }
                },
            }
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

/// `s` made [`visible`], then safe as Markdown inline text (also inside a
/// table cell): HTML's `<`, `>`, `&` as entities, and every character that
/// starts Markdown syntax backslash-escaped.
pub fn markdown(s: &str) -> String {
    let v = visible(s);
    let mut out = String::with_capacity(v.len() + 8);
    for c in v.chars() {
        match c {
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '&' => out.push_str("&amp;"),
            '\\' | '`' | '*' | '_' | '[' | ']' | '|' | '~' | '#' | '!' | '$' => {
                out.push('\\');
                out.push(c);
            }
            c => out.push(c),
        }
    }
    out
}

/// A CSV cell that a spreadsheet would run as a formula (`=`, `+`, `-`, `@`,
/// tab, CR first) gets a leading `'`, unless it is a number. OWASP's
/// rule for CSV injection.
pub fn csv_cell(s: &str) -> Cow<'_, str> {
    let risky = s.starts_with(['=', '+', '-', '@', '\t', '\r']);
    if risky && s.parse::<f64>().is_err() {
        Cow::Owned(format!("'{s}"))
    } else {
        Cow::Borrowed(s)
    }
}

/// serde_json's formatter, with every [`is_unsafe`] character (serde_json
/// already escapes C0 controls) written as a `\uXXXX` escape: the JSON holds
/// the same strings, and its bytes show no bidi override or C1 control.
pub struct JsonFormatter<F>(pub F);

impl<F: serde_json::ser::Formatter> serde_json::ser::Formatter for JsonFormatter<F> {
    fn write_string_fragment<W: ?Sized + io::Write>(
        &mut self,
        w: &mut W,
        fragment: &str,
    ) -> io::Result<()> {
        // Printable ASCII, nearly every fragment, holds no unsafe character:
        // one byte scan instead of a decode per character.
        if fragment.bytes().all(|b| (0x20..0x7f).contains(&b)) {
            return w.write_all(fragment.as_bytes());
        }
        let mut rest = fragment;
        while let Some((i, c)) = rest.char_indices().find(|(_, c)| is_unsafe(*c)) {
            w.write_all(&rest.as_bytes()[..i])?;
            let mut units = [0u16; 2];
            for u in c.encode_utf16(&mut units) {
                write!(w, "\\u{u:04x}")?;
            }
            rest = &rest[i + c.len_utf8()..];
        }
        w.write_all(rest.as_bytes())
    }

    fn begin_array<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.0.begin_array(w)
    }
    fn end_array<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.0.end_array(w)
    }
    fn begin_array_value<W: ?Sized + io::Write>(
        &mut self,
        w: &mut W,
        first: bool,
    ) -> io::Result<()> {
        self.0.begin_array_value(w, first)
    }
    fn end_array_value<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.0.end_array_value(w)
    }
    fn begin_object<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.0.begin_object(w)
    }
    fn end_object<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.0.end_object(w)
    }
    fn begin_object_key<W: ?Sized + io::Write>(
        &mut self,
        w: &mut W,
        first: bool,
    ) -> io::Result<()> {
        self.0.begin_object_key(w, first)
    }
    fn end_object_key<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.0.end_object_key(w)
    }
    fn begin_object_value<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.0.begin_object_value(w)
    }
    fn end_object_value<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.0.end_object_value(w)
    }
}

/// Writes `value` as pretty JSON through [`JsonFormatter`]. Generic in the
/// writer: the serializer makes a write per punctuation mark and indent,
/// which into a `Vec` are inlined copies and through a `dyn Write` are
/// calls each.
pub fn write_json<W: io::Write + ?Sized, T: serde::Serialize + ?Sized>(
    out: &mut W,
    value: &T,
) -> io::Result<()> {
    let fmt = JsonFormatter(serde_json::ser::PrettyFormatter::new());
    let mut ser = serde_json::Serializer::with_formatter(out, fmt);
    value.serialize(&mut ser).map_err(io::Error::from)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_line_starts_a_workflow_command_however_it_is_written() {
        let mut out = Vec::new();
        let mut w = NoCommands::new(&mut out);
        for piece in [
            ":",
            ":error::x\n",
            "a::b\n",
            "::",
            "y\n",
            ":",
            "z\n",
            "\n::",
        ] {
            io::Write::write_all(&mut w, piece.as_bytes()).expect("write");
        }
        w.finish().expect("finish");
        assert_eq!(
            String::from_utf8(out).expect("utf8"),
            " ::error::x\na::b\n ::y\n:z\n\n ::"
        );
        assert_eq!(toml_line("a = \"x\u{202e}\""), "a = \"x\\u202E\"");
    }

    #[test]
    fn controls_and_bidi_become_visible() {
        assert_eq!(visible("0.13.0"), "0.13.0");
        assert_eq!(
            visible("a\n::error::x\u{1b}[31m\u{7}\u{202e}b\u{9b}"),
            "a\\u{a}::error::x\\u{1b}[31m\\u{7}\\u{202e}b\\u{9b}"
        );
    }

    #[test]
    fn markdown_syntax_is_escaped() {
        assert_eq!(
            markdown("<img src=x> | ![a](b) `c` &"),
            "&lt;img src=x&gt; \\| \\!\\[a\\](b) \\`c\\` &amp;"
        );
    }

    #[test]
    fn formula_cells_get_a_quote_numbers_do_not() {
        assert_eq!(csv_cell("=HYPERLINK(\"x\")"), "'=HYPERLINK(\"x\")");
        assert_eq!(csv_cell("@SUM(A1)"), "'@SUM(A1)");
        assert_eq!(csv_cell("-5.5"), "-5.5");
        assert_eq!(csv_cell("-cmd"), "'-cmd");
        assert_eq!(csv_cell("abc"), "abc");
    }

    #[test]
    fn json_keeps_the_string_but_not_the_raw_characters() {
        // DEL alone among printable ASCII: the ASCII fast path must not pass it.
        for s in ["x\u{202e}y\u{1b}z\u{85}", "plain\u{7f}ascii", "~ \u{7f}"] {
            let mut out = Vec::new();
            write_json(&mut out, &serde_json::json!({ s: s })).expect("json");
            let text = String::from_utf8(out).expect("utf8");
            assert!(!text.chars().any(|c| is_unsafe(c) && c != '\n'), "{text}");
            let back: serde_json::Value = serde_json::from_str(&text).expect("parses");
            assert_eq!(back[s], s);
        }
    }
}
