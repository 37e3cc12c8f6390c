//! Observers: which series of a server family, on which endpoints, together
//! see every request once.
//!
//! A request-scoped family (one observation per request) is exported as
//! series per scrape endpoint and label set. What the series add up to
//! depends on the deployment, and the labels and endpoints say it:
//! - labels of kind `kind` (`finished_reason`, `mode`) split one observer's
//!   observations: summed;
//! - `partition` labels (vLLM's `engine`, SGLang's `dp_rank`) split the
//!   requests between engines: summed, but kept apart so a finding can name
//!   the engine;
//! - `replica` labels (`tp_rank`, `pp_rank`, `moe_ep_rank`) are ranks that
//!   each see every request of their partition: the k-th rank of every
//!   partition together is one observer (a "slot"), never summed with the
//!   others;
//! - `identity` labels (`model_name`, `dynamo_component`) and endpoints
//!   name observers of their own.
//!
//! The label meanings are data ([`crate::frameworks::LABEL_ROLES`]). A
//! label not in the table is read both ways (summed, or as a replica rank),
//! and endpoints both ways: each sees every request (disaggregated prefill
//! and decode workers, a frontend and its workers) or they split the
//! requests (replicas behind a load balancer). The reading whose observers
//! deviate least from the request counts is kept ([`observers`]), so the
//! verdict never depends on a guess the counts contradict. An observer
//! whose series never moved in any phase is idle: not compared.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use crate::artifacts::records::Phase;
use crate::artifacts::server_metrics::{Family, ServerMetricsExport};
use crate::frameworks::{
    label_role, Framework, LabelRole, DECODE_ROLES, FRONTEND_PREFIXES, PREFILL_ROLES, ROLE_LABELS,
};

pub use crate::artifacts::Labels;

/// The role of each scrape endpoint: the value of a role label on any of
/// its series (`prefill`, `decode`; Dynamo's `backend` reads as `decode`),
/// else `frontend` when it exports frontend families. Endpoints with
/// neither have no role.
pub fn endpoint_roles(server: &ServerMetricsExport) -> BTreeMap<String, String> {
    let mut roles: BTreeMap<String, String> = BTreeMap::new();
    let mut frontends: BTreeSet<String> = BTreeSet::new();
    let sections = [Some(&server.metrics), server.warmup_metrics.as_ref()];
    for (name, fam) in sections.into_iter().flatten().flat_map(|f| f.iter()) {
        for s in &fam.series {
            let Some(ep) = s.endpoint_url.as_deref() else {
                continue;
            };
            if FRONTEND_PREFIXES.iter().any(|p| name.starts_with(p)) {
                frontends.insert(ep.to_string());
            }
            if roles.contains_key(ep) {
                continue;
            }
            if let Some(v) = ROLE_LABELS.iter().find_map(|l| s.labels.get(*l)) {
                roles.insert(ep.to_string(), normalise_role(v));
            }
        }
    }
    for ep in frontends {
        roles.entry(ep).or_insert_with(|| "frontend".into());
    }
    roles
}

/// `prefill` and `decode` under their usual spellings; other values as they are.
pub fn normalise_role(v: &str) -> String {
    let v = v.to_ascii_lowercase();
    if PREFILL_ROLES.contains(&v.as_str()) {
        "prefill".into()
    } else if DECODE_ROLES.contains(&v.as_str()) {
        "decode".into()
    } else {
        v
    }
}

closed_set! {
    /// How a family's endpoints were read.
    pub enum EndpointMode {
        /// Each endpoint sees every request (or there is one endpoint).
        Each => "each",
        /// The endpoints split the requests between them.
        Split => "split",
    }
}

/// One series as an observer holds it: its endpoint and the labels that
/// are not summed over (kind labels dropped).
type Member = (String, Labels);

