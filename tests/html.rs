//! The HTML report in a real browser: every sample run's page rendered by
//! headless Chromium (Debian's `chromium`; the tests say they are skipped
//! where it is absent), its DOM after the page's script ran checked for an
//! element per request and per finding, its windows, scrapes and metric
//! intervals, and no console error; a page with a planted script error must
//! fail that check. A 10^5-request run's page stays under 5 MB (binned).
//! Without Chromium the size and structure tests still run on the file.

mod common;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use common::*;
use serde_json::Value;

fn chromium() -> Option<&'static str> {
    ["chromium", "chromium-browser", "google-chrome"]
        .into_iter()
        .find(|c| {
            Command::new(c)
                .arg("--version")
                .output()
                .is_ok_and(|o| o.status.success())
        })
}

/// The DOM after the page's script ran, and Chromium's console log.
fn dump_dom(browser: &str, page: &Path) -> (String, String) {
    let out = Command::new(browser)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--enable-logging=stderr",
            "--v=0",
            "--virtual-time-budget=3000",
            "--dump-dom",
        ])
        .arg(format!("file://{}", page.display()))
        .output()
        .expect("chromium runs");
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn html_of(paths: &[&Path], out: &Path) -> i32 {
    let mut args = vec!["--format".to_string(), "html".into(), "--output".into()];
    args.push(out.display().to_string());
    args.extend(paths.iter().map(|p| p.display().to_string()));
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    let (_, err, code) = cli(&refs);
    assert!(code <= 1, "{err}");
    code
}

fn count(hay: &str, needle: &str) -> usize {
    hay.matches(needle).count()
}

fn console_errors(log: &str) -> Vec<&str> {
    log.lines()
        .filter(|l| l.contains(":CONSOLE") || l.contains("Uncaught"))
        .collect()
}

#[test]
fn every_sample_page_renders_its_requests_and_findings_without_errors() {
    let browser = chromium();
    if browser.is_none() {
        common::missing_tool(
            "no chromium (apt-get install chromium): the pages are checked as files only",
        );
    }
    let t = tempfile::tempdir().expect("tempdir");
    for name in RUNS {
        let page = t.path().join(format!("{name}.html"));
        html_of(&[&run_dir(name)], &page);
        let html = fs::read_to_string(&page).expect("page");
        let (report, _) = sample(name);
        let records = records(name).len();
        let findings = report["findings"].as_array().expect("findings").len();
        assert!(
            !html.contains("http://") || !html.contains("<script src"),
            "{name}: no external script"
        );
        assert!(!html.contains("<link "), "{name}: no external stylesheet");
        assert_eq!(
            count(&html, "data-request=\""),
            records,
            "{name}: a bar per request"
        );
        assert_eq!(
            count(&html, "data-finding=\""),
            findings,
            "{name}: an item per finding"
        );
        assert!(
            html.contains("data-window=\"profiling\""),
            "{name}: AIPerf's window"
        );
        assert!(
            html.contains("data-span=\"profiling\""),
            "{name}: the requests' span"
        );
        let Some(b) = browser else { continue };
        let (dom, log) = dump_dom(b, &page);
        assert!(
            console_errors(&log).is_empty(),
            "{name}: {:?}",
            console_errors(&log)
        );
        assert!(dom.contains("data-errors=\"0\""), "{name}: script errors");
        assert!(
            dom.contains(&format!("data-ready=\"{records}\"")),
            "{name}: the script saw every bar"
        );
        assert_eq!(count(&dom, "data-request=\""), records);
        assert_eq!(count(&dom, "data-finding=\""), findings);
    }
}

#[test]
fn a_contaminated_metric_links_to_its_misattributed_intervals() {
    let t = tempfile::tempdir().expect("tempdir");
    let page = t.path().join("late-warmup.html");
    html_of(&[&run_dir("late-warmup")], &page);
    let html = fs::read_to_string(&page).expect("page");
    let (report, _) = sample("late-warmup");
    let late = findings(&report, "late-warmup-observation");
    assert_eq!(late.len(), 1);
    let metric = late[0]["metric"].as_str().expect("metric");
    assert!(html.contains(&format!("data-metric=\"{metric}\"")));
    assert!(
        html.contains("its scrape intervals</a>"),
        "the finding links to them"
    );
    // The ledger's late observation is in a profiling interval: marked.
    assert!(count(&html, "data-misattributed=\"1\"") >= 1);
    // Cold requests are marked (every request of this run opened one).
    assert!(html.contains("data-cold=\"1\""));
}

#[test]
fn a_script_error_on_the_page_is_caught() {
    let Some(browser) = chromium() else {
        common::missing_tool("no chromium (apt-get install chromium)");
        return;
    };
    let t = tempfile::tempdir().expect("tempdir");
    let page = t.path().join("clean.html");
    html_of(&[&run_dir("clean")], &page);
    let broken = fs::read_to_string(&page)
        .expect("page")
        .replace("</body>", "<script>not_defined();</script></body>");
    fs::write(&page, broken).expect("write");
    let (dom, log) = dump_dom(browser, &page);
    assert!(dom.contains("data-errors=\"1\""));
    assert!(!console_errors(&log).is_empty());
}

