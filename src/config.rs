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

use crate::findings::{Code, Finding, Severity};
use crate::frameworks::ObservedAt;

/// Thresholds of the `cold_connections` check.
#[derive(Debug, Clone, PartialEq)]
pub struct ColdSettings {
    /// A record whose `http_req_dns_lookup` exceeds this (ms) is cold.
    pub dns_ms: f64,
    /// A record whose `http_req_connecting` (TCP + TLS) exceeds this (ms) is cold.
    pub connect_ms: f64,
    /// Finding when a published statistic over all records differs from the
    /// warm-only one by more than this (percent).
    pub bias_pct: f64,
    /// Fewer warm records than this: too few to tell.
    pub min_warm: usize,
}

impl Default for ColdSettings {
    fn default() -> Self {
        ColdSettings {
            dns_ms: 1.0,
            connect_ms: 1.0,
            bias_pct: 5.0,
            min_warm: 5,
        }
    }
}

/// Options of the `phase_contamination` check.
#[derive(Debug, Clone, PartialEq)]
pub struct PhaseSettings {
    /// Extra request-scoped metrics (name, observed at `arrival`,
    /// `first_token` or `completion`), added to the built-in table.
    pub extra_metrics: Vec<(String, ObservedAt)>,
    /// Slack (ms) when matching a scrape increment to the request whose
    /// event it records: client and server clocks and the scrape's own
    /// latency put the two a little apart.
    pub match_slack_ms: f64,
}

impl Default for PhaseSettings {
    fn default() -> Self {
        PhaseSettings {
            extra_metrics: Vec::new(),
            match_slack_ms: 20.0,
        }
    }
}

/// Thresholds of the `prefix_cache` check.
#[derive(Debug, Clone, PartialEq)]
pub struct PrefixSettings {
    /// Finding when |server - client| hit rate exceeds this (percentage points).
    pub gap_pp: f64,
    /// Finding when AIPerf's `overall_usage_prompt_cache_read_pct` differs
    /// from the records by more than this (percentage points).
    pub client_summary_pp: f64,
    /// Finding when server and client prompt-token totals differ by more than
    /// this (percent).
    pub prompt_tokens_pct: f64,
    /// Finding when the published prefill throughput overstates the uncached
    /// one by more than this (percent).
    pub prefill_overstatement_pct: f64,
}

impl Default for PrefixSettings {
    fn default() -> Self {
        PrefixSettings {
            gap_pp: 1.0,
            client_summary_pp: 0.1,
            prompt_tokens_pct: 0.5,
            prefill_overstatement_pct: 10.0,
        }
    }
}

/// Thresholds of the `steady_state` check.
#[derive(Debug, Clone, PartialEq)]
pub struct SteadySettings {
    /// Finding when a published statistic over all profiling records
    /// differs from the steady-state one by more than this (percent).
    pub bias_pct: f64,
    /// Fewer successful profiling records than this: too few to tell a
    /// wave or a tail from the rest.
    pub min_records: usize,
    /// An opening wave's median TTFT (latency without streaming) is at
    /// least this many times the steady median.
    pub wave_ratio: f64,
}

impl Default for SteadySettings {
    fn default() -> Self {
        SteadySettings {
            bias_pct: 5.0,
            min_records: 20,
            wave_ratio: 1.5,
        }
    }
}

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
    /// The server metric (family), with or without `_total`.
    pub metric: Option<String>,
    /// The scrape endpoint URL.
    pub endpoint: Option<String>,
    /// A glob over the run directory's path as reported (`results/nightly-*`).
    pub run: Option<glob::Pattern>,
    /// Why (required).
    pub reason: String,
}

impl ScopedIgnore {
    /// Whether this silences `f`, a finding of the run at `run`.
    pub fn silences(&self, f: &Finding, run: &str) -> bool {
        let canon = crate::frameworks::canonical;
        if f.code != self.code {
            return false;
        }
        let id = f.identity(run);
        self.metric
            .as_deref()
            .is_none_or(|m| f.metric.is_some() && canon(&id.metric) == canon(m))
            && self
                .endpoint
                .as_deref()
                .is_none_or(|e| f.endpoint.is_some() && id.endpoint == e)
            && self
                .run
                .as_ref()
                .is_none_or(|g| g.matches(run) || g.matches(&id.run))
    }
}

