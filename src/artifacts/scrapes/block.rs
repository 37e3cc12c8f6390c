//! What one block of lines reads to, before it joins the run's store: its
//! scrapes, with families, endpoints, label sets and bucket bounds interned
//! within the block (a block's thousands of rows name a few dozen of each).

use std::collections::{BTreeMap, BTreeSet, HashMap};

use super::reference::RawScrape;

/// Labels of one series.
pub type Labels = BTreeMap<String, String>;

/// "No bucket bounds" in a row.
pub const NONE: u32 = u32::MAX;

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
}

/// One sample of a block.
#[derive(Debug, Clone, PartialEq)]
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
    /// Endpoints, by block id.
    pub endpoints: Vec<String>,
    endpoint_ids: HashMap<String, u32>,
    /// Families kept, by block id.
    pub families: Vec<String>,
    family_ids: HashMap<String, Option<u32>>,
    /// Label sets, by block id.
    pub labels: Vec<Labels>,
    label_texts: HashMap<Vec<u8>, u32>,
    /// Bucket bounds (the `le` texts in order), by block id.
    pub bounds: Vec<Vec<String>>,
    bounds_ids: HashMap<Vec<String>, u32>,
    /// Per family (block id), the bounds its last row had.
    last_bounds: Vec<u32>,
    /// Scrapes in line order.
    pub scrapes: Vec<LineScrape>,
    /// (family, first row, end row) of each scrape's families.
    pub groups: Vec<(u32, u32, u32)>,
    /// Samples.
    pub rows: Vec<LineRow>,
    /// Bucket counts.
    pub counts: Vec<f64>,
    /// Lines that could not be read.
    pub problems: Vec<Problem>,
}

/// Where a block stood before a line: what to cut back to when the scanner
/// gives the line up.
pub struct Mark(usize, usize, usize);

impl Block {
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

    /// The endpoint's block id.
    pub fn endpoint(&mut self, url: &str) -> u32 {
        if let Some(id) = self.endpoint_ids.get(url) {
            return *id;
        }
        let id = self.endpoints.len() as u32;
        self.endpoints.push(url.to_string());
        self.endpoint_ids.insert(url.to_string(), id);
        id
    }

    /// The family's block id, `None` when it is not kept.
    pub fn family(&mut self, name: &str, interest: &Interest) -> Option<u32> {
        if let Some(id) = self.family_ids.get(name) {
            return *id;
        }
        let id = interest.keeps(name).then(|| {
            self.families.push(name.to_string());
            self.families.len() as u32 - 1
        });
        self.family_ids.insert(name.to_string(), id);
        id
    }

    /// The block id of the label set written as `text`, if seen before.
    pub fn labels_seen(&self, text: &[u8]) -> Option<u32> {
        self.label_texts.get(text).copied()
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
    /// serde).
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
        let key: Vec<String> = les.iter().map(|s| s.to_string()).collect();
        let id = match self.bounds_ids.get(&key) {
            Some(id) => *id,
            None => {
                let mut sorted: Vec<&String> = key.iter().collect();
                sorted.sort_unstable();
                if sorted.windows(2).any(|w| w[0] == w[1]) {
                    return None;
                }
                let id = self.bounds.len() as u32;
                self.bounds.push(key.clone());
                self.bounds_ids.insert(key, id);
                id
            }
        };
        self.last_bounds[f] = id;
        Some(id)
    }

    /// Adds a scrape read by serde (families in name order, as the map
    /// holds them; the gauges the checks do not read dropped).
    pub fn push_raw(&mut self, s: RawScrape, line: u64, interest: &Interest) {
        let endpoint = self.endpoint(&s.endpoint_url);
        let first_group = self.groups.len() as u32;
        for (name, samples) in s.metrics {
            let Some(fam) = self.family(&name, interest) else {
                continue;
            };
            let start = self.rows.len() as u32;
            for x in samples {
                let labels = self.add_labels(x.labels, None);
                let (bounds, counts) = match x.buckets {
                    None => (NONE, (0, 0)),
                    Some(b) => {
                        let les: Vec<&str> = b.keys().map(String::as_str).collect();
                        let id = self.bounds_id(fam, &les).unwrap_or(NONE);
                        let from = self.counts.len() as u32;
                        self.counts.extend(b.values());
                        (id, (from, self.counts.len() as u32))
                    }
                };
                self.rows.push(LineRow {
                    labels,
                    value: x.value,
                    count: x.count,
                    sum: x.sum,
                    bounds,
                    counts,
                });
            }
            self.groups.push((fam, start, self.rows.len() as u32));
        }
        self.scrapes.push(LineScrape {
            line,
            endpoint,
            timestamp_ns: s.timestamp_ns,
            request_sent_ns: s.request_sent_ns,
            groups: (first_group, self.groups.len() as u32),
        });
    }
}
