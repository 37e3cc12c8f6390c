//! The published numbers of a run in words, for every text format: the
//! ones that are not trusted, grouped (a client metric's statistics on one
//! line, an endpoint's server figures of one cause on one line, the
//! numbers that cannot be told by their reason), each with what to publish
//! instead.

use crate::findings::Code;
use crate::results::published::{Published, Verdict};
use crate::results::RunReport;
use crate::text::figure;

/// One group of published numbers with one verdict.
#[derive(Debug, Clone, PartialEq)]
pub struct Group {
    /// Their verdict.
    pub verdict: Verdict,
    /// What they are: a client metric with its unit, an endpoint's server
    /// metrics, or how many cannot be told and why.
    pub subject: String,
    /// Each number: the metric it belongs to when the subject does not say
    /// (a server figure), and `p99 189.4 → 35.47` (or, for numbers that
    /// cannot be told, the metric).
    pub items: Vec<(Option<String>, String)>,
    /// The codes of the findings that move them, or why they cannot be told.
    pub why: String,
}

impl Group {
    /// The items in words, a metric named once before its statistics.
    pub fn items_text(&self) -> Vec<String> {
        let mut last: Option<&str> = None;
        self.items
            .iter()
            .map(|(metric, item)| match metric.as_deref() {
                Some(m) if Some(m) != last => {
                    last = Some(m);
                    format!("{m} {item}")
                }
                _ => item.clone(),
            })
            .collect()
    }

    /// The group on one line of at most `max` characters: `subject: items
    /// [why]`, the items that do not fit counted (`+3 more`).
    pub fn line(&self, max: usize) -> String {
        let (head, tail) = if self.verdict == Verdict::CannotTell {
            (format!("{} ({})", self.subject, self.why), String::new())
        } else {
            (self.subject.clone(), format!(" [{}]", self.why))
        };
        let items = self.items_text();
        let mut text = format!("{head}: ");
        let budget = max.saturating_sub(tail.chars().count() + 10);
        let mut shown = 0;
        for (i, item) in items.iter().enumerate() {
            let sep = if i == 0 { "" } else { ", " };
            if i > 0 && text.chars().count() + sep.len() + item.chars().count() > budget {
                break;
            }
            text.push_str(sep);
            text.push_str(item);
            shown += 1;
        }
        if shown < items.len() {
            text.push_str(&format!(", +{} more", items.len() - shown));
        }
        text.push_str(&tail);
        crate::text::clip(&text, max).into_owned()
    }
}

/// The corrected value in words: the value, its bounds, or `?`.
pub fn corrected(p: &Published) -> String {
    match (p.corrected, p.corrected_low, p.corrected_high) {
        (Some(c), _, _) => figure(c),
        (None, Some(lo), Some(hi)) => format!("{}..{}", figure(lo), figure(hi)),
        (None, Some(lo), None) => format!(">= {}", figure(lo)),
        (None, None, Some(hi)) => format!("<= {}", figure(hi)),
        _ => "?".into(),
    }
}

/// One number and its correction: `p99 189.4 → 35.47`.
pub fn change(p: &Published) -> String {
    format!(
        "{} {} → {}",
        p.stat,
        p.value.map_or("?".into(), figure),
        corrected(p)
    )
}

fn codes(causes: &[Code]) -> String {
    causes
        .iter()
        .map(|c| c.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

/// The numbers of a run that are not trusted, grouped, worst verdict first.
pub fn untrusted(run: &RunReport) -> Vec<Group> {
    let mut groups: Vec<Group> = Vec::new();
    let mut add =
        |verdict: Verdict, subject: String, item: (Option<String>, String), why: String| {
            match groups
                .iter_mut()
                .find(|g| g.verdict == verdict && g.subject == subject && g.why == why)
            {
                Some(g) => {
                    if !g.items.contains(&item) {
                        g.items.push(item)
                    }
                }
                None => groups.push(Group {
                    verdict,
                    subject,
                    items: vec![item],
                    why,
                }),
            }
        };
    for p in &run.published {
        match p.verdict {
            Verdict::Trusted => {}
            Verdict::CannotTell => add(
                p.verdict,
                "cannot tell".into(),
                (None, p.metric.clone()),
                p.reason.clone().unwrap_or_default(),
            ),
            v => {
                let unit = p
                    .unit
                    .as_deref()
                    .map(|u| format!(" ({u})"))
                    .unwrap_or_default();
                let (subject, item) = match &p.endpoint {
                    None => (format!("{}{unit}", p.metric), (None, change(p))),
                    Some(ep) => (
                        format!("server on {ep}"),
                        (
                            Some(format!("{}{}", p.metric, p.series.as_deref().unwrap_or(""))),
                            change(p),
                        ),
                    ),
                };
                add(v, subject, item, codes(&p.causes));
            }
        }
    }
    // Cannot-tell groups say how many numbers they hold.
    for g in groups
        .iter_mut()
        .filter(|g| g.verdict == Verdict::CannotTell)
    {
        let n = run
            .published
            .iter()
            .filter(|p| {
                p.verdict == Verdict::CannotTell && p.reason.as_deref() == Some(g.why.as_str())
            })
            .count();
        g.subject = format!("cannot tell {n}");
    }
    let rank = |v: Verdict| match v {
        Verdict::Wrong => 0,
        Verdict::Biased => 1,
        Verdict::CannotTell => 2,
        Verdict::Trusted => 3,
    };
    groups.sort_by_key(|g| rank(g.verdict));
    groups
}

/// How many of a run's published numbers have a verdict.
pub fn count(run: &RunReport, verdict: Verdict) -> usize {
    run.published
        .iter()
        .filter(|p| p.verdict == verdict)
        .count()
}
