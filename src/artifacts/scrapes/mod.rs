//! `server_metrics_export.jsonl`: AIPerf's raw scrapes, one line per scrape
//! whose body changed, with cumulative (not delta) values. Present only when
//! the run asked for `--server-metrics-formats ... jsonl`. With it, counter and
//! histogram increments can be placed in time and attributed to requests,
//! which is what lets the phase check repair a contaminated split.
//!
//! The file can be gigabytes (an hour of scrapes of two endpoints is
//! 300 MB), so it is never held: it is read in blocks of about 2 MiB cut at
//! line ends, each scanned by a rayon worker (`scan`, with serde's
//! `reference` reading for the lines the scanner gives up on, so a bad
//! line's finding names its line and field), and merged in file order into
//! columns (`store`): only the families the checks read (the export's
//! gauges are dropped after typing them), label sets and bounds interned,
//! buckets delta-coded per series.

use std::collections::{BTreeMap, BTreeSet};

use rayon::prelude::*;

use crate::findings::Finding;

#[cfg(any(test, feature = "fuzzing"))]
mod agree;
mod block;
mod order;
#[cfg(feature = "parquet")]
pub mod parquet;
mod read;
mod reference;
mod rows;
mod scan;
mod source;
mod store;
mod walk;

#[cfg(any(test, feature = "fuzzing"))]
#[doc(hidden)]
pub use agree::assert_agrees;
pub use block::Interest;
pub use order::state_order;
pub use read::{read_from, read_with};
pub use rows::{Labels, ScrapePhase};
pub use store::SeriesCursor;
use store::Store;
pub use walk::fell;

/// File name.
pub const FILE: &str = "server_metrics_export.jsonl";

/// One scrape of one endpoint.
#[derive(Debug, Clone, PartialEq)]
pub struct Scrape {
    /// Endpoint id ([`ScrapesRead::endpoint`] gives its URL).
    pub endpoint: u32,
    /// Scrape time (ns): when the answer's first byte arrived.
    pub timestamp_ns: u64,
    /// When the scrape request was sent (ns; AIPerf 0.13 and later).
    pub request_sent_ns: Option<u64>,
    /// 1-based line in the file.
    pub line: u64,
    /// Its layout (families and label sets, shared by the scrapes of one
    /// structure): equal ids, the same series at the same positions.
    pub layout: u32,
    /// The phase AIPerf tagged it with (`benchmark_phase`).
    pub phase: ScrapePhase,
    /// Its first row in the store.
    first_row: u32,
}

impl Scrape {
    /// Send order: by the time each request was sent, where known, else by
    /// arrival ([`state_order`] decides whether it is the state order).
    pub fn order_key(&self) -> (u64, u64) {
        (self.request_sent_ns.unwrap_or(self.timestamp_ns), self.line)
    }
}

/// The samples of one family in one scrape.
#[derive(Clone)]
pub struct Samples<'a> {
    store: &'a Store,
    /// The tags of the family's positions.
    tags: &'a [u32],
    /// The row of the first of them.
    row: u32,
    next: u32,
}

impl<'a> Iterator for Samples<'a> {
    type Item = Sample<'a>;
    fn next(&mut self) -> Option<Sample<'a>> {
        let tag = *self.tags.get(self.next as usize)?;
        let s = Sample {
            store: self.store,
            row: self.row + self.next,
            tag,
        };
        self.next += 1;
        Some(s)
    }
}

impl Samples<'_> {
    /// How many.
    pub fn count_samples(&self) -> usize {
        self.tags.len()
    }
}

/// One sample of a family in one scrape.
#[derive(Clone, Copy)]
pub struct Sample<'a> {
    store: &'a Store,
    row: u32,
    /// Its position's label set and numbers.
    tag: u32,
}

