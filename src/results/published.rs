//! The numbers a run publishes, each with a verdict and its value over what
//! it claims to be over: the one place the checks' figures and findings
//! become "can I publish TTFT p99 = X, and if not, what is the right
//! number?".
//!
//! Each check says which published figures it looked at ([`Figure`],
//! through [`super::CheckReport::figures`]): that it vouches for one, or
//! that it could not tell, and why. Each finding says what its cause moves
//! ([`Moved`], in [`Finding::metrics`]). [`build`] joins them: a figure is
//! `wrong` when the file disagrees with its own records, `biased` when a
//! finding at warning or above moves it, `cannot_tell` when a check that
//! touches it could not look (or no check did), else `trusted`.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::findings::{Code, Finding, MoveKind, Moved, Over, Severity};

/// The name of the prefix-cache hit rates among the published figures
/// (`stat`: `client` or `server`).
pub const HIT_RATE: &str = "prefix_cache_hit_rate";

/// The statistics of a per-request metric people quote, as
/// `profile_export_aiperf.json` spells them.
pub const QUOTED_STATS: [&str; 4] = ["avg", "p50", "p90", "p99"];

/// The run-level throughputs people quote (one value each, `avg`).
pub const THROUGHPUTS: [&str; 2] = ["output_token_throughput", "request_throughput"];

closed_set! {
    /// What a published number is worth.
    pub enum Verdict {
        /// Every check that can touch it looked and found nothing beyond
        /// tolerance.
        Trusted => "trusted",
        /// A finding moves it beyond tolerance: publish `corrected`.
        Biased => "biased",
        /// The file disagrees with its own records.
        Wrong => "wrong",
        /// It could not be verified (`reason` says why).
        CannotTell => "cannot_tell",
    }
}

/// What a check did with a published figure.
#[derive(Debug, Clone, PartialEq)]
pub enum Looked {
    /// It looked; anything that moves the figure is a finding.
    Vouches,
    /// It could not look, for this reason.
    CannotTell(String),
    /// It only knows the figure's value (the file it is read from).
    ValueOnly,
}

/// A published figure a check looked at.
#[derive(Debug, Clone, PartialEq)]
pub struct Figure {
    /// The metric, as its file spells it.
    pub metric: String,
    /// The statistic, as its file spells it.
    pub stat: String,
    /// The scrape endpoint of a server figure (`all` for a sum over
    /// endpoints that split the requests).
    pub endpoint: Option<String>,
    /// The labels of a server figure's series, in Prometheus notation.
    pub series: Option<String>,
    /// Its value, when this check knows it.
    pub value: Option<f64>,
    /// Its unit, as its file spells it.
    pub unit: Option<String>,
    /// What the check did with it.
    pub looked: Looked,
}

impl Figure {
    /// A client figure of `metric`'s `stat`.
    pub fn client(metric: impl Into<String>, stat: impl Into<String>, looked: Looked) -> Figure {
        Figure {
            metric: metric.into(),
            stat: stat.into(),
            endpoint: None,
            series: None,
            value: None,
            unit: None,
            looked,
        }
    }

    /// Sets the value and unit.
    pub fn value(mut self, value: Option<f64>, unit: Option<String>) -> Figure {
        self.value = value;
        self.unit = unit;
        self
    }

    /// Sets the endpoint and series of a server figure.
    pub fn on(mut self, endpoint: impl Into<String>, series: Option<String>) -> Figure {
        self.endpoint = Some(endpoint.into());
        self.series = series.filter(|s| !s.is_empty() && s != "{}");
        self
    }

    fn key(&self) -> (String, String, String, String) {
        (
            self.metric.clone(),
            self.stat.clone(),
            self.endpoint.clone().unwrap_or_default(),
            self.series.clone().unwrap_or_default(),
        )
    }

    /// Whether a finding's figure is this one.
    fn is(&self, m: &Moved) -> bool {
        if m.metric != self.metric || m.stat != self.stat || m.phase == Some("warmup") {
            return false;
        }
        match (&self.endpoint, m.phase) {
            (None, None) => true,
            (Some(ep), Some(_)) => {
                m.endpoint.as_deref().unwrap_or("all") == ep
                    && m.series.as_deref().unwrap_or("") == self.series.as_deref().unwrap_or("")
            }
            _ => false,
        }
    }
}

/// One published number with its verdict (`runs[].published[]`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Published {
    /// The metric, as its file spells it (`time_to_first_token`).
    pub metric: String,
    /// The statistic, as its file spells it (`p99`).
    pub stat: String,
    /// The published value.
    pub value: Option<f64>,
    /// Its unit, as its file spells it.
    pub unit: Option<String>,
    /// The scrape endpoint of a server figure (`null` for a client one).
    pub endpoint: Option<String>,
    /// The series of a server figure, in Prometheus notation.
    pub series: Option<String>,
    /// What it is worth.
    pub verdict: Verdict,
    /// Its value over what it claims to be over (warm-only, steady state,
    /// the repaired phase, the raw-scrape rate, what the records give).
    pub corrected: Option<f64>,
    /// The lowest the corrected value can be, when only bounded.
    pub corrected_low: Option<f64>,
    /// The highest, when only bounded.
    pub corrected_high: Option<f64>,
    /// The codes of the findings that move it.
    pub causes: Vec<Code>,
    /// Why it is `cannot_tell` (or what else a reader must know).
    pub reason: Option<String>,
}

/// Recomputes a client statistic over the records without the given
/// causes: `(metric, stat, over)` to its value.
pub type Recompute<'a> = dyn FnMut(&str, &str, &[Over]) -> Option<f64> + 'a;

