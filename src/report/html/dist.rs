//! Distributions of TTFT and request latency: over every successful
//! profiling record (what AIPerf publishes), warm-only (cold connections
//! dropped) and steady-state (opening wave and drain tail dropped), one
//! panel each on one log-spaced x axis in milliseconds, each with its own
//! y axis in requests per bin, the published percentiles marked.

use serde::Serialize;

use crate::results::timeline::{Distribution, Timeline};

const BINS: usize = 40;
const W: f64 = 480.0;
const H: f64 = 60.0;

/// One series as a step outline, in a panel of its own.
#[derive(Debug, Serialize)]
pub struct Series {
    name: &'static str,
    count: usize,
    points: String,
    /// The most requests in one bin: the top of the panel's y axis.
    peak: usize,
}

/// A percentile mark.
#[derive(Debug, Serialize)]
pub struct Mark {
    x: f64,
    label: String,
}

/// One metric's distribution.
#[derive(Debug, Serialize)]
pub struct DistView {
    metric: &'static str,
    width: f64,
    height: f64,
    series: Vec<Series>,
    marks: Vec<Mark>,
    /// The published percentiles in words (`p50 408.2 ms, ...`).
    marks_text: String,
    axis: Vec<Mark>,
}

/// TTFT and latency, those the run has.
pub fn views(tl: &Timeline) -> Vec<DistView> {
    tl.distributions().iter().map(view).collect()
}

/// Each set's histogram as a step outline, each on its own y scale.
fn series(sets: &[(&'static str, &Vec<f64>)], bin: &dyn Fn(f64) -> usize) -> Vec<Series> {
    let bw = W / BINS as f64;
    sets.iter()
        .map(|(name, vals)| {
            let mut c = vec![0_usize; BINS];
            for &v in vals.iter() {
                c[bin(v)] += 1;
            }
            let peak = c.iter().copied().max().unwrap_or(0);
            let top = peak.max(1) as f64;
            let mut pts = format!("0,{H:.1}");
            for (i, n) in c.iter().enumerate() {
                let y = H - *n as f64 / top * H;
                pts.push_str(&format!(
                    " {:.1},{y:.1} {:.1},{y:.1}",
                    i as f64 * bw,
                    (i + 1) as f64 * bw
                ));
            }
            pts.push_str(&format!(" {W:.1},{H:.1}"));
            Series {
                name,
                count: vals.len(),
                points: pts,
                peak,
            }
        })
        .collect()
}

fn view(d: &Distribution) -> DistView {
    let all = &d.all;
    let lo = all.iter().copied().fold(f64::INFINITY, f64::min).ln();
    let hi = all.iter().copied().fold(0.0, f64::max).ln().max(lo + 1e-9);
    let x = |v: f64| ((v.max(1e-9).ln() - lo) / (hi - lo) * W).clamp(0.0, W);
    let bin = |v: f64| ((x(v) / W * BINS as f64) as usize).min(BINS - 1);
    let sets = [
        ("all", &d.all),
        ("warm only", &d.warm),
        ("steady state", &d.steady),
    ];
    let series = series(&sets, &bin);
    let marks: Vec<Mark> = d
        .percentiles
        .iter()
        .map(|&(q, v)| Mark {
            x: x(v),
            label: format!("p{q:.0} {v:.1} ms"),
        })
        .collect();
    let marks_text = marks
        .iter()
        .map(|m| m.label.as_str())
        .collect::<Vec<_>>()
        .join(", ");
    let axis = (0..=4)
        .map(|i| {
            let f = i as f64 / 4.0;
            Mark {
                x: f * W,
                label: format!("{:.1} ms", (lo + f * (hi - lo)).exp()),
            }
        })
        .collect();
    DistView {
        metric: d.metric,
        width: W,
        height: H,
        series,
        marks,
        marks_text,
        axis,
    }
}