/// One partition of an observer: the labels naming it and its series.
#[derive(Debug, Clone, PartialEq)]
pub struct Partition {
    /// The partition labels (e.g. `engine="1"`) and, for a replica slot,
    /// the replica labels of this partition's rank.
    pub labels: Labels,
    /// Sorted and without repeats (as a set of members iterates), so a
    /// series is found by a binary search that allocates nothing.
    members: Vec<Member>,
}

impl Partition {
    /// Whether the series (`endpoint`, `labels` with the summed labels
    /// left out) is one of its members: the comparison of [`Member`]'s
    /// order (endpoint, then the labels' pairs in order) without building
    /// the member.
    fn has(&self, endpoint: &str, labels: &Labels, summed: &BTreeSet<String>) -> bool {
        let kept = || {
            (labels.iter())
                .filter(|(k, _)| !summed.contains(*k))
                .map(|(k, v)| (k.as_str(), v.as_str()))
        };
        (self.members)
            .binary_search_by(|(ep, l)| {
                let pairs = l.iter().map(|(k, v)| (k.as_str(), v.as_str()));
                ep.as_str().cmp(endpoint).then_with(|| pairs.cmp(kept()))
            })
            .is_ok()
    }
}

/// Series that together see every request once.
#[derive(Debug, Clone, PartialEq)]
pub struct Observer {
    /// The endpoint, when the observer lives on one; `None` when it sums
    /// several (endpoints splitting the requests).
    pub endpoint: Option<String>,
    /// The labels that single it out among the family's observers on its
    /// endpoint: identity labels where there are several identities, and
    /// `replica` (`"1 of 2"`) where there are several replica slots.
    pub key: Labels,
    /// Its partitions, in label order (one, with no labels, when unpartitioned).
    pub partitions: Vec<Partition>,
    /// Label names summed over as kinds.
    summed: BTreeSet<String>,
}

impl Observer {
    /// Whether the series (`endpoint`, `labels`) is one of its own.
    pub fn contains(&self, endpoint: &str, labels: &Labels) -> bool {
        (self.partitions.iter()).any(|p| p.has(endpoint, labels, &self.summed))
    }

    /// Whether the series belongs to partition `i`.
    pub fn in_partition(&self, i: usize, endpoint: &str, labels: &Labels) -> bool {
        (self.partitions.get(i)).is_some_and(|p| p.has(endpoint, labels, &self.summed))
    }

    /// Its observations in a phase's family (a histogram's count, a
    /// counter's total, summed over its series). `None` when the family is
    /// not in the phase or a series lacks the figure.
    pub fn count(&self, fam: Option<&Family>) -> Option<f64> {
        self.sum_where(fam, |ep, l| self.contains(ep, l))
    }

    /// The same for one partition.
    pub fn partition_count(&self, i: usize, fam: Option<&Family>) -> Option<f64> {
        self.sum_where(fam, |ep, l| self.in_partition(i, ep, l))
    }

    fn sum_where(&self, fam: Option<&Family>, keep: impl Fn(&str, &Labels) -> bool) -> Option<f64> {
        let fam = fam?;
        fam.series
            .iter()
            .filter(|s| keep(s.endpoint_url.as_deref().unwrap_or(""), &s.labels))
            .map(|s| s.observations(fam.kind))
            .sum()
    }

    /// Its endpoints.
    pub fn endpoints(&self) -> BTreeSet<&str> {
        self.partitions
            .iter()
            .flat_map(|p| p.members.iter().map(|m| m.0.as_str()))
            .collect()
    }

    /// `key` in Prometheus notation (`{tp_rank="0"}`); empty without labels.
    pub fn describe(&self) -> String {
        if self.key.is_empty() {
            return String::new();
        }
        crate::text::labels(&self.key)
    }
}

/// How a family was read, and its observers.
#[derive(Debug, Clone, PartialEq)]
pub struct Observers {
    /// Whether endpoints each see every request or split them.
    pub endpoints: EndpointMode,
    /// Labels not in the table, and how they were read (`kind`: summed, or
    /// `replica`).
    pub unknown_labels: BTreeMap<String, LabelRole>,
    /// The observers with traffic.
    pub busy: Vec<Observer>,
    /// Observers whose series never moved.
    pub idle: Vec<Observer>,
}

