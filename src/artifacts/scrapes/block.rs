//! What one block of lines reads to, before it joins the run's store: its
//! scrapes, with families, endpoints, label sets and bucket bounds interned
//! within the block (a block's thousands of rows name a few dozen of each).

use std::collections::BTreeSet;

use super::rows::{Labels, Layout, ScrapePhase, FLAGS_SHIFT, HAS_COUNT, HAS_SUM, HAS_VALUE, NONE};

/// Maps of the interned ids: foldhash, several times faster than SipHash on
/// these short keys.
type HashMap<K, V> = std::collections::HashMap<K, V, foldhash::fast::RandomState>;

/// Which families are kept: all but those the export types as gauges (no
/// check reads a gauge from the raw scrapes; the process start time, which
/// tells a restart, is always kept).
#[derive(Debug, Clone, Default)]
pub struct Interest {
    /// Canonical names of the families dropped.
    pub dropped: BTreeSet<String>,
}

impl Interest {
    /// Whether the checks read `family`.
    pub fn keeps(&self, family: &str) -> bool {
        self.dropped.is_empty() || !self.dropped.contains(crate::frameworks::canonical(family))
    }
}

/// One scrape of a block.
#[derive(Debug, Clone, PartialEq)]
pub struct LineScrape {
    /// Line in the block (1-based).
    pub line: u64,
    /// Endpoint (block id).
    pub endpoint: u32,
    /// Scrape time (ns).
    pub timestamp_ns: u64,
    /// Send time (ns).
    pub request_sent_ns: Option<u64>,
    /// Its families: a range of the block's groups.
    pub groups: (u32, u32),
    /// Its layout (block id; [`Block::layout_last`]).
    pub layout: u32,
    /// The phase AIPerf tagged it with.
    pub phase: ScrapePhase,
}

/// One sample of a block.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LineRow {
    /// Label set (block id).
    pub labels: u32,
    /// Counter/gauge value.
    pub value: Option<f64>,
    /// Histogram count.
    pub count: Option<f64>,
    /// Histogram sum.
    pub sum: Option<f64>,
    /// Bucket bounds (block id), or [`NONE`].
    pub bounds: u32,
    /// The bucket counts: a range of the block's counts.
    pub counts: (u32, u32),
    /// The series (endpoint, family, label set) in the block: set once the
    /// line is read ([`Block::name_series`]).
    pub series: u32,
}

/// A line that could not be read: where, what, and the field.
#[derive(Debug, Clone, PartialEq)]
pub struct Problem {
    /// Line in the block (1-based).
    pub line: u64,
    /// Finding code.
    pub code: crate::findings::Code,
    /// What is wrong, after "line N: ".
    pub message: String,
    /// The field, where serde could tell.
    pub field: Option<String>,
}

/// A block's lines, read.
#[derive(Debug, Default)]
pub struct Block {
    /// Lines in the block.
    pub lines: u64,
    /// Its bytes.
    pub bytes: usize,
    /// Endpoints, by block id.
    pub endpoints: Vec<String>,
    endpoint_ids: HashMap<String, u32>,
    /// Families kept, by block id.
    pub families: Vec<String>,
    family_ids: HashMap<String, Option<u32>>,
    /// Per family kept (block id), the stamp of the last line whose
    /// families named it ([`Block::family_again`]): a family written twice
    /// in a line found in constant time, not by a walk of the line's.
    family_stamp: Vec<u32>,
    /// The stamp of the line being read.
    stamp: u32,
    /// Whether a new family, endpoint or bounds set was refused at its cap
    /// ([`super::store::MAX_FAMILIES`], [`super::store::MAX_ENDPOINTS`],
    /// [`super::store::MAX_BUCKETS`], [`super::store::MAX_BOUND_TEXTS`]).
    names_over: bool,
    /// The bounds of every set in `bounds`, together.
    bound_texts: usize,
    /// Label sets, by block id.
    pub labels: Vec<Labels>,
    label_texts: HashMap<Vec<u8>, u32>,
    /// Bucket bounds (the `le` texts in order), by block id.
    pub bounds: Vec<Vec<String>>,
    bounds_ids: HashMap<Vec<String>, u32>,
    /// Scrape layouts (families and label sets as block ids), by block id.
    pub layouts: Vec<Layout>,
    layout_ids: HashMap<Layout, u32>,
    series_ids: HashMap<(u32, u32, u32), u32>,
    /// Per family (block id), the bounds its last row had.
    last_bounds: Vec<u32>,
    /// Scrapes in line order.
    pub scrapes: Vec<LineScrape>,
    /// (family, first row, end row) of each scrape's families.
    pub groups: Vec<(u32, u32, u32)>,
    /// Samples.
    pub rows: Vec<LineRow>,
    /// Bucket counts (while reading; coded into `arena` at the end).
    pub counts: Vec<f64>,
    /// The rows' buckets, coded ([`super::store::code_buckets`]).
    pub arena: Vec<u8>,
    /// Each row's offset in `arena`, or [`NONE`].
    pub at: Vec<u32>,
    /// Lines that could not be read.
    pub problems: Vec<Problem>,
    /// Lines of this chunk read by the grammar (no shape fitted them).
    pub scanned: u64,
    /// Line shapes learnt ([`super::scan`]).
    pub shapes: Vec<Shape>,
    /// The numbers of the line being scanned.
    pub slots: Vec<Slot>,
    /// Scratch of the shapes' diff: the slots whose number changed, with
    /// their new length and value.
    pub changes: Vec<Change>,
    /// The file's ids of the block's names (kept with them).
    pub to_file: ToFile,
    /// The line where the block's label sets reached
    /// [`super::store::MAX_LABEL_SETS`]: no more are interned, and the
    /// block is not read past it (the file holds more than the reader
    /// does).
    pub over_cap: Option<u64>,
    /// Rows and counts before the line being scanned.
    pub line_rows: usize,
    /// See `line_rows`.
    pub line_counts: usize,
}