impl<'a> Sample<'a> {
    /// Labels.
    pub fn labels(&self) -> &'a Labels {
        self.store.labels(self.labels_id())
    }

    /// The label set's id: equal ids, equal labels.
    pub fn labels_id(&self) -> u32 {
        rows::labels_of(self.tag)
    }

    /// Counter/gauge value.
    pub fn value(&self) -> Option<f64> {
        self.store.value(self.row, self.tag)
    }

    /// Histogram cumulative count.
    pub fn count(&self) -> Option<f64> {
        self.store.count(self.row, self.tag)
    }

    /// Histogram cumulative sum.
    pub fn sum(&self) -> Option<f64> {
        self.store.sum(self.row, self.tag)
    }

    /// The cumulative quantity that counts observations: `count` for
    /// histograms, `value` for counters.
    pub fn cumulative(&self) -> Option<f64> {
        self.store.cumulative(self.row, self.tag)
    }

    /// Histogram cumulative buckets, `(le, count)`, `le` `None` where the
    /// bound is not a number.
    pub fn buckets(&self) -> Option<Vec<(Option<f64>, f64)>> {
        self.store.buckets(self.row)
    }

    /// [`Sample::buckets`], for a reader going through one series' scrapes
    /// in order: each decoded from the one before, which `cursor` holds.
    pub fn buckets_after<'c>(
        &self,
        cursor: &'c mut SeriesCursor,
    ) -> Option<(&'a [Option<f64>], &'c [f64])> {
        self.store.buckets_after(self.row, cursor)
    }
}

/// Scrapes in file order plus per-line problems.
#[derive(Debug, Default)]
pub struct ScrapesRead {
    /// Scrapes.
    pub scrapes: Vec<Scrape>,
    /// Problems.
    pub findings: Vec<Finding>,
    /// The families the export types as counters or histograms (canonical
    /// names), set once the export is read: what only grows, and so what
    /// tells the state order. Empty: histogram counts alone tell it.
    pub cumulative: BTreeSet<String>,
    store: Store,
    /// Per endpoint, the scrapes (indices into `scrapes`) in state order with
    /// their state times: computed once, on first use.
    order: std::sync::OnceLock<BTreeMap<String, Vec<(usize, u64)>>>,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        write!(f, "Store({} bytes)", self.bytes())
    }
}

impl ScrapesRead {
    /// Sets the families that only grow (before the first ordered read).
    pub fn set_cumulative(&mut self, cumulative: BTreeSet<String>) {
        self.cumulative = cumulative;
        self.order = std::sync::OnceLock::new();
    }

    /// A scrape's endpoint URL.
    pub fn endpoint(&self, s: &Scrape) -> &str {
        self.store.endpoint(s.endpoint)
    }

