//! The run's raw scrapes in columns: endpoints, families, label sets, bucket
//! bounds and scrape layouts interned once for the file (their ids compare
//! as the strings, maps and structures do), a row per sample of a family the
//! checks read, and the bucket counts delta-coded per series.
//!
//! A scrape's **layout** is what its line's structure says: its families in
//! name order, each a range of row positions, and per position the label
//! set and which numbers the sample has. Consecutive scrapes of an endpoint
//! almost always share one, so it is kept once and a scrape is a layout id
//! and the index of its first row; a reader going through an endpoint's
//! scrapes finds a series at the same position while the layout holds.
//!
//! A row is 12 bytes in two columns: the cumulative quantity (the count
//! where there is one, else the value) and the offset of its record in the
//! arena, where a histogram's sum and buckets are. Buckets are most of a
//! scrape's bytes, and between two scrapes most of a series' buckets did
//! not move: a record's buckets are written either whole (the bounds' id and
//! each count) or as the change since the series' last row (that row's
//! distance back and each count's growth as a varint: a byte for a bucket
//! that did not move, and no byte at all where none moved, an idle
//! series' usual row). A change is written only when it is exact: the same
//! bounds, every count an integer that did not go down and adds back to the
//! same `f64`. Every 32nd record of a series is whole, so reading a row's
//! buckets decodes at most 31 changes.

/// foldhash: several times faster than SipHash on these short keys.
type HashMap<K, V> = std::collections::HashMap<K, V, foldhash::fast::RandomState>;

use super::block::Block;
use super::rows::{
    flags_of, labels_of, Labels, Layout, ScrapePhase, FLAGS_SHIFT, HAS_COUNT, HAS_SUM, HAS_VALUE,
    NONE,
};

/// A block's scrape as it joined the columns.
pub struct Merged {
    /// Endpoint (file id).
    pub endpoint: u32,
    /// Line in the block.
    pub line: u64,
    /// Scrape time (ns).
    pub timestamp_ns: u64,
    /// Send time (ns).
    pub request_sent_ns: Option<u64>,
    /// Layout (file id).
    pub layout: u32,
    /// Its first row.
    pub first_row: u32,
    /// Its phase tag.
    pub phase: ScrapePhase,
}

/// Rows of one series between two whole bucket records.
const WHOLE_EVERY: u32 = 32;

/// How many label sets the columns number (the ids below the flags).
const LABEL_IDS: usize = 1 << FLAGS_SHIFT;

/// The most distinct label sets one file's scrapes are read with: real
/// servers expose hundreds (engines x models x reasons); a file of ever-new
/// label sets stops being read where it passes this, with a finding, so its
/// memory follows this cap, not the file.
pub const MAX_LABEL_SETS: usize = 1 << 14;

/// The most distinct families (of those the checks read) one file's
/// scrapes are read with: real servers expose tens to a few hundred; past
/// it, as past [`MAX_LABEL_SETS`], the file stops being read, with a
/// finding.
pub const MAX_FAMILIES: usize = 1 << 14;

/// The most distinct endpoints one file's scrapes are read with: a run
/// scrapes the endpoints its command names (a handful; a large
/// disaggregated deployment, tens); past it, as past [`MAX_LABEL_SETS`].
pub const MAX_ENDPOINTS: usize = 1 << 10;

/// The most buckets one series' row is read with (real histograms have
/// tens); a 100k-bucket histogram is still audited.
pub const MAX_BUCKETS: usize = 1 << 17;

/// The most bucket bounds one file's distinct bounds sets hold together:
/// ever-new bucket layouts stop being read there, as past
/// [`MAX_LABEL_SETS`].
pub const MAX_BOUND_TEXTS: usize = 1 << 21;

/// A record's first byte: which parts follow.
const REC_SUM: u8 = 1;
const REC_WHOLE: u8 = 2;
const REC_CHANGE: u8 = 4;
/// With [`REC_CHANGE`]: no bucket moved since the series' last row, and
/// no growth follows the distance back (an idle series' row).
const REC_SAME: u8 = 8;

