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

use std::num::NonZeroU64;

use super::{Id, Metric, Phase, Record, Values};

/// Nesting deeper than this inside a skipped value: give up (serde's own
/// limit is 128, and the fallback reports it).
const MAX_DEPTH: u32 = 100;

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

/// The keys of the previous lines' objects, by position, as written
/// (`"key":`). The key at a position is usually the one seen there before:
/// comparing the bytes at the cursor with it replaces scanning the string. A
/// cached key was validated when it was first scanned, so an exact match
/// reads the same key the scan would have; anything else is scanned as usual.
///
/// In the metrics object it goes further: a field of the usual shape
/// (`"key":{"value":NUMBER,"unit":"..."}`) is cached whole, as the bytes
/// before its number, the bytes after it and the metric its key names. A
/// field that matches both byte strings around a valid number is that same
/// field with another number: two comparisons and a number scan instead of a
/// key, an object, two keys and a string.
#[derive(Default)]
struct Keys {
    keys: [Vec<Vec<u8>>; 3],
    fields: Vec<UsualField>,
}

/// A usual metric field as a line before wrote it at the same position.
#[derive(Default)]
struct UsualField {
    /// `"key":{"value":`, as written (validated when cached).
    before: Vec<u8>,
    /// `,"unit":"..."}`, as written (validated when cached).
    after: Vec<u8>,
    /// The metric the key names, if the records keep it.
    metric: Option<Metric>,
}

/// The shape of a line the scanner read: the bytes between its values (keys,
/// punctuation, whitespace, `unit` strings, nulls and booleans) and what
/// each value is. A line that has the same bytes between values of the same
/// kinds is the same record with other values: reading it is a comparison
/// per value and the value's own scan, with no key to look at.
///
/// It is learned ([`LineShape::learn`]) only from a line the scanner read,
/// so its bytes were validated as JSON once, the keys hold no escape and no
/// duplicate, and every value the record keeps is where the shape says. Each
/// value is then scanned and checked exactly as the scanner checks it at
/// that place, so a line read through a shape is read as the scanner, and
/// serde, read it; anything else (another byte between values, a value of
/// another kind) and the line is read the general way.
#[derive(Default)]
struct LineShape {
    /// The bytes between the values, one after the other.
    between: Vec<u8>,
    /// Each value, with where the bytes before it end in `between`; the bytes
    /// after the last value, to the end of the line, are the rest.
    values: Vec<(u32, Slot)>,
    /// `metadata.was_cancelled`, a literal of the shape.
    was_cancelled: bool,
}

/// A value of a [`LineShape`]: what the record takes from it, or how it is
/// checked and dropped.
#[derive(Clone, Copy, Debug)]
enum Slot {
    SessionNum,
    RequestStart,
    RequestEnd,
    RequestAck,
    Phase,
    PhaseIndex,
    ConversationId,
    TurnIndex,
    XRequestId,
    /// The number of a kept metric, usually of this form.
    Metric(Metric, Form),
    /// A number the record does not keep, usually of this form.
    Number(Form),
    /// A string the record does not keep.
    String,
    /// An array the record does not keep, as deep as this.
    Array(u32),
}

/// How a number of a [`LineShape`] was written; its scan expects that form
/// (a branch per form, not one for all numbers of a line, is predicted).
#[derive(Clone, Copy, Debug, PartialEq)]
enum Form {
    /// Digits (`16`).
    Integer,
    /// Digits, a point, digits (`183.412812`).
    Decimal,
    /// Anything else (negative, exponent).
    Other,
}

