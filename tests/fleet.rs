//! docs/fleet.md, run: `--shard` splits the runs into disjoint shards that
//! cover every run once, and the documented DuckDB queries, run statement by
//! statement on the shards' NDJSON, agree with one unsharded audit. The
//! DuckDB test needs Python with the `duckdb` package (PyPI): the
//! interpreter of `common::test_python`; without it the test says so and
//! is skipped.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::Path;

use common::*;
use serde_json::Value;

const FOLDERS: [&str; 2] = ["sample-artifacts", "fixtures"];
const SHARDS: usize = 3;

/// Audits shard `i` of [`SHARDS`] of [`FOLDERS`] into `out` (NDJSON).
fn shard(i: usize, out: &Path) -> i32 {
    let spec = format!("{i}/{SHARDS}");
    let out = out.display().to_string();
    let mut args = FOLDERS.to_vec();
    args.extend(["--shard", &spec, "--format", "ndjson", "--output", &out]);
    let (_, stderr, code) = cli(&args);
    assert!(code <= 1, "shard {spec} exited {code}: {stderr}");
    code
}

fn unsharded() -> Value {
    // Relative, as the shards were given them (the tests run in the crate root).
    let refs: Vec<&Path> = FOLDERS.iter().map(Path::new).collect();
    json_report(&refs, &[]).0
}

fn run_names(report: &Value) -> Vec<String> {
    report["runs"]
        .as_array()
        .expect("runs")
        .iter()
        .map(|r| r["path"].as_str().expect("path").to_string())
        .collect()
}

#[test]
fn shards_are_disjoint_and_cover_every_run_once() {
    let t = tempfile::tempdir().expect("tempdir");
    let mut seen = BTreeMap::new();
    for i in 0..SHARDS {
        let out = t.path().join(format!("shard-{i}.ndjson"));
        shard(i, &out);
        for line in jsonl(&out) {
            if line["kind"] == "run" {
                let run = line["run"].as_str().expect("run").to_string();
                assert!(seen.insert(run.clone(), i).is_none(), "{run} in two shards");
            }
        }
    }
    let all: BTreeSet<String> = run_names(&unsharded()).into_iter().collect();
    let sharded: BTreeSet<String> = seen.keys().cloned().collect();
    assert_eq!(sharded, all);
    // Every shard got some runs (53 runs over 3 shards).
    let per: BTreeSet<usize> = seen.values().copied().collect();
    assert_eq!(per.len(), SHARDS);
}

#[test]
fn a_shard_index_out_of_range_is_refused() {
    let (_, stderr, code) = cli(&["sample-artifacts", "--shard", "3/3"]);
    assert_eq!(code, 2);
    assert!(stderr.contains("0 <= INDEX < COUNT"), "{stderr}");
}

/// The ```sql block of docs/fleet.md.
fn documented_sql() -> String {
    let doc = fs::read_to_string(root().join("docs/fleet.md")).expect("docs/fleet.md");
    let start = doc.find("```sql\n").expect("a sql block") + 7;
    doc[start..start + doc[start..].find("```").expect("block end")].to_string()
}

/// Runs `sql` statement by statement in `dir` with DuckDB; the rows of each
/// statement that returns any, in order.
fn run_sql(python: &str, dir: &Path, sql: &str) -> Vec<Vec<Vec<Value>>> {
    let script = r#"
import duckdb, json, sys
con = duckdb.connect()
out = []
for stmt in sys.stdin.read().split(";"):
    code = "\n".join(l for l in stmt.splitlines() if not l.strip().startswith("--")).strip()
    if not code:
        continue
    rel = con.execute(code)
    if code.upper().startswith("SELECT"):
        out.append([[float(v) if hasattr(v, "as_integer_ratio") and not isinstance(v, (int, bool)) else v for v in row] for row in rel.fetchall()])
print(json.dumps(out, default=str))
"#;
    let out = run_python(
        python,
        script,
        &[],
        dir,
        sql.as_bytes(),
        "the documented SQL",
    );
    serde_json::from_slice(&out).expect("JSON rows")
}

