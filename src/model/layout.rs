//! What the AIPerf that wrote a run records, and what it never does: the
//! layout a check must know before it calls data missing.
//!
//! AIPerf's result folders changed shape between releases
//! (`docs/aiperf-versions.md`): before 0.12 the server-metrics export has
//! no warmup split (its profiling delta starts at the last periodic scrape
//! before profiling started, so warmup observations after that scrape count
//! in profiling) and `profile_export.jsonl` holds profiling records only;
//! before 0.9 no record carries `usage_prompt_cache_read_tokens`. The files
//! decide where they can (a warmup record, a `warmup_metrics` section, a
//! cached-token field seen); the version decides the rest, and a version
//! this tool does not know (a fork, a development build) is read by its
//! files alone.

use serde::Serialize;

use crate::artifacts::records::{Metric, Phase};
use crate::artifacts::RunArtifacts;

/// An AIPerf release number (`0.11.0`; a suffix such as `.dev3` or `rc1`
/// is ignored).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct Version {
    /// Major.
    pub major: u32,
    /// Minor.
    pub minor: u32,
    /// Patch.
    pub patch: u32,
}

impl Version {
    /// Parses `MAJOR.MINOR[.PATCH][suffix]`; `None` for anything else.
    pub fn parse(s: &str) -> Option<Version> {
        let s = s.trim().trim_start_matches('v');
        let mut parts = s.splitn(3, '.');
        let num = |p: Option<&str>| -> Option<u32> {
            let p = p?;
            let digits = p.len() - p.trim_start_matches(|c: char| c.is_ascii_digit()).len();
            p[..digits].parse().ok()
        };
        let major = num(parts.next())?;
        let minor = num(parts.next())?;
        let patch = num(parts.next()).unwrap_or(0);
        Some(Version {
            major,
            minor,
            patch,
        })
    }

    /// Whether this is an AIPerf release (0.x); forks number their own.
    pub fn is_aiperf(self) -> bool {
        self.major == 0
    }

    /// Whether this AIPerf release is older than `0.minor`.
    fn before(self, minor: u32) -> bool {
        self.is_aiperf() && self.minor < minor
    }
}

impl std::fmt::Display for Version {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}.{}", self.major, self.minor, self.patch)
    }
}

/// What the run's files can hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Layout {
    /// `server_metrics_export.json` splits warmup from profiling
    /// (`warmup_metrics`, `phase_time_ranges`): AIPerf 0.12 on. Without the
    /// split, the profiling delta starts at the last periodic scrape before
    /// profiling started.
    pub server_phase_split: bool,
    /// `profile_export.jsonl` holds the warmup's records (AIPerf 0.12 on).
    pub warmup_records: bool,
    /// Records can carry `usage_prompt_cache_read_tokens` (AIPerf 0.9 on).
    pub cached_tokens: bool,
}

impl Default for Layout {
    /// The current layout: everything recorded.
    fn default() -> Self {
        Layout {
            server_phase_split: true,
            warmup_records: true,
            cached_tokens: true,
        }
    }
}

impl Layout {
    /// The layout of a run: its files first, then its version.
    pub fn of(run: &RunArtifacts, version: Option<Version>) -> Layout {
        let records = run.records.as_ref().map(|r| r.records.as_slice());
        // What the records show, looked for only where the version does not
        // already say it: each is a walk over every record when none has it,
        // on one thread before the model's parallel part.
        let seen_warmup_record =
            || records.is_some_and(|rs| rs.iter().any(|r| r.phase == Phase::Warmup));
        let seen_cached = || {
            records.is_some_and(|rs| {
                rs.iter()
                    .any(|r| r.values.get(Metric::UsagePromptCacheReadTokens).is_some())
            })
        };
        let seen_split = run.server.as_ref().map(|s| {
            s.warmup_metrics.is_some() || s.summary.phase_time_ranges.contains_key("warmup")
        });
        let old = |minor| version.is_some_and(|v| v.before(minor));
        let known = version.is_some_and(Version::is_aiperf);
        let server_phase_split = if known {
            !old(12)
        } else {
            seen_split.unwrap_or(true)
        };
        let warmup_by_version = if known { !old(12) } else { server_phase_split };
        Layout {
            server_phase_split,
            warmup_records: warmup_by_version || seen_warmup_record(),
            cached_tokens: !old(9) || seen_cached(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_parse_with_suffixes_and_order_by_number() {
        let v = |s| Version::parse(s).expect(s);
        assert_eq!(v("0.11.0").minor, 11);
        assert_eq!(v("0.13.0.dev4"), v("0.13.0"));
        assert_eq!(v("v0.9").patch, 0);
        assert_eq!(v("0.12.1rc1").patch, 1);
        assert!(v("0.9.0") < v("0.10.0"));
        assert!(!v("1.0.2").is_aiperf());
        assert_eq!(Version::parse("main"), None);
        assert_eq!(Version::parse(""), None);
        assert_eq!(v("0.7.0").to_string(), "0.7.0");
    }

    #[test]
    fn the_version_decides_what_the_files_cannot_show() {
        let run = RunArtifacts::default();
        let at = |s: &str| Layout::of(&run, Version::parse(s));
        assert_eq!(at("0.13.0"), Layout::default());
        let l = at("0.11.0");
        assert!(!l.server_phase_split && !l.warmup_records && l.cached_tokens);
        let l = at("0.8.0");
        assert!(!l.server_phase_split && !l.warmup_records && !l.cached_tokens);
        // A fork's number says nothing: read by the files (none here).
        assert_eq!(at("1.0.3"), Layout::default());
        assert_eq!(Layout::of(&run, None), Layout::default());
    }
}
