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

use super::block::{Block, Interest, Kind, Labels, LineRow, LineScrape, Shape, Slot, NONE};
use crate::artifacts::cursor::Cursor;

/// Shapes a block keeps (most recently used first): one per endpoint of
/// a usual deployment.
const SHAPES: usize = 8;

/// Reads `line` through a shape a line before it had, if one fits; the
/// shape then holds this line (the next line of the endpoint differs from
/// it least).
pub fn read_shaped(line: &str, no: u64, block: &mut Block) -> Option<()> {
    let at = (0..block.shapes.len()).find(|k| {
        let t = &block.shapes[*k].text;
        let first = block.shapes[*k]
            .slots
            .first()
            .map_or(t.len(), |s| s.start as usize);
        line.as_bytes().get(..first) == t.get(..first)
    })?;
    if at > 0 {
        let s = block.shapes.remove(at);
        block.shapes.insert(0, s);
    }
    let mut shape = std::mem::take(&mut block.shapes[0]);
    let (rows, counts, groups) = (block.rows.len(), block.counts.len(), block.groups.len());
    if diff(&mut shape, line, &mut block.moved).is_none() {
        // Half brought up to date: of no further use.
        block.shapes.remove(0);
        return None;
    }
    fill(&shape, no, block);
    debug_assert!(block.rows.len() >= rows && block.counts.len() >= counts);
    let _ = groups;
    block.shapes[0] = shape;
    Some(())
}

/// How many leading bytes `a` and `b` share, eight at a time.
#[inline(always)]
fn common_prefix(a: &[u8], b: &[u8]) -> usize {
    let n = a.len().min(b.len());
    let mut i = 0;
    while i + 8 <= n {
        let x = u64::from_le_bytes(a[i..i + 8].try_into().unwrap_or_default())
            ^ u64::from_le_bytes(b[i..i + 8].try_into().unwrap_or_default());
        if x != 0 {
            return i + (x.trailing_zeros() / 8) as usize;
        }
        i += 8;
    }
    while i < n && a[i] == b[i] {
        i += 1;
    }
    i
}

/// Brings `shape` up to `line`: the stretches the two share are skipped
/// whole (their numbers are the same text, so the same values); where they
/// differ, the difference must be in a number, which is read. `None` when
/// they differ elsewhere (another structure) or a number does not read.
/// `moved` is scratch for the slots' new extents.
fn diff(shape: &mut Shape, line: &str, moved: &mut Vec<(u32, u32)>) -> Option<()> {
    let (new, old) = (line.as_bytes(), &shape.text[..]);
    let (mut p, mut q, mut k) = (0usize, 0usize, 0usize);
    let n = shape.slots.len();
    moved.clear();
    loop {
        let l = common_prefix(&new[p..], &old[q..]);
        let (pe, qe) = (p + l, q + l);
        // Numbers wholly inside the shared stretch, the byte after each
        // shared too: unchanged, moved by the same offset.
        while k < n && (shape.slots[k].end as usize) < qe {
            let sl = &shape.slots[k];
            moved.push((
                (sl.start as usize + p - q) as u32,
                (sl.end as usize + p - q) as u32,
            ));
            k += 1;
        }
        if qe == old.len() && pe == new.len() {
            break;
        }
        // The first difference: inside (or just after) slot k's number.
        let sl = *shape.slots.get(k)?;
        if (sl.start as usize) > qe {
            return None;
        }
        let start = p + (sl.start as usize - q);
        let mut c = Cursor::new(line);
        c.i = start;
        shape.values[k] = match sl.kind {
            Kind::Time | Kind::Sent => c.u64()?,
            _ => number(&mut c)?.to_bits(),
        };
        moved.push((start as u32, c.i as u32));
        p = c.i;
        q = sl.end as usize;
        k += 1;
    }
    if k != n {
        return None;
    }
    for (sl, &(a, b)) in shape.slots.iter_mut().zip(moved.iter()) {
        sl.start = a;
        sl.end = b;
    }
    shape.text.clear();
    shape.text.extend_from_slice(new);
    Some(())
}