/// The verdicts of a run's published figures: the checks' figures in
/// order (the first check to name one places it; one whose value no file
/// holds is left out), joined with what the findings at warning or above
/// move.
pub fn build(
    figures: impl IntoIterator<Item = Figure>,
    findings: &[Finding],
    recompute: &mut Recompute<'_>,
) -> Vec<Published> {
    // The figures in the order first met, what each check did with each,
    // and where each key's figure is in `order`.
    let mut order: Vec<Figure> = Vec::new();
    let mut looks: Vec<Vec<Looked>> = Vec::new();
    let mut at: BTreeMap<(String, String, String, String), usize> = BTreeMap::new();
    for f in figures {
        match at.entry(f.key()) {
            std::collections::btree_map::Entry::Occupied(e) => {
                let i = *e.get();
                looks[i].push(f.looked);
                let o = &mut order[i];
                o.value = o.value.or(f.value);
                o.unit = o.unit.take().or(f.unit);
            }
            std::collections::btree_map::Entry::Vacant(e) => {
                e.insert(order.len());
                looks.push(vec![f.looked.clone()]);
                order.push(f);
            }
        }
    }
    let moving: Vec<(&Finding, &Moved)> = findings
        .iter()
        .filter(|f| f.severity >= Severity::Warning)
        .flat_map(|f| f.metrics.iter().map(move |m| (f, m)))
        .collect();
    // A figure no file holds a value of is not published.
    order
        .into_iter()
        .zip(looks)
        .filter(|(fig, _)| fig.value.is_some())
        .map(|(fig, looked)| {
            let moves: Vec<(&Finding, &Moved)> =
                moving.iter().copied().filter(|(_, m)| fig.is(m)).collect();
            verdict(fig, &moves, &looked, recompute)
        })
        .collect()
}

fn verdict(
    fig: Figure,
    moves: &[(&Finding, &Moved)],
    looked: &[Looked],
    recompute: &mut Recompute<'_>,
) -> Published {
    let mut causes: Vec<Code> = Vec::new();
    for (f, _) in moves {
        if !causes.contains(&f.code) {
            causes.push(f.code);
        }
    }
    let mut p = Published {
        metric: fig.metric.clone(),
        stat: fig.stat.clone(),
        value: fig.value,
        unit: fig.unit,
        endpoint: fig.endpoint,
        series: fig.series,
        verdict: Verdict::Trusted,
        corrected: None,
        corrected_low: None,
        corrected_high: None,
        causes,
        reason: None,
    };
    let of_kind = |k: MoveKind| moves.iter().find(|(_, m)| m.kind == k);
    if p.value.is_none() {
        p.verdict = Verdict::CannotTell;
        p.reason = Some("the file does not hold a value".into());
    } else if let Some((_, m)) = of_kind(MoveKind::Disagrees) {
        p.verdict = Verdict::Wrong;
        p.corrected = m.corrected;
    } else if let Some((f, _)) = of_kind(MoveKind::Unverifiable) {
        p.verdict = Verdict::CannotTell;
        p.reason = Some(format!(
            "its records cannot verify it ({}: see that finding)",
            f.code.as_str()
        ));
    } else if !moves.is_empty() {
        p.verdict = Verdict::Biased;
        corrected(&mut p, moves, recompute);
    } else {
        let reasons: Vec<&str> = looked
            .iter()
            .filter_map(|l| match l {
                Looked::CannotTell(r) => Some(r.as_str()),
                _ => None,
            })
            .collect();
        if !reasons.is_empty() {
            p.verdict = Verdict::CannotTell;
            p.reason = Some(reasons.join("; "));
        } else if !looked.contains(&Looked::Vouches) {
            p.verdict = Verdict::CannotTell;
            p.reason = Some("no check verifies it".into());
        }
    }
    p
}

/// The corrected value of a biased figure: the one cause's; for several
/// causes over the records, recomputed without all of them; otherwise the
/// range their corrections span.
fn corrected(p: &mut Published, moves: &[(&Finding, &Moved)], recompute: &mut Recompute<'_>) {
    let first = moves[0].1;
    let same = moves.iter().all(|(_, m)| {
        m.corrected == first.corrected
            && m.corrected_low == first.corrected_low
            && m.corrected_high == first.corrected_high
    });
    if same {
        p.corrected = first.corrected;
        p.corrected_low = first.corrected_low;
        p.corrected_high = first.corrected_high;
        // Bounds that meet are a value.
        if p.corrected.is_none() && p.corrected_low.is_some() && p.corrected_low == p.corrected_high
        {
            p.corrected = p.corrected_low;
        }
        return;
    }
    let overs: Option<Vec<Over>> = moves.iter().map(|(_, m)| m.over).collect();
    if let Some(mut overs) = overs {
        overs.sort();
        overs.dedup();
        if let Some(v) = recompute(&p.metric, &p.stat, &overs) {
            p.corrected = Some(v);
            return;
        }
    }
    let values: Vec<f64> = moves
        .iter()
        .flat_map(|(_, m)| [m.corrected, m.corrected_low, m.corrected_high])
        .flatten()
        .collect();
    p.corrected_low = values.iter().copied().reduce(f64::min);
    p.corrected_high = values.iter().copied().reduce(f64::max);
    if p.corrected_low.is_some() && p.corrected_low == p.corrected_high {
        p.corrected = p.corrected_low;
        p.corrected_low = None;
        p.corrected_high = None;
        return;
    }
    p.reason = Some(
        "several causes move it and their corrections do not combine; the corrected value lies \
         between their corrections"
            .into(),
    );
}
