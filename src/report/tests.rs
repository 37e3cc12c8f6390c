//! Every renderer on one small synthetic report (ruff's pattern): a failing
//! run with an error, a warning and an info finding, a passing run, and a
//! path that held no run. A change to one renderer shows here in a few
//! lines, beside the sample-run snapshots of `tests/snapshots.rs`; a new
//! field of the report data shows only in the formats that print it.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::Serialize;

use super::{render, Format, Options};
use crate::findings::{Finding, Severity, Unit};
use crate::model::PhaseModel;
use crate::results::published::{Published, Verdict};
use crate::results::{
    CheckReport, CheckResult, CheckStatus, Checks, Detail, ExitStatus, Headline, HeadlineUnit,
    PathError, Report, RunReport, RunStatus, Summary,
};

/// A check's figures: one quantity, a headline and a detail table.
#[derive(Debug, Serialize)]
struct Figures {
    ttft_p99_ms: Option<f64>,
    ttft_p99_warm_ms: Option<f64>,
}

impl CheckReport for Figures {
    fn summary(&self, reason: Option<&str>) -> String {
        match reason {
            Some(r) => format!("cannot tell: {r}"),
            None => format!(
                "TTFT p99 {} ms, warm only {} ms",
                crate::text::fmt_opt(self.ttft_p99_ms, 1),
                crate::text::fmt_opt(self.ttft_p99_warm_ms, 1)
            ),
        }
    }

    fn details(&self, _status: CheckStatus) -> Vec<Detail> {
        vec![Detail {
            header: vec!["statistic", "all", "warm only"],
            rows: vec![vec![
                "p99".into(),
                crate::text::fmt_opt(self.ttft_p99_ms, 1),
                crate::text::fmt_opt(self.ttft_p99_warm_ms, 1),
            ]],
        }]
    }

    fn headline(&self) -> Vec<Headline> {
        vec![Headline {
            name: "TTFT p99 all / warm",
            values: vec![self.ttft_p99_ms, self.ttft_p99_warm_ms],
            unit: HeadlineUnit::Ms,
            change_pct: Some(33.2),
        }]
    }
}

fn code(id: &str) -> crate::findings::Code {
    crate::code(id).unwrap_or_else(|| panic!("no code {id}"))
}

fn phase(records: u64) -> PhaseModel {
    PhaseModel {
        configured_requests: Some(records),
        records: Some(records),
        successful: Some(records),
        errors: Some(0),
        cancelled: Some(0),
        ..Default::default()
    }
}

/// A run's report: a result per check the synthetic findings come from,
/// each with the same figures.
fn run_report(
    path: &str,
    status: RunStatus,
    findings: Vec<Finding>,
    figures: Figures,
) -> RunReport {
    let figures = Arc::new(figures);
    let checks = ["artifacts", "phase_contamination", "cold_connections"]
        .into_iter()
        .map(|name| CheckResult {
            name,
            status: CheckStatus::from_findings(findings.iter().filter(|f| f.check == name), false),
            reason: None,
            report: figures.clone(),
        })
        .collect();
    RunReport {
        path: path.into(),
        id: path.trim_end_matches('/').into(),
        benchmark_id: None,
        resolved_path: None,
        suppressed: Vec::new(),
        aiperf_version: Some("0.13.0".into()),
        status,
        published: published(&figures),
        phases: [("warmup", phase(4)), ("profiling", phase(32))].into(),
        checks: Checks(checks),
        claims: Vec::new(),
        findings,
        unknown_user_metrics: Vec::new(),
        timeline: None,
    }
}

/// The run's TTFT p99 as published: biased by cold requests when a
/// warm-only value is known, with a server count beside it.
fn published(figures: &Figures) -> Vec<Published> {
    let base = |metric: &str, stat: &str, value: Option<f64>| Published {
        metric: metric.into(),
        stat: stat.into(),
        value,
        unit: Some("ms".into()),
        endpoint: None,
        series: None,
        verdict: Verdict::Trusted,
        corrected: None,
        corrected_low: None,
        corrected_high: None,
        causes: Vec::new(),
        reason: None,
    };
    let mut ttft = base("time_to_first_token", "p99", figures.ttft_p99_ms);
    let mut server = Published {
        endpoint: Some("http://127.0.0.1:8000/metrics".into()),
        unit: Some("count".into()),
        ..base("vllm:time_to_first_token_seconds", "count", Some(34.0))
    };
    let mut itl = base("inter_token_latency", "p99", Some(4.5));
    if let Some(warm) = figures.ttft_p99_warm_ms {
        ttft.verdict = Verdict::Biased;
        ttft.corrected = Some(warm);
        ttft.causes = vec![code("cold-connection-bias")];
        server.verdict = Verdict::Biased;
        server.corrected = Some(32.0);
        server.causes = vec![code("late-warmup-observation")];
    } else {
        itl.verdict = Verdict::CannotTell;
        itl.reason = Some("too few requests to find a steady state".into());
    }
    vec![ttft, itl, server]
}