impl LineShape {
    /// Reads the line of `s` if it has this shape.
    #[inline(always)]
    fn read<'a>(&self, s: &mut Scanner<'a, '_>, line: u64) -> Option<Record> {
        let mut m = Meta {
            was_cancelled: self.was_cancelled,
            ..Meta::default()
        };
        let (mut start, mut end) = (None, None);
        let mut values = Values::default();
        let mut at = 0;
        for &(to, slot) in &self.values {
            let between = &self.between[at..to as usize];
            if !s.b[s.i..].starts_with(between) {
                return None;
            }
            s.i += between.len();
            at = to as usize;
            match slot {
                Slot::Metric(k, form) => {
                    let (text, integer) = s.number_of(form)?;
                    values.set(k, Some(number_value(text, integer)?));
                }
                Slot::Number(form) => drop(s.number_of(form)?),
                Slot::String => drop(s.string()?),
                Slot::Array(depth) => s.skip(depth)?,
                Slot::SessionNum => m.session_num = Some(s.u64()?),
                Slot::RequestStart => start = Some(s.u64()?),
                Slot::RequestEnd => end = Some(s.u64()?),
                Slot::RequestAck => m.request_ack_ns = Some(s.u64()?),
                Slot::Phase => m.phase = Some(phase(s.string()?)?),
                Slot::PhaseIndex => m.phase_index = Some(u32::try_from(s.u64()?).ok()?),
                Slot::TurnIndex => m.turn_index = Some(u32::try_from(s.u64()?).ok()?),
                Slot::ConversationId => m.conversation_id = Some(s.string()?),
                Slot::XRequestId => m.x_request_id = Some(s.string()?),
            }
        }
        if s.b[s.i..] != self.between[at..] {
            return None;
        }
        m.request_start_ns = start?;
        m.request_end_ns = end?;
        m.into_record(values, line)
    }

    /// The shape of `line`, a line the scanner read (`None` for a shape this
    /// does not capture: a kept metric whose value is not a number or null).
    fn learn(line: &str) -> Option<LineShape> {
        let mut keys = Keys::default();
        let mut l = Learner {
            s: Scanner::new(line, &mut keys),
            shape: LineShape::default(),
            from: 0,
        };
        l.object(1, |l, key| match key {
            "metadata" => l.metadata(),
            "metrics" => {
                if !l.s.null() {
                    l.metrics()?;
                }
                Some(())
            }
            // The scanner leaves error objects to serde.
            "error" => l.s.null().then_some(()),
            _ => l.value(1, false),
        })?;
        l.s.ws();
        if l.s.i != l.s.b.len() {
            return None;
        }
        let rest = &l.s.b[l.from..];
        l.shape.between.extend_from_slice(rest);
        Some(l.shape)
    }
}

/// Walks a line the scanner read, writing down its [`LineShape`].
struct Learner<'a, 'k> {
    s: Scanner<'a, 'k>,
    shape: LineShape,
    /// Where the bytes since the last value start.
    from: usize,
}

impl Learner<'_, '_> {
    /// Scans the value at the cursor with `scan`, which says what slot it
    /// is, and makes it one.
    fn slot(&mut self, scan: impl FnOnce(&mut Self) -> Option<Slot>) -> Option<()> {
        self.s.ws();
        let at = self.s.i;
        let slot = scan(self)?;
        let before = &self.s.b[self.from..at];
        self.shape.between.extend_from_slice(before);
        let to = u32::try_from(self.shape.between.len()).ok()?;
        self.shape.values.push((to, slot));
        self.from = self.s.i;
        Some(())
    }

    /// The number at the cursor, scanned, and the form it has.
    fn number_form(&mut self) -> Option<Form> {
        Some(match self.s.number()? {
            (_, true) => Form::Integer,
            (t, false) if !t.starts_with('-') && !t.contains(['e', 'E']) => Form::Decimal,
            _ => Form::Other,
        })
    }

    /// A number (or, for an optional field, null: part of the shape).
    fn number(&mut self, slot: Slot) -> Option<()> {
        if self.s.null() {
            return Some(());
        }
        self.slot(|l| l.s.number().map(|_| slot))
    }

    /// A string (or null, part of the shape).
    fn string(&mut self, slot: Slot) -> Option<()> {
        if self.s.null() {
            return Some(());
        }
        self.slot(|l| l.s.string().map(|_| slot))
    }

    /// An object `depth` containers deep, calling `field` after each key.
    fn object(
        &mut self,
        depth: u32,
        mut field: impl FnMut(&mut Self, &str) -> Option<()>,
    ) -> Option<()> {
        if depth > MAX_DEPTH {
            return None;
        }
        self.s.expect(b'{')?;
        if self.s.eat(b'}') {
            return Some(());
        }
        loop {
            let key = self.s.string()?;
            self.s.expect(b':')?;
            field(self, key)?;
            if !self.s.eat(b',') {
                return self.s.expect(b'}');
            }
        }
    }

