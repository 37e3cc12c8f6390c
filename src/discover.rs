//! Finding run directories under the paths the user named.
//!
//! A run directory holds at least one of AIPerf's marker files. Runs do not
//! nest: below a run directory (its `phases/`, `raw_records/`, `logs/`)
//! nothing is searched, so per-phase exports are never taken for runs of
//! their own. Symlinked directories are followed (fleets lay runs out as
//! links into a store), each directory once by its resolved path: a link
//! back to an ancestor (a cycle) or a second link to the same run is not
//! searched again, and the run is audited once, under the first path that
//! reached it (its report names the resolved path too).

use std::fs;
use std::path::{Path, PathBuf};

use crate::artifacts::is_run_dir;

/// One of `count` disjoint shards of the runs (`--shard INDEX/COUNT`,
/// INDEX from 0): a run belongs to the shard its path's stable hash picks,
/// so every invocation that is given the same paths agrees on the split
/// without a shared listing, and a run added later moves no other run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shard {
    /// This shard, `0..count`.
    pub index: u64,
    /// How many shards the runs are split into.
    pub count: u64,
}

impl Shard {
    /// Whether the run at `path` (as found) is this shard's.
    pub fn keeps(&self, path: &Path) -> bool {
        let key = path.to_string_lossy();
        crate::stats::fnv1a(key.bytes()) % self.count == self.index
    }
}

impl std::str::FromStr for Shard {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let bad = || format!("`{s}`: want INDEX/COUNT with 0 <= INDEX < COUNT, e.g. 0/8");
        let (i, n) = s.split_once('/').ok_or_else(bad)?;
        let index: u64 = i.trim().parse().map_err(|_| bad())?;
        let count: u64 = n.trim().parse().map_err(|_| bad())?;
        if count == 0 || index >= count {
            return Err(bad());
        }
        Ok(Shard { index, count })
    }
}

pub use crate::results::PathError;

/// The run's resolved path when the path to it passes through a symbolic
/// link (the run itself, or a folder above it), else `None`.
pub fn resolved_through_link(run: &Path) -> Option<PathBuf> {
    let linked = run
        .ancestors()
        .filter(|a| !a.as_os_str().is_empty())
        .any(|a| fs::symlink_metadata(a).is_ok_and(|m| m.file_type().is_symlink()));
    linked.then(|| fs::canonicalize(run).ok()).flatten()
}

/// A run's identity, independent of how the path to it was spelled: the
/// audited root's own name (resolved: `.`, `./results`, `results/`, a
/// symlink to it all name `results`) and the run's path below it, with `/`
/// between components (`results/nightly-1`); a run given as the root
/// itself is its own name. What `--baseline` and a `[[scoped-ignore]]`
/// `run` glob match on, so a cosmetic change to a workflow's paths keeps
/// its baseline.
pub fn run_id(root: &Path, run: &Path) -> String {
    let resolve = |p: &Path| fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
    let (root, run) = (resolve(root), resolve(run));
    let name = |p: &Path| {
        p.file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "/".to_string())
    };
    let mut parts = vec![name(&root)];
    if let Ok(below) = run.strip_prefix(&root) {
        parts.extend(
            below
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned()),
        );
    } else {
        return name(&run);
    }
    parts.join("/")
}

/// [`find_shard`], each run with its [`run_id`] under the path it was found
/// under (the first, when several paths reach it).
pub fn find_shard_ids(
    paths: &[PathBuf],
    shard: Option<Shard>,
) -> (Vec<(PathBuf, String)>, Vec<PathError>) {
    let (ids, errors, _) = find_shard_ids_following(paths, shard, true);
    (ids, errors)
}

/// [`find_shard_ids`], following symlinked directories below the given
/// paths or not (`--no-follow-links`); the links not followed are returned
/// (third), each with why: a skipped directory is never silent.
pub fn find_shard_ids_following(
    paths: &[PathBuf],
    shard: Option<Shard>,
    follow: bool,
) -> (Vec<(PathBuf, String)>, Vec<PathError>, Vec<PathError>) {
    let (runs, errors, skipped) = search(paths, shard, follow);
    let ids = runs
        .into_iter()
        .map(|r| {
            let root = paths.iter().find(|p| r.starts_with(p)).unwrap_or(&r);
            let id = run_id(root, &r);
            (r, id)
        })
        .collect();
    (ids, errors, skipped)
}

/// Runs found under `paths`, sorted and de-duplicated, plus the paths that
/// failed. Every path is searched even when another fails.
pub fn find_runs(paths: &[PathBuf]) -> (Vec<PathBuf>, Vec<PathError>) {
    find_shard(paths, None)
}

/// [`find_runs`], keeping only `shard`'s runs when one is given. A path that
/// holds runs, none of them this shard's, is not an error.
pub fn find_shard(paths: &[PathBuf], shard: Option<Shard>) -> (Vec<PathBuf>, Vec<PathError>) {
    let (runs, errors, _) = search(paths, shard, true);
    (runs, errors)
}