fn report() -> Report {
    let series: BTreeMap<String, String> = [("engine".to_string(), "0".to_string())].into();
    let failing = vec![
        Finding::new(
            code("late-warmup-observation"),
            "2 warmup observations of vllm:time_to_first_token_seconds were counted in profiling",
        )
        .file("server_metrics_export.json")
        .field("metrics[\"vllm:time_to_first_token_seconds\"]")
        .metric("vllm:time_to_first_token_seconds")
        .endpoint("http://127.0.0.1:8000/metrics")
        .series(series)
        .expected_found(32, 34)
        .effect("count_inflation", 2.0, Unit::Count),
        Finding::new(
            code("cold-connection-bias"),
            "cold-connection requests move TTFT p99 by +33.2 % <&> \"quoted\"",
        )
        .file("profile_export.jsonl")
        .line(7)
        .field("metrics.time_to_first_token")
        .effect("max_abs_bias", 33.2, Unit::Percent),
        Finding::new(code("parquet-scrapes-not-read"), "an advisory")
            .file("server_metrics_export.parquet"),
    ];
    let figures = |all, warm| Figures {
        ttft_p99_ms: all,
        ttft_p99_warm_ms: warm,
    };
    let runs = vec![
        run_report(
            "runs/a",
            RunStatus::Fail,
            failing,
            figures(Some(126.25), Some(94.75)),
        ),
        run_report(
            "runs/b",
            RunStatus::Pass,
            Vec::new(),
            figures(Some(90.0), None),
        ),
    ];
    Report {
        codes: &crate::CODES,
        schema_version: crate::REPORT_SCHEMA_VERSION,
        tool_version: "0.0.0-test",
        runs,
        errors: vec![PathError {
            path: "runs/empty".into(),
            message: "holds no AIPerf run".into(),
        }],
        summary: Summary {
            runs: 2,
            passed: 1,
            failed: 1,
            path_errors: 1,
            findings: [("error", 1), ("warning", 1), ("info", 1)].into(),
            fail_on: Severity::Error,
            exit: ExitStatus::Error,
            ..Default::default()
        },
    }
}

fn rendered(format: Format, opts: Options) -> String {
    let mut out = Vec::new();
    render(format, &report(), opts, &mut out).expect("renders");
    String::from_utf8(out).expect("utf-8")
}

const PLAIN: Options = Options {
    colour: false,
    quiet: false,
    statistics: false,
};

#[test]
fn every_renderer_on_a_synthetic_report() {
    for (name, format) in [
        ("concise", Format::Concise),
        ("full", Format::Table),
        ("json", Format::Json),
        ("junit", Format::Junit),
        ("markdown", Format::Markdown),
        ("github", Format::Github),
        ("ndjson", Format::Ndjson),
        ("sarif", Format::Sarif),
        ("gitlab", Format::Gitlab),
        ("html", Format::Html),
    ] {
        let text = rendered(format, PLAIN);
        // Every format names the failing finding's code.
        assert!(text.contains("late-warmup-observation"), "{name}: {text}");
        insta::assert_snapshot!(format!("synthetic.{name}"), text);
    }
}

#[test]
fn concise_quiet_and_statistics_on_a_synthetic_report() {
    for (name, opts) in [
        (
            "quiet",
            Options {
                quiet: true,
                ..PLAIN
            },
        ),
        (
            "statistics",
            Options {
                statistics: true,
                ..PLAIN
            },
        ),
    ] {
        let text = rendered(Format::Concise, opts);
        insta::assert_snapshot!(format!("synthetic.concise-{name}"), text);
    }
}