    /// A value the record does not keep, inside `depth` containers. Its
    /// strings are part of the shape when `strings_fixed` (metric units),
    /// values otherwise (ids); numbers and arrays are values.
    fn value(&mut self, depth: u32, strings_fixed: bool) -> Option<()> {
        self.s.ws();
        match self.s.peek()? {
            b'"' if strings_fixed => self.s.string().map(drop),
            b'"' => self.slot(|l| l.s.string().map(|_| Slot::String)),
            b'{' => self.object(depth + 1, |l, _| l.value(depth + 1, strings_fixed)),
            b'[' => self.slot(|l| l.s.skip(depth).map(|_| Slot::Array(depth))),
            b't' => self.s.literal(b"true"),
            b'f' => self.s.literal(b"false"),
            b'n' => self.s.literal(b"null"),
            _ => self.slot(|l| l.number_form().map(Slot::Number)),
        }
    }

    fn metadata(&mut self) -> Option<()> {
        self.object(2, |l, key| match key {
            "session_num" => l.number(Slot::SessionNum),
            "request_start_ns" => l.number(Slot::RequestStart),
            "request_end_ns" => l.number(Slot::RequestEnd),
            "request_ack_ns" => l.number(Slot::RequestAck),
            "phase_index" => l.number(Slot::PhaseIndex),
            "turn_index" => l.number(Slot::TurnIndex),
            "benchmark_phase" => l.slot(|l| l.s.string().map(|_| Slot::Phase)),
            "conversation_id" => l.string(Slot::ConversationId),
            "x_request_id" => l.string(Slot::XRequestId),
            "was_cancelled" => {
                l.s.ws();
                l.shape.was_cancelled = l.s.peek()? == b't';
                l.value(2, false)
            }
            _ => l.value(2, false),
        })
    }

    fn metrics(&mut self) -> Option<()> {
        self.object(2, |l, key| match Metric::from_tag(key) {
            Some(m) => {
                if l.s.null() {
                    return Some(());
                }
                let mut has_value = false;
                l.object(3, |l, key| {
                    if key != "value" {
                        return l.value(3, true);
                    }
                    has_value = true;
                    l.s.ws();
                    match l.s.peek()? {
                        b'n' => l.s.literal(b"null"),
                        b'-' | b'0'..=b'9' => {
                            l.slot(|l| l.number_form().map(|f| Slot::Metric(m, f)))
                        }
                        // An array where the record keeps a number: the
                        // next line could put a number there.
                        _ => None,
                    }
                })?;
                has_value.then_some(())
            }
            None => l.value(2, true),
        })
    }
}

/// Which object's keys.
#[derive(Clone, Copy)]
enum Obj {
    Top = 0,
    Metadata = 1,
    Metrics = 2,
}

struct Scanner<'a, 'k> {
    s: &'a str,
    b: &'a [u8],
    i: usize,
    keys: &'k mut Keys,
}

/// Bits of the fields seen, to refuse duplicates as serde does.
#[derive(Default)]
struct Seen(u32);

impl Seen {
    fn first(&mut self, bit: u32) -> Option<()> {
        let mask = 1 << bit;
        if self.0 & mask != 0 {
            return None;
        }
        self.0 |= mask;
        Some(())
    }
}

const LO: u64 = 0x0101_0101_0101_0101;
const HI: u64 = 0x8080_8080_8080_8080;

/// High bit set in every byte of `w` equal to `c`; exact for the lowest one.
#[inline(always)]
fn bytes_eq(w: u64, c: u8) -> u64 {
    let x = w ^ (LO * c as u64);
    x.wrapping_sub(LO) & !x & HI
}

impl<'a, 'k> Scanner<'a, 'k> {
    #[inline(always)]
    fn new(line: &'a str, keys: &'k mut Keys) -> Self {
        Scanner {
            s: line,
            b: line.as_bytes(),
            i: 0,
            keys,
        }
    }

    #[inline(always)]
    fn peek(&self) -> Option<u8> {
        self.b.get(self.i).copied()
    }

