//! `artifact-check clean RUN --out DIR`: the per-request table of the records
//! worth keeping, and the statistics recomputed over them.
//!
//! The rules (warmup always dropped; cold-connection, failed and first-turn
//! records on request) are [`crate::model::selection`]'s. Everything goes into DIR, never into the run
//! directory, and an existing file is only replaced when asked. Each file is
//! written to a temporary name in DIR and renamed into place, so a reader
//! never sees half a file.

use std::collections::BTreeMap;
use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::artifacts::records::{Metric, Record};
use crate::config::Settings;
use crate::files::{self, OutputError, Protected};
use crate::model::connection::Temperature;
use crate::model::selection::{select, statistics, Selection};
pub use crate::model::selection::{DropReason, Dropped, Exclusions};
use crate::stats;
use crate::text::escape::{csv_cell, visible};

/// Why the clean export could not be written.
#[derive(Debug, thiserror::Error)]
pub enum CleanError {
    /// The run has no readable `profile_export.jsonl`.
    #[error("{0}: no readable profile_export.jsonl; nothing to clean")]
    NoRecords(PathBuf),
    /// DIR (or a file in it) is the run directory or inside it, or a file
    /// could not be written.
    #[error(transparent)]
    Output(#[from] OutputError),
    /// A file exists and `--force` was not given.
    #[error("{0} already exists; pass --force to replace it")]
    Exists(PathBuf),
    /// Parquet was asked for in a build without it.
    #[error("Parquet output needs the `parquet` cargo feature: cargo build --release --features parquet")]
    NoParquet,
    /// An I/O error on a named path.
    #[error("{path}")]
    Io {
        /// The path.
        path: PathBuf,
        /// The error.
        source: io::Error,
    },
}

/// `summary.json` of the clean export.
#[derive(Debug, Clone, Serialize)]
pub struct CleanSummary {
    /// The run.
    pub run: String,
    /// Options in force.
    pub exclude_cold: bool,
    /// Options in force.
    pub exclude_errors: bool,
    /// Options in force.
    pub exclude_first_turns: bool,
    /// Options in force: the opening wave and the drain tail dropped.
    pub steady_state: bool,
    /// Records kept.
    pub kept: usize,
    /// Kept records whose connection state is unknown (never counted as warm;
    /// kept because they are not known to be cold).
    pub kept_unknown_connection: usize,
    /// Dropped records per reason (a record may have several).
    pub dropped_by_reason: BTreeMap<DropReason, usize>,
    /// Every dropped record.
    pub dropped: Vec<Dropped>,
    /// Problems reading `profile_export.jsonl` (a line each, with its
    /// number): those records are not in the export.
    pub unreadable: Vec<String>,
    /// Statistics over the kept successful records, per metric tag.
    pub metrics: BTreeMap<&'static str, stats::Summary>,
    /// Files written.
    pub files: Vec<String>,
}

/// Writes the clean export of `run_dir` into `out`.
pub fn export(
    run_dir: &Path,
    out: &Path,
    ex: Exclusions,
    settings: &Settings,
    parquet: bool,
    force: bool,
) -> Result<CleanSummary, CleanError> {
    if parquet && !cfg!(feature = "parquet") {
        return Err(CleanError::NoParquet);
    }
    // Refused before anything is created: DIR inside the run (after `..`
    // and symlinks), and later each file (a symlink in DIR could lead back).
    let protected = Protected::new([run_dir]);
    protected.check(out)?;
    let read = crate::artifacts::records::read(&run_dir.join(crate::artifacts::records::FILE))
        .map_err(|_| CleanError::NoRecords(run_dir.to_path_buf()))?;
    // A line that could not be read is never dropped silently: it is listed
    // in summary.json and the command exits 1.
    let unreadable = read.findings.iter().map(located).collect();
    let records = read.records;
    let names = prepare(out, parquet, force)?;

    let selection = select(&records, ex, settings);
    let kept_unknown = selection.kept_unknown();
    let Selection {
        kept,
        dropped,
        by_reason,
        kept_temperatures,
    } = selection;
    let metrics = statistics(&kept);

    let csv_path = out.join("requests.csv");
    files::write(&csv_path, &protected, |w| {
        write_csv(&kept, &kept_temperatures, w)
    })?;
    #[cfg(feature = "parquet")]
    if parquet {
        let p = out.join("requests.parquet");
        files::write(&p, &protected, |w| {
            parquet::write(&kept, &kept_temperatures, w)
        })?;
    }
    let summary = CleanSummary {
        run: run_dir.display().to_string(),
        exclude_cold: ex.cold,
        exclude_errors: ex.errors,
        exclude_first_turns: ex.first_turns,
        steady_state: ex.steady_state,
        kept: kept.len(),
        kept_unknown_connection: kept_unknown,
        dropped_by_reason: by_reason,
        dropped,
        unreadable,
        metrics,
        files: names
            .iter()
            .map(|n| out.join(n).display().to_string())
            .collect(),
    };
    let sp = out.join("summary.json");
    files::write(&sp, &protected, |w| {
        serde_json::to_writer_pretty(&mut *w, &summary).map_err(io::Error::other)?;
        writeln!(w)
    })?;
    Ok(summary)
}

/// Creates `out` and names the files to write there; refuses a file that
/// exists unless `force`.
fn prepare(out: &Path, parquet: bool, force: bool) -> Result<Vec<&'static str>, CleanError> {
    fs::create_dir_all(out).map_err(|source| CleanError::Io {
        path: out.to_path_buf(),
        source,
    })?;
    let mut names = vec!["requests.csv", "summary.json"];
    if parquet {
        names.push("requests.parquet");
    }
    for n in &names {
        let p = out.join(n);
        if p.exists() && !force {
            return Err(CleanError::Exists(p));
        }
    }
    Ok(names)
}

