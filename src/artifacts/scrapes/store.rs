//! The run's raw scrapes in columns: endpoints, families, label sets and
//! bucket bounds interned once for the file (their ids compare as the
//! strings and maps do), a row per sample of a family the checks read, and
//! the bucket counts delta-coded per series.
//!
//! Buckets are most of a scrape's bytes, and between two scrapes most of a
//! series' buckets did not move. A row's buckets are written either whole
//! (the bounds' id and each count) or as the change since the series' last
//! row (that row's index and each count's growth as a varint: a byte for a
//! bucket that did not move). A change is written only when it is exact: the
//! same bounds, every count an integer that did not go down and adds back to
//! the same `f64`. Every 32nd row of a series is whole, so reading a row's
//! buckets decodes at most 31 changes. A row is 24 bytes: its two numbers,
//! its label set's id with the `HAS_*` bits on top, and its buckets' offset
//! (the bounds' id is the whole row's, in the arena).

/// foldhash: several times faster than SipHash on these short keys.
type HashMap<K, V> = std::collections::HashMap<K, V, foldhash::fast::RandomState>;

use super::block::{Block, Labels, LineScrape, NONE};

/// Rows of one series between two whole bucket rows.
const WHOLE_EVERY: u32 = 32;

const HAS_VALUE: u8 = 1;
const HAS_COUNT: u8 = 2;
const HAS_SUM: u8 = 4;

/// Where a row keeps its `HAS_*` bits: above the label set's id.
const FLAGS_SHIFT: u32 = 29;
/// How many label sets the columns number (the ids below the flags).
const LABEL_IDS: usize = 1 << FLAGS_SHIFT;

/// The last decoded bucket counts of the rows a reader went through
/// ([`Store::buckets_in_order`]).
#[derive(Debug, Default)]
pub struct BucketCache(HashMap<u32, (u32, Vec<f64>)>);

/// One family's samples in one scrape: a range of rows.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Group {
    /// Family id.
    pub family: u32,
    /// Rows.
    pub rows: (u32, u32),
}

/// One sample.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Row {
    /// The cumulative quantity: the count when there is one, else the value.
    pub a: f64,
    /// Histogram sum (when `HAS_SUM`).
    pub sum: f64,
    /// Label set id, the `HAS_*` bits above it ([`FLAGS_SHIFT`]).
    tagged: u32,
    /// Offset of the buckets in the arena, or [`NONE`].
    pub buckets: u32,
}

impl Row {
    /// The label set's id.
    pub fn labels(&self) -> u32 {
        self.tagged & ((1 << FLAGS_SHIFT) - 1)
    }

    fn flags(&self) -> u8 {
        (self.tagged >> FLAGS_SHIFT) as u8
    }
}

/// Per series: where its buckets stand.
#[derive(Debug, Default)]
struct Chain {
    row: u32,
    bounds: u32,
    counts: Vec<f64>,
    since_whole: u32,
}

/// The columns.
#[derive(Default)]
pub struct Store {
    endpoints: Interned<String>,
    families: Interned<String>,
    labels: Interned<Labels>,
    bounds: Vec<Vec<Option<f64>>>,
    bounds_ids: HashMap<Vec<String>, u32>,
    /// Families of every scrape, scrape after scrape.
    pub groups: Vec<Group>,
    /// Samples.
    pub rows: Vec<Row>,
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

/// The growth of each count, when every one is exact as an integer.
fn growth(before: &[f64], now: &[f64], out: &mut Vec<u64>) -> bool {
    out.clear();
    if before.len() != now.len() {
        return false;
    }
    for (b, n) in before.iter().zip(now) {
        // Most buckets did not move.
        if b.to_bits() == n.to_bits() {
            out.push(0);
            continue;
        }
        let d = n - b;
        if !((0.0..9e15).contains(&d) && d == (d as u64) as f64 && b + d == *n) {
            return false;
        }
        out.push(d as u64);
    }
    true
}

/// Codes the buckets of a block's rows, in the order they join the
/// columns (scrape, family, row): each row's offset in `arena`, or
/// [`NONE`]. Series are told by (endpoint, family, label set) block ids.
pub fn code_buckets(b: &Block, arena: &mut Vec<u8>, at: &mut Vec<u32>) {
    at.clear();
    at.resize(b.rows.len(), NONE);
    let mut chains: Vec<Chain> = Vec::new();
    chains.resize_with(b.series_count(), Chain::default);
    let mut scratch = Vec::new();
    for s in &b.scrapes {
        for &(_, r0, r1) in &b.groups[s.groups.0 as usize..s.groups.1 as usize] {
            for index in r0..r1 {
                let r = &b.rows[index as usize];
                if r.bounds == NONE {
                    continue;
                }
                let counts = &b.counts[r.counts.0 as usize..r.counts.1 as usize];
                // Every row's series is named; a row without one is coded whole.
                let mut lone = Chain::default();
                let chain = chains.get_mut(r.series as usize).unwrap_or(&mut lone);
                at[index as usize] = arena.len() as u32;
                let delta = chain.since_whole + 1 < WHOLE_EVERY
                    && chain.bounds == r.bounds
                    && !chain.counts.is_empty()
                    && growth(&chain.counts, counts, &mut scratch);
                if delta {
                    arena.push(1);
                    arena.extend_from_slice(&(index - chain.row).to_le_bytes());
                    put_varints(arena, &scratch);
                    chain.since_whole += 1;
                } else {
                    // The block's bounds id, made the file's by the merge.
                    arena.push(0);
                    arena.extend_from_slice(&r.bounds.to_le_bytes());
                    for c in counts {
                        arena.extend_from_slice(&c.to_le_bytes());
                    }
                    chain.since_whole = 0;
                    chain.bounds = r.bounds;
                }
                chain.row = index;
                chain.counts.clear();
                chain.counts.extend_from_slice(counts);
            }
        }
    }
}

impl Store {
    /// Whether a block of this size still fits the 32-bit ids.
    pub fn fits(&self, b: &Block) -> bool {
        let limit = (u32::MAX - 1) as usize;
        self.rows.len() + b.rows.len() < limit
            && self.labels.all.len() + b.labels.len() - b.to_file.labels.len() < LABEL_IDS
            && self.groups.len() + b.groups.len() < limit
            && self.arena.len() + b.arena.len() < limit
    }