    #[inline(always)]
    fn ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.peek() {
            self.i += 1;
        }
    }

    /// Skips whitespace, then requires `c`.
    #[inline(always)]
    fn expect(&mut self, c: u8) -> Option<()> {
        self.ws();
        (self.peek()? == c).then(|| self.i += 1)
    }

    /// Skips whitespace, then eats `c` if it is next.
    #[inline(always)]
    fn eat(&mut self, c: u8) -> bool {
        self.ws();
        if self.peek() == Some(c) {
            self.i += 1;
            true
        } else {
            false
        }
    }

    /// A string without escapes or control characters, at the cursor (after
    /// whitespace). The line is `&str` and quotes are char boundaries, so the
    /// slice is valid UTF-8.
    #[inline(always)]
    fn string(&mut self) -> Option<&'a str> {
        self.expect(b'"')?;
        let start = self.i;
        let b = self.b;
        let mut i = start;
        while i + 8 <= b.len() {
            let w = u64::from_le_bytes(b[i..i + 8].try_into().ok()?);
            let control = w.wrapping_sub(LO * 0x20) & !w & HI;
            let hit = bytes_eq(w, b'"') | bytes_eq(w, b'\\') | control;
            if hit != 0 {
                i += (hit.trailing_zeros() / 8) as usize;
                break;
            }
            i += 8;
        }
        while i < b.len() && b[i] != b'"' && b[i] != b'\\' && b[i] >= 0x20 {
            i += 1;
        }
        if b.get(i) != Some(&b'"') {
            return None;
        }
        self.i = i + 1;
        // Both ends are ASCII quotes, so char boundaries.
        self.s.get(start..i)
    }

    /// `null`, if next.
    #[inline(always)]
    fn null(&mut self) -> bool {
        self.ws();
        if self.b[self.i..].starts_with(b"null") {
            self.i += 4;
            true
        } else {
            false
        }
    }

    fn literal(&mut self, word: &[u8]) -> Option<()> {
        self.b[self.i..]
            .starts_with(word)
            .then(|| self.i += word.len())
    }

    /// Eats ASCII digits, eight at a time; how many.
    #[inline(always)]
    fn digits(&mut self) -> usize {
        let b = self.b;
        let start = self.i;
        let mut i = start;
        while let Some(chunk) = b.get(i..i + 8) {
            let w = u64::from_le_bytes(chunk.try_into().ok().unwrap_or_default());
            // High bit set in each byte that is not '0'..='9' (exact for the
            // lowest: digits neither carry nor borrow).
            let other = (w.wrapping_add(LO * 0x46) | w.wrapping_sub(LO * 0x30)) & HI;
            if other != 0 {
                i += (other.trailing_zeros() / 8) as usize;
                self.i = i;
                return i - start;
            }
            i += 8;
        }
        while let Some(b'0'..=b'9') = b.get(i) {
            i += 1;
        }
        self.i = i;
        i - start
    }

    /// A JSON number's extent; whether it is a plain non-negative integer.
    fn number(&mut self) -> Option<(&'a str, bool)> {
        self.ws();
        let start = self.i;
        let negative = self.peek() == Some(b'-');
        if negative {
            self.i += 1;
        }
        let first = self.peek()?;
        let n = self.digits();
        if n == 0 || (first == b'0' && n > 1) {
            return None;
        }
        let mut integer = !negative;
        if self.peek() == Some(b'.') {
            self.i += 1;
            if self.digits() == 0 {
                return None;
            }
            integer = false;
        }
        if let Some(b'e' | b'E') = self.peek() {
            self.i += 1;
            if let Some(b'+' | b'-') = self.peek() {
                self.i += 1;
            }
            // Huge exponents: serde's range handling decides.
            if !(1..=3).contains(&self.digits()) {
                return None;
            }
            integer = false;
        }
        Some((self.s.get(start..self.i)?, integer))
    }

    /// [`Scanner::number`] for a number usually of `form`: the same extent
    /// and answer, by a scan specialised to that form where the number has
    /// it, by the general scan where it does not.
    #[inline(always)]
    fn number_of(&mut self, form: Form) -> Option<(&'a str, bool)> {
        let start = self.i;
        let fits = match form {
            Form::Other => false,
            Form::Integer | Form::Decimal => {
                let first = self.peek().unwrap_or(b'-');
                let n = self.digits();
                let whole = n > 0 && (first != b'0' || n == 1);
                match (form, self.peek()) {
                    (_, Some(b'.' | b'e' | b'E')) if form == Form::Integer => false,
                    (Form::Integer, _) => whole,
                    (_, Some(b'.')) if whole => {
                        self.i += 1;
                        self.digits() > 0 && !matches!(self.peek(), Some(b'e' | b'E'))
                    }
                    _ => false,
                }
            }
        };
        if fits {
            return Some((self.s.get(start..self.i)?, form == Form::Integer));
        }
        self.i = start;
        self.number()
    }

    /// A `u64` written as plain digits (what serde accepts for a `u64` field).
    fn u64(&mut self) -> Option<u64> {
        let (text, integer) = self.number_of(Form::Integer)?;
        if !integer {
            return None;
        }
        text.parse().ok()
    }

    fn opt_u64(&mut self) -> Option<Option<u64>> {
        if self.null() {
            return Some(None);
        }
        self.u64().map(Some)
    }

    fn opt_u32(&mut self) -> Option<Option<u32>> {
        match self.opt_u64()? {
            None => Some(None),
            Some(v) => u32::try_from(v).ok().map(Some),
        }
    }

    fn opt_string(&mut self) -> Option<Option<&'a str>> {
        if self.null() {
            return Some(None);
        }
        self.string().map(Some)
    }

    /// Any JSON value, validated and dropped.
    fn skip(&mut self, depth: u32) -> Option<()> {
        if depth > MAX_DEPTH {
            return None;
        }
        self.ws();
        match self.peek()? {
            b'"' => self.string().map(drop),
            b'{' => {
                self.i += 1;
                if self.eat(b'}') {
                    return Some(());
                }
                loop {
                    self.string()?;
                    self.expect(b':')?;
                    self.skip(depth + 1)?;
                    if !self.eat(b',') {
                        return self.expect(b'}');
                    }
                }
            }
            b'[' => {
                self.i += 1;
                if self.eat(b']') {
                    return Some(());
                }
                loop {
                    self.skip(depth + 1)?;
                    if !self.eat(b',') {
                        return self.expect(b']');
                    }
                }
            }
            b't' => self.literal(b"true"),
            b'f' => self.literal(b"false"),
            b'n' => self.literal(b"null"),
            _ => self.number().map(drop),
        }
    }

    /// Calls `field` for each key of an object, after its colon.
    #[inline(always)]
    fn object(&mut self, field: impl FnMut(&mut Self, &'a str) -> Option<()>) -> Option<()> {
        self.object_in(None, field)
    }

    /// [`Scanner::object`], reading the keys of `obj` through the cache.
    #[inline(always)]
    fn object_in(
        &mut self,
        obj: Option<Obj>,
        mut field: impl FnMut(&mut Self, &'a str) -> Option<()>,
    ) -> Option<()> {
        self.expect(b'{')?;
        if self.eat(b'}') {
            return Some(());
        }
        let mut position = 0;
        loop {
            let key = match obj {
                Some(o) => self.cached_key(o, position)?,
                None => {
                    let key = self.string()?;
                    self.expect(b':')?;
                    key
                }
            };
            field(self, key)?;
            position += 1;
            if !self.eat(b',') {
                return self.expect(b'}');
            }
        }
    }

    /// The key at `position` of an `obj` object, and its colon: by comparing
    /// with the cached key when that matches, else by scanning (and caching
    /// it when it is written without whitespace).
    #[inline(always)]
    fn cached_key(&mut self, obj: Obj, position: usize) -> Option<&'a str> {
        let at = self.i;
        let keys = &mut self.keys.keys[obj as usize];
        if let Some(k) = keys.get(position) {
            if self.b[at..].starts_with(k) {
                self.i = at + k.len();
                // `"key":` — the key is between the quotes.
                return self.s.get(at + 1..at + k.len() - 2);
            }
        }
        let key = self.string()?;
        self.expect(b':')?;
        let written = &self.b[at..self.i];
        if written.len() == key.len() + 3 {
            // Overwritten in place: a run whose lines alternate between two
            // key orders does not allocate a key per miss.
            let keys = &mut self.keys.keys[obj as usize];
            if position < keys.len() {
                keys[position].clear();
                keys[position].extend_from_slice(written);
            } else if position == keys.len() {
                keys.push(written.to_vec());
            }
        }
        Some(key)
    }

    fn record(&mut self, line: u64) -> Option<Record> {
        let mut meta = None;
        let mut values = Values::default();
        let mut seen = Seen::default();
        self.object_in(Some(Obj::Top), |s, key| match key {
            "metadata" => {
                seen.first(0)?;
                meta = Some(s.metadata()?);
                Some(())
            }
            "metrics" => {
                seen.first(1)?;
                if !s.null() {
                    s.metrics(&mut values)?;
                }
                Some(())
            }
            "error" => {
                seen.first(2)?;
                // Failed requests are rare: serde reads their error object.
                s.null().then_some(())
            }
            _ => s.skip(1),
        })?;
        meta?.into_record(values, line)
    }

    fn metadata(&mut self) -> Option<Meta<'a>> {
        let mut m = Meta::default();
        let mut start = None;
        let mut end = None;
        let mut seen = Seen::default();
        self.object_in(Some(Obj::Metadata), |s, key| {
            match key {
                "session_num" => {
                    seen.first(0)?;
                    m.session_num = s.opt_u64()?;
                }
                "request_start_ns" => {
                    seen.first(1)?;
                    start = Some(s.u64()?);
                }
                "request_end_ns" => {
                    seen.first(2)?;
                    end = Some(s.u64()?);
                }
                "request_ack_ns" => {
                    seen.first(3)?;
                    m.request_ack_ns = s.opt_u64()?;
                }
                "benchmark_phase" => {
                    seen.first(4)?;
                    m.phase = Some(phase(s.string()?)?);
                }
                "phase_index" => {
                    seen.first(5)?;
                    m.phase_index = s.opt_u32()?;
                }
                "conversation_id" => {
                    seen.first(6)?;
                    m.conversation_id = s.opt_string()?;
                }
                "turn_index" => {
                    seen.first(7)?;
                    m.turn_index = s.opt_u32()?;
                }
                "x_request_id" => {
                    seen.first(8)?;
                    m.x_request_id = s.opt_string()?;
                }
                "was_cancelled" => {
                    seen.first(9)?;
                    s.ws();
                    m.was_cancelled = match s.peek()? {
                        b't' => s.literal(b"true").map(|_| true)?,
                        b'f' => s.literal(b"false").map(|_| false)?,
                        _ => return None,
                    };
                }
                _ => s.skip(2)?,
            }
            Some(())
        })?;
        m.request_start_ns = start?;
        m.request_end_ns = end?;
        m.phase?;
        Some(m)
    }

    fn metrics(&mut self, values: &mut Values) -> Option<()> {
        self.expect(b'{')?;
        if self.eat(b'}') {
            return Some(());
        }
        let mut seen = Seen::default();
        let mut position = 0;
        loop {
            if !self.cached_field(position, &mut seen, values)? {
                self.metric_field(position, &mut seen, values)?;
            }
            position += 1;
            if !self.eat(b',') {
                return self.expect(b'}');
            }
        }
    }

    /// The metric field at the cursor, if it is the cached usual field of
    /// its position with another number: `Some(true)` when read, `Some(false)`
    /// (cursor unmoved) when it is not, `None` to give up.
    #[inline(always)]
    fn cached_field(
        &mut self,
        position: usize,
        seen: &mut Seen,
        values: &mut Values,
    ) -> Option<bool> {
        let at = self.i;
        let Some(field) = self.keys.fields.get(position) else {
            return Some(false);
        };
        // An empty `before` is a position not cached yet.
        if field.before.is_empty() || !self.b[at..].starts_with(&field.before) {
            return Some(false);
        }
        let (before, metric) = (field.before.len(), field.metric);
        self.i = at + before;
        let read = self.number().filter(|_| {
            let after = &self.keys.fields[position].after;
            self.b[self.i..].starts_with(after)
        });
        let Some((text, integer)) = read else {
            self.i = at;
            return Some(false);
        };
        self.i += self.keys.fields[position].after.len();
        if let Some(m) = metric {
            seen.first(m as u32)?;
            values.set(m, Some(number_value(text, integer)?));
        }
        Some(true)
    }

    /// A metric field read the general way; a usual one is cached for the
    /// lines after.
    fn metric_field(
        &mut self,
        position: usize,
        seen: &mut Seen,
        values: &mut Values,
    ) -> Option<()> {
        let at = self.i;
        let key = self.cached_key(Obj::Metrics, position)?;
        let metric = Metric::from_tag(key);
        if let Some(m) = metric {
            seen.first(m as u32)?;
        }
        if let Some((text, integer)) = self.usual_metric() {
            if let Some(m) = metric {
                values.set(m, Some(number_value(text, integer)?));
            }
            self.remember_field(position, at, text, metric);
            return Some(());
        }
        match metric {
            Some(m) => {
                if !self.null() {
                    let v = self.metric_value()?;
                    values.set(m, v);
                }
                Some(())
            }
            None => self.skip(2),
        }
    }

    /// Caches the usual field `b[at..self.i]` whose number is `number` (a
    /// slice of the line) at `position`, overwriting in place.
    fn remember_field(&mut self, position: usize, at: usize, number: &str, metric: Option<Metric>) {
        let start = number.as_ptr() as usize - self.b.as_ptr() as usize;
        let end = start + number.len();
        let (before, after) = (&self.b[at..start], &self.b[end..self.i]);
        let fields = &mut self.keys.fields;
        if position >= 256 || before.len() + after.len() > 512 {
            return;
        }
        if position >= fields.len() {
            fields.resize_with(position + 1, UsualField::default);
        }
        let f = &mut fields[position];
        f.before.clear();
        f.before.extend_from_slice(before);
        f.after.clear();
        f.after.extend_from_slice(after);
        f.metric = metric;
    }

    /// The usual metric object, `{"value":NUMBER,"unit":"..."}` (whitespace
    /// only where the number's and the string's own scans skip it): its
    /// number's text and whether that is an integer, read without the
    /// general object walk. `None`, with the cursor where it
    /// was, for anything else (which the general path then reads).
    #[inline(always)]
    fn usual_metric(&mut self) -> Option<(&'a str, bool)> {
        let start = self.i;
        let found = self.usual_metric_at_cursor();
        if found.is_none() {
            self.i = start;
        }
        found
    }

    #[inline(always)]
    fn usual_metric_at_cursor(&mut self) -> Option<(&'a str, bool)> {
        const VALUE: &[u8] = b"{\"value\":";
        const UNIT: &[u8] = b",\"unit\":";
        if !self.b[self.i..].starts_with(VALUE) {
            return None;
        }
        self.i += VALUE.len();
        let number = self.number()?;
        if !self.b[self.i..].starts_with(UNIT) {
            return None;
        }
        self.i += UNIT.len();
        self.string()?;
        if self.peek() != Some(b'}') {
            return None;
        }
        self.i += 1;
        Some(number)
    }

    /// `{"value": number | null | [..], "unit": ..}`: the number, if any.
    fn metric_value(&mut self) -> Option<Option<f64>> {
        let mut value = None;
        self.object(|s, key| {
            if key != "value" {
                return s.skip(3);
            }
            if value.is_some() {
                return None;
            }
            s.ws();
            value = Some(match s.peek()? {
                b'n' => s.literal(b"null").map(|_| None)?,
                b'[' => s.skip(3).map(|_| None)?,
                _ => {
                    let (text, integer) = s.number()?;
                    Some(number_value(text, integer)?)
                }
            });
            Some(())
        })?;
        value
    }
}

/// A metric's number as serde reads it into the record: serde visits an
/// integer as a u64 and the record casts it (past u64, serde reads a float:
/// left to serde); a float must be finite.
#[inline(always)]
fn number_value(text: &str, integer: bool) -> Option<f64> {
    if integer {
        text.parse::<u64>().ok().map(|v| v as f64)
    } else {
        text.parse::<f64>().ok().filter(|v| v.is_finite())
    }
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
        let slow = serde_json::from_str::<super::RawRecord>(line)
            .map_err(|e| e.to_string())
            .and_then(|raw| super::convert(raw, 1).map_err(|(_, m)| m));
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

    #[test]
    fn a_shape_is_not_learned_where_a_kept_metric_holds_an_array() {
        let lines = sample_lines();
        let line = lines[0].replace(
            "\"time_to_first_token\":{\"value\":168.496759",
            "\"time_to_first_token\":{\"value\":[168.496759]",
        );
        assert_ne!(line, lines[0]);
        let mut shapes = Shapes::default();
        let r = parse(&line, 1, &mut shapes).expect("the scanner reads it");
        assert_eq!(r.values.get(Metric::TimeToFirstToken), None);
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
            line.replace("\"session_num\":0", "\"session_num\":0.0"),
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
