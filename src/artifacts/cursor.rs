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

/// High bit set in each byte of `w` that is not '0'..='9' (exact for the
/// lowest such byte: digits neither carry nor borrow).
#[inline(always)]
fn non_digits(w: u64) -> u64 {
    (w.wrapping_add(LO * 0x46) | w.wrapping_sub(LO * 0x30)) & HI
}

/// Where the run of ASCII digits of `b` from `i` ends, eight at a time.
#[inline(always)]
pub fn digits_end(b: &[u8], mut i: usize) -> usize {
    while let Some(chunk) = b.get(i..i + 8) {
        let w = u64::from_le_bytes(chunk.try_into().ok().unwrap_or_default());
        let other = non_digits(w);
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

/// The value of eight ASCII digits read as a little-endian word (the first
/// digit in the lowest byte).
#[inline(always)]
fn eight_digits(w: u64) -> u64 {
    digit_bytes_value(w.wrapping_sub(LO * 0x30))
}

/// The value of eight digits, one per byte of `v` (0 to 9, the first in the
/// lowest byte), by three multiplications: pairs, fours, eights.
#[inline(always)]
fn digit_bytes_value(v: u64) -> u64 {
    let v = v.wrapping_mul(10).wrapping_add(v >> 8) & 0x00FF_00FF_00FF_00FF;
    let v = v.wrapping_mul(100).wrapping_add(v >> 16) & 0x0000_FFFF_0000_FFFF;
    v.wrapping_mul(10_000).wrapping_add(v >> 32) & 0xFFFF_FFFF
}

/// The value of `b`, ASCII digits only, as `str::parse::<u64>` reads them
/// (`None` past `u64::MAX`).
#[inline(always)]
pub fn digits_value(b: &[u8]) -> Option<u64> {
    digits_value_at(b, 0, b.len())
}

/// [`digits_value`] of `b[start..end]`: up to 19 digits (which cannot
/// overflow) eight at a time, the first `n % 8` of them from an eight-byte
/// read at `start` where `b` has eight bytes there; longer ones by
/// `str::parse`.
#[inline(always)]
pub fn digits_value_at(b: &[u8], start: usize, end: usize) -> Option<u64> {
    let digits = b.get(start..end)?;
    if digits.len() > 19 {
        return std::str::from_utf8(digits).ok()?.parse().ok();
    }
    let head = digits.len() % 8;
    let mut v: u64 = 0;
    match b.get(start..start + 8) {
        Some(w) if head > 0 => {
            let w = u64::from_le_bytes(w.try_into().ok()?);
            // The head's digits in the top bytes, zeros (leading zeros)
            // below them; a borrow of the bytes past them moves up and out.
            v = digit_bytes_value(w.wrapping_sub(LO * 0x30) << (8 * (8 - head)));
        }
        _ => {
            for &d in &digits[..head] {
                v = v
                    .wrapping_mul(10)
                    .wrapping_add(u64::from(d.wrapping_sub(b'0')));
            }
        }
    }
    for c in digits[head..].chunks_exact(8) {
        let w = u64::from_le_bytes(c.try_into().ok()?);
        v = v.wrapping_mul(100_000_000).wrapping_add(eight_digits(w));
    }
    Some(v)
}

/// Powers of ten a double holds exactly (all of them to 10^22; the decimals
/// below need them to 10^18).
const POW10: [f64; 19] = [
    1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16,
    1e17, 1e18,
];

/// The largest significand Clinger's fast path takes: every integer up to
/// 2^53 is a double (`core`'s own limit for it).
const MAX_EXACT: u64 = 1 << 53;

/// Up to seven ASCII digits at `i` (the eighth byte must be another
/// character): their value and how many, eight bytes at once. `None` for
/// no digit, eight or more, or fewer than eight bytes left.
#[inline(always)]
fn seven_digits(b: &[u8], i: usize) -> Option<(u64, usize)> {
    let w = u64::from_le_bytes(b.get(i..i + 8)?.try_into().ok()?);
    let n = (non_digits(w).trailing_zeros() / 8) as usize;
    if n == 0 || n == 8 {
        return None;
    }
    // The digits in the top n bytes, zero bytes (leading zeros) below
    // them. A borrow of the bytes past the digits only moves up, and those
    // bytes are shifted out.
    Some((
        digit_bytes_value(w.wrapping_sub(LO * 0x30) << (8 * (8 - n))),
        n,
    ))
}

/// `-?digits(.digits)?` without an exponent, of at most 19 digits whose
/// value as one integer is at most 2^53 (or with a fraction of zeros only),
/// valued at `*at` (which moves past it). The digits as an integer and a
/// power of ten up to 10^18 are both exact doubles, so their one division
/// is the correctly rounded value, as `str::parse` gives (Clinger's fast
/// path; an integer above 2^53 is rounded once, by the cast). `None`, `*at`
/// unmoved, for any other number.
#[inline(always)]
pub fn short_decimal(b: &[u8], at: &mut usize) -> Option<f64> {
    let start = *at;
    let negative = b.get(start) == Some(&b'-');
    let first = start + usize::from(negative);
    // Usually both parts are under eight digits: read eight bytes at a time.
    let fast = seven_digits(b, first).and_then(|(m, whole)| {
        if b[first] == b'0' && whole > 1 {
            return None;
        }
        let i = first + whole;
        match b.get(i) {
            Some(b'.') => {
                let (f, frac) = seven_digits(b, i + 1)?;
                let end = i + 1 + frac;
                (!matches!(b.get(end), Some(b'e' | b'E'))).then_some((m, f, frac, end))
            }
            Some(b'e' | b'E') => None,
            _ => Some((m, 0, 0, i)),
        }
    });
    let (m, f, frac, end) = match fast {
        Some(x) => x,
        None => long_parts(b, first)?,
    };
    let v = if f == 0 {
        m as f64
    } else {
        // Under 10^19: no overflow.
        let n = m * POW10[frac] as u64 + f;
        if n > MAX_EXACT {
            return None;
        }
        n as f64 / POW10[frac]
    };
    *at = end;
    Some(if negative { -v } else { v })
}

/// [`short_decimal`]'s parts where either has eight digits or more, or the
/// line ends within eight bytes: the integer part, the fraction's digits as
/// an integer, how many, and where the number ends.
fn long_parts(b: &[u8], first: usize) -> Option<(u64, u64, usize, usize)> {
    let i = digits_end(b, first);
    let whole = i - first;
    if whole == 0 || (b[first] == b'0' && whole > 1) {
        return None;
    }
    // The fraction's digits; `12.0` is the integer 12, no division.
    let (mut f, mut frac, mut end) = (0, 0, i);
    if b.get(i) == Some(&b'.') {
        end = digits_end(b, i + 1);
        frac = end - (i + 1);
        if frac == 0 {
            return None;
        }
    }
    if whole + frac > 19 || matches!(b.get(end), Some(b'e' | b'E')) {
        return None;
    }
    if frac > 0 {
        f = digits_value_at(b, i + 1, end)?;
    }
    Some((digits_value_at(b, first, i)?, f, frac, end))
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
        digits_value(text.as_bytes())
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

    /// An array of numbers written without whitespace (`[0.64,1.15]`, what
    /// AIPerf writes for per-chunk metrics), validated as [`Cursor::skip`]
    /// validates it and dropped: whether it was one. If not, the cursor has
    /// not moved.
    #[inline(always)]
    fn number_array(&mut self) -> bool {
        let b = self.b;
        let mut i = self.i + 1;
        if b.get(i) == Some(&b']') {
            self.i = i + 1;
            return true;
        }
        while let Some((end, _, _)) = number_extent(b, i) {
            match b.get(end) {
                Some(b',') => i = end + 1,
                Some(b']') => {
                    self.i = end + 1;
                    return true;
                }
                _ => return false,
            }
        }
        false
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
                if depth < MAX_DEPTH && self.number_array() {
                    return Some(());
                }
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Digits of `n` characters, the first not a zero unless alone; biased
    /// to nines and zeros (carries, leading zeros of a fraction).
    fn digits(rng: &mut fastrand::Rng, n: usize, leading_zero: bool) -> String {
        (0..n)
            .map(|k| match rng.u8(0..4) {
                0 => '9',
                1 if k > 0 || leading_zero => '0',
                _ => char::from(b'0' + rng.u8(if k == 0 && !leading_zero { 1 } else { 0 }..10)),
            })
            .collect()
    }

    #[test]
    fn digits_value_is_str_parse_to_the_bit() {
        let mut rng = fastrand::Rng::with_seed(7);
        let mut texts: Vec<String> = ["0", "18446744073709551615", "18446744073709551616"]
            .map(str::to_owned)
            .to_vec();
        texts.extend((1..=9).map(|n| "9".repeat(n * 2 + 1)));
        for _ in 0..20_000 {
            let n = rng.usize(1..=21);
            texts.push(digits(&mut rng, n, n == 1));
        }
        for t in &texts {
            assert_eq!(digits_value(t.as_bytes()), t.parse::<u64>().ok(), "{t}");
        }
    }

    #[test]
    fn short_decimal_is_str_parse_to_the_bit_or_declines() {
        let mut rng = fastrand::Rng::with_seed(11);
        let mut numbers: Vec<String> = [
            "0",
            "-0",
            "-0.0",
            "0.0",
            "12.0",
            "9007199254740992",
            "9007199254740993",
            "900719925474099.2",
            "900719925474099.3",
            "9999999999999999999",
            "9999999999999999999.0",
            "0.000000000000000001",
            "196.03169799999998",
            "81.61945319679882",
            "340.8542512334539",
            "1e5",
            "1.5E-3",
            "01",
            "1.",
        ]
        .map(str::to_owned)
        .to_vec();
        for _ in 0..200_000 {
            let whole = rng.usize(1..=12);
            let mut t = String::new();
            if rng.u8(0..8) == 0 {
                t.push('-');
            }
            t += &digits(&mut rng, whole, whole == 1);
            if rng.bool() {
                t.push('.');
                let frac = rng.usize(1..=20);
                t += &digits(&mut rng, frac, true);
            }
            numbers.push(t);
        }
        let mut taken = 0;
        for n in &numbers {
            // Alone (the slice ends with the number), and followed by what
            // a line has next (eight-byte reads past it).
            for text in [n.clone(), format!("{n},\"unit\":\"ms\"}}")] {
                let b = text.as_bytes();
                let end = number_extent(b, 0).map(|(end, _, _)| end);
                let mut at = 0;
                match short_decimal(b, &mut at) {
                    Some(v) => {
                        taken += 1;
                        assert_eq!(Some(at), end, "{text}");
                        let parsed: f64 = text[..at].parse().expect("a number");
                        assert_eq!(v.to_bits(), parsed.to_bits(), "{text}");
                    }
                    None => assert_eq!(at, 0, "{text}"),
                }
            }
        }
        // Most of them are short enough to be taken.
        assert!(taken > numbers.len(), "{taken} of {}", 2 * numbers.len());
    }
}