/// A number of a shape that changed in a line ([`super::scan`]).
#[derive(Debug, Clone, Copy)]
pub struct Change {
    /// The slot.
    pub slot: u32,
    /// Its new length.
    pub len: u32,
    /// Its value (`u64`s as they are, `f64`s as bits; 0 when dropped).
    pub value: u64,
}

/// Interned label sets plus series a block keeps from chunk to chunk.
pub const KEPT_NAMES: usize = 1 << 16;

/// The file's ids of a block's interned names, by block id: filled by the
/// merge as the block names new ones.
#[derive(Debug, Default)]
pub struct ToFile {
    /// Endpoints.
    pub endpoints: Vec<u32>,
    /// Families.
    pub families: Vec<u32>,
    /// Label sets.
    pub labels: Vec<u32>,
    /// Bucket bounds.
    pub bounds: Vec<u32>,
    /// Layouts.
    pub layouts: Vec<u32>,
}

/// Where a block stood before a line: what to cut back to when the scanner
/// gives the line up.
pub struct Mark(usize, usize, usize);

impl Block {
    /// Empties the block for the next chunk, keeping its allocations, its
    /// interned names (their ids stay the block's, so the shapes it learnt
    /// still read the next chunk's lines) and what the merge mapped them to;
    /// all of it goes once the names pass [`KEPT_NAMES`] (bounded memory
    /// on a file of ever new label sets).
    pub fn reset(&mut self) {
        if self.labels.len() + self.series_ids.len() > KEPT_NAMES {
            self.forget();
        }
        self.lines = 0;
        self.bytes = 0;
        self.scrapes.clear();
        self.groups.clear();
        self.rows.clear();
        self.counts.clear();
        self.arena.clear();
        self.at.clear();
        self.problems.clear();
        self.slots.clear();
        self.scanned = 0;
        self.over_cap = None;
        self.names_over = false;
    }

    /// Forgets the interned names, the shapes and the merge's map.
    fn forget(&mut self) {
        self.endpoints.clear();
        self.endpoint_ids.clear();
        self.families.clear();
        self.family_ids.clear();
        self.family_stamp.clear();
        self.labels.clear();
        self.label_texts.clear();
        self.bounds.clear();
        self.bounds_ids.clear();
        self.bound_texts = 0;
        self.layouts.clear();
        self.layout_ids.clear();
        self.last_bounds.clear();
        self.series_ids.clear();
        self.shapes.clear();
        self.to_file = ToFile::default();
    }

    /// Where the block stands.
    pub fn mark(&self) -> Mark {
        Mark(self.groups.len(), self.rows.len(), self.counts.len())
    }

    /// Drops what was added since `m` (interned names stay: unused, harmless).
    pub fn rewind(&mut self, m: Mark) {
        self.groups.truncate(m.0);
        self.rows.truncate(m.1);
        self.counts.truncate(m.2);
    }

    /// Numbers the series of the rows of the scrape just added.
    pub fn name_series(&mut self) {
        let Some(s) = self.scrapes.last() else { return };
        for &(fam, r0, r1) in &self.groups[s.groups.0 as usize..s.groups.1 as usize] {
            for r in &mut self.rows[r0 as usize..r1 as usize] {
                let n = self.series_ids.len() as u32;
                r.series = *self
                    .series_ids
                    .entry((s.endpoint, fam, r.labels))
                    .or_insert(n);
            }
        }
    }