impl CodeFilter {
    /// Whether a finding with `code` is kept by `--select` / `--ignore`.
    pub fn keeps(&self, code: Code) -> bool {
        (self.select.is_empty() || self.select.contains(&code)) && !self.ignore.contains(&code)
    }

    /// Whether `f`, a finding of the run at `run`, is reported.
    pub fn keeps_finding(&self, f: &Finding, run: &str) -> bool {
        self.keeps(f.code) && !self.scoped.iter().any(|s| s.silences(f, run))
    }
}

/// Everything the checks and the report need.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Settings {
    /// Exit 1 when a finding at or above this severity exists.
    pub fail_on: Severity,
    /// Which findings are reported.
    pub filter: CodeFilter,
    /// `cold_connections`.
    pub cold: ColdSettings,
    /// `phase_contamination`.
    pub phase: PhaseSettings,
    /// `prefix_cache`.
    pub prefix: PrefixSettings,
    /// `steady_state`.
    pub steady: SteadySettings,
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

/// One layer of configuration: the shape of `artifact-check.toml`, every key
/// optional, unknown keys rejected. The command line's flags are a layer too.
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
    /// Codes silenced only for a metric, an endpoint or runs, each with
    /// its reason (file only).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub scoped_ignore: Vec<ScopedIgnoreLayer>,
    /// `cold_connections` thresholds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cold_connections: Option<ColdLayer>,
    /// `phase_contamination` options.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase_contamination: Option<PhaseLayer>,
    /// `prefix_cache` thresholds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefix_cache: Option<PrefixLayer>,
    /// `steady_state` thresholds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub steady_state: Option<SteadyLayer>,
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

impl ColdLayer {
    fn apply(&self, s: &mut ColdSettings, origin: &Origin) -> Result<(), ConfigError> {
        let t = |file_key, flag, v| threshold(origin, file_key, flag, v);
        if let Some(v) = t("cold-connections.dns-ms", "cold-dns-ms", self.dns_ms)? {
            s.dns_ms = v;
        }
        if let Some(v) = t(
            "cold-connections.connect-ms",
            "cold-connect-ms",
            self.connect_ms,
        )? {
            s.connect_ms = v;
        }
        if let Some(v) = t("cold-connections.bias-pct", "cold-bias-pct", self.bias_pct)? {
            s.bias_pct = v;
        }
        if let Some(v) = self.min_warm_records {
            s.min_warm = v;
        }
        Ok(())
    }
}