/// Per series: where its buckets stand (while coding a block).
#[derive(Debug, Default)]
struct Chain {
    row: u32,
    bounds: u32,
    /// Its last row's counts: a range of the block's (not copied).
    counts: (u32, u32),
    since_whole: u32,
}

/// Where a reader going through one series' rows stands: the last rows it
/// decoded (a few: a reader in state order visits two scrapes answered out
/// of order the other way round) and their bucket counts
/// (`Store::buckets_after`).
///
/// A ring of four slots (`RECENT`), each a row's (row, bounds id) and counts:
/// a decode writes the slot after the latest (the oldest once all are
/// full) and reuses its buffer, so nothing moves or allocates once every
/// slot has been written.
#[derive(Debug, Default, Clone)]
pub struct SeriesCursor {
    /// Per slot: (row, bounds id).
    held: [(u32, u32); RECENT],
    /// Per slot: the row's counts.
    counts: [Vec<f64>; RECENT],
    /// How many slots hold a row.
    len: usize,
    /// The slot of the latest row.
    latest: usize,
}

/// Rows a [`SeriesCursor`] keeps.
const RECENT: usize = 4;

impl SeriesCursor {
    /// The slot holding `row`, the latest first.
    fn find(&self, row: u32) -> Option<usize> {
        (0..self.len)
            .map(|age| (self.latest + RECENT - age) % RECENT)
            .find(|&k| self.held[k].0 == row)
    }
}

/// The columns.
#[derive(Default)]
pub struct Store {
    endpoints: Interned<String>,
    families: Interned<String>,
    labels: Interned<Labels>,
    bounds: Vec<Vec<Option<f64>>>,
    bounds_ids: HashMap<Vec<String>, u32>,
    /// The bounds of every set in `bounds`, together.
    bound_texts: usize,
    /// A set in `bounds` has a bound that is not a number.
    unknown_bound: bool,
    layouts: Interned<Layout>,
    /// Per row: the count where there is one, else the value (0 without).
    a: Vec<f64>,
    /// Per row: its record's offset in the arena, or [`NONE`].
    aux: Vec<u32>,
    /// The value of rows that have both a value and a count.
    values_too: HashMap<u32, f64>,
    arena: Vec<u8>,
}

/// Values numbered in the order first seen: equal values, equal ids.
#[derive(Debug)]
struct Interned<K> {
    all: Vec<K>,
    ids: HashMap<K, u32>,
}

impl<K> Default for Interned<K> {
    fn default() -> Self {
        Interned {
            all: Vec::new(),
            ids: HashMap::default(),
        }
    }
}

impl<K: std::hash::Hash + Eq + Clone> Interned<K> {
    /// The value's id, numbering it if new.
    fn id(&mut self, k: K) -> u32 {
        let all = &mut self.all;
        intern(&mut self.ids, k, |k| {
            all.push(k);
            all.len() - 1
        })
    }

    fn get(&self, id: u32) -> &K {
        &self.all[id as usize]
    }
}

fn intern<K: std::hash::Hash + Eq + Clone>(
    ids: &mut HashMap<K, u32>,
    key: K,
    add: impl FnOnce(K) -> usize,
) -> u32 {
    if let Some(id) = ids.get(&key) {
        return *id;
    }
    let id = add(key.clone()) as u32;
    ids.insert(key, id);
    id
}

/// Each value as a varint (7 bits a byte, low first, the high bit set on
/// all but the last), written in place.
fn put_varints(out: &mut Vec<u8>, values: &[u64]) {
    let mut at = out.len();
    out.resize(at + 10 * values.len(), 0);
    for &v in values {
        if v < 0x80 {
            out[at] = v as u8;
            at += 1;
            continue;
        }
        let mut v = v;
        while v >= 0x80 {
            out[at] = (v as u8) | 0x80;
            v >>= 7;
            at += 1;
        }
        out[at] = v as u8;
        at += 1;
    }
    out.truncate(at);
}

fn get_varint(b: &[u8], at: &mut usize) -> u64 {
    let (mut v, mut shift) = (0u64, 0);
    loop {
        let byte = b[*at];
        *at += 1;
        v |= u64::from(byte & 0x7f) << shift;
        if byte < 0x80 {
            return v;
        }
        shift += 7;
    }
}