    fn samples_in<'a>(&'a self, s: &Scrape, g: &(u32, u32, u32)) -> Samples<'a> {
        let tags = &self.store.layout(s.layout).rows[g.1 as usize..g.2 as usize];
        Samples {
            store: &self.store,
            tags,
            row: s.first_row + g.1,
            next: 0,
        }
    }

    /// A scrape's families in name order, with their samples.
    pub fn families<'a>(&'a self, s: &Scrape) -> impl Iterator<Item = (&'a str, Samples<'a>)> {
        self.families_by_id(s).map(|(_, name, x)| (name, x))
    }

    /// A scrape's families in name order as (family id, name, samples):
    /// equal ids, equal names.
    pub fn families_by_id<'a>(
        &'a self,
        s: &Scrape,
    ) -> impl Iterator<Item = (u32, &'a str, Samples<'a>)> {
        let s = s.clone();
        self.store
            .layout(s.layout)
            .groups
            .iter()
            .map(move |g| (g.0, self.store.family(g.0), self.samples_in(&s, g)))
    }

    /// The samples of the family named exactly `name`, if the scrape has it.
    pub fn exactly(&self, s: &Scrape, name: &str) -> Option<Samples<'_>> {
        self.group(s, self.store.family_id(name)?)
    }

    /// The samples of family `id` ([`ScrapesRead::families_by_id`]), if the
    /// scrape has it.
    pub fn group(&self, s: &Scrape, id: u32) -> Option<Samples<'_>> {
        let g = self
            .store
            .layout(s.layout)
            .groups
            .iter()
            .find(|g| g.0 == id)?;
        Some(self.samples_in(s, g))
    }

    /// Where the family of ids `ids` ([`ScrapesRead::family`]) is among the
    /// groups of scrapes of `s`'s layout (the same for every scrape of it).
    pub fn group_index(&self, s: &Scrape, ids: [Option<u32>; 2]) -> Option<usize> {
        let groups = &self.store.layout(s.layout).groups;
        ids.into_iter()
            .flatten()
            .find_map(|id| groups.iter().position(|g| g.0 == id))
    }

    /// The samples of the group at `index` of `s`'s layout
    /// ([`ScrapesRead::group_index`]).
    pub fn samples_at(&self, s: &Scrape, index: usize) -> Samples<'_> {
        self.samples_in(s, &self.store.layout(s.layout).groups[index])
    }

    /// The rows of the group at `index` of `s`'s layout
    /// ([`ScrapesRead::group_index`]), as positions in the scrape: first
    /// and end.
    pub fn group_rows(&self, s: &Scrape, index: usize) -> (u32, u32) {
        let g = &self.store.layout(s.layout).groups[index];
        (g.1, g.2)
    }

    /// Reads every cache line of the rows `rows` (positions, as
    /// [`ScrapesRead::group_rows`] gives them) of each scrape and of their
    /// records, and folds them (the number means nothing): a read-ahead for
    /// a walk over several families of each scrape, that takes the scrapes'
    /// misses together (at most 64 scrapes).
    pub fn touch_scrapes<'s>(
        &self,
        scrapes: impl Iterator<Item = (&'s Scrape, (u32, u32))>,
    ) -> u64 {
        let mut seen = 0;
        let mut records = [(0, 0); 64];
        let mut n = 0;
        for (s, (first, end)) in scrapes.take(records.len()) {
            let (words, at) = self
                .store
                .touch_rows(s.first_row.saturating_add(first), end.saturating_sub(first));
            seen ^= words;
            if let Some(at) = at {
                records[n] = at;
                n += 1;
            }
        }
        for &at in &records[..n] {
            seen ^= self.store.touch_arena(at);
        }
        seen
    }

    /// The samples of a family, found by its name with or without `_total`
    /// (prometheus_client strips it from counter families, AIPerf keeps it).
    pub fn samples(&self, s: &Scrape, name: &str) -> Option<Samples<'_>> {
        self.samples_of(s, self.family(name))
    }

    /// The ids of a family named with or without `_total`, looked up once
    /// for [`ScrapesRead::samples_of`].
    pub fn family(&self, name: &str) -> [Option<u32>; 2] {
        let bare = crate::frameworks::canonical(name);
        [
            self.store.family_id(bare),
            self.store.family_id(&format!("{bare}_total")),
        ]
    }

    /// [`ScrapesRead::samples`] of a family found by [`ScrapesRead::family`].
    pub fn samples_of(&self, s: &Scrape, ids: [Option<u32>; 2]) -> Option<Samples<'_>> {
        ids.into_iter().flatten().find_map(|id| self.group(s, id))
    }

    /// A family's name, by id.
    pub fn family_name(&self, id: u32) -> &str {
        self.store.family(id)
    }

    /// Whether every bucket bound read is a number: a sample with a bucket
    /// whose bound is not leaves its scrape out of a family's points
    /// (`model::attribution::cumulative`).
    pub fn every_bound_known(&self) -> bool {
        self.store.every_bound_known()
    }

    /// How many families the file names.
    pub fn family_count(&self) -> usize {
        self.store.family_count()
    }

    /// Bytes the columns hold.
    pub fn bytes(&self) -> usize {
        self.store.bytes() + self.scrapes.capacity() * std::mem::size_of::<Scrape>()
    }

    fn order(&self) -> &BTreeMap<String, Vec<(usize, u64)>> {
        self.order.get_or_init(|| {
            let mut per: BTreeMap<&str, Vec<(&Scrape, u64)>> = BTreeMap::new();
            for s in &self.scrapes {
                per.entry(self.endpoint(s))
                    .or_default()
                    .push((s, s.timestamp_ns));
            }
            // Scrapes are in file order (their lines ascend: the merge
            // checks it in debug builds), so a line finds its scrape.
            let index = |line: u64| {
                (self.scrapes)
                    .binary_search_by_key(&line, |s| s.line)
                    .unwrap_or_default()
            };
            // Each endpoint's order on its own (a worker each).
            per.into_par_iter()
                .map(|(ep, mut list)| {
                    state_order(self, &mut list);
                    let ids = list.iter().map(|(s, t)| (index(s.line), *t)).collect();
                    (ep.to_string(), ids)
                })
                .collect()
        })
    }

    /// Puts each endpoint's scrapes in state order ([`state_order`]) now,
    /// the endpoints in parallel, rather than on first use.
    pub fn sort_states(&self) {
        self.order();
    }

    /// The scrapes of each endpoint in state order ([`state_order`]), with
    /// the latest time each one's state can be from.
    pub fn by_endpoint(&self) -> BTreeMap<&str, Vec<(&Scrape, u64)>> {
        self.order()
            .iter()
            .map(|(ep, ids)| {
                let list = ids.iter().map(|(i, t)| (&self.scrapes[*i], *t)).collect();
                (ep.as_str(), list)
            })
            .collect()
    }

    /// One endpoint's scrapes in state order.
    pub fn of_endpoint(&self, endpoint: &str) -> Vec<(&Scrape, u64)> {
        self.order()
            .get(endpoint)
            .map(|ids| ids.iter().map(|(i, t)| (&self.scrapes[*i], *t)).collect())
            .unwrap_or_default()
    }
}

