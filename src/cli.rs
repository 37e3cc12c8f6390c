//! Command-line arguments and their resolution into [`Settings`].

use std::path::{Path, PathBuf};

use clap::{Args, Parser, Subcommand, ValueEnum};

use crate::config::{find_config, read_config, FileConfig, Settings};
use crate::findings::{Code, Severity};
use crate::frameworks::ObservedAt;
use crate::report::Format;
use crate::CodeFilter;

const EXIT_CODES: &str = "\
Exit codes:
  0  no finding at or above the fail level (--fail-on, default error)
  1  at least one finding at or above the fail level
  2  the tool could not do its job: bad arguments, a path that does not exist
     or holds no AIPerf run, or a run none of whose artifacts could be read";

/// Audits AIPerf benchmark result directories before their numbers are trusted.
#[derive(Debug, Parser)]
#[command(name = "artifact-check", version, after_help = EXIT_CODES, args_conflicts_with_subcommands = true)]
pub struct Cli {
    /// What to do; without a subcommand, audit the PATHs.
    #[command(subcommand)]
    pub command: Option<Command>,
    /// Audit options.
    #[command(flatten)]
    pub audit: AuditArgs,
}

/// Subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Write the per-request table of the records worth keeping, and the
    /// statistics recomputed over them, into a new directory.
    Clean(CleanArgs),
    /// List every finding code with its check, severity and meaning.
    Codes,
    /// Print the effective configuration (defaults, then the config file) as TOML.
    Config {
        /// Read this file instead of searching for artifact-check.toml.
        #[arg(long, value_name = "FILE")]
        config: Option<PathBuf>,
    },
}

/// `artifact-check [OPTIONS] PATH...`
#[derive(Debug, Args)]
pub struct AuditArgs {
    /// Run directories, or folders searched recursively for run directories.
    #[arg(value_name = "PATH")]
    pub paths: Vec<PathBuf>,
    /// Output format [default: table].
    #[arg(long, value_enum)]
    pub format: Option<Format>,
    /// Write the report to FILE (atomically) instead of standard output.
    #[arg(long, short, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Exit 1 when a finding at or above this severity exists [default: error].
    #[arg(long, value_enum)]
    pub fail_on: Option<FailOn>,
    /// Configuration file [default: artifact-check.toml in the current
    /// directory or its nearest parent that has one].
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Check published claims (a TOML file of [[claim]] entries) against the
    /// artifacts after cleaning; see docs/ci.md.
    #[arg(long, value_name = "FILE")]
    pub expect: Option<PathBuf>,
    /// Only report these finding codes (comma-separated).
    #[arg(long, value_delimiter = ',', value_name = "CODES")]
    pub select: Vec<String>,
    /// Never report these finding codes (comma-separated).
    #[arg(long, value_delimiter = ',', value_name = "CODES")]
    pub ignore: Vec<String>,
    /// Check this many runs in parallel [default: all cores].
    #[arg(long, short)]
    pub jobs: Option<usize>,
    /// Never colour the output (also: the NO_COLOR environment variable).
    #[arg(long)]
    pub no_color: bool,
    /// Thresholds.
    #[command(flatten)]
    pub thresholds: Thresholds,
}

