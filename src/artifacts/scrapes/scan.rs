//! The raw-scrape scanner: one walk over a usual scrape line that keeps what
//! the checks read and validates the rest, without building a map per
//! sample. A label set is read once per block: later samples find it by its
//! text. Anything the scanner does not handle as serde would (escapes,
//! duplicate fields or families, a bucket bound written twice, trailing
//! bytes, a wrong type) makes it give the line up to serde
//! ([`super::reference`]), so a line reads the same either way (checked on
//! every sample run's lines and by the `scrapes_jsonl` fuzz target).
//!
//! Line shapes: consecutive scrapes of an endpoint repeat the same text
//! around different numbers (the same families, label sets and bounds, in
//! the same order). A line the scanner read becomes a [`Shape`]: the bytes
//! between its numbers and where each number went. A later line that has
//! the same bytes between valid numbers has the same JSON structure, so it
//! reads to the same rows with its own numbers: a comparison of the bytes
//! and a number scan per number, instead of a walk of the grammar.

use super::block::{Block, Change, Interest, Kind, LineRow, LineScrape, Shape, ShapeSlot, Slot};
use super::rows::{Labels, ScrapePhase, NONE};
use crate::artifacts::cursor::{digits_value, number_extent, short_decimal, Cursor};

/// Shapes a block keeps (most recently used first): one per endpoint of
/// a usual deployment.
const SHAPES: usize = 8;

/// Reads the line at `at` of `chunk` through a shape a line before it had,
/// if one fits (the endpoint's shapes tried most recently used first: a
/// run's scrapes can alternate between structures, a phase tag or a family
/// that comes and goes); the shape then holds this line (the next line of
/// the endpoint differs from it least). The line's end is where its shape's
/// text ends (ASCII whitespace, then a line end or the chunk's end, must
/// follow): the index past it comes back.
pub fn read_shaped(chunk: &[u8], at: usize, no: u64, block: &mut Block) -> Option<usize> {
    let new = &chunk[at..];
    let mut tried = 0;
    while tried < block.shapes.len() {
        let k = (tried..block.shapes.len()).find(|k| {
            let shape = &block.shapes[*k];
            let t = shape.text(chunk);
            let first = shape.slots.first().map_or(t.len(), |s| s.gap as usize);
            new.get(..first) == t.get(..first)
        })?;
        tried = k + 1;
        let mut shape = std::mem::take(&mut block.shapes[k]);
        if let Some(end) = diff(&shape, shape.text(chunk), new, &mut block.changes) {
            commit(&mut shape, (at, at + end), &block.changes);
            fill(&shape, no, block);
            block.shapes.remove(k);
            block.shapes.insert(0, shape);
            let rest = &new[end..];
            let ws = rest
                .iter()
                .position(|c| !c.is_ascii_whitespace() || *c == b'\n')
                .unwrap_or(rest.len());
            return Some(at + end + ws + usize::from(rest.get(ws) == Some(&b'\n')));
        }
        block.shapes[k] = shape;
    }
    None
}

/// The 32 bytes of `s` at `k`, as an array (compared with vector compares).
#[inline(always)]
fn chunk32(s: &[u8], k: usize) -> Option<&[u8; 32]> {
    s.get(k..k + 32)?.try_into().ok()
}

/// How many leading bytes `a` and `b` share, eight at a time.
#[inline(always)]
fn common_prefix(a: &[u8], b: &[u8]) -> usize {
    let n = a.len().min(b.len());
    let w = |s: &[u8], k: usize| u64::from_le_bytes(s[k..k + 8].try_into().unwrap_or_default());
    let mut i = 0;
    while i + 8 <= n {
        let x = w(a, i) ^ w(b, i);
        if x != 0 {
            return i + (x.trailing_zeros() / 8) as usize;
        }
        i += 8;
        // A long shared stretch: 32 bytes a step (an array comparison, which
        // the compiler does with vector compares).
        while i + 32 <= n && chunk32(a, i) == chunk32(b, i) {
            i += 32;
        }
    }
    while i < n && a[i] == b[i] {
        i += 1;
    }
    i
}

