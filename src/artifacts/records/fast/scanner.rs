//! The record scanner: one walk over a line that keeps the fields the
//! checks use, skips the rest and validates the JSON grammar as it goes,
//! with the keys of earlier lines cached by position ([`Keys`]).

use super::{phase, Meta, Metric, Record, Values};
use crate::artifacts::cursor::{digits_value_at, short_decimal};
pub(super) use crate::artifacts::cursor::{Cursor, Form};

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
    pub(super) c: Cursor<'a>,
    pub(super) keys: &'k mut Keys,
}

/// The scanner reads through its cursor's primitives.
impl<'a> std::ops::Deref for Scanner<'a, '_> {
    type Target = Cursor<'a>;
    fn deref(&self) -> &Cursor<'a> {
        &self.c
    }
}

impl<'a> std::ops::DerefMut for Scanner<'a, '_> {
    fn deref_mut(&mut self) -> &mut Cursor<'a> {
        &mut self.c
    }
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

impl<'a, 'k> Scanner<'a, 'k> {
    pub(super) fn new(line: &'a str, keys: &'k mut Keys) -> Self {
        Scanner {
            c: Cursor::new(line),
            keys,
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
        let at = self.c.i;
        let keys = &mut self.keys.keys[obj as usize];
        if let Some(k) = keys.get(position) {
            if self.c.b[at..].starts_with(k) {
                self.c.i = at + k.len();
                // `"key":` — the key is between the quotes.
                return self.c.s.get(at + 1..at + k.len() - 2);
            }
        }
        let key = self.string()?;
        self.expect(b':')?;
        let written = &self.c.b[at..self.c.i];
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
        let at = self.c.i;
        let Some(field) = self.keys.fields.get(position) else {
            return Some(false);
        };
        // An empty `before` is a position not cached yet.
        if field.before.is_empty() || !self.c.b[at..].starts_with(&field.before) {
            return Some(false);
        }
        let (before, metric) = (field.before.len(), field.metric);
        self.c.i = at + before;
        let read = self.number().filter(|_| {
            let after = &self.keys.fields[position].after;
            self.c.b[self.c.i..].starts_with(after)
        });
        let Some((text, integer)) = read else {
            self.c.i = at;
            return Some(false);
        };
        self.c.i += self.keys.fields[position].after.len();
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
        let at = self.c.i;
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

    /// Caches the usual field `b[at..self.c.i]` whose number is `number` (a
    /// slice of the line) at `position`, overwriting in place.
    pub(super) fn remember_field(
        &mut self,
        position: usize,
        at: usize,
        number: &str,
        metric: Option<Metric>,
    ) {
        let start = number.as_ptr() as usize - self.c.b.as_ptr() as usize;
        let end = start + number.len();
        let (before, after) = (&self.c.b[at..start], &self.c.b[end..self.c.i]);
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
        let start = self.c.i;
        let found = self.usual_metric_at_cursor();
        if found.is_none() {
            self.c.i = start;
        }
        found
    }

    #[inline(always)]
    pub(super) fn usual_metric_at_cursor(&mut self) -> Option<(&'a str, bool)> {
        const VALUE: &[u8] = b"{\"value\":";
        const UNIT: &[u8] = b",\"unit\":";
        if !self.c.b[self.c.i..].starts_with(VALUE) {
            return None;
        }
        self.c.i += VALUE.len();
        let number = self.number()?;
        if !self.c.b[self.c.i..].starts_with(UNIT) {
            return None;
        }
        self.c.i += UNIT.len();
        self.string()?;
        if self.peek() != Some(b'}') {
            return None;
        }
        self.c.i += 1;
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
                b'[' => s.skip(3).map(|_| Some(super::super::NOT_A_NUMBER))?,
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
    number_value_at(text.as_bytes(), 0, text, integer)
}

/// [`number_value`] of `text`, the number at `start` of the line `b`, which
/// may go on past it (eight-byte reads). A decimal of up to 16 digits is
/// valued without `str::parse`, to the same double ([`short_decimal`]);
/// longer ones rarely fit its fast path and go to `str::parse` at once.
#[inline(always)]
pub(super) fn number_value_at(b: &[u8], start: usize, text: &str, integer: bool) -> Option<f64> {
    let end = start + text.len();
    if integer {
        return digits_value_at(b, start, end).map(|v| v as f64);
    }
    let mut at = start;
    if text.len() <= 17 {
        if let Some(v) = short_decimal(b, &mut at).filter(|_| at == end) {
            return Some(v);
        }
    }
    text.parse::<f64>().ok().filter(|v| v.is_finite())
}