/// Adds to each count its growth, the varints from `at` on: eight at a
/// time where eight bytes in a row are one-byte varints (a bucket that grew
/// by less than 128, the usual case).
fn add_growths(b: &[u8], mut at: usize, counts: &mut [f64]) {
    let mut k = 0;
    while k + 8 <= counts.len() {
        let Some(w) = b.get(at..at + 8) else { break };
        let w = u64::from_le_bytes(w.try_into().unwrap_or_default());
        if w & 0x8080_8080_8080_8080 != 0 {
            break;
        }
        for (j, c) in counts[k..k + 8].iter_mut().enumerate() {
            *c += ((w >> (8 * j)) & 0x7f) as f64;
        }
        at += 8;
        k += 8;
    }
    for c in &mut counts[k..] {
        *c += get_varint(b, &mut at) as f64;
    }
}

fn word(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().unwrap_or_default())
}

fn float(b: &[u8], at: usize) -> f64 {
    f64::from_le_bytes(b[at..at + 8].try_into().unwrap_or_default())
}

/// The growth of each count, when every one is exact as an integer:
/// `Some(false)` with `out` the growths, `Some(true)` (and `out` empty)
/// when no count moved.
fn growth(before: &[f64], now: &[f64], out: &mut Vec<u64>) -> Option<bool> {
    out.clear();
    if before.len() != now.len() {
        return None;
    }
    // Often no bucket moved (no observation since the series' last row).
    if before
        .iter()
        .zip(now)
        .all(|(b, n)| b.to_bits() == n.to_bits())
    {
        return Some(true);
    }
    for (b, n) in before.iter().zip(now) {
        // Most buckets did not move.
        if b.to_bits() == n.to_bits() {
            out.push(0);
            continue;
        }
        let d = n - b;
        // Exact: a whole growth (an `i64` conversion is one instruction,
        // a `u64` one several) whose decoded count has the very bits
        // written (-0 and 0 too).
        if !(0.0..9e15).contains(&d) {
            return None;
        }
        let k = d as i64;
        if k as f64 != d || (b + d).to_bits() != n.to_bits() {
            return None;
        }
        out.push(k as u64);
    }
    Some(false)
}

/// Writes the records of a block's rows (a histogram's sum and buckets), in
/// the order they join the columns (scrape, family, row): each row's
/// offset in `arena`, or [`NONE`] for a row with neither. Series are told
/// by (endpoint, family, label set) block ids.
pub fn code_rows(b: &Block, arena: &mut Vec<u8>, at: &mut Vec<u32>) {
    at.clear();
    at.resize(b.rows.len(), NONE);
    let mut chains: Vec<Chain> = Vec::new();
    chains.resize_with(b.series_count(), Chain::default);
    let mut scratch = Vec::new();
    for s in &b.scrapes {
        for &(_, r0, r1) in &b.groups[s.groups.0 as usize..s.groups.1 as usize] {
            for index in r0..r1 {
                let r = &b.rows[index as usize];
                if r.bounds == NONE && r.sum.is_none() {
                    continue;
                }
                at[index as usize] = arena.len() as u32;
                let tag_at = arena.len();
                arena.push(0);
                let mut tag = 0;
                if let Some(sum) = r.sum {
                    tag |= REC_SUM;
                    arena.extend_from_slice(&sum.to_le_bytes());
                }
                if r.bounds != NONE {
                    let counts = &b.counts[r.counts.0 as usize..r.counts.1 as usize];
                    // Every row's series is named; a row without one is coded whole.
                    let mut lone = Chain::default();
                    let chain = chains.get_mut(r.series as usize).unwrap_or(&mut lone);
                    let before = &b.counts[chain.counts.0 as usize..chain.counts.1 as usize];
                    let delta = (chain.since_whole + 1 < WHOLE_EVERY
                        && chain.bounds == r.bounds
                        && !before.is_empty())
                    .then(|| growth(before, counts, &mut scratch))
                    .flatten();
                    if let Some(same) = delta {
                        tag |= REC_CHANGE;
                        arena.extend_from_slice(&(index - chain.row).to_le_bytes());
                        if same {
                            tag |= REC_SAME;
                        } else {
                            put_varints(arena, &scratch);
                        }
                        chain.since_whole += 1;
                    } else {
                        // The block's bounds id, made the file's by the merge.
                        tag |= REC_WHOLE;
                        arena.extend_from_slice(&r.bounds.to_le_bytes());
                        for c in counts {
                            arena.extend_from_slice(&c.to_le_bytes());
                        }
                        chain.since_whole = 0;
                        chain.bounds = r.bounds;
                    }
                    chain.row = index;
                    chain.counts = r.counts;
                }
                arena[tag_at] = tag;
            }
        }
    }
}

