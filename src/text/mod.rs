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

/// A measured value as people quote it: four significant digits, no
/// exponent for everyday magnitudes, trailing zeros dropped (`189.4`,
/// `35.47`, `0.009088`, `3559`).
pub fn figure(v: f64) -> String {
    if !v.is_finite() {
        return format!("{v}");
    }
    let a = v.abs();
    if a == 0.0 {
        return "0".into();
    }
    if !(1e-4..1e9).contains(&a) {
        return format!("{v:.3e}");
    }
    let digits = a.log10().floor() as i32 + 1;
    let decimals = (4 - digits).max(0) as usize;
    let s = format!("{v:.decimals$}");
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

/// `text` cut to at most `max` characters at a word boundary, with `…`
/// where it was cut.
pub fn clip(text: &str, max: usize) -> Cow<'_, str> {
    if text.chars().count() <= max {
        return Cow::Borrowed(text);
    }
    let keep = max.saturating_sub(1);
    let end = text.char_indices().nth(keep).map_or(text.len(), |(i, _)| i);
    let head = &text[..end];
    let cut = head
        .rfind([' ', ','])
        .filter(|i| *i > end / 2)
        .unwrap_or(end);
    let head = head[..cut].trim_end_matches([' ', ',', ';', ':']);
    Cow::Owned(format!("{head}…"))
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
    fn figures_have_four_significant_digits() {
        assert_eq!(figure(189.44030442), "189.4");
        assert_eq!(figure(35.472409), "35.47");
        assert_eq!(figure(3558.83), "3559");
        assert_eq!(figure(0.009087818), "0.009088");
        assert_eq!(figure(16.0), "16");
        assert_eq!(figure(-2.5), "-2.5");
    }

    #[test]
    fn clipping_cuts_at_a_word_and_marks_it() {
        assert_eq!(clip("short", 10), "short");
        let c = clip("one two three four five", 12);
        assert!(c.chars().count() <= 12, "{c}");
        assert_eq!(c, "one two…");
        let c = clip("ééééééééééééééé", 5);
        assert_eq!(c.chars().count(), 5);
    }

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