/// Compares `line` with the line `shape` holds: the stretches the two
/// share are skipped whole (their numbers are the same text, so the same
/// values); where they differ, the difference must be in a number, which is
/// read. `None` when they differ elsewhere (another structure) or a number
/// does not read; the shape is not changed either way. `changes` gets the
/// slots whose number changed, with their new length and value (a dropped
/// number is validated, not valued).
fn diff(shape: &Shape, old: &[u8], new: &[u8], changes: &mut Vec<Change>) -> Option<usize> {
    // p, q: where the comparison stands in the new and the old line; k:
    // the next slot, which starts at `at` in the old line plus its gap.
    let (mut p, mut q, mut k, mut at) = (0usize, 0usize, 0usize, 0usize);
    let slots = &shape.slots[..];
    let mut last = Last::default();
    changes.clear();
    // Every slot past the last difference lies in the shared tail.
    loop {
        let l = common_prefix(&new[p..], &old[q..]);
        let (pe, qe) = (p + l, q + l);
        if qe == old.len() {
            // The old line's end: the new one's must be there too.
            let rest = &new[pe..];
            let ws = rest
                .iter()
                .position(|c| !c.is_ascii_whitespace() || *c == b'\n')
                .unwrap_or(rest.len());
            return matches!(rest.get(ws), None | Some(b'\n')).then_some(pe);
        }
        // Numbers wholly inside the shared stretch, the byte after each
        // shared too: unchanged.
        let mut sl = *slots.get(k)?;
        while at + ((sl.gap + sl.len) as usize) < qe {
            at += (sl.gap + sl.len) as usize;
            k += 1;
            sl = *slots.get(k)?;
        }
        // The first difference: inside (or just after) slot k's number.
        let start_old = at + sl.gap as usize;
        if start_old > qe {
            return None;
        }
        let start = p + (start_old - q);
        let mut end = start;
        let value = match sl.kind {
            Kind::Time | Kind::Sent => u64_at(new, &mut end)?,
            Kind::Dropped => skip_number_at(new, &mut end).map(|()| 0)?,
            _ => match last.same(new, start) {
                // The same text as the number read before (a histogram's
                // upper buckets all hold its count): the same value.
                Some(len) => {
                    end = start + len;
                    last.value
                }
                None => {
                    let v = number_at(new, &mut end)?.to_bits();
                    last = Last::of(new, start, end, v);
                    v
                }
            },
        };
        changes.push(Change {
            slot: k as u32,
            len: (end - start) as u32,
            value,
        });
        p = end;
        at = start_old + sl.len as usize;
        q = at;
        k += 1;
    }
}

/// The last number [`diff`] read: its text (up to eight bytes) and value.
#[derive(Default)]
struct Last {
    /// Its bytes, little-endian, the rest zero.
    word: u64,
    /// How many (0: none kept).
    len: usize,
    value: u64,
}

impl Last {
    /// The number of `line` from `start` to `end`, valued `value`.
    #[inline(always)]
    fn of(line: &[u8], start: usize, end: usize, value: u64) -> Last {
        let len = end - start;
        if len == 0 || len > 8 {
            return Last::default();
        }
        let mut b = [0u8; 8];
        b[..len].copy_from_slice(&line[start..end]);
        Last {
            word: u64::from_le_bytes(b),
            len,
            value,
        }
    }

    /// The length of the number at `start` if it is this one's text
    /// followed by a byte no number goes on with.
    #[inline(always)]
    fn same(&self, line: &[u8], start: usize) -> Option<usize> {
        let len = self.len;
        let w = u64::from_le_bytes(line.get(start..start + 8)?.try_into().ok()?);
        let mask = if len == 8 {
            u64::MAX
        } else {
            (1u64 << (8 * len)) - 1
        };
        let after = *line.get(start + len)?;
        let ends = !matches!(after, b'0'..=b'9' | b'.' | b'e' | b'E' | b'+' | b'-');
        (len > 0 && w & mask == self.word && ends).then_some(len)
    }
}

/// Brings `shape` up to the line at `line` of the chunk, which [`diff`]
/// found to fit it (its text now the chunk's, until the block keeps it).
fn commit(shape: &mut Shape, line: (usize, usize), changes: &[Change]) {
    for ch in changes {
        let sl = &mut shape.slots[ch.slot as usize];
        sl.len = ch.len;
        let (i, v) = (sl.index as usize, ch.value);
        let f = f64::from_bits(v);
        match sl.kind {
            Kind::Time => shape.ts = v,
            Kind::Sent => shape.sent = Some(v),
            Kind::Value => shape.rows[i].value = Some(f),
            Kind::Count => shape.rows[i].count = Some(f),
            Kind::Sum => shape.rows[i].sum = Some(f),
            Kind::Bucket => shape.counts[i] = f,
            Kind::Dropped => {}
        }
    }
    shape.in_chunk = Some(line);
}