impl Store {
    /// Whether a block of this size still fits the 32-bit ids.
    pub fn fits(&self, b: &Block) -> bool {
        let limit = (u32::MAX - 1) as usize;
        self.a.len() + b.rows.len() < limit
            && self.labels.all.len() + b.labels.len() - b.to_file.labels.len()
                < LABEL_IDS.min(MAX_LABEL_SETS)
            && self.families.all.len() + b.families.len() - b.to_file.families.len() <= MAX_FAMILIES
            && self.endpoints.all.len() + b.endpoints.len() - b.to_file.endpoints.len()
                <= MAX_ENDPOINTS
            && self.bound_texts
                + (b.bounds[b.to_file.bounds.len()..].iter())
                    .map(Vec::len)
                    .sum::<usize>()
                <= MAX_BOUND_TEXTS
            && self.layouts.all.len() + b.layouts.len() < limit
            && self.arena.len() + b.arena.len() < limit
    }

    /// Sizes the columns for a file `times` the block's size (a little
    /// over, so they are not doubled at the end).
    pub fn reserve_for(&mut self, b: &Block, times: f64) {
        let n = |x: usize| (x as f64 * times * 1.05) as usize + 64;
        self.a.reserve(n(b.rows.len()));
        self.aux.reserve(n(b.rows.len()));
        self.arena.reserve(n(b.arena.len()));
    }

    /// Moves a block's scrapes into the columns (ids made the file's).
    /// Each scrape comes back with the file's endpoint and layout ids and
    /// its first row in the store (its line still the block's).
    pub fn merge(&mut self, b: &mut Block) -> Vec<Merged> {
        // The names the block learnt since its last merge get file ids.
        let map = &mut b.to_file;
        for e in &b.endpoints[map.endpoints.len()..] {
            map.endpoints.push(self.endpoints.id(e.clone()));
        }
        for f in &b.families[map.families.len()..] {
            map.families.push(self.families.id(f.clone()));
        }
        for l in &b.labels[map.labels.len()..] {
            map.labels.push(self.labels.id(l.clone()));
        }
        for les in &b.bounds[map.bounds.len()..] {
            map.bounds
                .push(intern(&mut self.bounds_ids, les.clone(), |les| {
                    self.bound_texts += les.len();
                    let values: Vec<Option<f64>> =
                        les.iter().map(|le| crate::stats::le_value(le)).collect();
                    self.unknown_bound |= values.iter().any(Option::is_none);
                    self.bounds.push(values);
                    self.bounds.len() - 1
                }));
        }
        for l in &b.layouts[map.layouts.len()..] {
            let layout = Layout {
                groups: (l.groups.iter())
                    .map(|&(f, p0, p1)| (map.families[f as usize], p0, p1))
                    .collect(),
                rows: (l.rows.iter())
                    .map(|&t| map.labels[labels_of(t) as usize] | (flags_of(t) << FLAGS_SHIFT))
                    .collect(),
            };
            map.layouts.push(self.layouts.id(layout));
        }
        let arena_base = self.arena.len() as u32;
        self.arena.extend_from_slice(&b.arena);
        let mut out = Vec::with_capacity(b.scrapes.len());
        for s in &b.scrapes {
            let first = self.a.len() as u32;
            let (g0, g1) = (s.groups.0 as usize, s.groups.1 as usize);
            let (r0, r1) = match (b.groups.get(g0), b.groups[..g1].last()) {
                (Some(a), Some(z)) if g1 > g0 => (a.1 as usize, z.2 as usize),
                _ => (0, 0),
            };
            for (k, r) in b.rows[r0..r1].iter().enumerate() {
                let at = b.at[r0 + k];
                let aux = if at == NONE {
                    NONE
                } else {
                    let o = (arena_base + at) as usize;
                    let tag = self.arena[o];
                    if tag & REC_WHOLE != 0 {
                        let p = o + 1 + if tag & REC_SUM != 0 { 8 } else { 0 };
                        let id = map.bounds[word(&self.arena, p) as usize];
                        self.arena[p..p + 4].copy_from_slice(&id.to_le_bytes());
                    }
                    arena_base + at
                };
                if let (Some(v), Some(_)) = (r.value, r.count) {
                    self.values_too.insert(self.a.len() as u32, v);
                }
                self.a.push(r.count.or(r.value).unwrap_or(0.0));
                self.aux.push(aux);
            }
            out.push(Merged {
                endpoint: map.endpoints[s.endpoint as usize],
                line: s.line,
                timestamp_ns: s.timestamp_ns,
                request_sent_ns: s.request_sent_ns,
                layout: map.layouts[s.layout as usize],
                first_row: first,
                phase: s.phase,
            });
        }
        out
    }

