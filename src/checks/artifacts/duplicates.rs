//! Records whose `x_request_id` an earlier record already used.
//!
//! One map of every id is as large as the records' ids (about 8 MB for
//! 400,000 records), so on a gigabyte run nearly every insert was a cache
//! miss, most of the check's time. The ids' hashes are first dealt, in file
//! order, into [`PARTS`] lists by their top bits; each list is then searched
//! for repeats with a map that fits in cache, the lists in parallel. A hash
//! met twice is a repeat when the two records' ids are equal; two different
//! ids with one 64-bit hash send their list to a map of the ids themselves.

use std::collections::hash_map::Entry;
use std::collections::HashMap;
use std::hash::BuildHasher;

use rayon::prelude::*;

use crate::artifacts::records::{Id, Record};

/// How many lists the hashes are dealt into (a power of two).
const PARTS: usize = 256;

/// foldhash: several times faster than SipHash on these ids, and seeded per
/// process, so a file cannot be crafted to make the lookups collide.
type State = foldhash::fast::RandomState;

/// A repeated id: the id, the line of its first use, the line of this one.
pub type Duplicate<'a> = (&'a Id, u64, u64);

/// Every record whose `x_request_id` an earlier record used, in file order,
/// each with the line of the first record that used it.
pub fn duplicate_ids(records: &[Record]) -> Vec<Duplicate<'_>> {
    let state = State::default();
    duplicate_ids_by(records, |id| state.hash_one(id))
}

/// [`duplicate_ids`] with the ids hashed by `hash` (a test can make it
/// collide).
fn duplicate_ids_by<'a>(records: &'a [Record], hash: impl Fn(&Id) -> u64) -> Vec<Duplicate<'a>> {
    let shift = u64::BITS - PARTS.trailing_zeros();
    let mut parts: Vec<Vec<(u64, usize)>> = vec![Vec::new(); PARTS];
    for (i, r) in records.iter().enumerate() {
        if let Some(id) = &r.x_request_id {
            let h = hash(id);
            // The top bits choose the list; the map inside it hashes all 64.
            parts[(h >> shift) as usize].push((h, i));
        }
    }
    // Per list: (index of the repeat, index of the first use).
    let mut found: Vec<(usize, usize)> = parts
        .par_iter()
        .flat_map_iter(|part| repeats(records, part))
        .collect();
    found.sort_unstable();
    found
        .into_iter()
        .filter_map(|(i, first)| {
            let id = records[i].x_request_id.as_ref()?;
            Some((id, records[first].line, records[i].line))
        })
        .collect()
}

/// The repeats in one list of `(hash, record index)`, in file order: by hash,
/// the ids compared where a hash repeats; by the ids themselves if two
/// different ids share a hash.
fn repeats(records: &[Record], part: &[(u64, usize)]) -> Vec<(usize, usize)> {
    let id = |i: usize| records[i].x_request_id.as_ref();
    let mut first: HashMap<u64, usize, State> =
        HashMap::with_capacity_and_hasher(part.len(), State::default());
    let mut out = Vec::new();
    for &(h, i) in part {
        match first.entry(h) {
            Entry::Vacant(slot) => {
                slot.insert(i);
            }
            Entry::Occupied(f) if id(*f.get()) == id(i) => out.push((i, *f.get())),
            Entry::Occupied(_) => return repeats_by_id(records, part),
        }
    }
    out
}

/// [`repeats`] by the ids themselves.
fn repeats_by_id(records: &[Record], part: &[(u64, usize)]) -> Vec<(usize, usize)> {
    let mut first: HashMap<&Id, usize, State> =
        HashMap::with_capacity_and_hasher(part.len(), State::default());
    let mut out = Vec::new();
    for &(_, i) in part {
        let Some(id) = records[i].x_request_id.as_ref() else {
            continue;
        };
        match first.entry(id) {
            Entry::Vacant(slot) => {
                slot.insert(i);
            }
            Entry::Occupied(f) => out.push((i, *f.get())),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::artifacts::records::Values;

    /// The definition: one map of every id, in file order.
    fn one_map(records: &[Record]) -> Vec<Duplicate<'_>> {
        let mut first: HashMap<&Id, u64> = HashMap::new();
        let mut out = Vec::new();
        for r in records {
            if let Some(id) = r.x_request_id.as_ref() {
                match first.entry(id) {
                    Entry::Occupied(f) => out.push((id, *f.get(), r.line)),
                    Entry::Vacant(slot) => {
                        slot.insert(r.line);
                    }
                }
            }
        }
        out
    }

    #[test]
    fn repeats_are_found_as_one_map_of_every_id_finds_them() {
        let mut x = 99u64;
        let mut next = move || {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            x >> 33
        };
        for (n, distinct) in [(0, 1), (1, 1), (50, 3), (2000, 40), (20_000, 15_000)] {
            // UUIDs, short ids and long ids, repeated at random, some absent.
            let records: Vec<Record> = (0..n)
                .map(|i| {
                    let k = next() % distinct;
                    let mut r = Record::with_values(Values::default());
                    r.line = i + 1;
                    r.x_request_id = match k % 4 {
                        0 => None,
                        1 => Some(Id::new(&format!("{k:08x}-0000-4000-8000-{k:012x}"))),
                        2 => Some(Id::new(&format!("req-{k}"))),
                        _ => Some(Id::new(&format!("a-rather-long-request-id-number-{k}"))),
                    };
                    r
                })
                .collect();
            let want = one_map(&records);
            assert_eq!(duplicate_ids(&records), want, "{n} records");
            // Every id on one hash, or on one of two: the lists fall back to
            // the ids themselves, with the same answer.
            assert_eq!(duplicate_ids_by(&records, |_| 7), want, "{n}, one hash");
            let two = |id: &Id| (id.to_string().len() as u64 % 2) << 63;
            assert_eq!(duplicate_ids_by(&records, two), want, "{n}, two hashes");
        }
    }
}
