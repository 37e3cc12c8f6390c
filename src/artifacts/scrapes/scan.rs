//! The raw-scrape scanner: one walk over a usual scrape line that keeps what
//! the checks read and validates the rest, without building a map per
//! sample. A label set is read once per block: later samples find it by its
//! text. Anything the scanner does not handle as serde would (escapes,
//! duplicate fields or families, a bucket bound written twice, trailing
//! bytes, a wrong type) makes it give the line up to serde
//! ([`super::reference`]), so a line reads the same either way (checked on
//! every sample run's lines and by the `scrapes_jsonl` fuzz target).

use super::block::{Block, Interest, Labels, LineRow, LineScrape, NONE};
use crate::artifacts::cursor::Cursor;

/// Reads `line` (line number `no` of the block) into `block`; `None` when
/// the scanner gives it up (the caller rewinds the block).
pub fn read_line(line: &str, no: u64, block: &mut Block, interest: &Interest) -> Option<()> {
    let mut c = Cursor::new(line);
    let mut les = Vec::new();
    let (mut endpoint, mut ts, mut sent) = (None, None, None);
    let (mut phase, mut metrics) = (false, false);
    let first_group = block.groups.len() as u32;
    c.expect(b'{')?;
    if !c.eat(b'}') {
        loop {
            let key = c.string()?;
            c.expect(b':')?;
            c.ws();
            match key {
                "endpoint_url" if endpoint.is_none() => endpoint = Some(c.string()?),
                "timestamp_ns" if ts.is_none() => ts = Some(c.u64()?),
                "request_sent_ns" if sent.is_none() => sent = Some(c.opt_u64()?),
                "benchmark_phase" if !phase => {
                    phase = true;
                    c.opt_string()?;
                }
                "metrics" if !metrics => {
                    metrics = true;
                    families(&mut c, block, interest, &mut les)?;
                }
                "endpoint_url" | "timestamp_ns" | "request_sent_ns" | "benchmark_phase"
                | "metrics" => return None,
                _ => c.skip(1)?,
            }
            if !c.eat(b',') {
                c.expect(b'}')?;
                break;
            }
        }
    }
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
    Some(())
}

/// `{"family": [samples], ...}`.
fn families<'a>(
    c: &mut Cursor<'a>,
    block: &mut Block,
    interest: &Interest,
    les: &mut Vec<&'a str>,
) -> Option<()> {
    let first = block.groups.len();
    c.expect(b'{')?;
    if c.eat(b'}') {
        return Some(());
    }
    loop {
        let name = c.string()?;
        c.expect(b':')?;
        let fam = block.family(name, interest);
        // A family written twice: serde keeps the last; left to it.
        if fam.is_some_and(|f| block.groups[first..].iter().any(|g| g.0 == f)) {
            return None;
        }
        let start = block.rows.len() as u32;
        c.expect(b'[')?;
        if !c.eat(b']') {
            loop {
                sample(c, block, fam, les)?;
                if !c.eat(b',') {
                    c.expect(b']')?;
                    break;
                }
            }
        }
        if let Some(f) = fam {
            block.groups.push((f, start, block.rows.len() as u32));
        }
        if !c.eat(b',') {
            return c.expect(b'}');
        }
    }
}

/// One sample object of family `fam`; stored when the family is kept.
fn sample<'a>(
    c: &mut Cursor<'a>,
    block: &mut Block,
    fam: Option<u32>,
    les: &mut Vec<&'a str>,
) -> Option<()> {
    let (mut labels, mut value, mut count, mut sum, mut buckets) = (None, None, None, None, None);
    c.expect(b'{')?;
    if !c.eat(b'}') {
        loop {
            let key = c.string()?;
            c.expect(b':')?;
            c.ws();
            match key {
                "labels" if labels.is_none() => labels = Some(label_set(c, block)?),
                "buckets" if buckets.is_none() => {
                    buckets = Some(bucket_map(c, block, fam, les)?);
                }
                "value" if value.is_none() => value = Some(opt_number(c)?),
                "count" if count.is_none() => count = Some(opt_number(c)?),
                "sum" if sum.is_none() => sum = Some(opt_number(c)?),
                // A field written twice: serde's error.
                "labels" | "buckets" | "value" | "count" | "sum" => return None,
                _ => c.skip(1)?,
            }
            if !c.eat(b',') {
                c.expect(b'}')?;
                break;
            }
        }
    }
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
        c.expect(b'{')?;
        if c.eat(b'}') {
            return Some(());
        }
        loop {
            let k = c.string()?;
            c.expect(b':')?;
            let v = c.string()?;
            // As serde builds the map: a name written twice keeps its last value.
            if let Some(m) = pair.as_deref_mut() {
                m.insert(k.to_string(), v.to_string());
            }
            if !c.eat(b',') {
                return c.expect(b'}');
            }
        }
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
    c.expect(b'{')?;
    if !c.eat(b'}') {
        loop {
            les.push(c.string()?);
            c.expect(b':')?;
            block.counts.push(number(c)?);
            if !c.eat(b',') {
                c.expect(b'}')?;
                break;
            }
        }
    }
    let Some(fam) = fam else {
        block.counts.truncate(from);
        return Some((NONE, (0, 0)));
    };
    let bounds = block.bounds_id(fam, les)?;
    Some((bounds, (from as u32, block.counts.len() as u32)))
}

/// `null` or a number.
fn opt_number(c: &mut Cursor) -> Option<Option<f64>> {
    if c.null() {
        return Some(None);
    }
    number(c).map(Some)
}

/// A number as serde reads it into an `f64` (with `float_roundtrip`: the
/// nearest double, as `str::parse`, `-0` included); out of range is
/// serde's error.
fn number(c: &mut Cursor) -> Option<f64> {
    let (text, _) = c.number()?;
    text.parse().ok().filter(|v: &f64| v.is_finite())
}
