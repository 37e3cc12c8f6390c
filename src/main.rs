//! The `artifact-check` binary: parses arguments, runs the library, prints
//! the report and maps the outcome to an exit code (0, 1, 2; see --help).

#![deny(unsafe_code)]
#![warn(clippy::undocumented_unsafe_blocks)]

// The binary's allocator (huge pages for large allocations) and the parquet
// reader's child process (no core file) are the only unsafe code of the
// crate; it is the binary's, not the library's, as in ripgrep's main.rs.
#[allow(unsafe_code)]
mod alloc;
#[cfg(feature = "parquet")]
#[allow(unsafe_code)]
mod child;

use std::io::{self, IsTerminal, Write};
use std::process::ExitCode;

use anyhow::{bail, Context, Result};
use clap::Parser;

use artifact_check::cli::{AuditArgs, CleanArgs, Cli, Command};
use artifact_check::report::{self, Format};
use artifact_check::{claims, clean, config, files, EXIT_ERROR};

#[global_allocator]
static ALLOC: alloc::HugePages = alloc::HugePages;

fn main() -> ExitCode {
    alloc::configure();
    #[cfg(feature = "parquet")]
    if let Some(code) = child::run_or_enable() {
        return code;
    }
    if let Some(msg) = shadowed_subcommand() {
        eprintln!("artifact-check: error: {}", report::escape::message(&msg));
        return ExitCode::from(EXIT_ERROR as u8);
    }
    let cli = Cli::parse();
    let result = match cli.command {
        Some(Command::Clean(args)) => run_clean(&args),
        Some(Command::Compare(args)) => run_compare(&args),
        Some(Command::Codes) => list_codes(),
        Some(Command::Explain { code }) => explain(&code),
        Some(Command::Completions { shell }) => {
            let mut cmd = <Cli as clap::CommandFactory>::command();
            clap_complete::generate(shell, &mut cmd, "artifact-check", &mut io::stdout());
            Ok(0)
        }
        Some(Command::Man) => {
            let cmd = <Cli as clap::CommandFactory>::command();
            clap_mangen::Man::new(cmd)
                .render(&mut io::stdout())
                .context("writing the man page")
                .map(|_| 0)
        }
        Some(Command::Config { config }) => print_config(config.as_deref()),
        None => run_audit(&cli.audit),
    };
    match result {
        Ok(code) => ExitCode::from(code as u8),
        Err(e) => {
            if e.chain().any(is_broken_pipe) {
                return ExitCode::SUCCESS;
            }
            // Every error the tool cannot work past: bad arguments or
            // configuration, an output it cannot write (exit 2).
            eprintln!(
                "artifact-check: error: {}",
                report::escape::message(&format!("{e:#}"))
            );
            ExitCode::from(EXIT_ERROR as u8)
        }
    }
}

/// `artifact-check config` where `config` is also a directory holding runs
/// (a folder of runs named like a subcommand): which was meant cannot be
/// told, and guessing the subcommand would exit 0 without auditing. Paths
/// stay unambiguous written `./config` or after `--`.
fn shadowed_subcommand() -> Option<String> {
    let first = std::env::args_os().nth(1)?;
    let name = first.to_str()?;
    if !matches!(
        name,
        "clean" | "codes" | "completions" | "config" | "explain" | "help" | "man"
    ) {
        return None;
    }
    let dir = std::path::Path::new(name);
    let (runs, _) = artifact_check::discover::find_runs(&[dir.to_path_buf()]);
    (dir.is_dir() && !runs.is_empty()).then(|| {
        format!(
            "`{name}` is a subcommand and also a directory here holding {} AIPerf run(s); to \
             audit the directory write `artifact-check ./{name}` (or `artifact-check -- \
             {name}`); to run the subcommand, run it from another directory",
            runs.len()
        )
    })
}