/// The search behind [`find_shard`]: the runs, the path errors, and the
/// symlinked directories not followed (only when `follow` is false).
fn search(
    paths: &[PathBuf],
    shard: Option<Shard>,
    follow: bool,
) -> (Vec<PathBuf>, Vec<PathError>, Vec<PathError>) {
    let mut runs = Vec::new();
    let mut errors = Vec::new();
    let mut skipped = Vec::new();
    // Resolved directories already searched: each once.
    let mut seen = std::collections::HashSet::new();
    for p in paths {
        let shown = p.display().to_string();
        match fs::metadata(p) {
            Err(e) => errors.push(PathError {
                path: shown,
                message: format!("cannot read: {e}"),
            }),
            Ok(m) if !m.is_dir() => errors.push(PathError {
                path: shown,
                message: "is not a directory (give a run directory or a folder of runs)".into(),
            }),
            // A path that resolves to a directory already searched (given
            // twice, or below another given path through a link): its runs
            // are audited once already.
            Ok(_) if fs::canonicalize(p).is_ok_and(|c| seen.contains(&c)) => {}
            Ok(_) => {
                let before = runs.len();
                let mut w = Walk {
                    runs: &mut runs,
                    errors: &mut errors,
                    skipped: &mut skipped,
                    seen: &mut seen,
                    follow,
                };
                w.walk(p);
                if runs.len() == before {
                    errors.push(PathError {
                        path: shown,
                        message: format!(
                            "holds no AIPerf run (no {} below it)",
                            crate::artifacts::RUN_MARKERS.join(", ")
                        ),
                    });
                }
            }
        }
    }
    runs.sort();
    runs.dedup();
    // The same run reached under two paths (a link and its target both
    // given): audited once, under the first.
    let mut resolved = std::collections::HashSet::new();
    runs.retain(|r| resolved.insert(fs::canonicalize(r).unwrap_or_else(|_| r.clone())));
    if let Some(shard) = shard {
        runs.retain(|r| shard.keeps(r));
    }
    skipped.sort_by(|a: &PathError, b: &PathError| a.path.cmp(&b.path));
    (runs, errors, skipped)
}

/// One search's state.
struct Walk<'a> {
    runs: &'a mut Vec<PathBuf>,
    errors: &'a mut Vec<PathError>,
    skipped: &'a mut Vec<PathError>,
    seen: &'a mut std::collections::HashSet<PathBuf>,
    follow: bool,
}

impl Walk<'_> {
    fn walk(&mut self, dir: &Path) {
        // A directory reached again (a cycle, or two links to one target) is
        // not searched twice.
        if let Ok(resolved) = fs::canonicalize(dir) {
            if !self.seen.insert(resolved) {
                return;
            }
        }
        if is_run_dir(dir) {
            self.runs.push(dir.to_path_buf());
            return;
        }
        let entries = match fs::read_dir(dir) {
            Ok(e) => e,
            Err(e) => {
                self.errors.push(PathError {
                    path: dir.display().to_string(),
                    message: format!("cannot list: {e}"),
                });
                return;
            }
        };
        // Directories, and links to directories (followed: `metadata`,
        // unless asked not to, and then said).
        let mut subdirs: Vec<PathBuf> = Vec::new();
        for e in entries.filter_map(Result::ok) {
            let Ok(t) = e.file_type() else { continue };
            let linked_dir = t.is_symlink() && fs::metadata(e.path()).is_ok_and(|m| m.is_dir());
            if linked_dir && !self.follow {
                self.skipped.push(PathError {
                    path: e.path().display().to_string(),
                    message: "a symbolic link to a directory, not followed (--no-follow-links)"
                        .into(),
                });
            } else if t.is_dir() || linked_dir {
                subdirs.push(e.path());
            }
        }
        subdirs.sort();
        for d in subdirs {
            self.walk(&d);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_runs_without_descending_into_them_and_names_bad_paths() {
        let t = tempfile::tempdir().expect("tempdir");
        let run = t.path().join("results/run-1");
        fs::create_dir_all(run.join("phases/warmup")).expect("mkdir");
        fs::write(run.join("profile_export.jsonl"), "x").expect("write");
        fs::write(run.join("phases/warmup/profile_export_aiperf.json"), "{}").expect("write");
        fs::create_dir_all(t.path().join("empty")).expect("mkdir");
        let (runs, errors) = find_runs(&[
            t.path().join("results"),
            t.path().join("empty"),
            t.path().join("missing"),
        ]);
        assert_eq!(runs, vec![run]);
        assert_eq!(errors.len(), 2);
        assert!(errors[0].path.ends_with("empty") && errors[0].message.contains("no AIPerf run"));
        assert!(errors[1].path.ends_with("missing"));
    }
}