    /// Done merging: each layout's families are put in name order (as a
    /// map of them iterates).
    pub fn finish(&mut self) {
        let mut names: Vec<u32> = (0..self.families.all.len() as u32).collect();
        names.sort_by(|a, b| self.families.get(*a).cmp(self.families.get(*b)));
        let mut rank = vec![0u32; names.len()];
        for (r, f) in names.iter().enumerate() {
            rank[*f as usize] = r as u32;
        }
        // The ids map still finds each layout by its content as merged;
        // nothing looks layouts up after this.
        self.layouts.ids = HashMap::default();
        for l in &mut self.layouts.all {
            if !l.groups.is_sorted_by_key(|x| rank[x.0 as usize]) {
                l.groups.sort_by_key(|x| rank[x.0 as usize]);
            }
        }
        self.a.shrink_to_fit();
        self.aux.shrink_to_fit();
        self.arena.shrink_to_fit();
    }

    /// An endpoint's URL.
    pub fn endpoint(&self, id: u32) -> &str {
        self.endpoints.get(id)
    }

    /// How many families.
    pub fn family_count(&self) -> usize {
        self.families.all.len()
    }

    /// A family's name.
    pub fn family(&self, id: u32) -> &str {
        self.families.get(id)
    }

    /// A family's id, by its exact name.
    pub fn family_id(&self, name: &str) -> Option<u32> {
        self.families.ids.get(name).copied()
    }

    /// A label set.
    pub fn labels(&self, id: u32) -> &Labels {
        self.labels.get(id)
    }

    /// A layout.
    pub fn layout(&self, id: u32) -> &Layout {
        self.layouts.get(id)
    }

    /// A row's value (counters, gauges); `tag` its position's.
    pub fn value(&self, i: u32, tag: u32) -> Option<f64> {
        let f = flags_of(tag);
        if f & HAS_VALUE == 0 {
            None
        } else if f & HAS_COUNT != 0 {
            self.values_too.get(&i).copied()
        } else {
            Some(self.a[i as usize])
        }
    }

    /// A row's count (histograms).
    pub fn count(&self, i: u32, tag: u32) -> Option<f64> {
        (flags_of(tag) & HAS_COUNT != 0).then(|| self.a[i as usize])
    }

    /// A row's sum (histograms).
    pub fn sum(&self, i: u32, tag: u32) -> Option<f64> {
        if flags_of(tag) & HAS_SUM == 0 {
            return None;
        }
        let at = self.aux[i as usize] as usize;
        Some(float(&self.arena, at + 1))
    }

