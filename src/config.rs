//! Settings: every threshold and option of every check, with its default,
//! and how they are resolved.
//!
//! Resolution is in layers, each a [`Layer`] (the shape of
//! `artifact-check.toml`, every key optional): the defaults, then the
//! configuration file (found by [`find_config`] or named with `--config`),
//! then the command line's flags, each overriding the one before field by
//! field. [`resolve`] validates every layer in its own terms (a file key or
//! a flag name in the error) and returns the concrete [`Settings`] the checks
//! read. Errors are [`ConfigError`]s naming the file and the key.

use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::findings::{Code, Finding, RunNames, Severity};
use crate::frameworks::ObservedAt;

/// Every threshold, declared once: its settings field and type, default,
/// file key, flag and meaning, per check section. `$gen` is the macro that
/// turns the table into code: here [`settings_from_table!`] (the settings
/// structs and their defaults, the file sections with their keys,
/// validation and effective values, [`THRESHOLDS`] for the documentation),
/// in `cli.rs` the flags. A new threshold is one row; `tests/config.rs`
/// holds docs/configuration.md to [`THRESHOLDS`].
#[doc(hidden)]
#[macro_export]
macro_rules! with_thresholds {
    ($gen:ident) => {
        $gen! {
            /// Thresholds of the `cold_connections` check.
            cold / cold_connections: ColdSettings, ColdLayer, "cold-connections", "cold_connections" {
                dns_ms: f64 = 1.0 => "dns-ms", cold_dns_ms, "MS", non_negative,
                    "DNS lookup above this (ms) makes a request cold.";
                connect_ms: f64 = 1.0 => "connect-ms", cold_connect_ms, "MS", non_negative,
                    "TCP + TLS connect above this (ms) makes a request cold.";
                bias_pct: f64 = 5.0 => "bias-pct", cold_bias_pct, "PCT", non_negative,
                    "Report a statistic biased by cold requests by more than this (%).";
                min_warm: usize = 5 => "min-warm-records", min_warm_records, "N", count,
                    "Fewer warm records than this: too few to tell.";
            } extra {} layer_extra {}
            /// Options of the `phase_contamination` check.
            phase / phase_contamination: PhaseSettings, PhaseLayer, "phase-contamination", "phase_contamination" {
                match_slack_ms: f64 = 20.0 => "match-slack-ms", match_slack_ms, "MS", non_negative,
                    "Slack when matching raw-scrape increments to request events (ms).";
            } extra {
                /// Extra request-scoped metrics (name, observed at `arrival`,
                /// `first_token` or `completion`), added to the built-in table
                /// (`request-scoped-metrics`; not a threshold).
                extra_metrics: Vec<(String, ObservedAt)> = Vec::new();
            } layer_extra {
                /// Metric name → `arrival`, `first_token` or `completion`.
                request_scoped_metrics: Option<BTreeMap<String, String>>;
            }
            /// Thresholds of the `prefix_cache` check.
            prefix / prefix_cache: PrefixSettings, PrefixLayer, "prefix-cache", "prefix_cache" {
                gap_pp: f64 = 1.0 => "gap-pp", cache_gap_pp, "PP", non_negative,
                    "Report a server/client hit-rate gap above this (percentage points).";
                client_summary_pp: f64 = 0.1 => "client-summary-pp", client_summary_pp, "PP", non_negative,
                    "Report AIPerf's `overall_usage_prompt_cache_read_pct` off the records by more than this (pp).";
                prompt_tokens_pct: f64 = 0.5 => "prompt-tokens-pct", prompt_tokens_pct, "PCT", non_negative,
                    "Report server vs client prompt-token totals differing by more than this (%).";
                prefill_overstatement_pct: f64 = 10.0 => "prefill-overstatement-pct", prefill_overstatement_pct, "PCT", non_negative,
                    "Report prefill throughput overstated by more than this (%).";
            } extra {} layer_extra {}
            /// Thresholds of the `steady_state` check.
            steady / steady_state: SteadySettings, SteadyLayer, "steady-state", "steady_state" {
                bias_pct: f64 = 5.0 => "bias-pct", steady_bias_pct, "PCT", non_negative,
                    "Report a statistic the opening wave or the drain tail moves by more than this (%).";
                min_records: usize = 20 => "min-records", steady_min_records, "N", count,
                    "Fewer successful profiling records than this: too few to tell a wave or a tail.";
                wave_ratio: f64 = 1.5 => "wave-ratio", wave_ratio, "RATIO", at_least_one,
                    "An opening wave's median TTFT (less DNS + connect) is at least this many times the steady median (at least 1).";
            } extra {} layer_extra {}
        }
    };
}

