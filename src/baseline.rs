//! `--baseline REPORT.json`: the findings of an earlier audit (its JSON
//! report) that are accepted as they are. A finding of the new audit that
//! was already there (the same [`Identity`]: run, code, file, field,
//! metric, endpoint and series; the wording, figures and line may change) is
//! not reported, so the gate fails only on what is new. A run is matched by
//! its identity (`runs[].id`: the audited folder's name and the run's path
//! below it, however the path was spelled) or by AIPerf's `benchmark_id`.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::findings::{Finding, Identity, RunNames};

crate::define_codes! { "suppressions";
    UNUSED_SUPPRESSION => ("unused-suppression", Warning,
        "A --baseline entry, or a [[scoped-ignore]] with a run glob, matched no finding of a run it names: what it accepted is gone, and it would hide a new finding"),
}

/// The findings of a baseline report.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Baseline {
    keys: BTreeSet<Identity>,
    /// The report it was read from.
    source: String,
}

/// Why a baseline could not be used.
#[derive(Debug, thiserror::Error)]
pub enum BaselineError {
    /// Not readable.
    #[error("{}: {why}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        why: std::io::Error,
    },
    /// Not an artifact-check JSON report.
    #[error("{}: not an artifact-check JSON report ({why})", path.display())]
    NotAReport {
        /// The file.
        path: PathBuf,
        /// Why.
        why: String,
    },
}

/// At most this many findings are read from a baseline: a real one holds a
/// few per run (an audit of 10,000 runs, tens of thousands). Past it the
/// baseline is refused, naming the cap, rather than held in memory whole.
pub const MAX_BASELINE_ENTRIES: usize = 1_000_000;

impl Baseline {
    /// Reads a JSON report written by `--format json` (or `--report json=`).
    pub fn read(path: &Path) -> Result<Baseline, BaselineError> {
        let text = crate::files::read_regular_to_string(path, crate::files::MAX_BASELINE_BYTES)
            .map_err(|why| BaselineError::Read {
                path: path.to_path_buf(),
                why,
            })?;
        Baseline::parse(&text, &path.display().to_string()).map_err(|why| {
            BaselineError::NotAReport {
                path: path.to_path_buf(),
                why,
            }
        })
    }

    /// The baseline in the JSON report `text`, read from `source`; `Err`
    /// says why it is not one. The report is read as a stream: one finding
    /// at a time is held whole, so the cost is the identities kept (at most
    /// [`MAX_BASELINE_ENTRIES`]), not a tree of the whole report.
    pub fn parse(text: &str, source: &str) -> Result<Baseline, String> {
        let mut keys = BTreeSet::new();
        let mut de = serde_json::Deserializer::from_str(text);
        serde::de::DeserializeSeed::deserialize(ReportSeed(&mut keys), &mut de)
            .and_then(|()| de.end())
            .map_err(|e| e.to_string())?;
        Ok(Baseline {
            keys,
            source: format!("in the baseline {source}"),
        })
    }

    /// Whether `f`, a finding of the run named `run`, is in the baseline:
    /// under the run's identity, or under its `benchmark_id`.
    pub fn contains(&self, f: &Finding, run: &RunNames) -> bool {
        if self.keys.is_empty() {
            return false;
        }
        self.keys.contains(&f.identity(run.id))
            || run
                .benchmark_id
                .is_some_and(|b| self.keys.contains(&f.identity(&RunNames::benchmark_key(b))))
    }

    /// The entries it holds for a run (under its identity or its
    /// `benchmark_id`), each as its [`Identity::subject`]: an entry under
    /// both names is one. Each name's entries are one range of the set.
    pub fn entries_of(&self, run: &RunNames) -> BTreeSet<crate::findings::Subject<'_>> {
        let bench = run.benchmark_id.map(RunNames::benchmark_key);
        let mut out = BTreeSet::new();
        for name in std::iter::once(run.id.to_string()).chain(bench) {
            let from = Identity {
                run: name,
                ..Identity::default()
            };
            out.extend(
                self.keys
                    .range(&from..)
                    .take_while(|k| k.run == from.run)
                    .map(Identity::subject),
            );
        }
        out
    }

    /// Where it was read from, in words (a suppression's reason).
    pub fn source(&self) -> &str {
        &self.source
    }

    /// How many findings it holds.
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    /// Whether it holds none.
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }
}