/// Adds the scrape `shape` now holds, as line `no`.
fn fill(shape: &Shape, no: u64, block: &mut Block) {
    let (row0, count0, group0) = (block.rows.len(), block.counts.len(), block.groups.len());
    block.counts.extend_from_slice(&shape.counts);
    block.rows.extend(shape.rows.iter().map(|r| LineRow {
        counts: rebase(r, count0 as u32, true),
        ..*r
    }));
    block.groups.extend(
        shape
            .groups
            .iter()
            .map(|&(f, a, b)| (f, a + row0 as u32, b + row0 as u32)),
    );
    block.scrapes.push(LineScrape {
        line: no,
        endpoint: shape.endpoint,
        timestamp_ns: shape.ts,
        request_sent_ns: shape.sent,
        groups: (group0 as u32, block.groups.len() as u32),
        layout: shape.layout,
        phase: shape.phase,
    });
}

/// A row's counts range moved by `by` (up, or down when not `up`); a row
/// without buckets keeps its empty range.
fn rebase(r: &LineRow, by: u32, up: bool) -> (u32, u32) {
    if r.bounds == NONE {
        return (0, 0);
    }
    let at = |x: u32| if up { x + by } else { x - by };
    (at(r.counts.0), at(r.counts.1))
}

/// Keeps the line just read by the scanner (the block's last scrape) as a
/// shape: its text, where its numbers are, and what it read to.
fn learn(line: &str, block: &mut Block, rows: usize, counts: usize, groups: usize) {
    let Some(s) = block.scrapes.last() else {
        return;
    };
    let mut end = 0;
    let slots = block
        .slots
        .drain(..)
        .map(|sl| {
            let gap = sl.start - end;
            end = sl.end;
            ShapeSlot {
                gap,
                len: sl.end - sl.start,
                kind: sl.kind,
                index: sl.index,
            }
        })
        .collect();
    let shape = Shape {
        text: line.as_bytes().to_vec(),
        in_chunk: None,
        slots,
        endpoint: s.endpoint,
        layout: s.layout,
        phase: s.phase,
        ts: s.timestamp_ns,
        sent: s.request_sent_ns,
        groups: block.groups[groups..]
            .iter()
            .map(|&(f, a, b)| (f, a - rows as u32, b - rows as u32))
            .collect(),
        rows: block.rows[rows..]
            .iter()
            .map(|r| LineRow {
                counts: rebase(r, counts as u32, false),
                ..*r
            })
            .collect(),
        counts: block.counts[counts..].to_vec(),
    };
    if block.shapes.len() >= SHAPES {
        block.shapes.pop();
    }
    block.shapes.insert(0, shape);
}

/// Notes the number just read (from `start` to the cursor).
fn note(c: &Cursor, block: &mut Block, start: usize, kind: Kind, index: usize) {
    block.slots.push(Slot {
        start: start as u32,
        end: c.i as u32,
        kind,
        index: index as u32,
    });
}

/// Reads `line` (line number `no` of the block) into `block`; `None` when
/// the scanner gives it up (the caller rewinds the block).
#[cfg(test)]
pub fn read_line(line: &str, no: u64, block: &mut Block, interest: &Interest) -> Option<()> {
    let shaped = read_shaped(line.as_bytes(), 0, no, block);
    // Tests read one line at a time: its text is kept at once.
    block.keep_texts(line.as_bytes());
    if shaped == Some(line.len()) {
        return Some(());
    }
    read_scanned(line, no, block, interest)
}

/// [`read_line`] by the grammar only (no shape fitted), the line then
/// kept as a shape.
pub fn read_scanned(line: &str, no: u64, block: &mut Block, interest: &Interest) -> Option<()> {
    let (rows, counts, groups) = (block.rows.len(), block.counts.len(), block.groups.len());
    block.slots.clear();
    block.scanned += 1;
    scan_line(line, no, block, interest)?;
    if line.len() < u32::MAX as usize {
        learn(line, block, rows, counts, groups);
    }
    Some(())
}

