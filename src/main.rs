//! The `artifact-check` binary: parses arguments, runs the library, prints
//! the report and maps the outcome to an exit code (0, 1, 2; see --help).

use std::io::{self, IsTerminal, Write};
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::Parser;

use artifact_check::cli::{AuditArgs, CleanArgs, Cli, Command};
use artifact_check::findings::Code;
use artifact_check::report::{self, Format};
use artifact_check::{clean, EXIT_ERROR};

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Some(Command::Clean(args)) => run_clean(&args),
        Some(Command::Codes) => list_codes(),
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
            eprintln!("artifact-check: error: {e:#}");
            ExitCode::from(EXIT_ERROR as u8)
        }
    }
}

fn run_audit(args: &AuditArgs) -> Result<i32> {
    if args.paths.is_empty() {
        eprintln!(
            "artifact-check: error: give at least one PATH (a run directory or a folder of runs)"
        );
        return Ok(EXIT_ERROR);
    }
    let (settings, filter) = match args.resolve() {
        Ok(x) => x,
        Err(msg) => {
            eprintln!("artifact-check: error: {msg}");
            return Ok(EXIT_ERROR);
        }
    };
    if let Some(jobs) = args.jobs {
        rayon::ThreadPoolBuilder::new()
            .num_threads(jobs.max(1))
            .build_global()
            .context("starting the worker pool")?;
    }
    let report = artifact_check::audit(&args.paths, &settings, &filter);
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
            let mut out = io::stdout().lock();
            report::render(format, &report, opts, &mut out)?;
            out.flush()?;
        }
    }
    Ok(report.exit_code())
}

fn run_clean(args: &CleanArgs) -> Result<i32> {
    let mut settings = artifact_check::config::Settings::default();
    if let Err(msg) = args.thresholds.apply(&mut settings) {
        eprintln!("artifact-check: error: {msg}");
        return Ok(EXIT_ERROR);
    }
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
            .map(|(k, v)| format!("{k}: {v}"))
            .collect::<Vec<_>>()
            .join(", "),
        s.files.join(", ")
    );
    Ok(0)
}

fn list_codes() -> Result<i32> {
    let mut out = io::stdout().lock();
    for c in Code::ALL {
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