/// Check thresholds; defaults in docs/checks.md.
#[derive(Debug, Args, Clone, Default)]
pub struct Thresholds {
    /// cold_connections: DNS lookup above this many ms makes a request cold [default: 1].
    #[arg(long, value_name = "MS")]
    pub cold_dns_ms: Option<f64>,
    /// cold_connections: TCP+TLS connect above this many ms makes a request cold [default: 1].
    #[arg(long, value_name = "MS")]
    pub cold_connect_ms: Option<f64>,
    /// cold_connections: report a statistic biased by more than this percent [default: 5].
    #[arg(long, value_name = "PCT")]
    pub cold_bias_pct: Option<f64>,
    /// cold_connections: fewer warm records than this are too few to tell [default: 5].
    #[arg(long, value_name = "N")]
    pub min_warm_records: Option<usize>,
    /// prefix_cache: report a server/client gap above this many points [default: 1].
    #[arg(long, value_name = "PP")]
    pub cache_gap_pp: Option<f64>,
    /// prefix_cache: report AIPerf's overall_usage_prompt_cache_read_pct off the records by
    /// more than this many points [default: 0.1].
    #[arg(long, value_name = "PP")]
    pub client_summary_pp: Option<f64>,
    /// prefix_cache: report server vs client prompt-token totals differing by more than this
    /// percent [default: 0.5].
    #[arg(long, value_name = "PCT")]
    pub prompt_tokens_pct: Option<f64>,
    /// prefix_cache: report prefill throughput overstated by more than this percent [default: 10].
    #[arg(long, value_name = "PCT")]
    pub prefill_overstatement_pct: Option<f64>,
    /// phase_contamination: slack when matching scrape increments to requests [default: 20].
    #[arg(long, value_name = "MS")]
    pub match_slack_ms: Option<f64>,
    /// phase_contamination: an extra request-scoped metric, NAME=arrival|first_token|completion
    /// (repeatable).
    #[arg(long, value_name = "NAME=WHEN")]
    pub request_scoped_metric: Vec<String>,
}

/// `--fail-on`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum FailOn {
    /// Errors only.
    Error,
    /// Warnings and errors.
    Warning,
    /// Any finding.
    Info,
}

/// `artifact-check clean RUN --out DIR`.
#[derive(Debug, Args)]
pub struct CleanArgs {
    /// The run directory.
    pub run: PathBuf,
    /// Directory to write into (created; must not be inside the run).
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
    /// Drop records that paid for DNS or connect.
    #[arg(long)]
    pub exclude_cold: bool,
    /// Drop failed and cancelled records.
    #[arg(long)]
    pub exclude_errors: bool,
    /// Drop the first turn of every session.
    #[arg(long)]
    pub exclude_first_turns: bool,
    /// Also write requests.parquet (needs the `parquet` cargo feature).
    #[arg(long)]
    pub parquet: bool,
    /// Replace existing files in DIR.
    #[arg(long)]
    pub force: bool,
    /// Thresholds used to classify connections.
    #[command(flatten)]
    pub thresholds: Thresholds,
}

impl Thresholds {
    /// Applies the given thresholds to `s`; an error names the bad value.
    pub fn apply(&self, s: &mut Settings) -> Result<(), String> {
        let non_negative = |flag: &str, v| crate::config::non_negative(&format!("--{flag}"), v);
        if let Some(v) = non_negative("cold-dns-ms", self.cold_dns_ms)? {
            s.cold.dns_ms = v;
        }
        if let Some(v) = non_negative("cold-connect-ms", self.cold_connect_ms)? {
            s.cold.connect_ms = v;
        }
        if let Some(v) = non_negative("cold-bias-pct", self.cold_bias_pct)? {
            s.cold.bias_pct = v;
        }
        if let Some(v) = self.min_warm_records {
            s.cold.min_warm = v;
        }
        if let Some(v) = non_negative("cache-gap-pp", self.cache_gap_pp)? {
            s.prefix.gap_pp = v;
        }
        if let Some(v) = non_negative("client-summary-pp", self.client_summary_pp)? {
            s.prefix.client_summary_pp = v;
        }
        if let Some(v) = non_negative("prompt-tokens-pct", self.prompt_tokens_pct)? {
            s.prefix.prompt_tokens_pct = v;
        }
        if let Some(v) = non_negative("prefill-overstatement-pct", self.prefill_overstatement_pct)?
        {
            s.prefix.prefill_overstatement_pct = v;
        }
        if let Some(v) = non_negative("match-slack-ms", self.match_slack_ms)? {
            s.phase.match_slack_ms = v;
        }
        for spec in &self.request_scoped_metric {
            let (name, when) = spec
                .split_once('=')
                .ok_or_else(|| format!("--request-scoped-metric {spec:?}: expected NAME=WHEN"))?;
            let at = ObservedAt::parse(when).ok_or_else(|| {
                format!("--request-scoped-metric {spec:?}: WHEN must be arrival, first_token or completion")
            })?;
            if name.is_empty() {
                return Err(format!(
                    "--request-scoped-metric {spec:?}: empty metric name"
                ));
            }
            s.phase.extra_metrics.push((name.to_string(), at));
        }
        Ok(())
    }
}