impl PhaseLayer {
    fn apply(&self, s: &mut PhaseSettings, origin: &Origin) -> Result<(), ConfigError> {
        let slack = self.match_slack_ms;
        let key = "phase-contamination.match-slack-ms";
        if let Some(v) = threshold(origin, key, "match-slack-ms", slack)? {
            s.match_slack_ms = v;
        }
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

impl PrefixLayer {
    fn apply(&self, s: &mut PrefixSettings, origin: &Origin) -> Result<(), ConfigError> {
        let t = |file_key, flag, v| threshold(origin, file_key, flag, v);
        if let Some(v) = t("prefix-cache.gap-pp", "cache-gap-pp", self.gap_pp)? {
            s.gap_pp = v;
        }
        let pp = self.client_summary_pp;
        if let Some(v) = t("prefix-cache.client-summary-pp", "client-summary-pp", pp)? {
            s.client_summary_pp = v;
        }
        let pct = self.prompt_tokens_pct;
        if let Some(v) = t("prefix-cache.prompt-tokens-pct", "prompt-tokens-pct", pct)? {
            s.prompt_tokens_pct = v;
        }
        if let Some(v) = t(
            "prefix-cache.prefill-overstatement-pct",
            "prefill-overstatement-pct",
            self.prefill_overstatement_pct,
        )? {
            s.prefill_overstatement_pct = v;
        }
        Ok(())
    }
}

impl SteadyLayer {
    fn apply(&self, s: &mut SteadySettings, origin: &Origin) -> Result<(), ConfigError> {
        let t = |file_key, flag, v| threshold(origin, file_key, flag, v);
        if let Some(v) = t("steady-state.bias-pct", "steady-bias-pct", self.bias_pct)? {
            s.bias_pct = v;
        }
        if let Some(v) = self.min_records {
            s.min_records = v;
        }
        if let Some(v) = t("steady-state.wave-ratio", "wave-ratio", self.wave_ratio)? {
            if v < 1.0 {
                return Err(ConfigError::Value {
                    origin: origin.clone(),
                    key: origin.key("steady-state.wave-ratio", "wave-ratio"),
                    message: format!(
                        "must be at least 1 (a wave is slower than steady state), not {v}"
                    ),
                });
            }
            s.wave_ratio = v;
        }
        Ok(())
    }
}

/// `[steady-state]`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
#[allow(missing_docs)]
pub struct SteadyLayer {
    pub bias_pct: Option<f64>,
    pub min_records: Option<usize>,
    pub wave_ratio: Option<f64>,
}

/// `[cold-connections]`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
#[allow(missing_docs)]
pub struct ColdLayer {
    pub dns_ms: Option<f64>,
    pub connect_ms: Option<f64>,
    pub bias_pct: Option<f64>,
    pub min_warm_records: Option<usize>,
}

/// `[phase-contamination]`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
#[allow(missing_docs)]
pub struct PhaseLayer {
    pub match_slack_ms: Option<f64>,
    /// Metric name → `arrival`, `first_token` or `completion`.
    pub request_scoped_metrics: Option<BTreeMap<String, String>>,
}

/// `[prefix-cache]`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
#[allow(missing_docs)]
pub struct PrefixLayer {
    pub gap_pp: Option<f64>,
    pub client_summary_pp: Option<f64>,
    pub prompt_tokens_pct: Option<f64>,
    pub prefill_overstatement_pct: Option<f64>,
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
    let text = crate::files::read_regular_to_string(path).map_err(|why| ConfigError::Read {
        path: path.to_path_buf(),
        why,
    })?;
    toml::from_str(&text).map_err(|e| ConfigError::Syntax {
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
fn threshold(
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
        if let Some(c) = &self.cold_connections {
            c.apply(&mut s.cold, origin)?;
        }
        if let Some(p) = &self.phase_contamination {
            p.apply(&mut s.phase, origin)?;
        }
        if let Some(p) = &self.prefix_cache {
            p.apply(&mut s.prefix, origin)?;
        }
        if let Some(p) = &self.steady_state {
            p.apply(&mut s.steady, origin)?;
        }
        Ok(())
    }

    /// The effective configuration of `s`, as a file.
    pub fn effective(s: &Settings) -> Layer {
        let names = |codes: &[Code]| codes.iter().map(|c| c.as_str().to_string()).collect();
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
            cold_connections: Some(ColdLayer {
                dns_ms: Some(s.cold.dns_ms),
                connect_ms: Some(s.cold.connect_ms),
                bias_pct: Some(s.cold.bias_pct),
                min_warm_records: Some(s.cold.min_warm),
            }),
            phase_contamination: Some(PhaseLayer {
                match_slack_ms: Some(s.phase.match_slack_ms),
                request_scoped_metrics: Some(
                    s.phase
                        .extra_metrics
                        .iter()
                        .map(|(n, a)| (n.clone(), a.as_str().to_string()))
                        .collect(),
                ),
            }),
            prefix_cache: Some(PrefixLayer {
                gap_pp: Some(s.prefix.gap_pp),
                client_summary_pp: Some(s.prefix.client_summary_pp),
                prompt_tokens_pct: Some(s.prefix.prompt_tokens_pct),
                prefill_overstatement_pct: Some(s.prefix.prefill_overstatement_pct),
            }),
            steady_state: Some(SteadyLayer {
                bias_pct: Some(s.steady.bias_pct),
                min_records: Some(s.steady.min_records),
                wave_ratio: Some(s.steady.wave_ratio),
            }),
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
