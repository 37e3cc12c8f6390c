//! Line shapes: a line the scanner read teaches its shape (the bytes between
//! its values and what each value is), and a next line of the same shape is
//! read by one comparison and one value scan per value.

use super::scanner::{number_value_at, Form, Keys, Scanner};
use super::{phase, Meta, Metric, Record, Values, MAX_DEPTH};

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
pub(super) struct LineShape {
    /// The bytes between the values, one after the other.
    pub(super) between: Vec<u8>,
    /// Each value, with where the bytes before it end in `between`; the bytes
    /// after the last value, to the end of the line, are the rest.
    pub(super) values: Vec<(u32, Slot)>,
    /// `metadata.was_cancelled`, a literal of the shape.
    pub(super) was_cancelled: bool,
}

/// A value of a [`LineShape`]: what the record takes from it, or how it is
/// checked and dropped.
#[derive(Clone, Copy, Debug)]
pub(super) enum Slot {
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

impl LineShape {
    /// Reads the line of `s` if it has this shape.
    #[inline(always)]
    pub(super) fn read<'a>(&self, s: &mut Scanner<'a, '_>, line: u64) -> Option<Record> {
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
                    // `number_of` may skip whitespace: the number is what
                    // ends at the cursor.
                    let (text, integer) = s.number_of(form)?;
                    let start = s.i - text.len();
                    values.set(k, Some(number_value_at(s.b, start, text, integer)?));
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
    pub(super) fn learn(line: &str) -> Option<LineShape> {
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
pub(super) struct Learner<'a, 'k> {
    pub(super) s: Scanner<'a, 'k>,
    pub(super) shape: LineShape,
    /// Where the bytes since the last value start.
    pub(super) from: usize,
}

impl Learner<'_, '_> {
    /// Scans the value at the cursor with `scan`, which says what slot it
    /// is, and makes it one.
    pub(super) fn slot(&mut self, scan: impl FnOnce(&mut Self) -> Option<Slot>) -> Option<()> {
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
    pub(super) fn number_form(&mut self) -> Option<Form> {
        Some(match self.s.number()? {
            (_, true) => Form::Integer,
            (t, false) if !t.starts_with('-') && !t.contains(['e', 'E']) => Form::Decimal,
            _ => Form::Other,
        })
    }

    /// A number (or, for an optional field, null: part of the shape).
    pub(super) fn number(&mut self, slot: Slot) -> Option<()> {
        if self.s.null() {
            return Some(());
        }
        self.slot(|l| l.s.number().map(|_| slot))
    }

    /// A string (or null, part of the shape).
    pub(super) fn string(&mut self, slot: Slot) -> Option<()> {
        if self.s.null() {
            return Some(());
        }
        self.slot(|l| l.s.string().map(|_| slot))
    }

    /// An object `depth` containers deep, calling `field` after each key.
    pub(super) fn object(
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
    pub(super) fn value(&mut self, depth: u32, strings_fixed: bool) -> Option<()> {
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

    pub(super) fn metadata(&mut self) -> Option<()> {
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

    pub(super) fn metrics(&mut self) -> Option<()> {
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
