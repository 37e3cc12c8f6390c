//! Command-line arguments. Parsing only: the flags that are settings become
//! a configuration [`Layer`], which [`crate::config::resolve`] puts over the
//! file and the defaults.

use std::path::PathBuf;

use clap::builder::PossibleValuesParser;
use clap::{Args, Parser, Subcommand};

use crate::config::Layer;
use crate::report::Format;

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
    Clean(Box<CleanArgs>),
    /// Compare two runs: both audited and cleaned the same way, their
    /// published statistics side by side with the difference, its bootstrap
    /// interval and whether it is beyond noise; warns when the comparison is
    /// unsafe.
    Compare(Box<CompareArgs>),
    /// List every finding code with its check, severity and meaning.
    Codes,
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell).
    Completions {
        /// The shell.
        shell: clap_complete::Shell,
    },
    /// Print the man page (roff) to standard output.
    Man,
    /// What a finding code means and what to do about it (the row of
    /// docs/checks.md).
    Explain {
        /// The code, e.g. `late-warmup-observation`.
        code: String,
    },
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
    /// Output format [default: concise].
    #[arg(long, value_enum)]
    pub format: Option<Format>,
    /// The full tables (`--format full`).
    #[arg(short, long, conflicts_with_all = ["format", "quiet", "statistics"])]
    pub verbose: bool,
    /// Only the findings at or above the fail level and the closing line.
    #[arg(short, long)]
    pub quiet: bool,
    /// Only the counts per finding code over all runs (and the closing line).
    #[arg(long)]
    pub statistics: bool,
    /// Write the report to FILE (atomically) instead of standard output.
    #[arg(long, short, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Also write the report in FORMAT to PATH (repeatable:
    /// `--report junit=out/junit.xml --report markdown=out/summary.md`).
    /// Every report is written before the exit code is decided, so a
    /// failing audit still writes them all.
    #[arg(long = "report", value_name = "FORMAT=PATH", value_parser = report_spec)]
    pub reports: Vec<(Format, PathBuf)>,
    /// Exit 1 when a finding at or above this severity exists [default: error].
    #[arg(long, value_parser = PossibleValuesParser::new(["error", "warning", "info"]))]
    pub fail_on: Option<String>,
    /// Configuration file [default: artifact-check.toml in the current
    /// directory or its nearest parent that has one].
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Check published claims (a TOML file of [[claim]] entries) against the
    /// artifacts after cleaning; see docs/ci.md.
    // `[[claim]]` is TOML, shown as written by --help, not a rustdoc link.
    #[allow(rustdoc::broken_intra_doc_links)]
    #[arg(long, value_name = "FILE")]
    pub expect: Option<PathBuf>,
    /// Accept the findings of an earlier audit: its JSON report. Only
    /// findings not in it are reported (and can fail the run).
    #[arg(long, value_name = "REPORT.json")]
    pub baseline: Option<PathBuf>,
    /// Only report these finding codes (comma-separated).
    #[arg(long, value_delimiter = ',', value_name = "CODES")]
    pub select: Vec<String>,
    /// Never report these finding codes (comma-separated).
    #[arg(long, value_delimiter = ',', value_name = "CODES")]
    pub ignore: Vec<String>,
    /// Audit only shard INDEX of COUNT (from 0): the runs whose path hashes
    /// to it, so COUNT invocations given the same paths (a CI matrix, a
    /// Kubernetes Job array) audit every run once between them; see
    /// docs/fleet.md.
    #[arg(long, value_name = "INDEX/COUNT")]
    pub shard: Option<crate::discover::Shard>,
    /// Do not follow symbolic links to directories below the given paths
    /// (they are followed by default, each resolved directory once); every
    /// link not followed is listed in the summary (`summary.skipped`) and
    /// counted on the closing line.
    #[arg(long)]
    pub no_follow_links: bool,
    /// Check this many runs in parallel [default and maximum: the cores].
    #[arg(long, short)]
    pub jobs: Option<usize>,
    /// Never colour the output (also: the NO_COLOR environment variable).
    #[arg(long)]
    pub no_color: bool,
    /// Thresholds.
    #[command(flatten)]
    pub thresholds: Thresholds,
}