    /// Sizes the columns for a file `times` the block's size (a little
    /// over, so they are not doubled at the end).
    pub fn reserve_for(&mut self, b: &Block, times: f64) {
        let n = |x: usize| (x as f64 * times * 1.05) as usize + 64;
        self.rows.reserve(n(b.rows.len()));
        self.groups.reserve(n(b.groups.len()));
        self.arena.reserve(n(b.arena.len()));
    }

    /// Moves a block's scrapes into the columns (ids made the file's).
    /// Each scrape comes back with the file's endpoint id and its groups in
    /// the store (its line still the block's).
    pub fn merge(&mut self, b: &mut Block) -> Vec<LineScrape> {
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
                    let values = les.iter().map(|le| crate::stats::le_value(le)).collect();
                    self.bounds.push(values);
                    self.bounds.len() - 1
                }));
        }
        let (endpoints, families, labels, bounds) =
            (&map.endpoints, &map.families, &map.labels, &map.bounds);
        let arena_base = self.arena.len() as u32;
        self.arena.extend_from_slice(&b.arena);
        let mut out = Vec::with_capacity(b.scrapes.len());
        for s in &b.scrapes {
            let endpoint = endpoints[s.endpoint as usize];
            let g0 = self.groups.len() as u32;
            for &(fam, r0, r1) in &b.groups[s.groups.0 as usize..s.groups.1 as usize] {
                let family = families[fam as usize];
                let start = self.rows.len() as u32;
                for (k, r) in b.rows[r0 as usize..r1 as usize].iter().enumerate() {
                    let index = self.rows.len() as u32;
                    let label = labels[r.labels as usize];
                    let at = b.at[r0 as usize + k];
                    let buckets = if at == NONE {
                        NONE
                    } else {
                        let o = (arena_base + at) as usize;
                        if self.arena[o] == 0 {
                            let id = bounds[r.bounds as usize];
                            self.arena[o + 1..o + 5].copy_from_slice(&id.to_le_bytes());
                        }
                        arena_base + at
                    };
                    let flags = (u8::from(r.value.is_some()) * HAS_VALUE)
                        | (u8::from(r.count.is_some()) * HAS_COUNT)
                        | (u8::from(r.sum.is_some()) * HAS_SUM);
                    if let (Some(v), Some(_)) = (r.value, r.count) {
                        self.values_too.insert(index, v);
                    }
                    self.rows.push(Row {
                        a: r.count.or(r.value).unwrap_or(0.0),
                        sum: r.sum.unwrap_or(0.0),
                        tagged: label | (u32::from(flags) << FLAGS_SHIFT),
                        buckets,
                    });
                }
                let rows = (start, self.rows.len() as u32);
                self.groups.push(Group { family, rows });
            }
            out.push(LineScrape {
                endpoint,
                line: s.line,
                timestamp_ns: s.timestamp_ns,
                request_sent_ns: s.request_sent_ns,
                groups: (g0, self.groups.len() as u32),
            });
        }
        out
    }

    /// Done merging: the merge state goes, and each scrape's families are
    /// put in name order (as a map of them iterates).
    pub fn finish(&mut self, scrapes: &[(u32, u32)]) {
        let mut names: Vec<u32> = (0..self.families.all.len() as u32).collect();
        names.sort_by(|a, b| self.families.get(*a).cmp(self.families.get(*b)));
        let mut rank = vec![0u32; names.len()];
        for (r, f) in names.iter().enumerate() {
            rank[*f as usize] = r as u32;
        }
        for &(a, b) in scrapes {
            let g = &mut self.groups[a as usize..b as usize];
            if !g.is_sorted_by_key(|x| rank[x.family as usize]) {
                g.sort_by_key(|x| rank[x.family as usize]);
            }
        }
        self.groups.shrink_to_fit();
        self.rows.shrink_to_fit();
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

    /// A row's value (counters, gauges).
    pub fn value(&self, i: u32) -> Option<f64> {
        let r = &self.rows[i as usize];
        if r.flags() & HAS_VALUE == 0 {
            None
        } else if r.flags() & HAS_COUNT != 0 {
            self.values_too.get(&i).copied()
        } else {
            Some(r.a)
        }
    }

    /// A row's count (histograms).
    pub fn count(&self, i: u32) -> Option<f64> {
        let r = &self.rows[i as usize];
        (r.flags() & HAS_COUNT != 0).then_some(r.a)
    }

    /// A row's sum (histograms).
    pub fn sum(&self, i: u32) -> Option<f64> {
        let r = &self.rows[i as usize];
        (r.flags() & HAS_SUM != 0).then_some(r.sum)
    }

    /// A row's cumulative quantity: the count, else the value.
    pub fn cumulative(&self, i: u32) -> Option<f64> {
        let r = &self.rows[i as usize];
        (r.flags() & (HAS_COUNT | HAS_VALUE) != 0).then_some(r.a)
    }

    /// A row's buckets, `(le, cumulative count)` (`le` `None` where the
    /// bound is not a number); `None` without buckets.
    pub fn buckets(&self, i: u32) -> Option<Vec<(Option<f64>, f64)>> {
        let r = &self.rows[i as usize];
        if r.buckets == NONE {
            return None;
        }
        let les = &self.bounds[self.bounds_of(i) as usize];
        let counts = self.decode(i, les.len());
        Some(les.iter().copied().zip(counts).collect())
    }

    /// [`Store::buckets`], reading a series' rows in order: a change is
    /// applied to its row before, kept in `cache` from the last call,
    /// instead of decoded from the last whole row.
    pub fn buckets_in_order<'c>(
        &self,
        i: u32,
        cache: &'c mut BucketCache,
    ) -> Option<(&[Option<f64>], &'c [f64])> {
        let r = &self.rows[i as usize];
        if r.buckets == NONE {
            return None;
        }
        let a = &self.arena;
        let mut at = r.buckets as usize;
        let (bounds, counts) = if a[at] == 1 {
            at += 1;
            let back = u32::from_le_bytes(a[at..at + 4].try_into().unwrap_or_default());
            at += 4;
            let (bounds, mut counts) = match cache.0.remove(&(i - back)) {
                Some(c) => c,
                None => {
                    let bounds = self.bounds_of(i);
                    let n = self.bounds[bounds as usize].len();
                    (bounds, self.decode(i - back, n))
                }
            };
            for c in counts.iter_mut() {
                *c += get_varint(a, &mut at) as f64;
            }
            (bounds, counts)
        } else {
            let bounds = self.bounds_of(i);
            (bounds, self.decode(i, self.bounds[bounds as usize].len()))
        };
        if cache.0.len() > 4096 {
            cache.0.clear();
        }
        let slot = cache.0.entry(i).or_default();
        *slot = (bounds, counts);
        Some((&self.bounds[bounds as usize], &slot.1))
    }

    /// The bounds' id of row `i`'s buckets: its whole row's (a change
    /// keeps its row's bounds).
    fn bounds_of(&self, mut i: u32) -> u32 {
        let a = &self.arena;
        loop {
            let at = self.rows[i as usize].buckets as usize;
            let word = u32::from_le_bytes(a[at + 1..at + 5].try_into().unwrap_or_default());
            if a[at] == 0 {
                return word;
            }
            i -= word;
        }
    }

    /// Row `i`'s `n` bucket counts.
    fn decode(&self, i: u32, n: usize) -> Vec<f64> {
        let a = &self.arena;
        let mut at = self.rows[i as usize].buckets as usize;
        let tag = a[at];
        at += 1;
        if tag == 0 {
            at += 4;
            return (0..n)
                .map(|k| {
                    let b: [u8; 8] = a[at + 8 * k..at + 8 * k + 8].try_into().unwrap_or_default();
                    f64::from_le_bytes(b)
                })
                .collect();
        }
        let back = u32::from_le_bytes(a[at..at + 4].try_into().unwrap_or_default());
        at += 4;
        let mut counts = self.decode(i - back, n);
        for c in counts.iter_mut() {
            *c += get_varint(a, &mut at) as f64;
        }
        counts
    }

    /// Bytes held (for the benchmark's accounting).
    pub fn bytes(&self) -> usize {
        self.rows.capacity() * std::mem::size_of::<Row>()
            + self.groups.capacity() * std::mem::size_of::<Group>()
            + self.arena.capacity()
    }
}