    /// Sets the layout of the scrape just added (its families and rows):
    /// its block id, numbered if new.
    pub fn layout_last(&mut self) {
        let Some(s) = self.scrapes.last() else { return };
        let groups = &self.groups[s.groups.0 as usize..s.groups.1 as usize];
        let first = groups.first().map_or(0, |g| g.1);
        let end = groups.last().map_or(0, |g| g.2);
        let layout = Layout {
            groups: groups
                .iter()
                .map(|&(f, a, b)| (f, a - first, b - first))
                .collect(),
            rows: self.rows[first as usize..end as usize]
                .iter()
                .map(|r| {
                    let flags = (u32::from(r.value.is_some()) * HAS_VALUE)
                        | (u32::from(r.count.is_some()) * HAS_COUNT)
                        | (u32::from(r.sum.is_some()) * HAS_SUM);
                    r.labels | (flags << FLAGS_SHIFT)
                })
                .collect(),
        };
        let id = match self.layout_ids.get(&layout) {
            Some(id) => *id,
            None => {
                let id = self.layouts.len() as u32;
                self.layouts.push(layout.clone());
                self.layout_ids.insert(layout, id);
                id
            }
        };
        if let Some(s) = self.scrapes.last_mut() {
            s.layout = id;
        }
    }

    /// Series in the block.
    pub fn series_count(&self) -> usize {
        self.series_ids.len()
    }

    /// The endpoint's block id; `None` past [`super::store::MAX_ENDPOINTS`]
    /// (the block stops at this line: [`Block::names_full`]).
    pub fn endpoint(&mut self, url: &str) -> Option<u32> {
        if let Some(id) = self.endpoint_ids.get(url) {
            return Some(*id);
        }
        if self.endpoints.len() >= super::store::MAX_ENDPOINTS {
            self.names_over = true;
            return None;
        }
        let id = self.endpoints.len() as u32;
        self.endpoints.push(url.to_string());
        self.endpoint_ids.insert(url.to_string(), id);
        Some(id)
    }

    /// The family's block id, `None` when it is not kept.
    pub fn family(&mut self, name: &str, interest: &Interest) -> Option<u32> {
        if let Some(id) = self.family_ids.get(name) {
            return *id;
        }
        let keeps = interest.keeps(name);
        if !keeps && self.family_ids.len() >= KEPT_NAMES {
            // Ever-new names of families not read: asked again, not held.
            return None;
        }
        if keeps && self.families.len() >= super::store::MAX_FAMILIES {
            // Ever-new families: refused, and the block stops at this line
            // ([`Block::names_full`]).
            self.names_over = true;
            return None;
        }
        let id = keeps.then(|| {
            self.families.push(name.to_string());
            self.family_stamp.push(0);
            self.families.len() as u32 - 1
        });
        self.family_ids.insert(name.to_string(), id);
        id
    }

    /// The block id of the label set written as `text`, if seen before.
    pub fn labels_seen(&self, text: &[u8]) -> Option<u32> {
        self.label_texts.get(text).copied()
    }

    /// Whether the block holds as many label sets as the file may, or
    /// refused a family or an endpoint past its cap: the block stops at
    /// the line being read.
    pub fn names_full(&self) -> bool {
        self.labels.len() >= super::store::MAX_LABEL_SETS || self.names_over
    }

    /// Starts a line's families: [`Block::family_again`] from here on
    /// tells the families this line named.
    pub fn new_line_families(&mut self) {
        self.stamp = self.stamp.wrapping_add(1);
        if self.stamp == 0 {
            // Wrapped: the old stamps could match again.
            self.family_stamp.iter_mut().for_each(|s| *s = 0);
            self.stamp = 1;
        }
    }

    /// Whether kept family `fam` was already named in this line (since
    /// [`Block::new_line_families`]); marks it named.
    pub fn family_again(&mut self, fam: u32) -> bool {
        let s = &mut self.family_stamp[fam as usize];
        let again = *s == self.stamp;
        *s = self.stamp;
        again
    }

    /// Interns a label set written as `text` (`None`: not by its text).
    pub fn add_labels(&mut self, labels: Labels, text: Option<&[u8]>) -> u32 {
        let id = self.labels.len() as u32;
        self.labels.push(labels);
        if let Some(t) = text {
            self.label_texts.insert(t.to_vec(), id);
        }
        id
    }