/// What a reading is held to: the deviation of an observer's count in a
/// phase from the phase's requests (0 inside the expected range).
pub trait PhaseExpectation {
    /// Signed deviation of `found` in `phase`; `None` when unknown.
    fn deviation(&self, phase: Phase, found: f64) -> Option<f64>;
}

/// Splits a family (both phases' sections) into observers, choosing the
/// reading of unknown labels and of the endpoints that deviates least from
/// `expected`. Ties keep the first reading: unknown labels summed,
/// endpoints each seeing every request.
pub fn observers(
    framework: Option<Framework>,
    profiling: Option<&Family>,
    warmup: Option<&Family>,
    expected: &impl PhaseExpectation,
) -> Observers {
    let series: BTreeSet<Member> = [profiling, warmup]
        .into_iter()
        .flatten()
        .flat_map(|f| f.series.iter())
        .map(|s| (s.endpoint_url.clone().unwrap_or_default(), s.labels.clone()))
        .collect();
    let names: BTreeSet<&String> = series.iter().flat_map(|(_, l)| l.keys()).collect();
    let unknown: Vec<String> = names
        .into_iter()
        .filter(|n| label_role(framework, n).is_none())
        .cloned()
        .collect();
    let endpoints: BTreeSet<&str> = series.iter().map(|(e, _)| e.as_str()).collect();
    let unknown_readings: &[LabelRole] = if unknown.is_empty() {
        &[LabelRole::Kind]
    } else {
        &[LabelRole::Kind, LabelRole::Replica]
    };
    let modes: &[EndpointMode] = if endpoints.len() > 1 {
        &[EndpointMode::Each, EndpointMode::Split]
    } else {
        &[EndpointMode::Each]
    };
    let mut best: Option<(f64, Observers)> = None;
    for &u in unknown_readings {
        for &mode in modes {
            let read = |n: &str| label_role(framework, n).unwrap_or(u);
            let all = build(&series, mode, read);
            let (busy, idle): (Vec<Observer>, Vec<Observer>) = all
                .into_iter()
                .partition(|o| moved(o, profiling) || moved(o, warmup));
            let dev: f64 = busy
                .iter()
                .flat_map(|o| {
                    [(Phase::Profiling, profiling), (Phase::Warmup, warmup)]
                        .into_iter()
                        .filter_map(|(ph, fam)| expected.deviation(ph, o.count(fam)?))
                })
                .map(f64::abs)
                .sum();
            if best.as_ref().is_none_or(|(d, _)| dev < *d) {
                let unknown_labels = unknown.iter().map(|n| (n.clone(), u)).collect();
                best = Some((
                    dev,
                    Observers {
                        endpoints: mode,
                        unknown_labels,
                        busy,
                        idle,
                    },
                ));
            }
        }
    }
    best.map(|b| b.1).unwrap_or(Observers {
        endpoints: EndpointMode::Each,
        unknown_labels: BTreeMap::new(),
        busy: Vec::new(),
        idle: Vec::new(),
    })
}

/// Whether any of the observer's series has observations in the phase.
fn moved(o: &Observer, fam: Option<&Family>) -> bool {
    let Some(fam) = fam else { return false };
    fam.series.iter().any(|s| {
        o.contains(s.endpoint_url.as_deref().unwrap_or(""), &s.labels)
            && s.observations(fam.kind).unwrap_or(0.0) > 0.0
    })
}

/// Orders label values as numbers where both are numbers (`tp_rank` 2 < 10).
fn value_order(a: &Labels, b: &Labels) -> std::cmp::Ordering {
    let key = |l: &Labels| -> Vec<(Option<i64>, String)> {
        l.values()
            .map(|v| (v.parse::<i64>().ok(), v.clone()))
            .collect()
    };
    key(a).cmp(&key(b))
}

