//! Findings: what a check reports, as data.
//!
//! Every problem artifact-check can report has a stable [`Code`], defined once
//! in the module of the check that emits it (the readers' in [`reading`]),
//! with its default severity and a one-line summary. `docs/checks.md`
//! documents each code, and a test fails if a code is missing there, so the
//! codes, the docs and the report cannot drift.
//!
//! Checks build [`Finding`]s and return them; they never print. Renderers in
//! [`crate::report`] turn findings into text.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::Value;

mod root_cause;
pub use root_cause::{merge_root_causes, MoveKind, Moved, Over};

closed_set! {
    /// How bad a finding is. Ordered: `Info < Warning < Error`.
    #[derive(Default)]
    pub enum Severity {
        /// Worth knowing; never fails a run unless `--fail-on info`.
        Info => "info",
        /// A number is suspect or a check could only partly run.
        Warning => "warning",
        /// A published number is wrong, or an artifact is broken. The default
        /// fail level.
        #[default]
        Error => "error",
    }
}

/// Not `error`, `warning` or `info`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0:?} is not error, warning or info")]
pub struct UnknownSeverity(pub String);

impl std::str::FromStr for Severity {
    type Err = UnknownSeverity;

    /// The lowercase name, as [`Severity::as_str`] writes it.
    fn from_str(s: &str) -> Result<Severity, UnknownSeverity> {
        Severity::parse(s).ok_or_else(|| UnknownSeverity(s.to_string()))
    }
}

/// What a code is: its id, the check that emits it, its default severity
/// and a one-line summary.
#[derive(Debug, PartialEq, Eq)]
pub struct CodeDef {
    /// The kebab-case id, as written in reports and accepted by
    /// `--select`/`--ignore`. The contract.
    pub id: &'static str,
    /// The check that emits it.
    pub check: &'static str,
    /// The severity a finding with this code gets by default.
    pub severity: Severity,
    /// One line saying what it means.
    pub summary: &'static str,
}

/// A stable finding code. Each check defines its own with [`crate::define_codes!`]
/// in its module and lists them in the registry ([`crate::checks::ALL`]);
/// [`crate::codes`] and [`crate::code`] go through the
/// registry, so the codes, `artifact-check codes` and `docs/checks.md` (a
/// test) cannot drift.
#[derive(Debug, Clone, Copy)]
pub struct Code(pub &'static CodeDef);

impl Code {
    /// The code as written in reports and accepted by `--select`/`--ignore`.
    pub fn as_str(self) -> &'static str {
        self.0.id
    }

    /// The check that emits this code.
    pub fn check(self) -> &'static str {
        self.0.check
    }

    /// The severity a finding with this code gets.
    pub fn severity(self) -> Severity {
        self.0.severity
    }

    /// One line saying what the code means.
    pub fn summary(self) -> &'static str {
        self.0.summary
    }
}

impl PartialEq for Code {
    fn eq(&self, other: &Code) -> bool {
        self.0.id == other.0.id
    }
}

impl Eq for Code {}

impl std::hash::Hash for Code {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.0.id.hash(state);
    }
}