    /// The block id of a bounds vector; `None` when a bound is written
    /// twice (serde's map keeps the last count; the scanner leaves it to
    /// serde), or past the buckets' caps ([`Block::names_full`]).
    pub fn bounds_id(&mut self, family: u32, les: &[&str]) -> Option<u32> {
        let f = family as usize;
        if self.last_bounds.len() <= f {
            self.last_bounds.resize(f + 1, NONE);
        }
        // The usual case: the bounds of the family's last row.
        let last = self.last_bounds[f];
        if last != NONE {
            let b = &self.bounds[last as usize];
            if b.len() == les.len() && b.iter().zip(les).all(|(x, y)| x == y) {
                return Some(last);
            }
        }
        if les.len() > super::store::MAX_BUCKETS {
            // Past the cap the line is not read (the block stops here).
            self.names_over = true;
            return None;
        }
        let key: Vec<String> = les.iter().map(|s| s.to_string()).collect();
        let id = match self.bounds_ids.get(&key) {
            Some(id) => *id,
            None if self.bound_texts + les.len() > super::store::MAX_BOUND_TEXTS => {
                self.names_over = true;
                return None;
            }
            None => {
                let mut sorted: Vec<&String> = key.iter().collect();
                sorted.sort_unstable();
                if sorted.windows(2).any(|w| w[0] == w[1]) {
                    return None;
                }
                let id = self.bounds.len() as u32;
                self.bound_texts += les.len();
                self.bounds.push(key.clone());
                self.bounds_ids.insert(key, id);
                id
            }
        };
        self.last_bounds[f] = id;
        Some(id)
    }
}

// --- Line shapes (read and written by `scan.rs`) ----------------------------------

impl Shape {
    /// The line's text: in `chunk` (the chunk being read) or kept.
    pub fn text<'a>(&'a self, chunk: &'a [u8]) -> &'a [u8] {
        match self.in_chunk {
            Some((a, b)) => &chunk[a..b],
            None => &self.text,
        }
    }
}

impl Block {
    /// Keeps the text of every shape whose line is in `chunk`, before the
    /// chunk goes.
    pub fn keep_texts(&mut self, chunk: &[u8]) {
        for s in &mut self.shapes {
            if let Some((a, b)) = s.in_chunk.take() {
                s.text.clear();
                s.text.extend_from_slice(&chunk[a..b]);
            }
        }
    }
}

/// Where a number of a line goes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Kind {
    /// `timestamp_ns`.
    Time,
    /// `request_sent_ns`.
    Sent,
    /// A row's value, count or sum (`index`: the row in the line).
    Value,
    /// See [`Kind::Value`].
    Count,
    /// See [`Kind::Value`].
    Sum,
    /// A bucket count (`index`: the count in the line).
    Bucket,
    /// Read (validated) and dropped: a family the checks do not read.
    Dropped,
}

/// One number of a line: its extent and where it goes.
#[derive(Debug, Clone, Copy)]
pub struct Slot {
    /// Where its text starts in the line.
    pub start: u32,
    /// Where it ends.
    pub end: u32,
    /// Where it goes.
    pub kind: Kind,
    /// Which row or count of the line.
    pub index: u32,
}

/// A number of a shape: the bytes before it since the number before
/// (the same in every line that fits the shape), its length (in the line
/// the shape holds) and where it goes.
#[derive(Debug, Clone, Copy)]
pub struct ShapeSlot {
    /// Bytes between the end of the number before (or the line's start)
    /// and this one.
    pub gap: u32,
    /// Its length.
    pub len: u32,
    /// Where it goes.
    pub kind: Kind,
    /// Which row or count of the line.
    pub index: u32,
}

/// A line read by the scanner, as a template for lines like it.
#[derive(Debug, Default)]
pub struct Shape {
    /// The line's text (the bytes between its numbers are compared),
    /// unless it is in the chunk being read ([`Shape::text`]).
    pub text: Vec<u8>,
    /// Where its text is in the chunk being read, if it is there.
    pub in_chunk: Option<(usize, usize)>,
    /// Its numbers, in line order.
    pub slots: Vec<ShapeSlot>,
    /// Endpoint (block id).
    pub endpoint: u32,
    /// Layout (block id).
    pub layout: u32,
    /// The line's phase tag (text between numbers: the same in every line
    /// of the shape).
    pub phase: ScrapePhase,
    /// The line's `timestamp_ns`.
    pub ts: u64,
    /// Its `request_sent_ns`.
    pub sent: Option<u64>,
    /// (family, first row, end row), rows counted in the line.
    pub groups: Vec<(u32, u32, u32)>,
    /// Rows as the line reads (values included), counts ranges counted in
    /// the line.
    pub rows: Vec<LineRow>,
    /// The line's bucket counts.
    pub counts: Vec<f64>,
}
