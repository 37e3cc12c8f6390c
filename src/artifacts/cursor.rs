//! A cursor over one line of JSON: the scanning primitives the fast line
//! readers share (the records scanner, the raw-scrape scanner). Each
//! validates the grammar of what it reads and answers `None` for anything
//! it does not handle (escapes, huge exponents, nesting past
//! [`MAX_DEPTH`]), leaving the line to serde.

/// Nesting deeper than this is left to serde.
pub const MAX_DEPTH: u32 = 100;

/// How a number of a line shape was written; its scan expects that form
/// (a branch per form, not one for all numbers of a line, is predicted).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Form {
    /// Digits (`16`).
    Integer,
    /// Digits, a point, digits (`183.412812`).
    Decimal,
    /// Anything else (negative, exponent).
    Other,
}

pub const LO: u64 = 0x0101_0101_0101_0101;
pub const HI: u64 = 0x8080_8080_8080_8080;

/// High bit set in every byte of `w` equal to `c`; exact for the lowest one.
#[inline(always)]
pub fn bytes_eq(w: u64, c: u8) -> u64 {
    let x = w ^ (LO * c as u64);
    x.wrapping_sub(LO) & !x & HI
}

/// Where the run of ASCII digits of `b` from `i` ends, eight at a time.
#[inline(always)]
pub fn digits_end(b: &[u8], mut i: usize) -> usize {
    while let Some(chunk) = b.get(i..i + 8) {
        let w = u64::from_le_bytes(chunk.try_into().ok().unwrap_or_default());
        // High bit set in each byte that is not '0'..='9' (exact for the
        // lowest: digits neither carry nor borrow).
        let other = (w.wrapping_add(LO * 0x46) | w.wrapping_sub(LO * 0x30)) & HI;
        if other != 0 {
            return i + (other.trailing_zeros() / 8) as usize;
        }
        i += 8;
    }
    while let Some(b'0'..=b'9') = b.get(i) {
        i += 1;
    }
    i
}

/// The extent of the JSON number of `b` at `at` (no whitespace before it;
/// an exponent of one to three digits: anything longer is serde's to
/// judge, with its range handling): where it ends, whether it is a plain
/// non-negative integer, whether it has an exponent.
#[inline(always)]
pub fn number_extent(b: &[u8], at: usize) -> Option<(usize, bool, bool)> {
    let negative = b.get(at) == Some(&b'-');
    let d0 = at + usize::from(negative);
    let first = *b.get(d0)?;
    let mut i = digits_end(b, d0);
    if i == d0 || (first == b'0' && i - d0 > 1) {
        return None;
    }
    let mut integer = !negative;
    if b.get(i) == Some(&b'.') {
        let f0 = i + 1;
        i = digits_end(b, f0);
        if i == f0 {
            return None;
        }
        integer = false;
    }
    let mut exponent = false;
    if let Some(b'e' | b'E') = b.get(i) {
        i += 1;
        if let Some(b'+' | b'-') = b.get(i) {
            i += 1;
        }
        let e0 = i;
        i = digits_end(b, e0);
        if !(1..=3).contains(&(i - e0)) {
            return None;
        }
        (integer, exponent) = (false, true);
    }
    Some((i, integer, exponent))
}

/// The line, and the cursor's place in it.
pub struct Cursor<'a> {
    /// The line.
    pub s: &'a str,
    /// Its bytes.
    pub b: &'a [u8],
    /// The cursor.
    pub i: usize,
}

impl<'a> Cursor<'a> {
    /// A cursor at the start of `line`.
    pub fn new(line: &'a str) -> Self {
        Cursor {
            s: line,
            b: line.as_bytes(),
            i: 0,
        }
    }

    #[inline(always)]
    pub fn peek(&self) -> Option<u8> {
        self.b.get(self.i).copied()
    }

    #[inline(always)]
    pub fn ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.peek() {
            self.i += 1;
        }
    }

    /// Skips whitespace, then requires `c`.
    #[inline(always)]
    pub fn expect(&mut self, c: u8) -> Option<()> {
        self.ws();
        (self.peek()? == c).then(|| self.i += 1)
    }

    /// Skips whitespace, then eats `c` if it is next.
    #[inline(always)]
    pub fn eat(&mut self, c: u8) -> bool {
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
    pub fn string(&mut self) -> Option<&'a str> {
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
    pub fn null(&mut self) -> bool {
        self.ws();
        if self.b[self.i..].starts_with(b"null") {
            self.i += 4;
            true
        } else {
            false
        }
    }

    pub fn literal(&mut self, word: &[u8]) -> Option<()> {
        self.b[self.i..]
            .starts_with(word)
            .then(|| self.i += word.len())
    }

    /// Eats ASCII digits, eight at a time; how many.
    #[inline(always)]
    pub fn digits(&mut self) -> usize {
        let start = self.i;
        self.i = digits_end(self.b, start);
        self.i - start
    }

    /// A JSON number's extent; whether it is a plain non-negative integer.
    pub fn number(&mut self) -> Option<(&'a str, bool)> {
        self.ws();
        let start = self.i;
        let (end, integer, _) = number_extent(self.b, start)?;
        self.i = end;
        Some((self.s.get(start..end)?, integer))
    }

    /// [`Scanner::number`] for a number usually of `form`: the same extent
    /// and answer, by a scan specialised to that form where the number has
    /// it, by the general scan where it does not.
    #[inline(always)]
    pub fn number_of(&mut self, form: Form) -> Option<(&'a str, bool)> {
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
    pub fn u64(&mut self) -> Option<u64> {
        let (text, integer) = self.number_of(Form::Integer)?;
        if !integer {
            return None;
        }
        text.parse().ok()
    }

    pub fn opt_u64(&mut self) -> Option<Option<u64>> {
        if self.null() {
            return Some(None);
        }
        self.u64().map(Some)
    }

    pub fn opt_u32(&mut self) -> Option<Option<u32>> {
        match self.opt_u64()? {
            None => Some(None),
            Some(v) => u32::try_from(v).ok().map(Some),
        }
    }

    pub fn opt_string(&mut self) -> Option<Option<&'a str>> {
        if self.null() {
            return Some(None);
        }
        self.string().map(Some)
    }

    /// Any JSON value, validated and dropped.
    pub fn skip(&mut self, depth: u32) -> Option<()> {
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

    /// Calls `field` for each key of the object at the cursor, after its
    /// colon and any whitespace, then eats the closing brace.
    pub fn fields(
        &mut self,
        mut field: impl FnMut(&mut Self, &'a str) -> Option<()>,
    ) -> Option<()> {
        self.expect(b'{')?;
        if self.eat(b'}') {
            return Some(());
        }
        loop {
            let key = self.string()?;
            self.expect(b':')?;
            self.ws();
            field(self, key)?;
            if !self.eat(b',') {
                return self.expect(b'}');
            }
        }
    }

    /// Calls `item` for each element of the array at the cursor, then eats
    /// the closing bracket.
    pub fn items(&mut self, mut item: impl FnMut(&mut Self) -> Option<()>) -> Option<()> {
        self.expect(b'[')?;
        if self.eat(b']') {
            return Some(());
        }
        loop {
            item(self)?;
            if !self.eat(b',') {
                return self.expect(b']');
            }
        }
    }
}
