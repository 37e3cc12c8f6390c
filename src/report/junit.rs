//! JUnit XML: one testsuite per run, one testcase per check and one per
//! published number. Findings at or above the fail level are the check's
//! failure; below it they go to system-out. A published number fails when
//! a finding at or above the fail level moves it (`biased` or `wrong`, with
//! the value to publish instead), passes when trusted (or moved only below
//! the fail level, said in system-out), and is skipped when it cannot be
//! told. A check that could not tell is skipped; a run that could not be
//! read, and a path that held no run, are errors.

use std::io::{self, Write};

use quick_junit::{NonSuccessKind, Report as JUnit, TestCase, TestCaseStatus, TestSuite};

use super::numbers;
use crate::findings::Finding;
use crate::results::published::{Published, Verdict};
use crate::results::{CheckStatus, Report, RunStatus};
use crate::text::escape::visible;

fn describe(findings: &[&Finding]) -> String {
    findings
        .iter()
        .map(|f| {
            let at = f.location().map(|l| format!(" ({l})")).unwrap_or_default();
            visible(&format!(
                "[{}] {}{at}: {}",
                f.severity.as_str(),
                f.code.as_str(),
                f.message
            ))
            .into_owned()
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// A published claim as a testcase of its own: failed when the artifacts
/// do not support it, skipped when they cannot tell.
fn claim_case(c: &crate::results::ClaimResult) -> TestCase {
    let name = visible(&format!("claim {}", c.name)).into_owned();
    let figures = format!(
        "claimed {}, the cleaned artifacts give {}",
        c.claimed,
        c.supported
            .map_or("nothing (cannot tell)".to_string(), |v| format!("{v}"))
    );
    let mut case = match c.within {
        Some(true) => TestCase::new(name, TestCaseStatus::success()),
        Some(false) => {
            let mut s = TestCaseStatus::non_success(NonSuccessKind::Failure);
            s.set_message(visible(&figures).as_ref());
            s.set_type("claim-mismatch");
            TestCase::new(name, s)
        }
        None => {
            let mut s = TestCaseStatus::skipped();
            s.set_message(visible(&figures).as_ref());
            TestCase::new(name, s)
        }
    };
    case.set_classname("artifact-check.claims");
    if c.within == Some(true) {
        case.set_system_out(visible(&figures).as_ref());
    }
    case
}

/// A published number as a testcase of its own.
fn number_case(
    run: &crate::results::RunReport,
    p: &Published,
    fail_on: crate::findings::Severity,
) -> TestCase {
    let place = p
        .endpoint
        .as_deref()
        .map(|e| format!(" on {e}{}", p.series.as_deref().unwrap_or("")))
        .unwrap_or_default();
    let name = visible(&format!("{} {}{place}", p.metric, p.stat)).into_owned();
    let unit = p
        .unit
        .as_deref()
        .map(|u| format!(" {u}"))
        .unwrap_or_default();
    let figures = format!(
        "{}: published {}{unit}, corrected {} ({})",
        p.verdict.as_str(),
        p.value.map_or("?".into(), crate::text::figure),
        numbers::corrected(p),
        p.causes
            .iter()
            .map(|c| c.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    );
    let failing = p.causes.iter().any(|c| {
        run.findings
            .iter()
            .any(|f| f.code == *c && f.severity >= fail_on)
    });
    let mut case = match p.verdict {
        Verdict::Trusted => TestCase::new(name, TestCaseStatus::success()),
        Verdict::CannotTell => {
            let mut s = TestCaseStatus::skipped();
            s.set_message(
                visible(&format!(
                    "cannot tell: {}",
                    p.reason.as_deref().unwrap_or("")
                ))
                .as_ref(),
            );
            TestCase::new(name, s)
        }
        _ if failing => {
            let mut s = TestCaseStatus::non_success(NonSuccessKind::Failure);
            s.set_message(visible(&figures).as_ref());
            s.set_type(p.verdict.as_str());
            TestCase::new(name, s)
        }
        _ => {
            let mut c = TestCase::new(name, TestCaseStatus::success());
            c.set_system_out(visible(&figures).as_ref());
            c
        }
    };
    case.set_classname("artifact-check.published");
    case
}

/// A run's suppressed findings, each with its rule and reason.
fn suppressed_out(run: &crate::results::RunReport) -> Option<String> {
    if run.suppressed.is_empty() {
        return None;
    }
    let lines: Vec<String> = run
        .suppressed
        .iter()
        .map(|s| {
            visible(&format!(
                "suppressed [{}] {} ({}: {})",
                s.finding.severity.as_str(),
                s.finding.code.as_str(),
                s.rule.as_str(),
                s.reason
            ))
            .into_owned()
        })
        .collect();
    Some(format!(
        "{} finding(s) suppressed\n{}",
        run.suppressed.len(),
        lines.join("\n")
    ))
}

/// Writes the JUnit report.
pub fn render(report: &Report, out: &mut dyn Write) -> io::Result<()> {
    let fail_on = report.summary.fail_on;
    let mut junit = JUnit::new("artifact-check");
    for run in &report.runs {
        let mut suite = TestSuite::new(visible(&run.path).as_ref());
        if run.status == RunStatus::Error {
            let mut s = TestCaseStatus::non_success(NonSuccessKind::Error);
            s.set_message("the run could not be read");
            let all: Vec<&Finding> = run.findings.iter().collect();
            s.set_description(describe(&all));
            suite.add_test_case(TestCase::new("read", s));
        }
        for c in run.checks.iter() {
            let (check, status, reason) = (c.name, c.status, c.reason.clone());
            let mine: Vec<&Finding> = run.findings.iter().filter(|f| f.check == check).collect();
            let (failing, rest): (Vec<&Finding>, Vec<&Finding>) =
                mine.iter().partition(|f| f.severity >= fail_on);
            let mut case = if !failing.is_empty() {
                let mut s = TestCaseStatus::non_success(NonSuccessKind::Failure);
                s.set_message(format!(
                    "{} finding(s) at or above {}",
                    failing.len(),
                    fail_on.as_str()
                ));
                s.set_type(failing[0].code.as_str());
                s.set_description(describe(&failing));
                TestCase::new(check, s)
            } else if status == CheckStatus::Unknown {
                let mut s = TestCaseStatus::skipped();
                s.set_message(
                    visible(&format!("cannot tell: {}", reason.unwrap_or_default())).as_ref(),
                );
                TestCase::new(check, s)
            } else {
                TestCase::new(check, TestCaseStatus::success())
            };
            if !rest.is_empty() {
                case.set_system_out(describe(&rest));
            }
            case.set_classname(format!("artifact-check.{check}"));
            suite.add_test_case(case);
        }
        for c in &run.claims {
            suite.add_test_case(claim_case(c));
        }
        for p in &run.published {
            suite.add_test_case(number_case(run, p, fail_on));
        }
        if let Some(out) = suppressed_out(run) {
            suite.set_system_out(out);
        }
        junit.add_test_suite(suite);
    }
    if !report.errors.is_empty() {
        let mut suite = TestSuite::new("paths");
        for e in &report.errors {
            let mut s = TestCaseStatus::non_success(NonSuccessKind::Error);
            s.set_message(visible(&e.message).as_ref());
            suite.add_test_case(TestCase::new(visible(&e.path).as_ref(), s));
        }
        junit.add_test_suite(suite);
    }
    junit.serialize(&mut *out).map_err(io::Error::other)?;
    writeln!(out)
}