/// Every raw-scrape file of the sample runs and the fixtures (for tests).
#[cfg(test)]
pub(crate) fn committed_scrape_files() -> Vec<std::path::PathBuf> {
    fn walk(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                walk(&p, out);
            } else if p.file_name().is_some_and(|n| n == FILE) {
                out.push(p);
            }
        }
    }
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut out = Vec::new();
    walk(&root.join("sample-artifacts/runs"), &mut out);
    walk(&root.join("fixtures"), &mut out);
    out.sort();
    out
}

#[cfg(test)]
mod tests {
    use super::block::Block;
    use super::read::read_block;
    use super::source::Chunk;
    use super::*;

    #[test]
    fn reads_counters_and_histograms_and_reports_bad_lines() {
        let text = concat!(
            r#"{"endpoint_url":"u","timestamp_ns":5,"benchmark_phase":"warmup","metrics":{"c":[{"value":3}],"h":[{"labels":{"a":"b"},"count":2,"sum":0.5,"buckets":{"+Inf":2}}]}}"#,
            "\n",
            r#"{"endpoint_url":"u","timestamp_ns":"late"}"#,
            "\n"
        );
        let r = read_from(text.as_bytes()).expect("reads");
        assert_eq!(r.scrapes.len(), 1);
        let s = &r.scrapes[0];
        let first = |fam: &str| r.samples(s, fam).and_then(|mut x| x.next());
        assert_eq!(first("h").and_then(|x| x.cumulative()), Some(2.0));
        assert_eq!(first("c").and_then(|x| x.cumulative()), Some(3.0));
        assert_eq!(
            first("h").and_then(|x| x.buckets()),
            Some(vec![(Some(f64::INFINITY), 2.0)])
        );
        assert_eq!(r.findings[0].line, Some(2));
        assert_eq!(r.findings[0].field.as_deref(), Some("timestamp_ns"));
    }

    #[test]
    fn every_committed_line_reads_as_serde_reads_it_and_through_the_scanner() {
        let files = committed_scrape_files();
        assert!(files.len() > 40, "{} files", files.len());
        let mut lines = 0;
        for path in files {
            let Ok(data) = std::fs::read(&path) else {
                continue;
            };
            assert_agrees(&data);
            // The scanner, not serde, reads every one of them.
            let text = std::str::from_utf8(&data).expect("utf-8");
            for (i, line) in text.lines().enumerate() {
                let mut b = Block::default();
                let read = scan::read_line(line, i as u64 + 1, &mut b, &Interest::default());
                assert!(
                    read.is_some(),
                    "{}: line {} left to serde",
                    path.display(),
                    i + 1
                );
                lines += 1;
            }
        }
        assert!(lines > 100, "{lines} lines");
    }