#[test]
fn the_documented_duckdb_queries_agree_with_an_unsharded_audit() {
    let python = match test_python(&["duckdb"]) {
        Ok(p) => p,
        Err(why) => {
            common::missing_tool(&format!(
                "the DuckDB queries of docs/fleet.md need Python with duckdb: {why}"
            ));
            return;
        }
    };
    let t = tempfile::tempdir().expect("tempdir");
    let shards = t.path().join("shards");
    let mut worst = 0;
    for i in 0..SHARDS {
        worst = worst.max(shard(i, &shards.join(format!("shard-{i}.ndjson"))));
    }
    let results = run_sql(&python, t.path(), &documented_sql());
    assert_eq!(results.len(), 4, "four queries answer: {results:?}");
    let report = unsharded();
    let runs = report["runs"].as_array().expect("runs");

    // Verdicts.
    let mut statuses = BTreeMap::new();
    for r in runs {
        *statuses
            .entry(r["status"].as_str().expect("status").to_string())
            .or_insert(0_i64) += 1;
    }
    let got: BTreeMap<String, i64> = results[0]
        .iter()
        .map(|row| {
            (
                row[0].as_str().unwrap().to_string(),
                row[1].as_i64().unwrap(),
            )
        })
        .collect();
    assert_eq!(got, statuses);

    // Findings per code and severity, and the runs they are in.
    let mut codes: BTreeMap<(String, String), (i64, BTreeSet<String>)> = BTreeMap::new();
    for r in runs {
        for f in r["findings"].as_array().expect("findings") {
            let key = (
                f["code"].as_str().unwrap().to_string(),
                f["severity"].as_str().unwrap().to_string(),
            );
            let e = codes.entry(key).or_default();
            e.0 += 1;
            e.1.insert(r["path"].as_str().unwrap().to_string());
        }
    }
    let got: BTreeMap<(String, String), (i64, usize)> = results[1]
        .iter()
        .map(|row| {
            (
                (
                    row[0].as_str().unwrap().into(),
                    row[1].as_str().unwrap().into(),
                ),
                (row[2].as_i64().unwrap(), row[3].as_i64().unwrap() as usize),
            )
        })
        .collect();
    let want: BTreeMap<(String, String), (i64, usize)> = codes
        .into_iter()
        .map(|(k, (n, rs))| (k, (n, rs.len())))
        .collect();
    assert_eq!(got, want);

    // The most biased published average among the errors.
    let mut biases: Vec<f64> = runs
        .iter()
        .flat_map(|r| r["findings"].as_array().unwrap())
        .filter(|f| f["severity"] == "error")
        .flat_map(|f| f["effect"].as_array().cloned().unwrap_or_default())
        .filter(|e| e["quantity"] == "profiling_avg_bias")
        .map(|e| e["value"].as_f64().unwrap())
        .collect();
    biases.sort_by(|a, b| b.abs().total_cmp(&a.abs()));
    assert!(
        !biases.is_empty(),
        "the fixtures hold errors with an average bias"
    );
    let top = results[2][0][3].as_f64().expect("a bias");
    assert!((top - biases[0]).abs() < 0.006, "{top} vs {}", biases[0]);
    assert_eq!(results[2].len(), biases.len().min(10));

    // The gate: every shard in, the runs all counted, nothing exited 2.
    let gate = &results[3][0];
    assert_eq!(gate[0].as_i64(), Some(SHARDS as i64));
    assert_eq!(gate[1].as_i64(), Some(runs.len() as i64));
    assert_eq!(gate[2].as_i64(), Some(worst as i64));
}

/// A fleet laid out as links: 250 run folders and 250 symbolic links to
/// runs kept elsewhere, plus a link back to the folder itself (a cycle) and
/// a second link to a linked run. Every run is audited exactly once, the
/// linked ones with their resolved path beside the given one; the cycle
/// neither loops nor duplicates.
#[test]
fn symlinked_run_directories_are_followed_once_each() {
    let t = tempfile::tempdir().expect("tempdir");
    let (fleet, store) = (t.path().join("fleet"), t.path().join("store"));
    let summary =
        std::fs::read(root().join("sample-artifacts/runs/clean/profile_export_aiperf.json"))
            .expect("summary");
    let make = |dir: &std::path::Path| {
        std::fs::create_dir_all(dir).expect("mkdir");
        std::fs::write(dir.join("profile_export_aiperf.json"), &summary).expect("write");
    };
    for i in 0..250 {
        make(&fleet.join(format!("run-{i:03}")));
        let kept = store.join(format!("kept-{i:03}"));
        make(&kept);
        std::os::unix::fs::symlink(&kept, fleet.join(format!("link-{i:03}"))).expect("link");
    }
    std::os::unix::fs::symlink(&fleet, fleet.join("loop")).expect("cycle");
    std::os::unix::fs::symlink(store.join("kept-000"), fleet.join("zz-again")).expect("link");
    let (report, _) = json_report(&[&fleet], &[]);
    let runs = report["runs"].as_array().expect("runs");
    assert_eq!(runs.len(), 500, "{}", report["errors"]);
    assert!(
        report["errors"].as_array().is_some_and(|e| e.is_empty()),
        "{}",
        report["errors"]
    );
    let linked: Vec<&Value> = runs
        .iter()
        .filter(|r| r["path"].as_str().is_some_and(|p| p.contains("/link-")))
        .collect();
    assert_eq!(linked.len(), 250);
    for r in linked {
        let resolved = r["resolved_path"].as_str().expect("resolved");
        assert!(resolved.contains("/store/kept-"), "{r}");
    }
    assert!(runs
        .iter()
        .filter(|r| r["path"].as_str().is_some_and(|p| p.contains("/run-")))
        .all(|r| r["resolved_path"].is_null()));
    // Asked not to follow links: the 250 folders, and every link not
    // followed listed (the 250 runs, the cycle, the second link); not an
    // error, so the exit code is the audit's.
    let (report, code) = json_report(&[&fleet], &["--no-follow-links"]);
    assert_eq!(report["runs"].as_array().expect("runs").len(), 250);
    let skipped = report["summary"]["skipped"].as_array().expect("skipped");
    assert_eq!(skipped.len(), 252, "{skipped:?}");
    assert!(skipped.iter().all(|s| s["message"]
        .as_str()
        .is_some_and(|m| m.contains("not followed"))));
    assert!(code <= 1);
    let (concise, _, _) = cli(&["--no-follow-links", fleet.to_str().expect("utf8")]);
    assert!(
        concise.contains("252 symlinked director(ies) not followed"),
        "{concise}"
    );
    assert_eq!(
        concise
            .lines()
            .filter(|l| l.contains(": skipped: "))
            .count(),
        252
    );
}
