//! `artifact-check compare`: the comparison as a table, JSON (the rows'
//! fields `metric`, `stat`, `a`, `b`, `difference`, `interval`,
//! `significant` are the contract; docs/report-schema.md) or Markdown.

use std::io::{self, Write};

use comfy_table::presets::UTF8_FULL_CONDENSED;
use comfy_table::{ColumnConstraint, ContentArrangement, Table};

use crate::results::comparison::{Comparison, Row};
use crate::text::escape::visible;

/// How a comparison is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum CompareFormat {
    /// A table per section (the default).
    Table,
    /// One JSON document.
    Json,
    /// Markdown, for a pull request.
    Markdown,
}

fn num(v: Option<f64>) -> String {
    v.map_or("n/a".into(), |x| format!("{x:.4}"))
}

fn verdict(r: &Row) -> &'static str {
    match (r.significant, r.difference) {
        (Some(true), Some(d)) if (d > 0.0) == r.higher_is_better => "better, beyond noise",
        (Some(true), Some(_)) => "worse, beyond noise",
        (Some(false), _) => "within noise",
        (None, _) if r.interval.is_some() => "cannot tell: too few requests beyond it",
        _ => "cannot tell",
    }
}

fn cells(r: &Row) -> [String; 8] {
    [
        r.metric.to_string(),
        r.stat.as_str().to_string(),
        r.unit.clone().unwrap_or_default(),
        num(r.a),
        num(r.b),
        match (r.difference, r.difference_pct) {
            (Some(d), Some(p)) => format!("{d:+.4} ({p:+.1} %)"),
            (Some(d), None) => format!("{d:+.4}"),
            _ => "n/a".into(),
        },
        r.interval
            .map_or("n/a".into(), |[lo, hi]| format!("{lo:+.4} to {hi:+.4}")),
        verdict(r).to_string(),
    ]
}

const HEADER: [&str; 8] = [
    "metric",
    "stat",
    "unit",
    "A",
    "B",
    "B - A",
    "95 % interval",
    "verdict",
];

fn intro(c: &Comparison) -> String {
    format!(
        "A = {}\nB = {}\nboth cleaned the same way: warmup and failed requests dropped{}{}\n\
         intervals: {} ({} bootstrap resamples)",
        visible(&c.a),
        visible(&c.b),
        if c.exclude_cold {
            ", cold connections dropped"
        } else {
            ""
        },
        if c.steady_state {
            ", opening wave and drain tail dropped"
        } else {
            ""
        },
        c.interval_method,
        c.resamples
    )
}

/// Writes the comparison.
pub fn render(c: &Comparison, format: CompareFormat, out: &mut dyn Write) -> io::Result<()> {
    // No line starts a workflow command (see `escape::NoCommands`).
    let mut guarded = crate::text::escape::NoCommands::new(out);
    render_unguarded(c, format, &mut guarded)?;
    guarded.finish()
}

fn render_unguarded(c: &Comparison, format: CompareFormat, out: &mut dyn Write) -> io::Result<()> {
    match format {
        CompareFormat::Json => {
            crate::text::escape::write_json(&mut *out, c)?;
            writeln!(out)
        }
        CompareFormat::Table => {
            writeln!(out, "{}", intro(c))?;
            let mut t = Table::new();
            t.load_preset(UTF8_FULL_CONDENSED)
                .set_content_arrangement(ContentArrangement::Dynamic)
                .set_header(HEADER);
            if !t.is_tty() {
                t.set_width(120);
            }
            for r in &c.rows {
                t.add_row(cells(r));
            }
            // Names and units whole: the other columns wrap.
            for i in [0, 2] {
                if let Some(col) = t.column_mut(i) {
                    col.set_constraint(ColumnConstraint::ContentWidth);
                }
            }
            writeln!(out, "{t}")?;
            for f in &c.findings {
                writeln!(
                    out,
                    "{}[{}] {}",
                    f.severity.as_str(),
                    f.code.as_str(),
                    visible(&f.message)
                )?;
            }
            writeln!(out, "exit {}", c.exit_code)
        }
        CompareFormat::Markdown => {
            let md = crate::text::escape::markdown;
            writeln!(out, "## artifact-check compare\n")?;
            for line in intro(c).lines() {
                writeln!(out, "{}  ", md(line))?;
            }
            writeln!(out)?;
            for f in &c.findings {
                writeln!(
                    out,
                    "> **{}** `{}`: {}\n",
                    f.severity.as_str(),
                    f.code.as_str(),
                    md(&f.message)
                )?;
            }
            writeln!(out, "| {} |", HEADER.join(" | "))?;
            writeln!(out, "|{}", "---|".repeat(HEADER.len()))?;
            for r in &c.rows {
                let row: Vec<String> = cells(r).iter().map(|s| md(s)).collect();
                writeln!(out, "| {} |", row.join(" | "))?;
            }
            writeln!(out, "\nExit code {}.", c.exit_code)
        }
    }
}