/// The flags a threshold table makes (`config::with_thresholds!`): one per
/// threshold, named, typed and documented by its row, and the layer they
/// make.
macro_rules! flags_from_table {
    ($(
        $(#[$sdoc:meta])*
        $sfield:ident / $lfield:ident: $Settings:ident, $Layer:ident, $file:literal, $check:literal {
            $( $field:ident: $ty:ty = $default:expr => $key:literal, $flag:ident, $vn:literal, $valid:ident, $meaning:literal; )*
        } extra { $($extra:tt)* } layer_extra { $($layer_extra:tt)* }
    )*) => {
        /// Check thresholds (each with its default; docs/configuration.md).
        #[derive(Debug, Args, Clone, Default)]
        pub struct Thresholds {
            $($(
                #[doc = concat!($check, ": ", $meaning, " [default: ", stringify!($default), "]")]
                #[arg(
                    long,
                    value_name = $vn,
                    help = concat!($check, ": ", $meaning, " [default: ", stringify!($default), "]")
                )]
                pub $flag: Option<$ty>,
            )*)*
            /// phase_contamination: an extra request-scoped metric, NAME=arrival|first_token|completion
            /// (repeatable).
            #[arg(long, value_name = "NAME=WHEN", value_parser = name_when)]
            pub request_scoped_metric: Vec<(String, String)>,
        }

        impl Thresholds {
            /// The thresholds given, as a configuration layer (a section
            /// only where one of its flags is given).
            // A section without extras spells every field already.
            #[allow(clippy::needless_update)]
            pub fn layer(&self) -> Layer {
                let mut layer = Layer {
                    $(
                        $lfield: {
                            let section = crate::config::$Layer {
                                $( $field: self.$flag, )*
                                ..Default::default()
                            };
                            (section != crate::config::$Layer::default()).then_some(section)
                        },
                    )*
                    ..Default::default()
                };
                if !self.request_scoped_metric.is_empty() {
                    layer
                        .phase_contamination
                        .get_or_insert_with(Default::default)
                        .request_scoped_metrics =
                        Some(self.request_scoped_metric.iter().cloned().collect());
                }
                layer
            }
        }
    };
}

crate::with_thresholds!(flags_from_table);

/// `FORMAT=PATH`.
fn report_spec(spec: &str) -> Result<(Format, PathBuf), String> {
    use clap::ValueEnum;
    let (format, path) = spec
        .split_once('=')
        .ok_or_else(|| format!("{spec:?}: expected FORMAT=PATH, e.g. junit=out/junit.xml"))?;
    let format = Format::from_str(format, true).map_err(|_| {
        let names: Vec<String> = Format::value_variants()
            .iter()
            .filter_map(|f| f.to_possible_value().map(|v| v.get_name().to_string()))
            .collect();
        format!("{format:?} is not a format (one of: {})", names.join(", "))
    })?;
    if path.is_empty() {
        return Err(format!("{spec:?}: the path is empty"));
    }
    Ok((format, PathBuf::from(path)))
}

/// `NAME=WHEN` (WHEN is checked where the settings are resolved).
fn name_when(spec: &str) -> Result<(String, String), String> {
    spec.split_once('=')
        .map(|(n, w)| (n.to_string(), w.to_string()))
        .ok_or_else(|| format!("{spec:?}: expected NAME=WHEN"))
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
    /// Drop the opening wave and the drain tail (the `steady_state` check's
    /// rule, docs/checks.md): the statistics of the steady state.
    #[arg(long)]
    pub steady_state: bool,
    /// Also write requests.parquet (needs the `parquet` cargo feature).
    #[arg(long)]
    pub parquet: bool,
    /// Replace existing files in DIR.
    #[arg(long)]
    pub force: bool,
    /// Configuration file [default: artifact-check.toml in the current
    /// directory or its nearest parent that has one].
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Thresholds used to classify connections.
    #[command(flatten)]
    pub thresholds: Thresholds,
}

/// `artifact-check compare A B`.
#[derive(Debug, Args)]
pub struct CompareArgs {
    /// Run A: the baseline.
    pub a: PathBuf,
    /// Run B: compared with A (differences are B - A).
    pub b: PathBuf,
    /// Output format.
    #[arg(long, value_enum, default_value = "table")]
    pub format: crate::report::compare::CompareFormat,
    /// Write to FILE (atomically) instead of standard output.
    #[arg(long, short, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Exit 1 when B is worse than A beyond noise and by more than PCT
    /// percent in any statistic (latencies higher, throughputs and hit rate
    /// lower).
    #[arg(long, value_name = "PCT")]
    pub fail_on_regression: Option<f64>,
    /// Exit 1 on findings at or above this severity [default: error]; `warning`
    /// also fails on an unsafe comparison.
    #[arg(long, value_parser = PossibleValuesParser::new(["error", "warning", "info"]))]
    pub fail_on: Option<String>,
    /// Drop cold-connection requests from both.
    #[arg(long)]
    pub exclude_cold: bool,
    /// Drop the opening wave and the drain tail from both.
    #[arg(long)]
    pub steady_state: bool,
    /// Bootstrap resamples (20 to 100000: each holds one difference of
    /// means in memory).
    #[arg(long, default_value_t = 1000, value_name = "N",
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(20..=100_000))]
    pub resamples: usize,
    /// No colour (the comparison is written without colour in any case;
    /// accepted as the audit accepts it, and `NO_COLOR` is honoured).
    #[arg(long)]
    pub no_color: bool,
    /// Bootstrap seed (the same runs and seed give the same intervals).
    #[arg(long, default_value_t = 7, value_name = "N")]
    pub seed: u64,
    /// Configuration file [default: artifact-check.toml in the current
    /// directory or its nearest parent that has one].
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Thresholds (both runs are audited with the same ones).
    #[command(flatten)]
    pub thresholds: Thresholds,
}

impl AuditArgs {
    /// The flags that are settings, as a configuration layer.
    pub fn layer(&self) -> Layer {
        let list = |v: &Vec<String>| (!v.is_empty()).then(|| v.clone());
        Layer {
            fail_on: self.fail_on.clone(),
            select: list(&self.select),
            ignore: list(&self.ignore),
            ..self.thresholds.layer()
        }
    }
}
