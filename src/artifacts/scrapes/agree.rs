//! The reader held to serde: [`assert_agrees`] reads a file both ways and
//! compares every scrape (the unit tests on every sample line and odd
//! lines, and the `scrapes_jsonl` fuzz target).

use super::reference::RawScrape;
use std::collections::BTreeMap;

use super::{read_from, Labels, Sample, ScrapePhase, ScrapesRead, SeriesCursor};
use crate::artifacts::records::MAX_LINE_BYTES;
use crate::findings::MAX_LISTED;
use crate::stats::le_value;

/// One scrape as plain data: endpoint, times, and per family (in name
/// order) each sample's labels, value, count, sum and buckets (by bound
/// text order).
type Plain = (
    String,
    u64,
    Option<u64>,
    &'static str,
    Vec<(String, Vec<PlainSample>)>,
);

type PlainSample = (
    Labels,
    Option<f64>,
    Option<f64>,
    Option<f64>,
    Option<Vec<(Option<u64>, f64)>>,
);

fn plain_buckets(mut b: Vec<(Option<f64>, f64)>) -> Vec<(Option<u64>, f64)> {
    let mut out: Vec<(Option<u64>, f64)> = b
        .drain(..)
        .map(|(le, c)| (le.map(f64::to_bits), c))
        .collect();
    out.sort_by(|x, y| x.0.cmp(&y.0).then(x.1.total_cmp(&y.1)));
    out
}

/// What serde alone reads from `data`: each good line's scrape, by line
/// number, and how many lines are bad.
fn by_serde(data: &[u8]) -> (Vec<(u64, Plain)>, usize) {
    let mut expected = Vec::new();
    let mut bad = 0usize;
    for (i, raw_line) in data.split(|b| *b == b'\n').enumerate() {
        let line = raw_line.trim_ascii();
        if line.is_empty() || raw_line.len() > MAX_LINE_BYTES {
            bad += usize::from(raw_line.len() > MAX_LINE_BYTES);
            continue;
        }
        let mut de = serde_json::Deserializer::from_slice(line);
        match serde_path_to_error::deserialize::<_, RawScrape>(&mut de) {
            Ok(s) if de.end().is_ok() => {
                let fams = s
                    .metrics
                    .into_iter()
                    .map(|(name, xs)| {
                        let xs = xs
                            .into_iter()
                            .map(|x| {
                                let b = x.buckets.map(|m| {
                                    let les = m.into_iter().map(|(le, c)| (le_value(&le), c));
                                    plain_buckets(les.collect())
                                });
                                (x.labels, x.value, x.count, x.sum, b)
                            })
                            .collect();
                        (name, xs)
                    })
                    .collect();
                let phase = ScrapePhase::of(s.benchmark_phase.as_deref()).as_str();
                let plain = (
                    s.endpoint_url,
                    s.timestamp_ns,
                    s.request_sent_ns,
                    phase,
                    fams,
                );
                expected.push((i as u64 + 1, plain));
            }
            _ => bad += 1,
        }
    }
    (expected, bad)
}

/// What the reader read, as plain data.
fn by_reader(read: &ScrapesRead) -> Vec<(u64, Plain)> {
    read.scrapes
        .iter()
        .map(|s| {
            let fams = read
                .families(s)
                .map(|(name, xs)| {
                    let xs = xs
                        .map(|x| {
                            let b = x.buckets().map(plain_buckets);
                            (x.labels().clone(), x.value(), x.count(), x.sum(), b)
                        })
                        .collect();
                    (name.to_string(), xs)
                })
                .collect();
            (
                s.line,
                (
                    read.endpoint(s).to_string(),
                    s.timestamp_ns,
                    s.request_sent_ns,
                    s.phase.as_str(),
                    fams,
                ),
            )
        })
        .collect()
}

/// Panics unless every line of `data` reads the same through the reader
/// (scanner, columns, bucket coding) as through serde alone: the same
/// scrapes with the same samples, the same bad lines.
pub fn assert_agrees(data: &[u8]) {
    let Ok(read) = read_from(data) else { return };
    let (expected, bad) = by_serde(data);
    let got = by_reader(&read);
    assert_eq!(got.len(), expected.len(), "scrapes read");
    for (g, e) in got.iter().zip(&expected) {
        assert!(
            format!("{g:?}") == format!("{e:?}"),
            "line {}: read {g:?}\nserde {e:?}",
            e.0
        );
    }
    let findings = read.findings.iter().filter(|f| f.line.is_some()).count();
    assert!(
        bad.min(MAX_LISTED) <= findings + 1,
        "{bad} bad lines, {findings} findings"
    );
    cursors_agree(&read);
}

/// Panics unless [`super::Sample::buckets_after`] gives each row's buckets
/// as [`super::Sample::buckets`] does, whatever order a cursor is taken
/// through the rows in: each series' rows forward, backward and in
/// swapped pairs, and every row of the file in a scrambled order with
/// repeats (a cursor holds rows by their number, so any row is answered).
fn cursors_agree(read: &ScrapesRead) {
    let mut series: BTreeMap<(u32, u32, u32), Vec<Sample>> = BTreeMap::new();
    for s in &read.scrapes {
        for (family, _, xs) in read.families_by_id(s) {
            for x in xs {
                series
                    .entry((s.endpoint, family, x.labels_id()))
                    .or_default()
                    .push(x);
            }
        }
    }
    let check = |order: &mut dyn Iterator<Item = Sample>| {
        let mut cursor = SeriesCursor::default();
        for x in order {
            let after = x.buckets_after(&mut cursor).map(|(les, counts)| {
                assert_eq!(les.len(), counts.len());
                les.iter().copied().zip(counts.iter().copied()).collect()
            });
            let bits = |b: Option<Vec<(Option<f64>, f64)>>| {
                b.map(|b| {
                    (b.into_iter())
                        .map(|(le, c)| (le.map(f64::to_bits), c.to_bits()))
                        .collect::<Vec<_>>()
                })
            };
            assert_eq!(bits(after), bits(x.buckets()), "row of {:?}", x.labels());
        }
    };
    for rows in series.values() {
        check(&mut rows.iter().copied());
        check(&mut rows.iter().rev().copied());
        let swapped = rows.chunks(2).flat_map(|p| p.iter().rev().copied());
        check(&mut swapped.collect::<Vec<_>>().into_iter());
    }
    let all: Vec<Sample> = series.into_values().flatten().collect();
    let mut rng = fastrand::Rng::with_seed(13);
    let mut scrambled = (0..all.len() * 2).map(|_| all[rng.usize(..all.len())]);
    if !all.is_empty() {
        check(&mut scrambled);
    }
}