/// A closed standard output (`| head`) is not a failure; the error may be
/// wrapped in another error inside an `io::Error` (JSON, XML writers).
fn is_broken_pipe(e: &(dyn std::error::Error + 'static)) -> bool {
    match e.downcast_ref::<io::Error>() {
        Some(io) if io.kind() == io::ErrorKind::BrokenPipe => true,
        Some(io) => io.get_ref().is_some_and(|inner| is_broken_pipe(inner)),
        None => e.source().is_some_and(is_broken_pipe),
    }
}

/// The audited runs, with every output path (`--output`, `--report`)
/// checked not to be inside one: refused before any work.
fn protect_outputs(args: &AuditArgs) -> Result<files::Protected> {
    let outputs: Vec<&std::path::Path> = args
        .output
        .iter()
        .map(|p| p.as_path())
        .chain(args.reports.iter().map(|(_, p)| p.as_path()))
        .collect();
    if outputs.is_empty() {
        return Ok(files::Protected::default());
    }
    let (runs, _) = artifact_check::discover::find_runs(&args.paths);
    let protected = files::Protected::new(runs.iter().map(|r| r.as_path()));
    for out in &outputs {
        protected.check(out)?;
    }
    Ok(protected)
}

/// The global worker pool of `jobs` threads: more threads than cores only
/// cost memory (and 100000 would be 100000 stacks), so capped at the cores.
fn worker_pool(jobs: usize) -> Result<()> {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    rayon::ThreadPoolBuilder::new()
        .num_threads(jobs.clamp(1, cores))
        .build_global()
        .context("starting the worker pool")
}

fn run_audit(args: &AuditArgs) -> Result<i32> {
    if args.paths.is_empty() {
        bail!("give at least one PATH (a run directory or a folder of runs)");
    }
    let protected = protect_outputs(args)?;
    let settings =
        config::resolve(args.config.as_deref(), &args.layer(), artifact_check::code)?.settings;
    let options = artifact_check::RunOptions {
        shard: args.shard,
        timeline: args.format == Some(Format::Html)
            || args.reports.iter().any(|(f, _)| *f == Format::Html),
        baseline: match &args.baseline {
            Some(path) => artifact_check::baseline::Baseline::read(path)?,
            None => Default::default(),
        },
        id: None,
        no_follow_links: args.no_follow_links,
    };
    let claims = match &args.expect {
        Some(path) => claims::read(path)?,
        None => Vec::new(),
    };
    if let Some(jobs) = args.jobs {
        worker_pool(jobs)?;
    }
    let bar = progress_bar(&args.paths, args.shard);
    let tick = || {
        if let Some(b) = &bar {
            b.inc(1);
        }
    };
    let format = match args.format {
        Some(f) => f,
        None if args.verbose => Format::Table,
        None => Format::Concise,
    };
    if matches!(format, Format::Json | Format::Ndjson) && args.reports.is_empty() {
        // Streamed: each run is written as soon as it is audited, so memory
        // does not grow with the number of runs.
        let code = stream(
            format, args, &settings, &options, &claims, &tick, &protected,
        )?;
        if let Some(b) = bar {
            b.finish_and_clear();
        }
        return Ok(code);
    }
    let report =
        artifact_check::audit_with_progress(&args.paths, &settings, &options, &claims, &tick);
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    let stdout_tty = io::stdout().is_terminal();
    let colour = args.output.is_none()
        && stdout_tty
        && !args.no_color
        && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty());
    let opts = report::Options {
        colour,
        quiet: args.quiet,
        statistics: args.statistics,
    };
    let failed = write_reports(&args.reports, &report, &protected);
    write_out(args.output.as_deref(), &protected, |w| {
        report::render(format, &report, opts, w)
    })?;
    if !failed.is_empty() {
        bail!("could not write {}", failed.join(", "));
    }
    Ok(report.exit_code())
}