    /// Rows `first..first + n` (one scrape's): a word of every cache line
    /// of both columns, folded, for a read-ahead; and where their records
    /// are in the arena (first and end byte, when any).
    pub fn touch_rows(&self, first: u32, n: u32) -> (u64, Option<(usize, usize)>) {
        let len = self.a.len().min(self.aux.len());
        let start = (first as usize).min(len);
        let rows = start..(start + n as usize).min(len);
        let (a, aux) = (&self.a[rows.clone()], &self.aux[rows]);
        let mut seen = 0u64;
        for x in a.iter().step_by(8) {
            seen ^= x.to_bits();
        }
        for x in aux.iter().step_by(16) {
            seen ^= u64::from(*x);
        }
        // The last rows' lines too, where the steps fell short of them.
        seen ^= a.last().map_or(0, |x| x.to_bits());
        seen ^= aux.last().map_or(0, |x| u64::from(*x));
        let first_record = aux.iter().find(|&&x| x != NONE);
        let last_record = aux.iter().rev().find(|&&x| x != NONE);
        let records = first_record.zip(last_record);
        (
            seen,
            records.map(|(&lo, &hi)| (lo as usize, hi as usize + 64)),
        )
    }

    /// A word of every cache line of the arena's bytes `range` (a scrape's
    /// records, [`Store::touch_rows`]), folded.
    pub fn touch_arena(&self, range: (usize, usize)) -> u64 {
        let end = range.1.min(self.arena.len());
        let bytes = self.arena.get(range.0..end).unwrap_or_default();
        bytes.iter().step_by(64).fold(0, |s, &b| s ^ u64::from(b))
    }

    /// Every row's count, else value (0 without either): a column.
    pub fn cumulatives(&self) -> &[f64] {
        &self.a
    }

    /// A row's cumulative quantity: the count, else the value.
    pub fn cumulative(&self, i: u32, tag: u32) -> Option<f64> {
        (flags_of(tag) & (HAS_COUNT | HAS_VALUE) != 0).then(|| self.a[i as usize])
    }

    /// Where row `i`'s bucket coding starts in the arena, and its record's
    /// first byte; `None` without buckets.
    fn coding(&self, i: u32) -> Option<(usize, u8)> {
        let at = self.aux[i as usize];
        if at == NONE {
            return None;
        }
        let at = at as usize;
        let tag = self.arena[at];
        if tag & (REC_WHOLE | REC_CHANGE) == 0 {
            return None;
        }
        let p = at + 1 + if tag & REC_SUM != 0 { 8 } else { 0 };
        Some((p, tag))
    }

    /// A row's buckets, `(le, cumulative count)` (`le` `None` where the
    /// bound is not a number); `None` without buckets.
    pub fn buckets(&self, i: u32) -> Option<Vec<(Option<f64>, f64)>> {
        self.coding(i)?;
        let les = &self.bounds[self.bounds_of(i) as usize];
        let counts = self.decode(i, les.len());
        Some(les.iter().copied().zip(counts).collect())
    }