    #[test]
    fn odd_lines_read_as_serde_reads_them() {
        let base = r#"{"endpoint_url":"u","timestamp_ns":5,"metrics":{"h":[{"labels":{"a":"b"},"count":2,"sum":0.5,"buckets":{"0.1":1,"+Inf":2}}]}}"#;
        let variants = [
            base.to_string(),
            base.replace("\"u\"", "\"\\u0075\""),
            base.replace("\"a\":\"b\"", "\"a\":\"b\",\"a\":\"c\""),
            base.replace("\"count\":2", "\"count\":2,\"count\":3"),
            base.replace("\"0.1\":1", "\"0.1\":1,\"0.1\":0"),
            base.replace("\"count\":2", "\"count\":-0"),
            base.replace("\"count\":2", "\"count\":-0.0"),
            base.replace("\"count\":2", "\"count\":1e400"),
            base.replace("\"count\":2", "\"count\":123456789012345678901234567890"),
            base.replace("\"count\":2", "\"count\":null"),
            base.replace("\"count\":2", "\"count\":\"2\""),
            base.replace("\"sum\":0.5", "\"sum\":0.5,\"extra\":[1,{\"x\":null}]"),
            base.replace("\"buckets\":{", "\"buckets\":null,\"x\":{"),
            base.replace("\"labels\":{\"a\":\"b\"}", "\"labels\":null"),
            base.replace("\"metrics\":{\"h\"", "\"metrics\":{\"g\":[],\"h\""),
            base.replace("}]}}", "}],\"h\":[]}}"),
            base.replace("\"timestamp_ns\":5", "\"timestamp_ns\":5.0"),
            base.replace(
                "\"timestamp_ns\":5",
                "\"timestamp_ns\":5,\"request_sent_ns\":null",
            ),
            base.replace(
                "\"timestamp_ns\":5",
                "\"timestamp_ns\" : 5 , \"request_sent_ns\":4",
            ),
            base.to_string() + " x",
            base.replace("[{", "[[").replace("}]}}", "]]}}"),
            base.replace("\"+Inf\":2", "\"+Inf\":2.5"),
            base.replace("\"0.1\"", "\"le\""),
        ];
        // Each variant alone, then after a line that sets up the bucket
        // chain (a change coded against it).
        for v in &variants {
            assert_agrees(v.as_bytes());
            let two = format!("{base}\n{v}\n{}\n", base.replace(":2,", ":7,"));
            assert_agrees(two.as_bytes());
        }
    }

    /// Lines of two endpoints whose scrapes alternate between two
    /// structures (a phase tag that comes and goes), with histogram buckets
    /// that repeat one number's text and numbers that only start like it.
    fn alternating_lines(n: u64) -> String {
        let mut text = String::new();
        for i in 0..n {
            let ep = i % 2;
            let tag = if (i / 6) % 2 == 0 {
                r#""benchmark_phase":"warmup","#
            } else {
                ""
            };
            let c = 10 + i / 4;
            let near = if i % 3 == 0 {
                format!("{c}.05")
            } else {
                format!("{c}.0")
            };
            text.push_str(&format!(
                r#"{{"endpoint_url":"e{ep}","timestamp_ns":{},{tag}"metrics":{{"g":[{{"value":{i}.5}}],"h":[{{"labels":{{"x":"1"}},"count":{c}.0,"sum":{},"buckets":{{"0.1":{near},"1":{c}.0,"10":{c}.0,"+Inf":{c}.0}}}}]}}}}"#,
                1000 + i,
                i as f64 * 0.123_456_789_012_345_6
            ));
            text.push('\n');
        }
        text
    }

    #[test]
    fn alternating_structures_and_repeated_numbers_read_as_serde_reads_them() {
        let text = alternating_lines(240);
        assert_agrees(text.as_bytes());
        // Each structure of each endpoint is scanned once; every other
        // line fits a shape learnt before (in this chunk or an earlier one).
        let interest = Interest::default();
        let mut b = Block::default();
        let half = text.len() / 2;
        let cut = half + text[half..].find('\n').expect("a line end") + 1;
        let mut scanned = 0;
        for part in [&text[..cut], &text[cut..]] {
            read_block(&Chunk::Lines(part.as_bytes().to_vec()), &interest, &mut b);
            scanned += b.scanned;
            b.reset();
        }
        assert_eq!(scanned, 4, "lines read by the grammar");
    }