/// Adds the scrape `shape` now holds, as line `no`.
fn fill(shape: &Shape, no: u64, block: &mut Block) {
    let (row0, count0, group0) = (block.rows.len(), block.counts.len(), block.groups.len());
    let (mut ts, mut sent) = (0u64, None);
    block.counts.resize(count0 + shape.counts as usize, 0.0);
    block.rows.extend(shape.rows.iter().map(|r| LineRow {
        counts: rebase(r, count0 as u32, true),
        ..r.clone()
    }));
    for (slot, &v) in shape.slots.iter().zip(&shape.values) {
        let i = slot.index as usize;
        let f = f64::from_bits(v);
        match slot.kind {
            Kind::Time => ts = v,
            Kind::Sent => sent = Some(v),
            Kind::Value => block.rows[row0 + i].value = Some(f),
            Kind::Count => block.rows[row0 + i].count = Some(f),
            Kind::Sum => block.rows[row0 + i].sum = Some(f),
            Kind::Bucket => block.counts[count0 + i] = f,
            Kind::Dropped => {}
        }
    }
    block.groups.extend(
        shape
            .groups
            .iter()
            .map(|&(f, a, b)| (f, a + row0 as u32, b + row0 as u32)),
    );
    block.scrapes.push(LineScrape {
        line: no,
        endpoint: shape.endpoint,
        timestamp_ns: ts,
        request_sent_ns: sent,
        groups: (group0 as u32, block.groups.len() as u32),
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
/// shape.
fn learn(line: &str, block: &mut Block, rows: usize, counts: usize, groups: usize) {
    let Some(s) = block.scrapes.last() else {
        return;
    };
    let slots = std::mem::take(&mut block.slots);
    // Each number read again (once per shape): what an unchanged one is.
    let mut values = Vec::with_capacity(slots.len());
    for sl in &slots {
        let mut c = Cursor::new(line);
        c.i = sl.start as usize;
        let v = match sl.kind {
            Kind::Time | Kind::Sent => c.u64(),
            _ => number(&mut c).map(f64::to_bits),
        };
        let Some(v) = v else { return };
        values.push(v);
    }
    let shape = Shape {
        text: line.as_bytes().to_vec(),
        slots,
        values,
        endpoint: s.endpoint,
        groups: block.groups[groups..]
            .iter()
            .map(|&(f, a, b)| (f, a - rows as u32, b - rows as u32))
            .collect(),
        rows: block.rows[rows..]
            .iter()
            .map(|r| LineRow {
                counts: rebase(r, counts as u32, false),
                ..r.clone()
            })
            .collect(),
        counts: (block.counts.len() - counts) as u32,
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
pub fn read_line(line: &str, no: u64, block: &mut Block, interest: &Interest) -> Option<()> {
    if read_shaped(line, no, block).is_some() {
        return Some(());
    }
    let (rows, counts, groups) = (block.rows.len(), block.counts.len(), block.groups.len());
    block.slots.clear();
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
    let (mut phase, mut metrics) = (false, false);
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
            "benchmark_phase" if !phase => {
                phase = true;
                c.opt_string()?;
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
    let endpoint = block.endpoint(endpoint?);
    block.scrapes.push(LineScrape {
        line: no,
        endpoint,
        timestamp_ns: ts?,
        request_sent_ns: sent.flatten(),
        groups: (first_group, block.groups.len() as u32),
    });
    block.name_series();
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
    let first = block.groups.len();
    c.fields(|c, name| {
        let fam = block.family(name, interest);
        // A family written twice: serde keeps the last; left to it.
        if fam.is_some_and(|f| block.groups[first..].iter().any(|g| g.0 == f)) {
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
    if let Some(v) = short_decimal(c) {
        return Some(v);
    }
    let (text, _) = c.number()?;
    text.parse().ok().filter(|v: &f64| v.is_finite())
}

/// Powers of ten a double holds exactly.
const POW10: [f64; 16] = [
    1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
];

/// `-?digits(.digits)?` of at most 15 digits, without an exponent, valued
/// at the cursor (which moves past it): the digits as an integer below
/// 2^53 and a power of ten are both exact, so their one division is the
/// correctly rounded value, as `str::parse` gives (Clinger's fast path).
/// `None`, the cursor unmoved, for any other number.
#[inline(always)]
fn short_decimal(c: &mut Cursor) -> Option<f64> {
    let b = c.b;
    let start = c.i;
    let mut i = start;
    let negative = b.get(i) == Some(&b'-');
    i += usize::from(negative);
    let first = i;
    let mut m: u64 = 0;
    while let Some(d @ b'0'..=b'9') = b.get(i) {
        m = m.wrapping_mul(10).wrapping_add(u64::from(d - b'0'));
        i += 1;
    }
    let whole = i - first;
    if whole == 0 || (b[first] == b'0' && whole > 1) {
        return None;
    }
    // The fraction's digits; `12.0` is the integer 12, no division.
    let (mut f, mut frac) = (0u64, 0);
    if b.get(i) == Some(&b'.') {
        i += 1;
        let f0 = i;
        while let Some(d @ b'0'..=b'9') = b.get(i) {
            f = f.wrapping_mul(10).wrapping_add(u64::from(d - b'0'));
            i += 1;
        }
        frac = i - f0;
        if frac == 0 {
            return None;
        }
    }
    if whole + frac > 15 || matches!(b.get(i), Some(b'e' | b'E')) {
        return None;
    }
    c.i = i;
    let v = if f == 0 {
        m as f64
    } else {
        (m * POW10[frac] as u64 + f) as f64 / POW10[frac]
    };
    Some(if negative { -v } else { v })
}