/// A reader's finding as one line of `summary.json`'s `unreadable`.
fn located(f: &crate::findings::Finding) -> String {
    match f.line {
        Some(l) => format!("line {l}: {}", f.message),
        None => f.message.clone(),
    }
}

/// Columns of the per-request table, after the fixed ones.
fn header() -> Vec<String> {
    let mut h: Vec<String> = [
        "line",
        "x_request_id",
        "conversation_id",
        "session_num",
        "turn_index",
        "connection",
        "success",
        "request_start_ns",
        "request_end_ns",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    h.extend(Metric::ALL.iter().map(|m| m.tag().to_string()));
    h
}

fn write_csv(kept: &[&Record], temperatures: &[Temperature], w: &mut dyn Write) -> io::Result<()> {
    let mut csv = csv::Writer::from_writer(w);
    csv.write_record(header())?;
    for (r, t) in kept.iter().zip(temperatures) {
        let opt = |v: Option<String>| v.unwrap_or_default();
        // Ids are input text: one physical line, no control or bidi
        // character ([`visible`]), never a formula when the CSV is opened.
        let text = |v: Option<String>| csv_cell(&visible(&opt(v))).into_owned();
        let mut row = vec![
            r.line.to_string(),
            text(r.x_request_id.as_ref().map(ToString::to_string)),
            text(r.conversation_id.as_ref().map(ToString::to_string)),
            opt(r.session_num.map(|v| v.to_string())),
            opt(r.turn_index.map(|v| v.to_string())),
            t.as_str().to_string(),
            r.is_success().to_string(),
            r.request_start_ns.to_string(),
            r.request_end_ns.to_string(),
        ];
        row.extend(
            Metric::ALL
                .iter()
                .map(|m| opt(r.values.get(*m).map(|v| v.to_string()))),
        );
        csv.write_record(&row)?;
    }
    csv.flush()
}

#[cfg(feature = "parquet")]
mod parquet {
    use super::*;
    use polars::prelude::*;

    pub fn write(
        kept: &[&Record],
        temperatures: &[Temperature],
        w: &mut dyn Write,
    ) -> io::Result<()> {
        let col_u64 = |name: &str, f: &dyn Fn(&Record) -> Option<u64>| {
            Column::new(
                name.into(),
                kept.iter().map(|r| f(r)).collect::<Vec<Option<u64>>>(),
            )
        };
        let col_str = |name: &str, f: &dyn Fn(&Record) -> Option<String>| {
            Column::new(
                name.into(),
                kept.iter().map(|r| f(r)).collect::<Vec<Option<String>>>(),
            )
        };
        let mut cols = vec![
            col_u64("line", &|r| Some(r.line)),
            col_str("x_request_id", &|r| {
                r.x_request_id.as_ref().map(ToString::to_string)
            }),
            col_str("conversation_id", &|r| {
                r.conversation_id.as_ref().map(ToString::to_string)
            }),
            col_u64("session_num", &|r| r.session_num),
            col_u64("turn_index", &|r| r.turn_index.map(u64::from)),
            Column::new(
                "connection".into(),
                temperatures
                    .iter()
                    .map(|t| Some(t.as_str().to_string()))
                    .collect::<Vec<Option<String>>>(),
            ),
            Column::new(
                "success".into(),
                kept.iter().map(|r| r.is_success()).collect::<Vec<bool>>(),
            ),
            col_u64("request_start_ns", &|r| Some(r.request_start_ns)),
            col_u64("request_end_ns", &|r| Some(r.request_end_ns)),
        ];
        for m in Metric::ALL {
            cols.push(Column::new(
                m.tag().into(),
                kept.iter()
                    .map(|r| r.values.get(*m))
                    .collect::<Vec<Option<f64>>>(),
            ));
        }
        let mut df = DataFrame::new(kept.len(), cols).map_err(io::Error::other)?;
        ParquetWriter::new(w)
            .finish(&mut df)
            .map_err(io::Error::other)?;
        Ok(())
    }
}