// The report read as a stream (serde seeds): `{"runs": [RUN...], ...}`, a
// run `{"path", "id", "benchmark_id", "findings": [FINDING...], ...}` in any
// order of its keys.

use serde::de::{DeserializeSeed, Error as _, IgnoredAny, MapAccess, SeqAccess, Visitor};

/// The whole report: finds `runs`, ignores the rest.
struct ReportSeed<'k>(&'k mut BTreeSet<Identity>);

impl<'de> DeserializeSeed<'de> for ReportSeed<'_> {
    type Value = ();
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for ReportSeed<'_> {
    type Value = ();
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a JSON report object")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let mut runs = false;
        while let Some(key) = map.next_key::<std::borrow::Cow<str>>()? {
            if key == "runs" && !runs {
                map.next_value_seed(RunsSeed(&mut *self.0))?;
                runs = true;
            } else {
                map.next_value::<IgnoredAny>()?;
            }
        }
        if runs {
            Ok(())
        } else {
            Err(A::Error::custom("no `runs` array"))
        }
    }
}

/// `runs`: each run's findings go into the set under each of its names.
struct RunsSeed<'k>(&'k mut BTreeSet<Identity>);

impl<'de> DeserializeSeed<'de> for RunsSeed<'_> {
    type Value = ();
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_seq(self)
    }
}

impl<'de> Visitor<'de> for RunsSeed<'_> {
    type Value = ();
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a `runs` array")
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while let Some(run) = seq.next_element_seed(RunSeed)? {
            for id in &run.findings {
                for name in &run.names {
                    if self.0.len() >= MAX_BASELINE_ENTRIES {
                        return Err(A::Error::custom(format!(
                            "more than {MAX_BASELINE_ENTRIES} findings (the cap of a baseline)"
                        )));
                    }
                    self.0.insert(id.in_run(name));
                }
            }
        }
        Ok(())
    }
}

/// One run: its names and its findings' identities (under no run yet: a
/// run's keys may come in any order).
struct Run {
    names: Vec<String>,
    findings: Vec<Identity>,
}

struct RunSeed;