/// [`read_line`] by the grammar, noting where each number goes.
fn scan_line(line: &str, no: u64, block: &mut Block, interest: &Interest) -> Option<()> {
    block.line_rows = block.rows.len();
    block.line_counts = block.counts.len();
    let mut c = Cursor::new(line);
    let mut les = Vec::new();
    let (mut endpoint, mut ts, mut sent) = (None, None, None);
    let (mut phase, mut metrics) = (None, false);
    let first_group = block.groups.len() as u32;
    c.fields(|c, key| {
        match key {
            "endpoint_url" if endpoint.is_none() => endpoint = Some(c.string()?),
            "timestamp_ns" if ts.is_none() => {
                let start = c.i;
                ts = Some(c.u64()?);
                note(c, block, start, Kind::Time, 0);
            }
            "request_sent_ns" if sent.is_none() => {
                let start = c.i;
                sent = Some(c.opt_u64()?);
                if sent.flatten().is_some() {
                    note(c, block, start, Kind::Sent, 0);
                }
            }
            "benchmark_phase" if phase.is_none() => {
                phase = Some(ScrapePhase::of(c.opt_string()?));
            }
            "metrics" if !metrics => {
                metrics = true;
                families(c, block, interest, &mut les)?;
            }
            "endpoint_url" | "timestamp_ns" | "request_sent_ns" | "benchmark_phase" | "metrics" => {
                return None
            }
            _ => other(c, block)?,
        }
        Some(())
    })?;
    c.ws();
    if c.i != c.b.len() {
        return None;
    }
    let endpoint = block.endpoint(endpoint?)?;
    block.scrapes.push(LineScrape {
        line: no,
        endpoint,
        timestamp_ns: ts?,
        request_sent_ns: sent.flatten(),
        groups: (first_group, block.groups.len() as u32),
        layout: 0,
        phase: phase.unwrap_or_default(),
    });
    block.name_series();
    block.layout_last();
    Some(())
}

/// A field the reader does not keep, validated and dropped: a number is
/// noted as dropped, so a later line with another number there (AIPerf's
/// `endpoint_latency_ns`, which changes every scrape) still fits the shape.
fn other(c: &mut Cursor, block: &mut Block) -> Option<()> {
    c.ws();
    if let Some(b'-' | b'0'..=b'9') = c.peek() {
        let start = c.i;
        number(c)?;
        note(c, block, start, Kind::Dropped, 0);
        return Some(());
    }
    c.skip(1)
}

/// `{"family": [samples], ...}`.
fn families<'a>(
    c: &mut Cursor<'a>,
    block: &mut Block,
    interest: &Interest,
    les: &mut Vec<&'a str>,
) -> Option<()> {
    block.new_line_families();
    c.fields(|c, name| {
        let fam = block.family(name, interest);
        // A family written twice: serde keeps the last; left to it. Past
        // the families' cap the line is not read (the block stops here).
        if fam.is_some_and(|f| block.family_again(f)) || block.names_full() {
            return None;
        }
        let start = block.rows.len() as u32;
        c.items(|c| sample(c, block, fam, les))?;
        if let Some(f) = fam {
            block.groups.push((f, start, block.rows.len() as u32));
        }
        Some(())
    })
}

/// One sample object of family `fam`; stored when the family is kept.
fn sample<'a>(
    c: &mut Cursor<'a>,
    block: &mut Block,
    fam: Option<u32>,
    les: &mut Vec<&'a str>,
) -> Option<()> {
    let (mut labels, mut value, mut count, mut sum, mut buckets) = (None, None, None, None, None);
    let row = block.rows.len() - block.line_rows;
    c.fields(|c, key| {
        match key {
            "labels" if labels.is_none() => labels = Some(label_set(c, block)?),
            "buckets" if buckets.is_none() => {
                buckets = Some(bucket_map(c, block, fam, les)?);
            }
            "value" if value.is_none() => value = Some(noted(c, block, fam, Kind::Value, row)?),
            "count" if count.is_none() => count = Some(noted(c, block, fam, Kind::Count, row)?),
            "sum" if sum.is_none() => sum = Some(noted(c, block, fam, Kind::Sum, row)?),
            // A field written twice: serde's error.
            "labels" | "buckets" | "value" | "count" | "sum" => return None,
            _ => other(c, block)?,
        }
        Some(())
    })?;
    if fam.is_some() {
        let labels = match labels {
            Some(l) => l,
            None => empty_labels(block),
        };
        let (bounds, counts) = buckets.unwrap_or((NONE, (0, 0)));
        block.rows.push(LineRow {
            labels,
            value: value.flatten(),
            count: count.flatten(),
            sum: sum.flatten(),
            bounds,
            counts,
            series: NONE,
        });
    }
    Some(())
}

fn empty_labels(block: &mut Block) -> u32 {
    match block.labels_seen(b"{}") {
        Some(id) => id,
        None => block.add_labels(Labels::new(), Some(b"{}")),
    }
}