/// One threshold as the documentation shows it (a row of
/// docs/configuration.md), from [`with_thresholds!`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ThresholdDoc {
    /// `section.key` in `artifact-check.toml`.
    pub key: &'static str,
    /// The flag without `--`.
    pub flag: &'static str,
    /// The check it belongs to.
    pub check: &'static str,
    /// Its default, as written in the table.
    pub default: &'static str,
    /// What it means.
    pub meaning: &'static str,
}

/// The code a threshold table makes here: each section's settings (the
/// checks read them) with their defaults, its file section (every key
/// optional, unknown keys rejected) with the validation of each key and the
/// effective values, and the documentation rows.
macro_rules! settings_from_table {
    ($(
        $(#[$sdoc:meta])*
        $sfield:ident / $lfield:ident: $Settings:ident, $Layer:ident, $file:literal, $check:literal {
            $( $field:ident: $ty:ty = $default:expr => $key:literal, $flag:ident, $vn:literal, $valid:ident, $meaning:literal; )*
        } extra {
            $( $(#[$xdoc:meta])* $xfield:ident: $xty:ty = $xdefault:expr; )*
        } layer_extra {
            $( $(#[$ydoc:meta])* $yfield:ident: $yty:ty; )*
        }
    )*) => {
        $(
            $(#[$sdoc])*
            #[derive(Debug, Clone, PartialEq)]
            pub struct $Settings {
                $( #[doc = $meaning] pub $field: $ty, )*
                $( $(#[$xdoc])* pub $xfield: $xty, )*
            }

            impl Default for $Settings {
                fn default() -> Self {
                    $Settings {
                        $( $field: $default, )*
                        $( $xfield: $xdefault, )*
                    }
                }
            }

            #[doc = concat!("`[", $file, "]`.")]
            #[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
            #[serde(deny_unknown_fields, rename_all = "kebab-case")]
            #[allow(missing_docs)]
            pub struct $Layer {
                $( #[serde(rename = $key)] pub $field: Option<$ty>, )*
                $( $(#[$ydoc])* pub $yfield: $yty, )*
            }

            impl $Layer {
                /// Validates each threshold this section sets and applies it.
                fn apply_thresholds(&self, s: &mut $Settings, origin: &Origin) -> Result<(), ConfigError> {
                    $(
                        let flag = stringify!($flag).replace('_', "-");
                        if let Some(v) = $valid(origin, concat!($file, ".", $key), &flag, self.$field)? {
                            s.$field = v;
                        }
                    )*
                    Ok(())
                }

                /// The section with every threshold of `s` (extras unset).
                // A section without extras spells every field already.
                #[allow(clippy::needless_update)]
                fn thresholds_of(s: &$Settings) -> $Layer {
                    $Layer {
                        $( $field: Some(s.$field.clone()), )*
                        ..Default::default()
                    }
                }
            }
        )*

        /// Everything the checks read: the fail level, the finding filters
        /// and every check's thresholds (nothing set per invocation: that
        /// is the flow's `RunOptions`).
        #[derive(Debug, Clone, Default, PartialEq)]
        pub struct Settings {
            /// Exit 1 when a finding at or above this severity exists.
            pub fail_on: Severity,
            /// Which findings are reported.
            pub filter: CodeFilter,
            $( #[doc = concat!("`", $check, "`.")] pub $sfield: $Settings, )*
        }

        /// One layer of configuration: the shape of `artifact-check.toml`,
        /// every key optional, unknown keys rejected. The command line's
        /// flags are a layer too.
        #[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
        #[serde(deny_unknown_fields, rename_all = "kebab-case")]
        pub struct Layer {
            /// `error`, `warning` or `info`.
            #[serde(skip_serializing_if = "Option::is_none")]
            pub fail_on: Option<String>,
            /// Only report these codes.
            #[serde(skip_serializing_if = "Option::is_none")]
            pub select: Option<Vec<String>>,
            /// Never report these codes.
            #[serde(skip_serializing_if = "Option::is_none")]
            pub ignore: Option<Vec<String>>,
            /// Codes silenced only for a metric, an endpoint or runs, each
            /// with its reason (file only).
            #[serde(default, skip_serializing_if = "Vec::is_empty")]
            pub scoped_ignore: Vec<ScopedIgnoreLayer>,
            $(
                #[doc = concat!("`[", $file, "]`.")]
                #[serde(default, skip_serializing_if = "Option::is_none")]
                pub $lfield: Option<$Layer>,
            )*
        }

        impl Layer {
            /// Applies the thresholds of every section this layer has.
            fn apply_thresholds(&self, s: &mut Settings, origin: &Origin) -> Result<(), ConfigError> {
                $(
                    if let Some(section) = &self.$lfield {
                        section.apply_thresholds(&mut s.$sfield, origin)?;
                    }
                )*
                Ok(())
            }

            /// Every section with every threshold of `s` (extras unset).
            fn thresholds_of(s: &Settings) -> Layer {
                Layer {
                    $( $lfield: Some($Layer::thresholds_of(&s.$sfield)), )*
                    ..Default::default()
                }
            }
        }

        /// Every threshold, in table order, as the documentation shows it.
        pub const THRESHOLDS: &[ThresholdDoc] = &[
            $($(
                ThresholdDoc {
                    key: concat!($file, ".", $key),
                    flag: stringify!($flag),
                    check: $check,
                    default: stringify!($default),
                    meaning: $meaning,
                },
            )*)*
        ];
    };
}

with_thresholds!(settings_from_table);

/// Which findings are reported: `--select` / `--ignore`, and the scoped
/// ignores of the file.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CodeFilter {
    /// When non-empty, only these codes are reported.
    pub select: Vec<Code>,
    /// These codes are never reported.
    pub ignore: Vec<Code>,
    /// Findings of a code never reported where they concern this metric,
    /// endpoint or run (`[[scoped-ignore]]`, each with its reason).
    pub scoped: Vec<ScopedIgnore>,
}

/// One `[[scoped-ignore]]`: a code silenced only where every given scope
/// matches.
#[derive(Debug, Clone, PartialEq)]
pub struct ScopedIgnore {
    /// The finding code.
    pub code: Code,
    /// The server metric (family), with or without `_total`: a finding
    /// that names it (its `metric`, or one of the `metrics` its cause
    /// moves) is silenced whole.
    pub metric: Option<String>,
    /// The scrape endpoint URL.
    pub endpoint: Option<String>,
    /// A glob over the run: its identity (`results/nightly-*`: the audited
    /// folder's name and the run's path below it, however the path was
    /// spelled) or its path as given.
    pub run: Option<glob::Pattern>,
    /// Why (required).
    pub reason: String,
}

impl ScopedIgnore {
    /// Whether its `run` glob (if any) names the run.
    pub fn applies_to(&self, run: &RunNames) -> bool {
        self.run.as_ref().is_none_or(|g| {
            let shown = run.shown.trim_start_matches("./").trim_end_matches('/');
            g.matches(run.id) || g.matches(run.shown) || g.matches(shown)
        })
    }

    /// Whether this silences `f`, a finding of the run named `run`.
    pub fn silences(&self, f: &Finding, run: &RunNames) -> bool {
        let canon = crate::frameworks::canonical;
        if f.code != self.code {
            return false;
        }
        let id = f.identity(run.id);
        // A finding of one root cause is named by every metric it moves.
        let names = |m: &str| {
            f.metric.iter().any(|x| canon(x) == canon(m))
                || f.metrics.iter().any(|x| canon(&x.metric) == canon(m))
        };
        self.metric.as_deref().is_none_or(names)
            && self
                .endpoint
                .as_deref()
                .is_none_or(|e| f.endpoint.is_some() && id.endpoint == e)
            && self.applies_to(run)
    }
}

impl CodeFilter {
    /// Whether a finding with `code` is kept by `--select` / `--ignore`.
    pub fn keeps(&self, code: Code) -> bool {
        (self.select.is_empty() || self.select.contains(&code)) && !self.ignore.contains(&code)
    }

    /// Whether `f`, a finding of the run named `run`, is reported.
    pub fn keeps_finding(&self, f: &Finding, run: &RunNames) -> bool {
        self.keeps(f.code) && self.silencer(f, run).is_none()
    }

    /// The scoped ignore that silences `f`, if one does.
    pub fn silencer(&self, f: &Finding, run: &RunNames) -> Option<&ScopedIgnore> {
        self.scoped.iter().find(|s| s.silences(f, run))
    }
}

/// A configuration that could not be used: what, where, and which key.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// A file could not be read.
    #[error("{}: {why}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why (shown in the message; not a `source`, so an error chain
        /// does not print it twice).
        why: io::Error,
    },
    /// A file is not valid TOML or has an unknown key (the message names
    /// the key and the line).
    #[error("{}: {message}", path.display())]
    Syntax {
        /// The file.
        path: PathBuf,
        /// The parser's message.
        message: String,
    },
    /// A value is out of range or of the wrong kind.
    #[error("{origin}{key}: {message}")]
    Value {
        /// Where the value came from.
        origin: Origin,
        /// The file key or the flag (`--cold-bias-pct`).
        key: String,
        /// What is wrong with it.
        message: String,
    },
    /// The current directory, where the search for the file starts, is unknown.
    #[error("cannot search for {CONFIG_FILE}: the current directory is unknown: {0}")]
    CurrentDir(io::Error),
}

/// Where a setting came from.
#[derive(Debug, Clone, PartialEq)]
pub enum Origin {
    /// A configuration file.
    File(PathBuf),
    /// The command line.
    CommandLine,
}

impl std::fmt::Display for Origin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Origin::File(p) => write!(f, "{}: ", p.display()),
            Origin::CommandLine => Ok(()),
        }
    }
}

impl Origin {
    /// How a key is named here: the file's `section.key`, or the flag.
    fn key(&self, file_key: &str, flag: &str) -> String {
        match self {
            Origin::File(_) => file_key.to_string(),
            Origin::CommandLine => format!("--{flag}"),
        }
    }
}

/// `[[scoped-ignore]]` as written.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ScopedIgnoreLayer {
    /// The finding code.
    pub code: String,
    /// The server metric.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metric: Option<String>,
    /// The scrape endpoint URL.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<String>,
    /// A glob over the run's path.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub run: Option<String>,
    /// Why the finding is acceptable there (required).
    #[serde(default)]
    pub reason: String,
}

impl ScopedIgnoreLayer {
    fn resolve(
        &self,
        i: usize,
        origin: &Origin,
        lookup: CodeLookup,
    ) -> Result<ScopedIgnore, ConfigError> {
        let err = |message: String| ConfigError::Value {
            origin: origin.clone(),
            key: format!("scoped-ignore[{i}]"),
            message,
        };
        let code = lookup(self.code.trim()).ok_or_else(|| {
            err(format!(
                "unknown finding code {:?} (see `artifact-check codes`)",
                self.code
            ))
        })?;
        if self.reason.trim().is_empty() {
            return Err(err(
                "a scoped ignore needs a reason (reason = \"...\")".into()
            ));
        }
        if self.metric.is_none() && self.endpoint.is_none() && self.run.is_none() {
            return Err(err(
                "give metric, endpoint or run (to silence a code everywhere, use ignore = [...])"
                    .into(),
            ));
        }
        let run = match &self.run {
            Some(g) => Some(glob::Pattern::new(g).map_err(|e| err(format!("run = {g:?}: {e}")))?),
            None => None,
        };
        Ok(ScopedIgnore {
            code,
            metric: self.metric.clone(),
            endpoint: self.endpoint.clone(),
            run,
            reason: self.reason.clone(),
        })
    }
}

impl PhaseLayer {
    /// The request-scoped metrics this section adds (not thresholds).
    fn apply_extras(&self, s: &mut PhaseSettings, origin: &Origin) -> Result<(), ConfigError> {
        for (name, when) in self.request_scoped_metrics.iter().flatten() {
            let bad = |message: String| ConfigError::Value {
                origin: origin.clone(),
                key: origin.key(
                    &format!("phase-contamination.request-scoped-metrics.{name:?}"),
                    &format!("request-scoped-metric {name}"),
                ),
                message,
            };
            if name.is_empty() {
                return Err(bad("empty metric name".into()));
            }
            let at = ObservedAt::parse(when).ok_or_else(|| {
                bad(format!(
                    "{when:?} is not arrival, first_token or completion"
                ))
            })?;
            s.extra_metrics.push((name.clone(), at));
        }
        Ok(())
    }
}

/// The file name searched for.
pub const CONFIG_FILE: &str = "artifact-check.toml";

/// `artifact-check.toml` in `start` or its nearest parent that has one.
pub fn find_config(start: &Path) -> Option<PathBuf> {
    start
        .ancestors()
        .map(|d| d.join(CONFIG_FILE))
        .find(|p| p.is_file())
}

/// Reads and parses a configuration file.
pub fn read_config(path: &Path) -> Result<Layer, ConfigError> {
    let text = crate::files::read_regular_to_string(path, crate::files::MAX_SETTINGS_BYTES)
        .map_err(|why| ConfigError::Read {
            path: path.to_path_buf(),
            why,
        })?;
    parse_config(&text, path)
}

/// The layer of the text of the configuration file `path`.
pub fn parse_config(text: &str, path: &Path) -> Result<Layer, ConfigError> {
    toml::from_str(text).map_err(|e| ConfigError::Syntax {
        path: path.to_path_buf(),
        message: e.to_string(),
    })
}

/// The file layer: `explicit`, or the nearest `artifact-check.toml` from the
/// current directory up; `None` when there is none.
pub fn load_config(explicit: Option<&Path>) -> Result<Option<(PathBuf, Layer)>, ConfigError> {
    let path = match explicit {
        Some(p) => p.to_path_buf(),
        None => {
            let cwd = std::env::current_dir().map_err(ConfigError::CurrentDir)?;
            match find_config(&cwd) {
                Some(p) => p,
                None => return Ok(None),
            }
        }
    };
    read_config(&path).map(|c| Some((path, c)))
}

/// The settings in force, and what they were resolved from.
#[derive(Debug, Clone)]
pub struct Resolved {
    /// The concrete settings.
    pub settings: Settings,
    /// The configuration file applied, if any.
    pub file: Option<PathBuf>,
}

/// Looks a finding code up by its id (the registry's [`crate::code`];
/// passed in, so that configuration does not depend on the checks).
pub type CodeLookup = fn(&str) -> Option<Code>;

/// Defaults, then the configuration file (`explicit`, or the one found from
/// the current directory up), then `flags`.
pub fn resolve(
    explicit: Option<&Path>,
    flags: &Layer,
    codes: CodeLookup,
) -> Result<Resolved, ConfigError> {
    let mut settings = Settings::default();
    let file = match load_config(explicit)? {
        Some((path, layer)) => {
            layer.apply(&mut settings, &Origin::File(path.clone()), codes)?;
            Some(path)
        }
        None => None,
    };
    flags.apply(&mut settings, &Origin::CommandLine, codes)?;
    Ok(Resolved { settings, file })
}

/// A threshold must be a finite, non-negative number.
/// A threshold that is a non-negative number.
fn non_negative(
    origin: &Origin,
    file_key: &str,
    flag: &str,
    v: Option<f64>,
) -> Result<Option<f64>, ConfigError> {
    match v {
        Some(x) if !(x.is_finite() && x >= 0.0) => Err(ConfigError::Value {
            origin: origin.clone(),
            key: origin.key(file_key, flag),
            message: format!("must be a non-negative number, not {x}"),
        }),
        v => Ok(v),
    }
}

/// A threshold that is a ratio of a slower to a faster median: at least 1.
fn at_least_one(
    origin: &Origin,
    file_key: &str,
    flag: &str,
    v: Option<f64>,
) -> Result<Option<f64>, ConfigError> {
    match non_negative(origin, file_key, flag, v)? {
        Some(x) if x < 1.0 => Err(ConfigError::Value {
            origin: origin.clone(),
            key: origin.key(file_key, flag),
            message: format!("must be at least 1 (a wave is slower than steady state), not {x}"),
        }),
        v => Ok(v),
    }
}

/// A threshold that is a count (its type already makes it whole and
/// non-negative).
fn count(
    _origin: &Origin,
    _file_key: &str,
    _flag: &str,
    v: Option<usize>,
) -> Result<Option<usize>, ConfigError> {
    Ok(v)
}

fn codes(
    origin: &Origin,
    key: &str,
    names: &[String],
    lookup: CodeLookup,
) -> Result<Vec<Code>, ConfigError> {
    names
        .iter()
        .filter(|c| !c.trim().is_empty())
        .map(|c| {
            lookup(c.trim()).ok_or_else(|| ConfigError::Value {
                origin: origin.clone(),
                key: origin.key(key, key),
                message: format!("unknown finding code {c:?} (see `artifact-check codes`)"),
            })
        })
        .collect()
}

impl Layer {
    /// Applies this layer over `s`: every key it sets replaces the value
    /// there; `select`/`ignore` replace the lists whole.
    pub fn apply(
        &self,
        s: &mut Settings,
        origin: &Origin,
        lookup: CodeLookup,
    ) -> Result<(), ConfigError> {
        if let Some(f) = &self.fail_on {
            s.fail_on = f.parse().map_err(|_| ConfigError::Value {
                origin: origin.clone(),
                key: origin.key("fail-on", "fail-on"),
                message: format!("{f:?} is not error, warning or info"),
            })?;
        }
        if let Some(names) = &self.select {
            s.filter.select = codes(origin, "select", names, lookup)?;
        }
        if let Some(names) = &self.ignore {
            s.filter.ignore = codes(origin, "ignore", names, lookup)?;
        }
        for (i, e) in self.scoped_ignore.iter().enumerate() {
            s.filter.scoped.push(e.resolve(i, origin, lookup)?);
        }
        self.apply_thresholds(s, origin)?;
        if let Some(p) = &self.phase_contamination {
            p.apply_extras(&mut s.phase, origin)?;
        }
        Ok(())
    }

    /// The effective configuration of `s`, as a file.
    pub fn effective(s: &Settings) -> Layer {
        let names = |codes: &[Code]| codes.iter().map(|c| c.as_str().to_string()).collect();
        let mut thresholds = Layer::thresholds_of(s);
        if let Some(p) = thresholds.phase_contamination.as_mut() {
            p.request_scoped_metrics = Some(
                s.phase
                    .extra_metrics
                    .iter()
                    .map(|(n, a)| (n.clone(), a.as_str().to_string()))
                    .collect(),
            );
        }
        Layer {
            fail_on: Some(s.fail_on.as_str().to_string()),
            select: Some(names(&s.filter.select)),
            ignore: Some(names(&s.filter.ignore)),
            scoped_ignore: s
                .filter
                .scoped
                .iter()
                .map(|e| ScopedIgnoreLayer {
                    code: e.code.as_str().to_string(),
                    metric: e.metric.clone(),
                    endpoint: e.endpoint.clone(),
                    run: e.run.as_ref().map(|g| g.as_str().to_string()),
                    reason: e.reason.clone(),
                })
                .collect(),
            ..thresholds
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_keys_are_rejected_with_their_name() {
        let e = toml::from_str::<Layer>("fail-on = \"warning\"\n[cold-connections]\nbias = 3\n")
            .expect_err("unknown key");
        assert!(e.to_string().contains("unknown field `bias`"), "{e}");
    }

    #[test]
    fn file_values_apply_and_round_trip() {
        let f: Layer = toml::from_str(
            "[prefix-cache]\ngap-pp = 2.5\n[phase-contamination.request-scoped-metrics]\n\"my:metric\" = \"completion\"\n",
        )
        .expect("parses");
        let mut s = Settings::default();
        f.apply(&mut s, &Origin::File("x.toml".into()), |_| None)
            .expect("applies");
        assert_eq!(s.prefix.gap_pp, 2.5);
        assert_eq!(s.phase.extra_metrics.len(), 1);
        let eff = Layer::effective(&s);
        let text = toml::to_string(&eff).expect("serializes");
        let back: Layer = toml::from_str(&text).expect("round trip");
        assert_eq!(back, eff);
    }

    #[test]
    fn a_bad_value_is_named_by_its_file_key_or_its_flag() {
        let layer = Layer {
            prefix_cache: Some(PrefixLayer {
                gap_pp: Some(-1.0),
                ..Default::default()
            }),
            ..Default::default()
        };
        let mut s = Settings::default();
        let file = layer.apply(&mut s, &Origin::File("a.toml".into()), |_| None);
        let flag = layer.apply(&mut s, &Origin::CommandLine, |_| None);
        assert_eq!(
            file.expect_err("bad").to_string(),
            "a.toml: prefix-cache.gap-pp: must be a non-negative number, not -1"
        );
        assert_eq!(
            flag.expect_err("bad").to_string(),
            "--cache-gap-pp: must be a non-negative number, not -1"
        );
    }
}
