//! The state order of an endpoint's scrapes: two scrapes in flight
//! together can be answered out of order, and of the two orders (by the
//! answer's arrival, by send time) the one along which fewer cumulative
//! series go down is the one the server's state followed.

use super::rows::HAS_COUNT;
use super::walk::{Counted, HAS_CUMULATIVE};
use super::{Scrape, ScrapesRead};

/// foldhash: the layouts' ids are small integers.
type HashMap<K, V> = std::collections::HashMap<K, V, foldhash::fast::RandomState>;

/// Which families (by id) only grow: those the export types as counters or
/// histograms, decided once per family; and whether the export typed none
/// (then it is left to each sample: histograms grow).
fn growing(read: &ScrapesRead) -> (Vec<bool>, bool) {
    let typed = (0..read.store.family_count() as u32)
        .map(|id| {
            read.cumulative
                .contains(crate::frameworks::canonical(read.store.family(id)))
        })
        .collect();
    (typed, read.cumulative.is_empty())
}

/// How many cumulative series go down from `x` to `y`, by a walk of the
/// pair (any two layouts): those of the families `keep` accepts, only
/// histograms when `untyped`. Only a fall counts: `v < p`.
fn walked_falls(
    read: &ScrapesRead,
    x: &Scrape,
    y: &Scrape,
    keep: impl Fn(u32) -> bool,
    untyped: bool,
) -> usize {
    let mut n = 0;
    read.walk_series(
        &[x, y],
        keep,
        |_| true,
        Some(0.0),
        |i, _, now, before| {
            if i == 0 || (untyped && now.count().is_none()) {
                return;
            }
            let prev = before.and_then(|p| p.cumulative());
            n += usize::from(matches!((prev, now.cumulative()), (Some(p), Some(v)) if v < p));
        },
    );
    n
}

/// How many cumulative series go down from the first scrape of each pair
/// to the second: those the export types as counters or histograms, or
/// (without types) histograms.
fn drops<'s>(read: &ScrapesRead, pairs: impl Iterator<Item = (&'s Scrape, &'s Scrape)>) -> usize {
    let (typed, untyped) = growing(read);
    let keep = |id: u32| untyped || typed[id as usize];
    let a = read.store.cumulatives();
    // Only histograms (their counts) without types.
    let wanted = if untyped { HAS_COUNT } else { HAS_CUMULATIVE };
    // Per layout: the positions of its kept cumulative quantities.
    let mut counted: HashMap<u32, Counted> = HashMap::default();
    let mut n = 0;
    for (x, y) in pairs {
        if x.layout == y.layout {
            // Every series at its position in both: a comparison of two
            // columns of numbers, as `walk_series` compares them (a fall
            // from an infinite value is none).
            let c = (counted.entry(x.layout))
                .or_insert_with(|| Counted::of(read.store.layout(x.layout), &keep, wanted));
            n += c.count_falls(a, (y.first_row as usize, x.first_row as usize), 0.0);
            continue;
        }
        n += walked_falls(read, x, y, keep, untyped);
    }
    n
}

/// Sorts one endpoint's scrapes into state order and sets each one's state
/// time. A server snapshots its state somewhere between receiving a scrape
/// and answering it, so two scrapes in flight together can be answered out
/// of order either way: a server that snapshots on receipt and answers
/// late puts the later-sent one first; one that is slow to start handling
/// snapshots late. Counters and histograms only grow, so of the two orders
/// (by the answer's arrival, by send time) the one along which fewer of
/// their series go down is the state order; ties keep arrival order. In
/// send order a scrape's state time is lowered to the earliest answer of
/// any scrape sent after it.
pub fn state_order(read: &ScrapesRead, list: &mut [(&Scrape, u64)]) {
    list.sort_by_key(|(s, _)| (s.timestamp_ns, s.line));
    // Send order, as positions in arrival order (a stable sort: ties keep
    // arrival order), and where each scrape stands in it.
    let mut sent: Vec<usize> = (0..list.len()).collect();
    sent.sort_by_key(|&i| list[i].0.order_key());
    let mut rank = vec![0; sent.len()];
    for (j, &i) in sent.iter().enumerate() {
        rank[i] = j;
    }
    let differs = sent.iter().enumerate().any(|(j, &i)| i != j);
    // The pairs both orders share go down alike: only the others decide.
    let by_send = || {
        (sent.windows(2))
            .filter(|w| w[1] != w[0] + 1)
            .map(|w| (list[w[0]].0, list[w[1]].0))
    };
    let by_arrival = || {
        (1..list.len())
            .filter(|&i| rank[i] != rank[i - 1] + 1)
            .map(|i| (list[i - 1].0, list[i].0))
    };
    // The two counts at once (each a walk over its own pairs: an
    // endpoint's order is otherwise one worker's, the other idle when a
    // run has one endpoint).
    let fewer_by_send = differs && {
        let (send, arrival) = rayon::join(|| drops(read, by_send()), || drops(read, by_arrival()));
        send < arrival
    };
    if fewer_by_send {
        let in_send_order: Vec<(&Scrape, u64)> = sent.iter().map(|&i| list[i]).collect();
        list.copy_from_slice(&in_send_order);
        let mut earliest_after = u64::MAX;
        for (s, t) in list.iter_mut().rev() {
            *t = s.timestamp_ns.min(earliest_after);
            earliest_after = *t;
        }
    } else {
        for (s, t) in list.iter_mut() {
            *t = s.timestamp_ns;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What `drops` counted for every pair before it compared columns: a
    /// walk of each pair.
    fn walked(read: &ScrapesRead, pairs: &[(&Scrape, &Scrape)]) -> usize {
        let (typed, untyped) = growing(read);
        let keep = |id: u32| untyped || typed[id as usize];
        (pairs.iter())
            .map(|&(x, y)| walked_falls(read, x, y, keep, untyped))
            .sum()
    }

    #[test]
    fn drops_by_columns_count_what_the_walk_counts() {
        let runs = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("sample-artifacts/runs");
        let (mut compared, mut fell) = (0, 0);
        for dir in std::fs::read_dir(runs).expect("sample runs").flatten() {
            let dir = dir.path();
            let Ok(file) = std::fs::File::open(dir.join(super::super::FILE)) else {
                continue;
            };
            let mut read = super::super::read_from(file).expect("raw scrapes");
            let export = std::fs::read(dir.join("server_metrics_export.json"))
                .ok()
                .and_then(|b| {
                    serde_json::from_slice::<crate::artifacts::server_metrics::ServerMetricsExport>(
                        &b,
                    )
                    .ok()
                });
            // Typed by the export, then untyped (histograms only).
            let typings = [
                export.map(|e| e.cumulative_families()).unwrap_or_default(),
                Default::default(),
            ];
            for typing in typings {
                read.set_cumulative(typing);
                for list in read.by_endpoint().values() {
                    // Each pair both ways: backwards, what grew falls.
                    let pairs: Vec<(&Scrape, &Scrape)> = (list.windows(2))
                        .flat_map(|w| [(w[0].0, w[1].0), (w[1].0, w[0].0)])
                        .collect();
                    let n = drops(&read, pairs.iter().copied());
                    assert_eq!(n, walked(&read, &pairs), "{}", dir.display());
                    compared += pairs.len();
                    fell += n;
                }
            }
        }
        assert!(
            compared > 1000 && fell > 100,
            "{compared} pairs, {fell} falls"
        );
    }
}