#[test]
fn a_sample_page_renders_to_a_png() {
    let Some(browser) = chromium() else {
        common::missing_tool("no chromium (apt-get install chromium)");
        return;
    };
    let t = tempfile::tempdir().expect("tempdir");
    let page = t.path().join("cold-tls.html");
    html_of(&[&run_dir("cold-tls")], &page);
    let png = t.path().join("cold-tls.png");
    let out = Command::new(browser)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--window-size=1200,1600",
        ])
        .arg(format!("--screenshot={}", png.display()))
        .arg(format!("file://{}", page.display()))
        .output()
        .expect("chromium runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let bytes = fs::read(&png).expect("png");
    assert!(bytes.starts_with(b"\x89PNG") && bytes.len() > 10_000);
}

/// A run of 10^5 requests: the clean sample's records repeated with their
/// times shifted and fresh ids (hand-made input for a size test of the
/// renderer, not the proof of a check).
fn big_run(dir: &Path) -> PathBuf {
    let run = dir.join("big");
    fs::create_dir_all(&run).expect("mkdir");
    let recs: Vec<Value> = records("clean");
    let span = recs
        .iter()
        .map(|r| r["metadata"]["request_end_ns"].as_u64().unwrap_or(0))
        .max()
        .unwrap_or(0)
        - recs
            .iter()
            .map(|r| {
                r["metadata"]["request_start_ns"]
                    .as_u64()
                    .unwrap_or(u64::MAX)
            })
            .min()
            .unwrap_or(0);
    let mut out = String::new();
    let mut n = 0;
    'fill: for round in 0.. {
        for r in &recs {
            if n == 100_000 {
                break 'fill;
            }
            let mut r = r.clone();
            let shift = round * span / 4;
            for key in ["request_start_ns", "request_end_ns", "request_ack_ns"] {
                if let Some(v) = r["metadata"][key].as_u64() {
                    r["metadata"][key] = (v + shift).into();
                }
            }
            r["metadata"]["x_request_id"] = format!("req-{n}").into();
            out.push_str(&r.to_string());
            out.push('\n');
            n += 1;
        }
    }
    fs::write(run.join("profile_export.jsonl"), out).expect("write");
    run
}

#[test]
fn a_100k_request_page_is_binned_and_under_5_mb() {
    let t = tempfile::tempdir().expect("tempdir");
    let run = big_run(t.path());
    let page = t.path().join("big.html");
    html_of(&[&run], &page);
    let size = fs::metadata(&page).expect("page").len();
    assert!(size < 5_000_000, "{size} bytes");
    let html = fs::read_to_string(&page).expect("page");
    assert_eq!(
        count(&html, "data-request=\""),
        0,
        "binned, not a bar per request"
    );
    assert!(count(&html, "data-bin=\"") >= 100);
    assert!(html.contains("100000 request(s), binned"));
    if let Some(b) = chromium() {
        let (dom, log) = dump_dom(b, &page);
        assert!(
            console_errors(&log).is_empty(),
            "{:?}",
            console_errors(&log)
        );
        assert!(dom.contains("data-errors=\"0\""));
    }
}