impl<'de> DeserializeSeed<'de> for RunSeed {
    type Value = Run;
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Run, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for RunSeed {
    type Value = Run;
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a run object")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Run, A::Error> {
        let (mut path, mut id, mut bench) = (None, None, None);
        let mut findings = Vec::new();
        while let Some(key) = map.next_key::<std::borrow::Cow<str>>()? {
            match &*key {
                "path" => path = map.next_value::<Value>()?.as_str().map(str::to_string),
                "id" => id = map.next_value::<Value>()?.as_str().map(str::to_string),
                "benchmark_id" => {
                    bench = map
                        .next_value::<Value>()?
                        .as_str()
                        .map(RunNames::benchmark_key)
                }
                "findings" => findings = map.next_value_seed(FindingsSeed)?,
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        // The run's identity (reports before it had none: the path), and
        // its benchmark_id.
        let path = path.ok_or_else(|| A::Error::custom("a run without `path`"))?;
        let mut names = vec![id.unwrap_or(path)];
        names.extend(bench);
        Ok(Run { names, findings })
    }
}

/// `findings`: each read whole, one at a time, and kept as its identity.
struct FindingsSeed;

impl<'de> DeserializeSeed<'de> for FindingsSeed {
    type Value = Vec<Identity>;
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Vec<Identity>, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for FindingsSeed {
    type Value = Vec<Identity>;
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a `findings` array")
    }
    // Anything but an array holds no finding, as before.
    fn visit_unit<E: serde::de::Error>(self) -> Result<Vec<Identity>, E> {
        Ok(Vec::new())
    }
    fn visit_bool<E: serde::de::Error>(self, _: bool) -> Result<Vec<Identity>, E> {
        Ok(Vec::new())
    }
    fn visit_i64<E: serde::de::Error>(self, _: i64) -> Result<Vec<Identity>, E> {
        Ok(Vec::new())
    }
    fn visit_u64<E: serde::de::Error>(self, _: u64) -> Result<Vec<Identity>, E> {
        Ok(Vec::new())
    }
    fn visit_f64<E: serde::de::Error>(self, _: f64) -> Result<Vec<Identity>, E> {
        Ok(Vec::new())
    }
    fn visit_str<E: serde::de::Error>(self, _: &str) -> Result<Vec<Identity>, E> {
        Ok(Vec::new())
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Vec<Identity>, A::Error> {
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(Vec::new())
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<Identity>, A::Error> {
        let mut out = Vec::new();
        while let Some(f) = seq.next_element::<Value>()? {
            let code = f["code"]
                .as_str()
                .ok_or_else(|| A::Error::custom("a finding without `code`"))?;
            out.push(Identity::of_json("", code, &f));
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names<'a>(id: &'a str, bench: Option<&'a str>) -> RunNames<'a> {
        RunNames {
            shown: id,
            id,
            benchmark_id: bench,
        }
    }

    #[test]
    fn a_run_is_read_whatever_the_order_of_its_keys() {
        let finding = r#"{"code": "cold-connection-bias", "file": "profile_export.jsonl",
            "metric": "m", "series": {"engine": "0"}, "extra": [1, {"a": null}]}"#;
        let early =
            format!(r#"{{"runs": [{{"path": "a/r", "id": "r", "findings": [{finding}]}}]}}"#);
        let late = format!(
            r#"{{"tool": {{"x": 1}}, "runs": [{{"findings": [{finding}], "benchmark_id": "b1", "path": "a/r"}}], "z": []}}"#
        );
        let early = Baseline::parse(&early, "x").expect("a report");
        let late = Baseline::parse(&late, "x").expect("a report");
        assert_eq!(early.len(), 1);
        // Without `id`, the path names the run; with a benchmark_id, the
        // entry is held under both names and counted once for the run.
        assert_eq!(late.len(), 2);
        let subject = [
            "cold-connection-bias",
            "profile_export.jsonl",
            "",
            "m",
            "",
            "engine=0",
        ];
        assert_eq!(
            early
                .entries_of(&names("r", None))
                .into_iter()
                .collect::<Vec<_>>(),
            vec![subject]
        );
        assert_eq!(
            late.entries_of(&names("a/r", Some("b1")))
                .into_iter()
                .collect::<Vec<_>>(),
            vec![subject]
        );
        assert_eq!(late.entries_of(&names("other", Some("b1"))).len(), 1);
        assert!(late.entries_of(&names("other", None)).is_empty());
    }

    #[test]
    fn what_is_no_report_says_why() {
        for (text, why) in [
            ("[]", "invalid type"),
            (r#"{"tool": 1}"#, "no `runs` array"),
            (r#"{"runs": {}}"#, "invalid type"),
            (r#"{"runs": [{"id": "r"}]}"#, "a run without `path`"),
            (
                r#"{"runs": [{"path": "r", "findings": [{"file": "f"}]}]}"#,
                "a finding without `code`",
            ),
            (r#"{"runs": []} x"#, "trailing characters"),
        ] {
            let e = Baseline::parse(text, "x").expect_err(text);
            assert!(e.contains(why), "{text}: {e}");
        }
        // A run without findings, or with `findings` of another type, holds none.
        for text in [
            r#"{"runs": [{"path": "r"}]}"#,
            r#"{"runs": [{"path": "r", "findings": null}]}"#,
        ] {
            assert!(Baseline::parse(text, "x").expect(text).is_empty());
        }
    }
}