/// Audits and writes `format` (JSON or NDJSON) run by run; the exit code.
fn stream(
    format: Format,
    args: &AuditArgs,
    settings: &config::Settings,
    options: &artifact_check::RunOptions,
    claims: &[claims::Claim],
    tick: &(dyn Fn() + Sync),
    protected: &files::Protected,
) -> Result<i32> {
    let mut code = 0;
    let write = |w: &mut dyn Write| -> io::Result<()> {
        let audit = |emit: &mut dyn FnMut(artifact_check::RunReport) -> io::Result<()>| {
            artifact_check::audit_each(&args.paths, settings, options, claims, tick, emit)
        };
        let summary = if format == Format::Ndjson {
            let (errors, summary) = audit(&mut |r| report::ndjson::write_run(w, &r))?;
            report::ndjson::end(w, &errors, &summary)?;
            summary
        } else {
            let mut json = report::json::JsonStream::begin(w)?;
            let (errors, summary) = audit(&mut |r| json.write_run(&r))?;
            json.end(&errors, &summary)?;
            summary
        };
        code = summary.exit.code();
        Ok(())
    };
    write_out(args.output.as_deref(), protected, write)?;
    Ok(code)
}

/// Writes every `--report` (never coloured) before the main output; an
/// error writing one is said and the others are still tried. Returns the
/// paths that could not be written.
fn write_reports(
    reports: &[(Format, std::path::PathBuf)],
    report: &artifact_check::Report,
    protected: &files::Protected,
) -> Vec<String> {
    let mut failed = Vec::new();
    for (f, path) in reports {
        let plain = report::Options::default();
        if let Err(e) = files::write(path, protected, |w| report::render(*f, report, plain, w)) {
            eprintln!(
                "artifact-check: error: writing the {} report: {}",
                f.name(),
                report::escape::message(&format!("{:#}", anyhow::Error::from(e)))
            );
            failed.push(path.display().to_string());
        }
    }
    failed
}

/// Writes with `write` to `path` (see [`files::write`]) or to standard
/// output.
fn write_out(
    path: Option<&std::path::Path>,
    protected: &files::Protected,
    write: impl FnOnce(&mut dyn Write) -> io::Result<()>,
) -> Result<()> {
    match path {
        Some(path) => files::write(path, protected, write).context("writing the report")?,
        None => {
            // Stdout is line-buffered: a big JSON report would be a write per line.
            let mut out = io::BufWriter::with_capacity(1 << 20, io::stdout().lock());
            write(&mut out)?;
            out.flush()?;
        }
    }
    Ok(())
}