    /// [`Store::buckets`] for a reader going through a series' rows: the
    /// changes since a row `cursor` holds (usually the one just before)
    /// are applied to its counts instead of decoding from the last whole
    /// row.
    pub fn buckets_after<'c>(
        &self,
        i: u32,
        cursor: &'c mut SeriesCursor,
    ) -> Option<(&[Option<f64>], &'c [f64])> {
        self.coding(i)?;
        let a = &self.arena;
        // Back along the chain to a row the cursor holds or a whole one
        // (where each change's growths start; 0 for one without).
        let mut chain = [0usize; WHOLE_EVERY as usize];
        let mut n = 0;
        let mut row = i;
        let found = loop {
            if let Some(k) = cursor.find(row) {
                break Some(k);
            }
            let (p, tag) = self.coding(row)?;
            if tag & REC_WHOLE != 0 || n == chain.len() {
                break None;
            }
            chain[n] = if tag & REC_SAME != 0 { 0 } else { p + 4 };
            n += 1;
            row -= word(a, p);
        };
        // The slot written: the one after the latest, the oldest once all
        // are full (the row found may be that one: its counts are then
        // changed where they are).
        let to = (cursor.latest + 1) % RECENT;
        let bounds = match found {
            Some(k) => {
                if k != to {
                    let from = std::mem::take(&mut cursor.counts[k]);
                    cursor.counts[to].clear();
                    cursor.counts[to].extend_from_slice(&from);
                    cursor.counts[k] = from;
                }
                cursor.held[k].1
            }
            None => {
                let (p, tag) = self.coding(row)?;
                if tag & REC_WHOLE == 0 {
                    // A chain longer than the coder writes: not from here.
                    return None;
                }
                let b = word(a, p);
                let len = self.bounds[b as usize].len();
                let buf = &mut cursor.counts[to];
                buf.clear();
                buf.extend((0..len).map(|k| float(a, p + 4 + 8 * k)));
                b
            }
        };
        // Forward again, each change applied.
        for &p in chain[..n].iter().rev().filter(|p| **p != 0) {
            add_growths(a, p, &mut cursor.counts[to]);
        }
        cursor.held[to] = (i, bounds);
        cursor.latest = to;
        cursor.len = (cursor.len + 1).min(RECENT);
        Some((&self.bounds[bounds as usize], &cursor.counts[to]))
    }

    /// Whether every bucket bound read is a number (a row with one that is
    /// not leaves its scrape out of a walk's points).
    pub fn every_bound_known(&self) -> bool {
        !self.unknown_bound
    }

    /// The bounds' id of row `i`'s buckets: its whole row's (a change
    /// keeps its row's bounds).
    fn bounds_of(&self, mut i: u32) -> u32 {
        loop {
            let Some((p, tag)) = self.coding(i) else {
                return 0;
            };
            let w = word(&self.arena, p);
            if tag & REC_WHOLE != 0 {
                return w;
            }
            i -= w;
        }
    }

    /// Row `i`'s `n` bucket counts.
    fn decode(&self, i: u32, n: usize) -> Vec<f64> {
        let a = &self.arena;
        let Some((mut p, tag)) = self.coding(i) else {
            return vec![0.0; n];
        };
        if tag & REC_WHOLE != 0 {
            p += 4;
            return (0..n).map(|k| float(a, p + 8 * k)).collect();
        }
        let back = word(a, p);
        let mut counts = self.decode(i - back, n);
        if tag & REC_SAME == 0 {
            add_growths(a, p + 4, &mut counts);
        }
        counts
    }

    /// Bytes held (for the benchmark's accounting).
    pub fn bytes(&self) -> usize {
        let layouts: usize = (self.layouts.all.iter())
            .map(|l| 12 * l.groups.capacity() + 4 * l.rows.capacity())
            .sum();
        self.a.capacity() * 8 + self.aux.capacity() * 4 + self.arena.capacity() + layouts
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `add_growths` adds what `get_varint` reads one varint at a time:
    /// every count from 0 to 40, growths of one byte, of several, and
    /// mixed, written anywhere in the arena, followed by bytes with or
    /// without their high bit, or by the arena's end.
    #[test]
    fn growths_add_as_one_varint_at_a_time() {
        let mut rng = fastrand::Rng::with_seed(11);
        for case in 0..20_000 {
            let n = rng.usize(0..41);
            let kind = rng.u8(0..4);
            let values: Vec<u64> = (0..n)
                .map(|_| match kind {
                    0 => rng.u64(0..128),
                    1 if rng.u8(0..8) == 0 => rng.u64(128..1 << 40),
                    1 => rng.u64(0..128),
                    2 => rng.u64(..),
                    _ => rng.u64(0..300),
                })
                .collect();
            let mut arena: Vec<u8> = (0..rng.usize(0..10)).map(|_| rng.u8(..)).collect();
            let at = arena.len();
            put_varints(&mut arena, &values);
            let after = rng.usize(0..12);
            arena.extend((0..after).map(|_| rng.u8(..)));
            let start: Vec<f64> = (0..n).map(|_| f64::from(rng.u32(..))).collect();
            let (mut want, mut p) = (start.clone(), at);
            for c in &mut want {
                *c += get_varint(&arena, &mut p) as f64;
            }
            let mut got = start;
            add_growths(&arena, at, &mut got);
            let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&got), bits(&want), "case {case}: {values:?}");
        }
    }
}