    #[test]
    fn a_block_stops_at_the_label_set_and_family_caps_and_forgets_its_names_past_theirs() {
        // Every line a new label set: the block stops at the line that
        // reaches the file's cap (the store holds fewer), holding no more.
        let line = |i: u64, family: &str, id: u64| {
            format!(
                "{{\"endpoint_url\":\"u\",\"timestamp_ns\":{i},\"metrics\":{{\"{family}\":[{{\"labels\":{{\"id\":\"{id}\"}},\"value\":{i}}}]}}}}\n"
            )
        };
        let cap = store::MAX_LABEL_SETS as u64;
        let text: String = (0..cap + 50).map(|i| line(i, "c", i)).collect();
        let interest = Interest::default();
        let mut b = Block::default();
        read_block(&Chunk::Lines(text.as_bytes().to_vec()), &interest, &mut b);
        assert_eq!(b.labels.len(), store::MAX_LABEL_SETS);
        assert_eq!(b.over_cap, Some(cap));
        assert_eq!(b.scrapes.len() as u64, cap);
        // What the reader holds agrees.
        let held: String = text
            .lines()
            .take(store::MAX_LABEL_SETS / 2)
            .map(|l| format!("{l}\n"))
            .collect();
        assert_agrees(held.as_bytes());
        // Ever-new families: the same, at the families' cap.
        let text: String = (0..store::MAX_FAMILIES as u64 + 50)
            .map(|i| line(i, &format!("c{i}"), 0))
            .collect();
        let mut b = Block::default();
        read_block(&Chunk::Lines(text.as_bytes().to_vec()), &interest, &mut b);
        assert_eq!(b.families.len(), store::MAX_FAMILIES);
        assert_eq!(b.over_cap, Some(store::MAX_FAMILIES as u64 + 1));
        // And at the endpoints' cap.
        let text: String = (0..store::MAX_ENDPOINTS as u64 + 50)
            .map(|i| line(i, "c", 0).replace("\"u\"", &format!("\"u{i}\"")))
            .collect();
        let mut b = Block::default();
        read_block(&Chunk::Lines(text.as_bytes().to_vec()), &interest, &mut b);
        assert_eq!(b.endpoints.len(), store::MAX_ENDPOINTS);
        assert_eq!(b.over_cap, Some(store::MAX_ENDPOINTS as u64 + 1));
        // Ever-new series of one label set (each pair of a thousand
        // endpoints and a few families once): the block's names are
        // dropped once they pass theirs.
        let text: String = (0..block::KEPT_NAMES as u64 + 50)
            .map(|i| {
                line(i, &format!("c{}", i / 1000), 0)
                    .replace("\"u\"", &format!("\"u{}\"", i % 1000))
            })
            .collect();
        let mut b = Block::default();
        read_block(&Chunk::Lines(text.as_bytes().to_vec()), &interest, &mut b);
        assert_eq!(b.over_cap, None);
        b.reset();
        assert!(b.labels.is_empty() && b.shapes.is_empty());
    }

    #[test]
    fn bucket_bounds_stop_the_block_at_their_caps() {
        // One series' row past MAX_BUCKETS.
        let texts: Vec<String> = (0..=store::MAX_BUCKETS).map(|i| i.to_string()).collect();
        let les: Vec<&str> = texts.iter().map(String::as_str).collect();
        let mut b = Block::default();
        assert!(b.bounds_id(0, &les[..store::MAX_BUCKETS]).is_some());
        assert!(!b.names_full());
        assert_eq!(b.bounds_id(1, &les), None);
        assert!(b.names_full());
        // Ever-new bounds sets: refused once they would pass MAX_BOUND_TEXTS.
        let per = 1 << 14;
        let sets = store::MAX_BOUND_TEXTS / per;
        let texts: Vec<String> = (0..(sets + 1) * per).map(|i| i.to_string()).collect();
        let les: Vec<&str> = texts.iter().map(String::as_str).collect();
        let mut b = Block::default();
        for set in les.chunks(per).take(sets) {
            assert!(b.bounds_id(0, set).is_some());
        }
        assert!(!b.names_full());
        assert_eq!(b.bounds_id(0, &les[sets * per..]), None);
        assert!(b.names_full());
        // A set seen before is still found.
        assert!(b.bounds_id(0, &les[..per]).is_some());
    }

    #[test]
    fn bucket_changes_decode_exactly_across_many_scrapes() {
        // Counts that grow, stall (for a scrape, and for longer than a
        // whole record's period: rows coded as unchanged, chains of them
        // between changes), go down (a reset), turn fractional, and bounds
        // that change: every row decodes to what was written.
        let mut text = String::new();
        let mut c = [0.0f64; 3];
        for i in 0..200u64 {
            match i % 37 {
                _ if (100..140).contains(&i) || i % 7 == 3 => {}
                5 => c = [0.0; 3],
                11 => c[1] += 0.25,
                _ => {
                    c[0] += (i % 3) as f64;
                    c[1] = c[0] + (i % 5) as f64;
                    c[2] = c[1] + 1.0;
                }
            }
            let les = if i % 50 == 49 {
                ["1", "2", "+Inf"]
            } else {
                ["0.5", "2", "+Inf"]
            };
            text.push_str(&format!(
                r#"{{"endpoint_url":"u","timestamp_ns":{i},"metrics":{{"h":[{{"labels":{{"e":"0"}},"count":{},"sum":1.5,"buckets":{{"{}":{},"{}":{},"{}":{}}}}}]}}}}"#,
                c[2], les[0], c[0], les[1], c[1], les[2], c[2]
            ));
            text.push('\n');
        }
        assert_agrees(text.as_bytes());
    }

