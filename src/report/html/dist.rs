//! Distributions of TTFT and request latency: over every successful
//! profiling record (what AIPerf publishes), warm-only (cold connections
//! dropped) and steady-state (opening wave and drain tail dropped), on
//! log-spaced bins, with the published percentiles marked.

use serde::Serialize;

use crate::results::timeline::{Distribution, Timeline};

const BINS: usize = 40;
const W: f64 = 480.0;
const H: f64 = 120.0;

/// One series as a step outline.
#[derive(Debug, Serialize)]
pub struct Series {
    name: &'static str,
    count: usize,
    points: String,
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
    axis: Vec<Mark>,
}

/// TTFT and latency, those the run has.
pub fn views(tl: &Timeline) -> Vec<DistView> {
    tl.distributions().iter().map(view).collect()
}

/// Each set's histogram as a step outline, on one scale.
fn series(sets: &[(&'static str, &Vec<f64>)], bin: &dyn Fn(f64) -> usize) -> Vec<Series> {
    let counts = |vals: &[f64]| {
        let mut c = vec![0_usize; BINS];
        for &v in vals {
            c[bin(v)] += 1;
        }
        c
    };
    let hist: Vec<(&'static str, usize, Vec<usize>)> =
        sets.iter().map(|(n, v)| (*n, v.len(), counts(v))).collect();
    let peak = hist
        .iter()
        .flat_map(|h| h.2.iter().copied())
        .max()
        .unwrap_or(1)
        .max(1) as f64;
    let bw = W / BINS as f64;
    hist.into_iter()
        .map(|(name, count, c)| {
            let mut pts = format!("0,{H:.1}");
            for (i, n) in c.iter().enumerate() {
                let y = H - *n as f64 / peak * H;
                pts.push_str(&format!(
                    " {:.1},{y:.1} {:.1},{y:.1}",
                    i as f64 * bw,
                    (i + 1) as f64 * bw
                ));
            }
            pts.push_str(&format!(" {W:.1},{H:.1}"));
            Series {
                name,
                count,
                points: pts,
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
    let marks = d
        .percentiles
        .iter()
        .map(|&(q, v)| Mark {
            x: x(v),
            label: format!("p{q:.0} {v:.1} ms"),
        })
        .collect();
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
        axis,
    }
}
