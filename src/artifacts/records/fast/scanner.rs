//! The record scanner: one walk over a line that keeps the fields the
//! checks use, skips the rest and validates the JSON grammar as it goes,
//! with the keys of earlier lines cached by position ([`Keys`]).

use super::{phase, Meta, Metric, Record, Values, MAX_DEPTH};

/// How a number of a line shape was written; its scan expects that form
/// (a branch per form, not one for all numbers of a line, is predicted).
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum Form {
    /// Digits (`16`).
    Integer,
    /// Digits, a point, digits (`183.412812`).
    Decimal,
    /// Anything else (negative, exponent).
    Other,
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
pub(super) struct Keys {
    pub(super) keys: [Vec<Vec<u8>>; 3],
    pub(super) fields: Vec<UsualField>,
}

/// A usual metric field as a line before wrote it at the same position.
#[derive(Default)]
pub(super) struct UsualField {
    /// `"key":{"value":`, as written (validated when cached).
    pub(super) before: Vec<u8>,
    /// `,"unit":"..."}`, as written (validated when cached).
    pub(super) after: Vec<u8>,
    /// The metric the key names, if the records keep it.
    pub(super) metric: Option<Metric>,
}

/// Which object's keys.
#[derive(Clone, Copy)]
pub(super) enum Obj {
    Top = 0,
    Metadata = 1,
    Metrics = 2,
}

pub(super) struct Scanner<'a, 'k> {
    pub(super) s: &'a str,
    pub(super) b: &'a [u8],
    pub(super) i: usize,
    pub(super) keys: &'k mut Keys,
}

/// Bits of the fields seen, to refuse duplicates as serde does.
#[derive(Default)]
pub(super) struct Seen(u32);

impl Seen {
    pub(super) fn first(&mut self, bit: u32) -> Option<()> {
        let mask = 1 << bit;
        if self.0 & mask != 0 {
            return None;
        }
        self.0 |= mask;
        Some(())
    }
}

pub(super) const LO: u64 = 0x0101_0101_0101_0101;
pub(super) const HI: u64 = 0x8080_8080_8080_8080;

/// High bit set in every byte of `w` equal to `c`; exact for the lowest one.
#[inline(always)]
pub(super) fn bytes_eq(w: u64, c: u8) -> u64 {
    let x = w ^ (LO * c as u64);
    x.wrapping_sub(LO) & !x & HI
}

impl<'a, 'k> Scanner<'a, 'k> {
    #[inline(always)]
    pub(super) fn new(line: &'a str, keys: &'k mut Keys) -> Self {
        Scanner {
            s: line,
            b: line.as_bytes(),
            i: 0,
            keys,
        }
    }

    #[inline(always)]
    pub(super) fn peek(&self) -> Option<u8> {
        self.b.get(self.i).copied()
    }

    #[inline(always)]
    pub(super) fn ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.peek() {
            self.i += 1;
        }
    }

    /// Skips whitespace, then requires `c`.
    #[inline(always)]
    pub(super) fn expect(&mut self, c: u8) -> Option<()> {
        self.ws();
        (self.peek()? == c).then(|| self.i += 1)
    }

    /// Skips whitespace, then eats `c` if it is next.
    #[inline(always)]
    pub(super) fn eat(&mut self, c: u8) -> bool {
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
    pub(super) fn string(&mut self) -> Option<&'a str> {
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
    pub(super) fn null(&mut self) -> bool {
        self.ws();
        if self.b[self.i..].starts_with(b"null") {
            self.i += 4;
            true
        } else {
            false
        }
    }

    pub(super) fn literal(&mut self, word: &[u8]) -> Option<()> {
        self.b[self.i..]
            .starts_with(word)
            .then(|| self.i += word.len())
    }

    /// Eats ASCII digits, eight at a time; how many.
    #[inline(always)]
    pub(super) fn digits(&mut self) -> usize {
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
    pub(super) fn number(&mut self) -> Option<(&'a str, bool)> {
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
    pub(super) fn number_of(&mut self, form: Form) -> Option<(&'a str, bool)> {
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
    pub(super) fn u64(&mut self) -> Option<u64> {
        let (text, integer) = self.number_of(Form::Integer)?;
        if !integer {
            return None;
        }
        text.parse().ok()
    }

    pub(super) fn opt_u64(&mut self) -> Option<Option<u64>> {
        if self.null() {
            return Some(None);
        }
        self.u64().map(Some)
    }

    pub(super) fn opt_u32(&mut self) -> Option<Option<u32>> {
        match self.opt_u64()? {
            None => Some(None),
            Some(v) => u32::try_from(v).ok().map(Some),
        }
    }

    pub(super) fn opt_string(&mut self) -> Option<Option<&'a str>> {
        if self.null() {
            return Some(None);
        }
        self.string().map(Some)
    }

    /// Any JSON value, validated and dropped.
    pub(super) fn skip(&mut self, depth: u32) -> Option<()> {
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
    pub(super) fn object(
        &mut self,
        field: impl FnMut(&mut Self, &'a str) -> Option<()>,
    ) -> Option<()> {
        self.object_in(None, field)
    }

    /// [`Scanner::object`], reading the keys of `obj` through the cache.
    #[inline(always)]
    pub(super) fn object_in(
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
    pub(super) fn cached_key(&mut self, obj: Obj, position: usize) -> Option<&'a str> {
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

    pub(super) fn record(&mut self, line: u64) -> Option<Record> {
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

    pub(super) fn metadata(&mut self) -> Option<Meta<'a>> {
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

    pub(super) fn metrics(&mut self, values: &mut Values) -> Option<()> {
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
    pub(super) fn cached_field(
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
    pub(super) fn metric_field(
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
    pub(super) fn remember_field(
        &mut self,
        position: usize,
        at: usize,
        number: &str,
        metric: Option<Metric>,
    ) {
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
    pub(super) fn usual_metric(&mut self) -> Option<(&'a str, bool)> {
        let start = self.i;
        let found = self.usual_metric_at_cursor();
        if found.is_none() {
            self.i = start;
        }
        found
    }

    #[inline(always)]
    pub(super) fn usual_metric_at_cursor(&mut self) -> Option<(&'a str, bool)> {
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
    pub(super) fn metric_value(&mut self) -> Option<Option<f64>> {
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
pub(super) fn number_value(text: &str, integer: bool) -> Option<f64> {
    if integer {
        text.parse::<u64>().ok().map(|v| v as f64)
    } else {
        text.parse::<f64>().ok().filter(|v| v.is_finite())
    }
}