fn parse_codes(flag: &str, codes: &[String]) -> Result<Vec<Code>, String> {
    codes
        .iter()
        .filter(|c| !c.trim().is_empty())
        .map(|c| {
            Code::parse(c.trim()).ok_or_else(|| {
                format!("--{flag}: unknown finding code {c:?} (see `artifact-check codes`)")
            })
        })
        .collect()
}

/// Loads the configuration file: `explicit`, or the nearest
/// `artifact-check.toml` from the current directory up. `None` when there is none.
pub fn load_config(explicit: Option<&Path>) -> Result<Option<(PathBuf, FileConfig)>, String> {
    let path = match explicit {
        Some(p) => p.to_path_buf(),
        None => {
            let cwd = std::env::current_dir().map_err(|e| e.to_string())?;
            match find_config(&cwd) {
                Some(p) => p,
                None => return Ok(None),
            }
        }
    };
    read_config(&path).map(|c| Some((path, c)))
}

fn severity(name: &str) -> Result<Severity, String> {
    match name {
        "error" => Ok(Severity::Error),
        "warning" => Ok(Severity::Warning),
        "info" => Ok(Severity::Info),
        other => Err(format!("fail-on: {other:?} is not error, warning or info")),
    }
}

/// Defaults with the configuration file applied: the settings, the file (empty
/// when there is none) and where it was found.
pub fn settings_from_file(
    explicit: Option<&Path>,
) -> Result<(Settings, FileConfig, Option<PathBuf>), String> {
    let mut s = Settings::default();
    let (path, file) = match load_config(explicit)? {
        Some((p, f)) => (Some(p), f),
        None => (None, FileConfig::default()),
    };
    let at = |e: String| match &path {
        Some(p) => format!("{}: {e}", p.display()),
        None => e,
    };
    file.apply(&mut s).map_err(at)?;
    if let Some(f) = &file.fail_on {
        s.fail_on = severity(f).map_err(at)?;
    }
    for (flag, codes) in [("select", &file.select), ("ignore", &file.ignore)] {
        parse_codes(flag, codes.as_deref().unwrap_or_default()).map_err(at)?;
    }
    Ok((s, file, path))
}

impl AuditArgs {
    /// Resolves defaults, then the config file, then the flags, into the
    /// settings and the code filter; an error is a usage error (exit 2).
    pub fn resolve(&self) -> Result<(Settings, CodeFilter), String> {
        let (mut s, file, _) = settings_from_file(self.config.as_deref())?;
        if let Some(f) = self.fail_on {
            s.fail_on = match f {
                FailOn::Error => Severity::Error,
                FailOn::Warning => Severity::Warning,
                FailOn::Info => Severity::Info,
            };
        }
        self.thresholds.apply(&mut s)?;
        let pick = |flag: &Vec<String>, file: &Option<Vec<String>>| {
            if flag.is_empty() {
                file.clone().unwrap_or_default()
            } else {
                flag.clone()
            }
        };
        if let Some(path) = &self.expect {
            s.claims = crate::claims::read(path)?;
        }
        let filter = CodeFilter {
            select: parse_codes("select", &pick(&self.select, &file.select))?,
            ignore: parse_codes("ignore", &pick(&self.ignore, &file.ignore))?,
        };
        Ok((s, filter))
    }
}