impl PartialOrd for Code {
    fn partial_cmp(&self, other: &Code) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Code {
    fn cmp(&self, other: &Code) -> std::cmp::Ordering {
        self.0.id.cmp(other.0.id)
    }
}

impl Serialize for Code {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

/// Defines a check's codes: one constant per code and `CODES`, the list.
///
/// ```
/// mod my_check {
///     artifact_check::define_codes! { "my_check";
///         SOMETHING_WRONG => ("something-wrong", Error, "What is wrong"),
///     }
/// }
/// assert_eq!(my_check::SOMETHING_WRONG.as_str(), "something-wrong");
/// assert_eq!(my_check::SOMETHING_WRONG.check(), "my_check");
/// assert_eq!(my_check::CODES, &[my_check::SOMETHING_WRONG]);
/// ```
#[macro_export]
macro_rules! define_codes {
    ($check:literal; $( $name:ident => ($id:literal, $sev:ident, $summary:literal), )*) => {
        $(
            #[doc = $summary]
            pub const $name: $crate::findings::Code = $crate::findings::Code(&$crate::findings::CodeDef {
                id: $id,
                check: $check,
                severity: $crate::findings::Severity::$sev,
                summary: $summary,
            });
        )*
        /// This module's codes, in documentation order.
        pub const CODES: &[$crate::findings::Code] = &[$($name,)*];
    };
}

/// The codes of reading the run directory: every reader's problems, which
/// the `artifacts` check reports.
pub mod reading {
    crate::define_codes! { "artifacts";
        MISSING_ARTIFACT => ("missing-artifact", Warning,
            "An artifact a check needs is not in the run directory"),
        UNREADABLE_FILE => ("unreadable-file", Error,
            "A file exists but cannot be read (permissions, a directory in its place, I/O error)"),
        EMPTY_FILE => ("empty-file", Error,
            "An artifact file is empty"),
        INVALID_JSON => ("invalid-json", Error,
            "A JSON artifact is not valid JSON or a field has the wrong type"),
        INVALID_RECORD => ("invalid-record", Error,
            "A line of a JSON-lines artifact is not valid JSON or a field has the wrong type"),
        IMPOSSIBLE_VALUE => ("impossible-value", Error,
            "A value no producer writes (a negative duration or count, a count that is not whole, a value beyond any run, hits above queries): kept out of every figure"),
        TRUNCATED_RECORD => ("truncated-record", Warning,
            "The last line of a JSON-lines artifact is cut off (the run was killed mid-write)"),
        OVERSIZED_LINE => ("oversized-line", Error,
            "A line of a JSON-lines artifact is longer than the reader accepts; it was skipped"),
        UNSUPPORTED_LAYOUT => ("unsupported-layout", Warning,
            "A file is in a layout this tool recognises but does not read (an AIPerf development build): its checks cannot tell"),
        UNKNOWN_SCHEMA_VERSION => ("unknown-schema-version", Warning,
            "An artifact declares a schema version this tool was not built for"),
        SYMLINK_OUTSIDE_RUN => ("symlink-outside-run", Warning,
            "An artifact is a symlink that leads outside the run directory (it was read)"),
        PARQUET_SCRAPES_NOT_READ => ("parquet-scrapes-not-read", Info,
            "The raw scrapes are only in server_metrics_export.parquet, which this build does not read (the `parquet` feature)"),
    }
}

closed_set! {
    /// The unit of an effect's size.
    pub enum Unit {
        /// A number of observations, requests or records.
        Count => "count",
        /// Percent.
        Percent => "%",
        /// Percentage points.
        Pp => "pp",
        /// Milliseconds.
        Ms => "ms",
        /// Seconds.
        S => "s",
        /// Tokens.
        Tokens => "tokens",
        /// In the unit of the claimed value.
        Value => "value",
    }
}

/// A measured size of an effect: "+1 observation", "+20 %", "-3.1 pp".
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Effect {
    /// What is measured, e.g. `count_inflation`.
    pub quantity: &'static str,
    /// The value.
    pub value: f64,
    /// Its unit.
    pub unit: Unit,
}

/// One problem found in one run.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[non_exhaustive]
pub struct Finding {
    /// Stable code.
    pub code: Code,
    /// Severity (the code's default).
    pub severity: Severity,
    /// The check that found it.
    pub check: &'static str,
    /// What is wrong, in one or two sentences a person can act on.
    pub message: String,
    /// The file it concerns, relative to the run directory.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
    /// 1-based line number within `file`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub line: Option<u64>,
    /// The JSON field (path) concerned.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub field: Option<String>,
    /// The server metric (family) concerned, as exported.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metric: Option<String>,
    /// The scrape endpoint concerned (its URL).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<String>,
    /// The series concerned: the labels that single it out (e.g.
    /// `{"engine": "1"}`); empty when the finding is about the endpoint's
    /// whole family.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub series: Option<BTreeMap<String, String>>,
    /// What the artifacts should have said.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expected: Option<Value>,
    /// What they say.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub found: Option<Value>,
    /// The size of the effect.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub effect: Vec<Effect>,
    /// What this one cause moves: each published figure with what it should
    /// be, what it is and its corrected value (see [`Moved`]). A finding
    /// that lists them is one per root cause: `metric` names the worst.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub metrics: Vec<Moved>,
    /// An advisory that holds, word for word, for every run of the AIPerf
    /// version that wrote the run: a text report says it once per audit.
    #[serde(skip)]
    pub per_version: bool,
}

impl Finding {
    /// A finding with the code's default severity and check.
    pub fn new(code: Code, message: impl Into<String>) -> Finding {
        Finding {
            code,
            severity: code.severity(),
            check: code.check(),
            message: message.into(),
            file: None,
            line: None,
            field: None,
            metric: None,
            endpoint: None,
            series: None,
            expected: None,
            found: None,
            effect: Vec::new(),
            metrics: Vec::new(),
            per_version: false,
        }
    }