/// `{"name": "value", ...}`: its block id, found by its text once seen.
fn label_set(c: &mut Cursor, block: &mut Block) -> Option<u32> {
    let start = c.i;
    let pairs = |c: &mut Cursor, mut pair: Option<&mut Labels>| -> Option<()> {
        c.fields(|c, k| {
            let v = c.string()?;
            // As serde builds the map: a name written twice keeps its last value.
            if let Some(m) = pair.as_deref_mut() {
                m.insert(k.to_string(), v.to_string());
            }
            Some(())
        })
    };
    pairs(c, None)?;
    let text = &c.b[start..c.i];
    if let Some(id) = block.labels_seen(text) {
        return Some(id);
    }
    if block.names_full() {
        // Past the cap the line is not read (the block stops here).
        return None;
    }
    let mut map = Labels::new();
    pairs(&mut Cursor::new(&c.s[start..c.i]), Some(&mut map))?;
    Some(block.add_labels(map, Some(text)))
}

/// `null` or `{"le": count, ...}`: the bounds' block id and the counts'
/// range (nothing stored unless the family `fam` is kept).
fn bucket_map<'a>(
    c: &mut Cursor<'a>,
    block: &mut Block,
    fam: Option<u32>,
    les: &mut Vec<&'a str>,
) -> Option<(u32, (u32, u32))> {
    if c.null() {
        return Some((NONE, (0, 0)));
    }
    les.clear();
    let from = block.counts.len();
    c.fields(|c, le| {
        les.push(le);
        let start = c.i;
        block.counts.push(number(c)?);
        let (kind, index) = match fam {
            Some(_) => (Kind::Bucket, block.counts.len() - 1 - block.line_counts),
            None => (Kind::Dropped, 0),
        };
        note(c, block, start, kind, index);
        Some(())
    })?;
    let Some(fam) = fam else {
        block.counts.truncate(from);
        return Some((NONE, (0, 0)));
    };
    let bounds = block.bounds_id(fam, les)?;
    Some((bounds, (from as u32, block.counts.len() as u32)))
}

/// `null` or a number, noted as going to `kind` of row `row` (dropped
/// when the family `fam` is not kept).
fn noted(
    c: &mut Cursor,
    block: &mut Block,
    fam: Option<u32>,
    kind: Kind,
    row: usize,
) -> Option<Option<f64>> {
    if c.null() {
        return Some(None);
    }
    c.ws();
    let start = c.i;
    let v = number(c)?;
    let kind = if fam.is_some() { kind } else { Kind::Dropped };
    note(c, block, start, kind, row);
    Some(Some(v))
}

/// A number as serde reads it into an `f64` (with `float_roundtrip`: the
/// nearest double, as `str::parse`, `-0` included); out of range is
/// serde's error.
fn number(c: &mut Cursor) -> Option<f64> {
    c.ws();
    number_at(c.b, &mut c.i)
}

/// [`number`] of the bytes of a line at `*at` (no whitespace before it),
/// `*at` moved past it.
#[inline(always)]
fn number_at(b: &[u8], at: &mut usize) -> Option<f64> {
    if let Some(v) = short_decimal(b, at) {
        return Some(v);
    }
    let (end, _, _) = number_extent(b, *at)?;
    // ASCII, so UTF-8.
    let text = std::str::from_utf8(&b[*at..end]).ok()?;
    let v = text.parse().ok().filter(|v: &f64| v.is_finite())?;
    *at = end;
    Some(v)
}

/// A `u64` written as plain digits at `*at` (as [`Cursor::u64`] reads
/// it), `*at` moved past it.
#[inline(always)]
fn u64_at(b: &[u8], at: &mut usize) -> Option<u64> {
    let (end, integer, _) = number_extent(b, *at)?;
    if !integer {
        return None;
    }
    let v = digits_value(&b[*at..end])?;
    *at = end;
    Some(v)
}

/// A number of a family the checks do not read: validated as [`number`]
/// validates it (serde reads it into an `f64`, so out of range is its
/// error), its value not computed where it cannot be out of range.
#[inline(always)]
fn skip_number_at(b: &[u8], at: &mut usize) -> Option<()> {
    if short_decimal(b, at).is_some() {
        return Some(());
    }
    let (end, _, exponent) = number_extent(b, *at)?;
    // Without an exponent, under 300 digits is below f64::MAX.
    let finite = (end - *at < 300 && !exponent)
        || std::str::from_utf8(&b[*at..end])
            .ok()
            .and_then(|t| t.parse().ok())
            .is_some_and(|v: f64| v.is_finite());
    finite.then(|| *at = end)
}