    /// The read of many chunks by every worker at once (on the main
    /// thread) says what the read of them one after the other (on a rayon
    /// worker, a run among many) says: the same scrapes and findings, bad
    /// lines among them; and past the columns' cap nothing of the rest of
    /// the file is reported, however many chunks the workers had scanned
    /// ahead (before, the bad lines of a batch's later chunks were).
    #[test]
    fn the_parallel_read_says_what_the_sequential_read_says() {
        let mut text = String::new();
        let files = committed_scrape_files();
        while text.len() < 6 * source::BLOCK_BYTES {
            for path in &files {
                let data = std::fs::read_to_string(path).expect("utf-8 scrapes");
                for (i, line) in data.lines().enumerate() {
                    text.push_str(if i % 997 == 5 {
                        "{\"endpoint_url\":3}"
                    } else {
                        line
                    });
                    text.push('\n');
                }
            }
        }
        let new_set = |i: usize| {
            format!(
                "{{\"endpoint_url\":\"u\",\"timestamp_ns\":{i},\"metrics\":{{\"c\":[{{\"labels\":{{\"id\":\"{i}\"}},\"value\":1}}]}}}}\n"
            )
        };
        let summary = |r: &ScrapesRead| {
            let scrapes: Vec<(u64, u64, u32)> = (r.scrapes.iter())
                .map(|s| (s.line, s.timestamp_ns, s.endpoint))
                .collect();
            let findings: Vec<(Option<u64>, String)> = (r.findings.iter())
                .map(|f| (f.line, f.message.clone()))
                .collect();
            (scrapes, findings)
        };
        let parallel = read_from(text.as_bytes()).expect("reads");
        let sequential = rayon::scope(|_| read_from(text.as_bytes())).expect("reads");
        assert!(parallel.scrapes.len() > 1000, "{}", parallel.scrapes.len());
        assert!(parallel.findings.len() > 3, "{:?}", parallel.findings);
        assert!(summary(&parallel) == summary(&sequential));
        // Ever-new label sets past the cap, then several chunks of bad lines.
        let lines_before = text.lines().count() as u64;
        for i in 0..store::MAX_LABEL_SETS + 10 {
            text.push_str(&new_set(i));
        }
        while text.len() < 16 * source::BLOCK_BYTES {
            text.push_str("{\"endpoint_url\":3}\n");
        }
        let parallel = read_from(text.as_bytes()).expect("reads");
        let sequential = rayon::scope(|_| read_from(text.as_bytes())).expect("reads");
        // Which line the cap finding names depends on where a block's own
        // names filled (a block keeps its names from chunk to chunk): the
        // line that passed the cap, or the first line of the block the
        // columns refused. Everything else is the same.
        let cap = crate::findings::reading::UNREADABLE_FILE;
        let (mut p, mut s) = (summary(&parallel), summary(&sequential));
        assert_eq!(p.0, s.0, "the same scrapes kept");
        // Past the cap nothing is kept, and the bad lines after it are
        // not reported.
        let last_kept = p.0.last().map(|x| x.0).expect("scrapes kept");
        let past_cap = lines_before + store::MAX_LABEL_SETS as u64;
        assert!(last_kept < past_cap, "{last_kept} >= {past_cap}");
        for (read, found) in [(&parallel, &mut p), (&sequential, &mut s)] {
            let capped = (read.findings.iter()).filter(|f| f.code == cap).count();
            assert_eq!(capped, 1, "{:?}", read.findings);
            found.1.retain(|f| !f.1.contains("than the reader holds"));
            // No problem of a line the reader did not read (the bad lines
            // are before the new label sets and after them).
            assert!((found.1.iter()).all(|f| f.0.is_some_and(|l| l <= lines_before)));
        }
        assert_eq!(p.1, s.1);
    }
}
