//! The `artifact-check` binary: parses arguments, runs the library, prints
//! the report and maps the outcome to an exit code (0, 1, 2; see --help).

#![deny(unsafe_code)]
#![warn(clippy::undocumented_unsafe_blocks)]

// The binary's allocator (huge pages for large allocations) is the only
// unsafe code of the crate; it is the binary's, not the library's, as in
// ripgrep's main.rs.
#[allow(unsafe_code)]
mod alloc;

use std::io::{self, IsTerminal, Write};
use std::process::ExitCode;

use anyhow::{bail, Context, Result};
use clap::Parser;

use artifact_check::cli::{AuditArgs, CleanArgs, Cli, Command};
use artifact_check::report::{self, Format};
use artifact_check::{checks, claims, clean, config, EXIT_ERROR};

#[global_allocator]
static ALLOC: alloc::HugePages = alloc::HugePages;

fn main() -> ExitCode {
    alloc::configure();
    let cli = Cli::parse();
    let result = match cli.command {
        Some(Command::Clean(args)) => run_clean(&args),
        Some(Command::Codes) => list_codes(),
        Some(Command::Config { config }) => print_config(config.as_deref()),
        None => run_audit(&cli.audit),
    };
    match result {
        Ok(code) => ExitCode::from(code as u8),
        Err(e) => {
            if e.chain().any(|c| {
                c.downcast_ref::<io::Error>()
                    .is_some_and(|e| e.kind() == io::ErrorKind::BrokenPipe)
            }) {
                return ExitCode::SUCCESS;
            }
            // Every error the tool cannot work past: bad arguments or
            // configuration, an output it cannot write (exit 2).
            eprintln!("artifact-check: error: {e:#}");
            ExitCode::from(EXIT_ERROR as u8)
        }
    }
}

fn run_audit(args: &AuditArgs) -> Result<i32> {
    if args.paths.is_empty() {
        bail!("give at least one PATH (a run directory or a folder of runs)");
    }
    let settings = config::resolve(args.config.as_deref(), &args.layer(), checks::code)?.settings;
    let claims = match &args.expect {
        Some(path) => claims::read(path)?,
        None => Vec::new(),
    };
    if let Some(jobs) = args.jobs {
        rayon::ThreadPoolBuilder::new()
            .num_threads(jobs.max(1))
            .build_global()
            .context("starting the worker pool")?;
    }
    let bar = progress_bar(&args.paths);
    let tick = || {
        if let Some(b) = &bar {
            b.inc(1);
        }
    };
    let report = artifact_check::audit_with_progress(&args.paths, &settings, &claims, &tick);
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    let stdout_tty = io::stdout().is_terminal();
    let colour = args.output.is_none()
        && stdout_tty
        && !args.no_color
        && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty());
    let format = args.format.unwrap_or(Format::Table);
    let opts = report::Options { colour };
    match &args.output {
        Some(path) => clean::write_atomic(path, |w| report::render(format, &report, opts, w))
            .with_context(|| format!("writing {}", path.display()))?,
        None => {
            // Stdout is line-buffered: a big JSON report would be a write per line.
            let mut out = io::BufWriter::with_capacity(1 << 20, io::stdout().lock());
            report::render(format, &report, opts, &mut out)?;
            out.flush()?;
        }
    }
    Ok(report.exit_code())
}

/// A progress bar on standard error, only on a terminal and only for work
/// long enough to need one (more than a handful of runs).
fn progress_bar(paths: &[std::path::PathBuf]) -> Option<indicatif::ProgressBar> {
    if !io::stderr().is_terminal() {
        return None;
    }
    let (runs, _) = artifact_check::discover::find_runs(paths);
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
    let resolved = config::resolve(explicit, &config::Layer::default(), checks::code)?;
    match &resolved.file {
        Some(p) => println!(
            "# effective configuration: {} over the defaults",
            p.display()
        ),
        None => println!("# effective configuration: the defaults (no artifact-check.toml found)"),
    }
    let eff = config::Layer::effective(&resolved.settings);
    print!(
        "{}",
        toml::to_string(&eff).context("serializing the configuration")?
    );
    Ok(0)
}

fn run_clean(args: &CleanArgs) -> Result<i32> {
    let settings = config::resolve(
        args.config.as_deref(),
        &args.thresholds.layer(),
        checks::code,
    )?
    .settings;
    let ex = clean::Exclusions {
        cold: args.exclude_cold,
        errors: args.exclude_errors,
        first_turns: args.exclude_first_turns,
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
    Ok(0)
}

fn list_codes() -> Result<i32> {
    let mut out = io::stdout().lock();
    for c in checks::codes() {
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