/// A progress bar on standard error, only on a terminal and only for work
/// long enough to need one (more than a handful of runs).
fn progress_bar(
    paths: &[std::path::PathBuf],
    shard: Option<artifact_check::discover::Shard>,
) -> Option<indicatif::ProgressBar> {
    if !io::stderr().is_terminal() {
        return None;
    }
    let (runs, _) = artifact_check::discover::find_shard(paths, shard);
    if runs.len() < 20 {
        return None;
    }
    let bar = indicatif::ProgressBar::new(runs.len() as u64);
    bar.set_style(
        indicatif::ProgressStyle::with_template("{bar:40} {pos}/{len} runs ({eta} left)")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    Some(bar)
}

fn print_config(explicit: Option<&std::path::Path>) -> Result<i32> {
    let resolved = config::resolve(explicit, &config::Layer::default(), artifact_check::code)?;
    match &resolved.file {
        Some(p) => println!(
            "# effective configuration: {} over the defaults",
            report::escape::message(&p.display().to_string())
        ),
        None => println!("# effective configuration: the defaults (no artifact-check.toml found)"),
    }
    let eff = config::Layer::effective(&resolved.settings);
    let text = toml::to_string(&eff).context("serializing the configuration")?;
    for line in text.lines() {
        println!("{}", report::escape::toml_line(line));
    }
    Ok(0)
}

fn run_compare(args: &artifact_check::cli::CompareArgs) -> Result<i32> {
    let layer = config::Layer {
        fail_on: args.fail_on.clone(),
        ..args.thresholds.layer()
    };
    let settings = config::resolve(args.config.as_deref(), &layer, artifact_check::code)?.settings;
    if let Some(p) = args.fail_on_regression {
        if !(p.is_finite() && p >= 0.0) {
            bail!("--fail-on-regression must be a non-negative percentage, not {p}");
        }
    }
    let opts = artifact_check::compare::Options {
        exclusions: clean::Exclusions {
            cold: args.exclude_cold,
            errors: true,
            first_turns: false,
            steady_state: args.steady_state,
        },
        resamples: args.resamples,
        seed: args.seed,
        fail_on_regression_pct: args.fail_on_regression,
    };
    for dir in [&args.a, &args.b] {
        if !artifact_check::artifacts::is_run_dir(dir) {
            bail!("{}: not an AIPerf run directory", dir.display());
        }
    }
    let c = artifact_check::compare::compare(&args.a, &args.b, &settings, &opts)
        .map_err(anyhow::Error::msg)?;
    let protected = files::Protected::new([args.a.as_path(), args.b.as_path()]);
    if let Some(out) = &args.output {
        protected.check(out)?;
    }
    write_out(args.output.as_deref(), &protected, |w| {
        report::compare::render(&c, args.format, w)
    })?;
    Ok(c.exit_code)
}

fn run_clean(args: &CleanArgs) -> Result<i32> {
    let settings = config::resolve(
        args.config.as_deref(),
        &args.thresholds.layer(),
        artifact_check::code,
    )?
    .settings;
    let ex = clean::Exclusions {
        cold: args.exclude_cold,
        errors: args.exclude_errors,
        first_turns: args.exclude_first_turns,
        steady_state: args.steady_state,
    };
    let s = clean::export(
        &args.run,
        &args.out,
        ex,
        &settings,
        args.parquet,
        args.force,
    )?;
    println!(
        "kept {} record(s), dropped {} ({}); wrote {}",
        s.kept,
        s.dropped.len(),
        s.dropped_by_reason
            .iter()
            .map(|(k, v)| format!("{}: {v}", k.as_str()))
            .collect::<Vec<_>>()
            .join(", "),
        s.files.join(", ")
    );
    if !s.unreadable.is_empty() {
        // Exit 1: the export is of fewer records than the run holds.
        eprintln!(
            "artifact-check: {} problem(s) reading profile_export.jsonl; those records are not \
             in the export (listed in summary.json), the first: {}",
            s.unreadable.len(),
            report::escape::message(&s.unreadable[0])
        );
        return Ok(1);
    }
    Ok(0)
}

fn explain(code: &str) -> Result<i32> {
    let Some(c) = artifact_check::code(code) else {
        bail!("unknown finding code {code:?} (see `artifact-check codes`)");
    };
    let mut out = io::stdout().lock();
    writeln!(
        out,
        "{} ({}, check {})",
        c.as_str(),
        c.severity().as_str(),
        c.check()
    )?;
    writeln!(out, "\n{}", c.summary())?;
    for (column, text) in artifact_check::findings::explanation(c.as_str()).unwrap_or_default() {
        writeln!(out, "\n{}: {text}", capitalised(&column))?;
    }
    Ok(0)
}

fn capitalised(s: &str) -> String {
    let mut c = s.chars();
    c.next()
        .map(|f| f.to_uppercase().chain(c).collect())
        .unwrap_or_default()
}

fn list_codes() -> Result<i32> {
    let mut out = io::stdout().lock();
    for c in artifact_check::codes() {
        writeln!(
            out,
            "{:<32} {:<20} {:<8} {}",
            c.as_str(),
            c.check(),
            c.severity().as_str(),
            c.summary()
        )?;
    }
    Ok(0)
}
