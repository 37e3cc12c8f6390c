//! The state order of an endpoint's scrapes: two scrapes in flight
//! together can be answered out of order, and of the two orders (by the
//! answer's arrival, by send time) the one along which fewer cumulative
//! series go down is the one the server's state followed.

use super::{Scrape, ScrapesRead};

/// How many cumulative series go down from the first scrape of each pair
/// to the second: those the export types as counters or histograms, or
/// (without types) histograms.
fn drops<'s>(read: &ScrapesRead, pairs: impl Iterator<Item = (&'s Scrape, &'s Scrape)>) -> usize {
    // Whether each family (by id) only grows, decided once per family; an
    // untyped export leaves it to each sample (histograms grow).
    let typed: Vec<bool> = (0..read.store.family_count() as u32)
        .map(|id| {
            read.cumulative
                .contains(crate::frameworks::canonical(read.store.family(id)))
        })
        .collect();
    let untyped = read.cumulative.is_empty();
    let mut n = 0;
    for (a, b) in pairs {
        let keep = |id: u32| untyped || typed[id as usize];
        let pair = [a, b];
        // Only a fall counts: `v < p`.
        read.walk_series(
            &pair,
            keep,
            |_| true,
            0.0,
            |i, _, x, before| {
                if i == 0 || (untyped && x.count().is_none()) {
                    return;
                }
                let prev = before.and_then(|p| p.cumulative());
                n += usize::from(matches!((prev, x.cumulative()), (Some(p), Some(v)) if v < p));
            },
        );
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
pub fn state_order<'s>(read: &ScrapesRead, list: &mut [(&'s Scrape, u64)]) {
    list.sort_by_key(|(s, _)| (s.timestamp_ns, s.line));
    let mut sent: Vec<(&Scrape, u64)> = list.to_vec();
    sent.sort_by_key(|(s, _)| s.order_key());
    let differs = sent
        .iter()
        .zip(list.iter())
        .any(|(a, b)| a.0.line != b.0.line);
    // The pairs both orders share go down alike: only the others decide.
    let only = |x: &[(&'s Scrape, u64)], y: &[(&Scrape, u64)]| {
        let shared: std::collections::HashSet<(u64, u64)> =
            y.windows(2).map(|w| (w[0].0.line, w[1].0.line)).collect();
        x.windows(2)
            .map(|w| (w[0].0, w[1].0))
            .filter(move |(a, b)| !shared.contains(&(a.line, b.line)))
            .collect::<Vec<_>>()
    };
    if differs
        && drops(read, only(&sent, list).into_iter()) < drops(read, only(list, &sent).into_iter())
    {
        list.copy_from_slice(&sent);
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