    /// Marks an advisory that holds for every run of the version that wrote
    /// the run (see [`Finding::per_version`]).
    pub fn holds_for_version(mut self) -> Finding {
        self.per_version = true;
        self
    }

    /// Adds the figures this finding's cause moves.
    pub fn moves_all(mut self, moved: impl IntoIterator<Item = Moved>) -> Finding {
        self.metrics.extend(moved);
        self
    }

    /// Adds a figure this finding's cause moves.
    pub fn moves(mut self, moved: Moved) -> Finding {
        self.metrics.push(moved);
        self
    }

    /// Sets the file.
    pub fn file(mut self, file: impl Into<String>) -> Finding {
        self.file = Some(file.into());
        self
    }

    /// Sets the line.
    pub fn line(mut self, line: u64) -> Finding {
        self.line = Some(line);
        self
    }

    /// Sets the field path (unset when the path says nothing: empty, `.`,
    /// or only the `?` a parser writes for a position it cannot name).
    pub fn field(mut self, field: impl Into<String>) -> Finding {
        self.field = known_path(&field.into());
        self
    }

    /// Sets the server metric concerned.
    pub fn metric(mut self, metric: impl Into<String>) -> Finding {
        self.metric = Some(metric.into());
        self
    }

    /// Sets the scrape endpoint concerned.
    pub fn endpoint(mut self, endpoint: impl Into<String>) -> Finding {
        self.endpoint = Some(endpoint.into());
        self
    }

    /// Sets the series concerned (the labels that single it out).
    pub fn series(mut self, labels: BTreeMap<String, String>) -> Finding {
        self.series = Some(labels);
        self
    }

    /// Sets expected and found.
    pub fn expected_found(mut self, expected: impl Serialize, found: impl Serialize) -> Finding {
        self.expected = serde_json::to_value(expected).ok();
        self.found = serde_json::to_value(found).ok();
        self
    }

    /// Sets the severity where the finding's facts make it other than its
    /// code's default (an error seen only in warmup is a warning, a reset
    /// not confirmed is one too). A finding's severity is set when it is
    /// built, by this or by [`Finding::harmless`], never assigned after.
    pub fn severity(mut self, severity: Severity) -> Finding {
        self.severity = severity;
        self
    }

    /// A risk verified harmless: `info`, with why it is harmless after the
    /// message (`; why`). The one place the severity rule's "info =
    /// verified harmless" is written.
    pub fn harmless(mut self, why: &str) -> Finding {
        self.settle_harmless(why);
        self
    }

    /// [`Finding::harmless`] on a finding already listed, for a check
    /// whose proof that a risk is harmless comes after the finding was
    /// built (a later pass over the run).
    pub fn settle_harmless(&mut self, why: &str) {
        self.severity = Severity::Info;
        if !why.is_empty() {
            self.message.push_str("; ");
            self.message.push_str(why);
        }
    }

