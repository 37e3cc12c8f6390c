//! Text: the lowest layer, below the findings and the report data. How a
//! number, a fraction, a label set and a place in a file are written
//! ([`fmt_opt`], [`pct`], [`labels`], [`location`]), once for every check and
//! renderer, and how text from the input is made safe for each output
//! format ([`escape`]). Nothing here knows a check, a finding or a report.

pub mod escape;

use std::borrow::Cow;
use std::collections::BTreeMap;

/// A number with `decimals` decimals, `n/a` when absent.
pub fn fmt_opt(v: Option<f64>, decimals: usize) -> String {
    match v {
        Some(v) => format!("{v:.decimals$}"),
        None => "n/a".into(),
    }
}

/// A fraction as a percentage with two decimals, `unknown` when absent.
pub fn pct(v: Option<f64>) -> String {
    match v {
        Some(v) => format!("{:.2} %", v * 100.0),
        None => "unknown".into(),
    }
}

/// A label set in Prometheus notation, `{k="v",...}`, each name and value
/// passed through `escape` (identity for the findings' own text, a format's
/// escaping in a renderer).
pub fn labels_with<'a>(
    labels: &'a BTreeMap<String, String>,
    escape: impl Fn(&'a str) -> Cow<'a, str>,
) -> String {
    let parts: Vec<String> = labels
        .iter()
        .map(|(k, v)| format!("{}=\"{}\"", escape(k), escape(v)))
        .collect();
    format!("{{{}}}", parts.join(","))
}

/// A label set in Prometheus notation, `{k="v",...}`, as it is.
pub fn labels(labels: &BTreeMap<String, String>) -> String {
    labels_with(labels, Cow::Borrowed)
}

/// A place in a file: `file:line`, or `file` when no line is known.
pub fn location(file: &str, line: Option<u64>) -> String {
    match line {
        Some(l) => format!("{file}:{l}"),
        None => file.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_are_written_in_prometheus_notation() {
        let l: BTreeMap<String, String> = [
            ("engine".to_string(), "1".to_string()),
            ("a".into(), "x\ny".into()),
        ]
        .into();
        assert_eq!(labels(&l), "{a=\"x\ny\",engine=\"1\"}");
        assert_eq!(
            labels_with(&l, escape::visible),
            "{a=\"x\\u{a}y\",engine=\"1\"}"
        );
        assert_eq!(labels(&BTreeMap::new()), "{}");
    }

    #[test]
    fn numbers_fractions_and_places() {
        assert_eq!(fmt_opt(Some(1.23456), 2), "1.23");
        assert_eq!(fmt_opt(None, 2), "n/a");
        assert_eq!(pct(Some(0.5)), "50.00 %");
        assert_eq!(pct(None), "unknown");
        assert_eq!(location("a.jsonl", Some(3)), "a.jsonl:3");
        assert_eq!(location("a.jsonl", None), "a.jsonl");
    }
}