/// A raw-scrape run of 2,460 scrapes: 123 copies of the 0.13.0
/// late-warmup fixture (real AIPerf output) laid end to end by
/// `benches/make_scrapes.py`.
fn long_scrape_run(dir: &Path) -> Option<PathBuf> {
    let python = match test_python(&["json"]) {
        Ok(p) => p,
        Err(why) => {
            missing_tool(&why);
            return None;
        }
    };
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let run = dir.join("long");
    let out = Command::new(python)
        .arg(root.join("benches/make_scrapes.py"))
        .arg(root.join("fixtures/aiperf-versions/0.13.0/late-warmup"))
        .arg(&run)
        .arg("16")
        .output()
        .expect("make_scrapes.py runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    Some(run)
}

#[test]
fn a_long_raw_scrape_run_s_intervals_are_binned_and_every_one_counted() {
    let t = tempfile::tempdir().expect("tempdir");
    let Some(run) = long_scrape_run(t.path()) else {
        return;
    };
    let page = t.path().join("long.html");
    html_of(&[&run], &page);
    let html = fs::read_to_string(&page).expect("page");
    // One element per scrape and interval made pages of 10^8 bytes.
    assert!(html.len() < 1_000_000, "{} bytes", html.len());
    assert!(count(&html, "<line class=\"scrape\"") <= 2 * 1000 + 1);
    let mut metrics = 0;
    for part in html.split("data-metric=\"").skip(1) {
        let heading = &part[..part.find("</h3>").expect("heading")];
        // "N misattributed interval(s), binned: X intervals summed in Y bins"
        let words: Vec<&str> = heading.split_whitespace().collect();
        let at = |w: &str| words.iter().position(|x| *x == w).expect(w);
        let num = |i: usize| {
            words[i]
                .trim_end_matches(',')
                .parse::<usize>()
                .expect("a number")
        };
        let misattributed = num(at("misattributed") - 1);
        let (shown, bins) = (num(at("binned:") + 1), num(at("bins") - 1));
        assert!(shown > 2000 && bins <= 400, "{heading}");
        // Each bin's title counts its intervals and its misattributed ones:
        // together, the heading's.
        let svg = &part[..part.find("</svg>").expect("its intervals")];
        let titles: Vec<&str> = (svg.split("<title>").skip(1))
            .map(|x| &x[..x.find("</title>").expect("title end")])
            .collect();
        assert_eq!(titles.len(), bins, "{heading}");
        let field = |title: &str, after: &str| -> usize {
            let w: Vec<&str> = title.split_whitespace().collect();
            let i = w
                .windows(2)
                .position(|p| p[1].starts_with(after))
                .expect(after);
            w[i].parse().expect("a count")
        };
        let summed: usize = titles.iter().map(|x| field(x, "scrape")).sum();
        assert_eq!(summed, shown, "{heading}");
        let marked: usize = titles.iter().map(|x| field(x, "misattributed")).sum();
        assert_eq!(marked, misattributed, "{heading}");
        let flagged = titles
            .iter()
            .filter(|x| field(x, "misattributed") > 0)
            .count();
        assert_eq!(count(svg, "data-misattributed=\"1\""), flagged);
        // Every copy of the fixture holds its late warmup observation.
        assert!(misattributed >= 100, "{heading}");
        metrics += 1;
    }
    assert!(metrics >= 1);
}

/// The successful profiling records of a run's `profile_export.jsonl` with
/// a positive TTFT, and how many of them the tool's documented rule calls
/// warm (connection reused, DNS and connect at most 1 ms: docs/checks.md),
/// read here without the crate.
fn ttft_counts(dir: &Path) -> (usize, usize) {
    let text = fs::read_to_string(dir.join("profile_export.jsonl")).expect("records");
    let (mut all, mut warm) = (0, 0);
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let r: serde_json::Value = serde_json::from_str(line).expect("record");
        let m = &r["metrics"];
        let value = |k: &str| m[k]["value"].as_f64().or_else(|| m[k].as_f64());
        let ok = r["error"].is_null() && r["metadata"]["was_cancelled"] != true;
        if r["metadata"]["benchmark_phase"] != "profiling" || !ok {
            continue;
        }
        if !value("time_to_first_token").is_some_and(|v| v > 0.0) {
            continue;
        }
        all += 1;
        let small = |k: &str| value(k).is_none_or(|v| v <= 1.0);
        if value("http_req_connection_reused") == Some(1.0)
            && small("http_req_dns_lookup")
            && small("http_req_connecting")
        {
            warm += 1;
        }
    }
    (all, warm)
}

/// The "warm only" distribution holds warm requests only: a request whose
/// temperature cannot be told (no connection fields) is not warm.
#[test]
fn the_warm_only_series_excludes_requests_of_unknown_temperature() {
    let (_t, dir) = copy_run("cold-tls");
    let (all, warm) = ttft_counts(&dir);
    assert!(
        warm > 0 && warm < all,
        "cold-tls has cold and warm requests: {all} {warm}"
    );
    let page = dir.with_extension("html");
    html_of(&[&dir], &page);
    let html = fs::read_to_string(&page).expect("page");
    assert!(html.contains(&format!("all ({all})")), "all ({all})");
    assert!(
        html.contains(&format!("warm only ({warm})")),
        "warm only ({warm})"
    );

    // The same run without its connection fields: every request is of
    // unknown temperature, so none is warm.
    let path = dir.join("profile_export.jsonl");
    let stripped: String = fs::read_to_string(&path)
        .expect("records")
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let mut r: serde_json::Value = serde_json::from_str(l).expect("record");
            let m = r["metrics"].as_object_mut().expect("metrics");
            m.retain(|k, _| !k.starts_with("http_req_"));
            format!("{r}\n")
        })
        .collect();
    fs::write(&path, stripped).expect("write");
    assert_eq!(ttft_counts(&dir), (all, 0));
    html_of(&[&dir], &page);
    let html = fs::read_to_string(&page).expect("page");
    assert!(html.contains(&format!("all ({all})")), "all ({all})");
    assert!(
        html.contains("warm only (0)"),
        "unknown-temperature requests counted warm: {:?}",
        html.match_indices("warm only (")
            .map(|(i, _)| &html[i..i + 16])
            .collect::<Vec<_>>()
    );
    assert!(!html.contains(&format!("warm only ({all})")));
}