    /// Where it points in its file: `file:line`, or `file`; `None` when it
    /// names no file. Every format writes a finding's place with this.
    pub fn location(&self) -> Option<String> {
        self.file
            .as_deref()
            .map(|file| crate::text::location(file, self.line))
    }

    /// How many findings this one counts as not listed (see [`cap`]).
    pub fn not_listed(&self) -> Option<u64> {
        self.effect
            .iter()
            .find(|e| e.quantity == "not_listed")
            .map(|e| e.value as u64)
    }

    /// Adds an effect size.
    pub fn effect(mut self, quantity: &'static str, value: f64, unit: Unit) -> Finding {
        if value.is_finite() {
            self.effect.push(Effect {
                quantity,
                value,
                unit,
            });
        }
        self
    }
}

/// What makes a finding the same finding in another audit: its run, code,
/// file and subject (field, metric, endpoint, series), never its wording,
/// its figures or its line (a line moves when a record is added above it).
/// `--baseline`, `[[scoped-ignore]]`, the SARIF fingerprint and GitLab's
/// all key on this one identity.
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Identity {
    /// The run directory as reported, without a trailing `/`.
    pub run: String,
    /// The code.
    pub code: String,
    /// The file, relative to the run (empty when none).
    pub file: String,
    /// The field path (empty when none).
    pub field: String,
    /// The server metric (empty when none).
    pub metric: String,
    /// The scrape endpoint (empty when none).
    pub endpoint: String,
    /// The series as `k=v,k=v` (empty when none).
    pub series: String,
}

/// An [`Identity`] without its run (see [`Identity::subject`]).
pub type Subject<'a> = [&'a str; 6];

impl Identity {
    /// The identity of a finding as an earlier JSON report wrote it (`f` is
    /// one element of a run's `findings`).
    pub fn of_json(run: &str, code: &str, f: &Value) -> Identity {
        let per_cause = f["metrics"].as_array().is_some_and(|m| !m.is_empty());
        let s = |v: &Value| match v {
            Value::Null => String::new(),
            Value::String(s) => s.clone(),
            v => v.to_string(),
        };
        let series = f["series"]
            .as_object()
            .map(|o| {
                o.iter()
                    .map(|(k, v)| format!("{k}={}", s(v)))
                    .collect::<Vec<_>>()
                    .join(",")
            })
            .unwrap_or_default();
        Identity {
            run: normal_run(run),
            code: code.to_string(),
            file: s(&f["file"]),
            field: if per_cause {
                String::new()
            } else {
                s(&f["field"])
            },
            metric: if per_cause {
                String::new()
            } else {
                s(&f["metric"])
            },
            endpoint: s(&f["endpoint"]),
            series,
        }
    }

    /// What it says of the finding, whatever the run: code, file, field,
    /// metric, endpoint and series.
    pub fn subject(&self) -> Subject<'_> {
        [
            &self.code,
            &self.file,
            &self.field,
            &self.metric,
            &self.endpoint,
            &self.series,
        ]
    }

    /// The same identity in the run named `run`.
    pub fn in_run(&self, run: &str) -> Identity {
        Identity {
            run: normal_run(run),
            ..self.clone()
        }
    }

    /// A stable fingerprint of the identity: FNV-1a, 64 bits, hex.
    pub fn fingerprint(&self) -> String {
        let key = [
            self.code.as_str(),
            &self.run,
            &self.file,
            &self.field,
            &self.metric,
            &self.endpoint,
            &self.series,
        ]
        .join("\u{1f}");
        format!("{:016x}", crate::stats::fnv1a(key.bytes()))
    }
}

