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

impl Baseline {
    /// Reads a JSON report written by `--format json` (or `--report json=`).
    pub fn read(path: &Path) -> Result<Baseline, BaselineError> {
        let text = crate::files::read_regular_to_string(path, crate::files::MAX_BASELINE_BYTES)
            .map_err(|why| BaselineError::Read {
                path: path.to_path_buf(),
                why,
            })?;
        let bad = |why: String| BaselineError::NotAReport {
            path: path.to_path_buf(),
            why,
        };
        let v: Value = serde_json::from_str(&text).map_err(|e| bad(e.to_string()))?;
        let runs = v["runs"]
            .as_array()
            .ok_or_else(|| bad("no `runs` array".into()))?;
        let mut keys = BTreeSet::new();
        for r in runs {
            let path = r["path"]
                .as_str()
                .ok_or_else(|| bad("a run without `path`".into()))?;
            // The run's identity (reports before it had none: the path),
            // and its benchmark_id.
            let mut names = vec![r["id"].as_str().unwrap_or(path).to_string()];
            names.extend(r["benchmark_id"].as_str().map(RunNames::benchmark_key));
            for f in r["findings"].as_array().into_iter().flatten() {
                let code = f["code"]
                    .as_str()
                    .ok_or_else(|| bad("a finding without `code`".into()))?;
                for run in &names {
                    keys.insert(Identity::of_json(run, code, f));
                }
            }
        }
        Ok(Baseline {
            keys,
            source: format!("in the baseline {}", path.display()),
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
    /// `benchmark_id`), each as the identity a finding of that run would
    /// have.
    pub fn entries_of(&self, run: &RunNames) -> BTreeSet<Identity> {
        let bench = run.benchmark_id.map(RunNames::benchmark_key);
        self.keys
            .iter()
            .filter(|k| k.run == run.id || Some(&k.run) == bench.as_ref())
            .map(|k| Identity {
                run: run.id.to_string(),
                ..k.clone()
            })
            .collect()
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