fn pick(labels: &Labels, read: &impl Fn(&str) -> LabelRole, role: LabelRole) -> Labels {
    labels
        .iter()
        .filter(|(k, _)| read(k) == role)
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// The observers of one reading.
fn build(
    series: &BTreeSet<Member>,
    mode: EndpointMode,
    read: impl Fn(&str) -> LabelRole,
) -> Vec<Observer> {
    // Group: (endpoint if each, identity labels) -> partition -> replica -> members.
    type Slots = BTreeMap<Labels, BTreeSet<Member>>;
    let mut groups: BTreeMap<(Option<String>, Labels), BTreeMap<Labels, Slots>> = BTreeMap::new();
    let mut summed: BTreeSet<String> = BTreeSet::new();
    for (ep, labels) in series {
        for k in labels.keys().filter(|k| read(k) == LabelRole::Kind) {
            summed.insert(k.clone());
        }
        let identity = pick(labels, &read, LabelRole::Identity);
        let partition = pick(labels, &read, LabelRole::Partition);
        let replica = pick(labels, &read, LabelRole::Replica);
        let kept: Labels = labels
            .iter()
            .filter(|(k, _)| read(k) != LabelRole::Kind)
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let g = ((mode == EndpointMode::Each).then(|| ep.clone()), identity);
        groups
            .entry(g)
            .or_default()
            .entry(partition)
            .or_default()
            .entry(replica)
            .or_default()
            .insert((ep.clone(), kept));
    }
    let identities_per_endpoint =
        |ep: &Option<String>| groups.keys().filter(|(e, _)| e == ep).count();
    let mut out = Vec::new();
    for ((ep, identity), partitions) in &groups {
        let slots = partitions.values().map(BTreeMap::len).max().unwrap_or(1);
        for j in 0..slots {
            let mut key = if identities_per_endpoint(ep) > 1 {
                identity.clone()
            } else {
                Labels::new()
            };
            if slots > 1 {
                key.insert("replica".into(), format!("{} of {slots}", j + 1));
            }
            let parts: Vec<Partition> = partitions
                .iter()
                .filter_map(|(plabels, replicas)| {
                    let mut ordered: Vec<(&Labels, &BTreeSet<Member>)> = replicas.iter().collect();
                    ordered.sort_by(|a, b| value_order(a.0, b.0));
                    let (rlabels, members) = ordered.get(j)?;
                    let mut labels = plabels.clone();
                    labels.extend(rlabels.iter().map(|(k, v)| (k.clone(), v.clone())));
                    Some(Partition {
                        labels,
                        members: members.iter().cloned().collect(),
                    })
                })
                .collect();
            out.push(Observer {
                endpoint: ep.clone().or_else(|| {
                    let eps: BTreeSet<&String> = parts
                        .iter()
                        .flat_map(|p| p.members.iter().map(|m| &m.0))
                        .collect();
                    (eps.len() == 1)
                        .then(|| eps.into_iter().next().cloned())
                        .flatten()
                }),
                key,
                partitions: parts,
                summed: summed.clone(),
            });
        }
    }
    out
}

/// A plain summary of an observers reading for reports.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ReadingSummary {
    /// `each` or `split`.
    pub endpoints: EndpointMode,
    /// Unknown labels and how they were read.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub unknown_labels: BTreeMap<String, LabelRole>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::artifacts::server_metrics::{MetricType, Series, Stats};

    struct Exp(f64, f64);
    impl PhaseExpectation for Exp {
        fn deviation(&self, phase: Phase, found: f64) -> Option<f64> {
            Some(
                found
                    - if phase == Phase::Profiling {
                        self.0
                    } else {
                        self.1
                    },
            )
        }
    }

    /// (endpoint, labels, count) of one series.
    type Row<'a> = (&'a str, &'a [(&'a str, &'a str)], f64);

    fn fam(series: &[Row]) -> Family {
        Family {
            kind: MetricType::Histogram,
            unit: None,
            series: series
                .iter()
                .map(|(ep, labels, n)| Series {
                    endpoint_url: Some(ep.to_string()),
                    labels: labels
                        .iter()
                        .map(|(k, v)| (k.to_string(), v.to_string()))
                        .collect(),
                    stats: Stats {
                        count: Some(*n),
                        ..Default::default()
                    },
                    ..Default::default()
                })
                .collect(),
        }
    }

    #[test]
    fn dp_engines_are_one_observer_with_two_partitions() {
        let p = fam(&[
            ("u", &[("engine", "0")], 6.0),
            ("u", &[("engine", "1")], 7.0),
        ]);
        let w = fam(&[
            ("u", &[("engine", "0")], 2.0),
            ("u", &[("engine", "1")], 1.0),
        ]);
        let o = observers(Some(Framework::Vllm), Some(&p), Some(&w), &Exp(12.0, 4.0));
        assert_eq!(o.busy.len(), 1);
        assert_eq!(o.busy[0].count(Some(&p)), Some(13.0));
        assert_eq!(o.busy[0].partitions.len(), 2);
        assert_eq!(o.busy[0].partition_count(1, Some(&p)), Some(7.0));
    }

    #[test]
    fn tp_replicas_are_slots_and_dp_ranks_partitions() {
        let s = |dp: &'static str, tp: &'static str, n| {
            ("u", vec![("dp_rank", dp), ("tp_rank", tp)], n)
        };
        let rows = [
            s("0", "0", 6.0),
            s("0", "1", 6.0),
            s("1", "2", 6.0),
            s("1", "3", 6.0),
        ];
        let p = fam(&rows
            .iter()
            .map(|(e, l, n)| (*e, l.as_slice(), *n))
            .collect::<Vec<_>>());
        let o = observers(Some(Framework::Sglang), Some(&p), None, &Exp(12.0, 4.0));
        assert_eq!(o.busy.len(), 2, "two slots");
        for obs in &o.busy {
            assert_eq!(obs.count(Some(&p)), Some(12.0));
        }
    }

    #[test]
    fn disaggregated_endpoints_each_see_every_request_and_replicas_behind_a_balancer_split() {
        let p = fam(&[("prefill", &[], 12.0), ("decode", &[], 12.0)]);
        let o = observers(None, Some(&p), None, &Exp(12.0, 4.0));
        assert_eq!(o.endpoints, EndpointMode::Each);
        assert_eq!(o.busy.len(), 2);
        let p = fam(&[("a", &[], 5.0), ("b", &[], 7.0)]);
        let o = observers(None, Some(&p), None, &Exp(12.0, 4.0));
        assert_eq!(o.endpoints, EndpointMode::Split);
        assert_eq!(o.busy.len(), 1);
        assert_eq!(o.busy[0].endpoint, None);
    }

    #[test]
    fn an_unknown_label_is_read_the_way_the_counts_fit_and_idle_series_are_apart() {
        // `shard` unknown: each shard sees every request.
        let p = fam(&[
            ("u", &[("shard", "a")], 12.0),
            ("u", &[("shard", "b")], 12.0),
            ("idle", &[], 0.0),
        ]);
        let o = observers(None, Some(&p), None, &Exp(12.0, 4.0));
        assert_eq!(o.unknown_labels["shard"], LabelRole::Replica);
        assert_eq!(o.busy.len(), 2);
        assert_eq!(o.idle.len(), 1);
        // `reason` unknown: a split of one observer.
        let p = fam(&[
            ("u", &[("reason", "a")], 5.0),
            ("u", &[("reason", "b")], 7.0),
        ]);
        let o = observers(None, Some(&p), None, &Exp(12.0, 4.0));
        assert_eq!(o.unknown_labels["reason"], LabelRole::Kind);
        assert_eq!(o.busy.len(), 1);
    }
}