/// A run's path as identities hold it: without a trailing `/`.
/// The names of the run a finding belongs to: the path as given and shown,
/// its identity independent of that spelling (`discover::run_id`), and
/// AIPerf's `benchmark_id` when the run has one.
#[derive(Debug, Clone, Copy)]
pub struct RunNames<'a> {
    /// The run directory's path as given.
    pub shown: &'a str,
    /// Its identity.
    pub id: &'a str,
    /// AIPerf's `benchmark_id`.
    pub benchmark_id: Option<&'a str>,
}

impl<'a> RunNames<'a> {
    /// Names that are all the one path (a caller that knows no more).
    pub fn path(path: &'a str) -> RunNames<'a> {
        RunNames {
            shown: path,
            id: path,
            benchmark_id: None,
        }
    }

    /// The key a baseline holds a run's findings under for its
    /// `benchmark_id`.
    pub fn benchmark_key(benchmark_id: &str) -> String {
        format!("benchmark_id:{benchmark_id}")
    }
}

fn normal_run(run: &str) -> String {
    let t = run.trim_end_matches('/');
    if t.is_empty() && !run.is_empty() {
        "/".into()
    } else {
        t.to_string()
    }
}

impl Finding {
    /// This finding's identity in the run at `run` (see [`Identity`]).
    pub fn identity(&self, run: &str) -> Identity {
        let series = self
            .series
            .as_ref()
            .map(|s| {
                s.iter()
                    .map(|(k, v)| format!("{k}={v}"))
                    .collect::<Vec<_>>()
                    .join(",")
            })
            .unwrap_or_default();
        let o = |v: &Option<String>| v.clone().unwrap_or_default();
        // One finding per root cause: the worst metric it moves may change
        // from one audit to the next, the cause does not.
        let per_cause = !self.metrics.is_empty();
        let subject = |v: &Option<String>| if per_cause { String::new() } else { o(v) };
        Identity {
            run: normal_run(run),
            code: self.code.as_str().to_string(),
            file: o(&self.file),
            field: subject(&self.field),
            metric: subject(&self.metric),
            endpoint: o(&self.endpoint),
            series,
        }
    }
}

/// A field path without its trailing unknown (`?`) segments; `None` when
/// nothing is left.
pub fn known_path(path: &str) -> Option<String> {
    let mut p = path.trim();
    loop {
        let before = p;
        p = p.trim_end_matches('?').trim_end_matches('.');
        if p == before {
            break;
        }
    }
    (!p.is_empty()).then(|| p.to_string())
}

/// The documentation of finding codes, compiled in: `explain` prints from
/// the same table the documentation shows.
const CHECKS_DOC: &str = include_str!("../../docs/checks.md");

/// A code's row in docs/checks.md as (column, text) pairs after the code
/// and severity (`meaning`, `when`, `what to do`: each table names its
/// columns), Markdown code marks removed.
pub fn explanation(code: &str) -> Option<Vec<(String, String)>> {
    let start = format!("| `{code}` |");
    let cells = |l: &str| -> Vec<String> {
        l.trim()
            .trim_matches('|')
            .split(" | ")
            .map(|c| c.trim().replace('`', ""))
            .collect()
    };
    let mut header = Vec::new();
    for l in CHECKS_DOC.lines() {
        if l.starts_with("| code |") {
            header = cells(l);
        } else if l.starts_with(&start) {
            let row = cells(l);
            return Some(
                header
                    .iter()
                    .zip(row)
                    .skip(2)
                    .map(|(h, c)| (h.clone(), c.replace("**", "")))
                    .collect(),
            );
        }
    }
    None
}

/// At most this many request ids are listed in one list of a report (the
/// first ones, in the list's order); the rest are counted beside it
/// (`<list>_unlisted`), so a report's size follows its findings, not the
/// records. `clean` writes every request with its cause.
pub const MAX_LISTED_IDS: usize = 100;

/// Serde's test for a count of ids not listed: written only when some are.
pub fn none_unlisted(n: &usize) -> bool {
    *n == 0
}

/// At most this many findings of one code are listed per file of a run;
/// the rest are counted in one more finding (see [`cap`]).
pub const MAX_LISTED: usize = 100;

/// Keeps the first [`MAX_LISTED`] findings of each (code, file) in order
/// and puts, after them, one finding per group that had more saying how
/// many are not listed: a file of a million bad lines is a bounded report.
pub fn cap(findings: &mut Vec<Finding>) {
    type Group = (&'static str, Option<String>);
    // Per group: findings seen, and those already counted by a reader's
    // own "not listed" finding (merged into the one made here).
    let mut seen: BTreeMap<Group, (usize, u64)> = BTreeMap::new();
    for f in findings.iter() {
        let g = seen.entry((f.code.as_str(), f.file.clone())).or_default();
        match f.not_listed() {
            Some(n) => g.1 += n,
            None => g.0 += 1,
        }
    }
    let mut listed: BTreeMap<Group, usize> = BTreeMap::new();
    let mut order = Vec::new();
    findings.retain(|f| {
        let key = (f.code.as_str(), f.file.clone());
        let (total, counted) = seen[&key];
        if total <= MAX_LISTED && counted == 0 {
            return true;
        }
        if f.not_listed().is_some() {
            return false;
        }
        let n = listed.entry(key.clone()).or_insert(0);
        *n += 1;
        if *n == 1 {
            order.push((f.code, key.1));
        }
        *n <= MAX_LISTED
    });
    for (code, file) in order {
        let (total, counted) = seen[&(code.as_str(), file.clone())];
        let n = total.saturating_sub(MAX_LISTED) as u64 + counted;
        if n > 0 {
            findings.push(not_listed(code, file, n));
        }
    }
}

/// The finding that counts `n` more findings of `code` in `file` that are
/// not listed.
pub fn not_listed(code: Code, file: Option<String>, n: u64) -> Finding {
    let mut f = Finding::new(
        code,
        format!(
            "{n} more {} finding(s){} are not listed (at most {MAX_LISTED} of a code are listed \
             per file)",
            code.as_str(),
            file.as_deref()
                .map(|f| format!(" in {f}"))
                .unwrap_or_default()
        ),
    )
    .effect("not_listed", n as f64, Unit::Count);
    f.file = file;
    f
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_code_has_an_explanation() {
        let cols = explanation("invalid-json").expect("documented");
        assert_eq!(cols[0].0, "meaning");
        assert!(cols[0].1.starts_with("A JSON document"), "{cols:?}");
        assert_eq!(cols[1].0, "what to do");
        let cols = explanation("late-warmup-observation").expect("documented");
        assert_eq!(cols[0].0, "when");
        assert!(cols[0].1.starts_with("the accounting needs"), "{cols:?}");
        assert!(explanation("no-such-code").is_none());
    }

    #[test]
    fn unknown_path_segments_are_dropped() {
        assert_eq!(known_path("?"), None);
        assert_eq!(known_path("."), None);
        assert_eq!(known_path("metrics.?"), Some("metrics".into()));
        assert_eq!(known_path("a.b[3]"), Some("a.b[3]".into()));
    }

    #[test]
    fn more_than_the_cap_of_one_code_and_file_are_counted_not_listed() {
        let mut v: Vec<Finding> = (0..250)
            .map(|i| Finding::new(reading::INVALID_RECORD, format!("{i}")).file("a"))
            .chain((0..3).map(|i| Finding::new(reading::INVALID_RECORD, format!("{i}")).file("b")))
            .collect();
        cap(&mut v);
        assert_eq!(v.len(), MAX_LISTED + 3 + 1);
        let last = v.last().expect("summary");
        assert!(
            last.message.starts_with("150 more invalid-record"),
            "{}",
            last.message
        );
        assert_eq!(last.file.as_deref(), Some("a"));
    }

    #[test]
    fn non_finite_effects_are_dropped() {
        let f = Finding::new(reading::EMPTY_FILE, "x").effect("gap", f64::NAN, Unit::Pp);
        assert!(f.effect.is_empty());
    }
}
