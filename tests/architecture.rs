//! The layering of docs/architecture.md, held by reading the sources: no
//! import cycle through two top-level modules (a parent's use of its child
//! counts), the renderers read only the report data, the findings and the
//! text layer, a check never names another check or a renderer, lower
//! layers never name the checks or the renderers, and the registry lists
//! every check module.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

use common::root;

fn sources(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in fs::read_dir(dir).expect("list") {
        let p = e.expect("entry").path();
        if p.is_dir() {
            out.extend(sources(&p));
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
    out
}

/// The code of a file without its comments (a doc comment may name anything).
fn code(p: &Path) -> String {
    fs::read_to_string(p)
        .expect("read")
        .lines()
        .map(|l| l.split("//").next().unwrap_or(""))
        .collect::<Vec<_>>()
        .join("\n")
}

fn checks() -> Vec<String> {
    let dir = root().join("src/checks");
    let mut names: Vec<String> = fs::read_dir(&dir)
        .expect("list")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.file_name().is_some_and(|n| n != "mod.rs"))
        .map(|p| {
            p.file_stem()
                .and_then(|s| s.to_str())
                .unwrap_or_default()
                .to_string()
        })
        .collect();
    names.sort();
    names.dedup();
    names
}

#[test]
fn a_check_never_names_another_check() {
    let all = checks();
    assert!(all.len() >= 4, "{all:?}");
    for check in &all {
        let dir = root().join("src/checks");
        let file = dir.join(format!("{check}.rs"));
        let files = if file.exists() {
            vec![file]
        } else {
            sources(&dir.join(check))
        };
        for f in files {
            let text = code(&f);
            for other in all.iter().filter(|o| *o != check) {
                for pattern in [format!("checks::{other}"), format!("super::{other}")] {
                    assert!(
                        !text.contains(&pattern),
                        "{} names {pattern}: checks depend on the model, never on each other",
                        f.display()
                    );
                }
            }
        }
    }
}

#[test]
fn lower_layers_never_name_checks_or_renderers() {
    for layer in [
        "artifacts",
        "model",
        "findings",
        "frameworks.rs",
        "stats.rs",
        "config.rs",
        "results",
        "text",
    ] {
        let path = root().join("src").join(layer);
        let files = if path.is_dir() {
            sources(&path)
        } else {
            vec![path]
        };
        for f in files {
            let text = code(&f);
            for upper in [
                "crate::checks",
                "crate::report",
                "crate::claims",
                "crate::clean",
                "crate::compare",
            ] {
                assert!(
                    !text.contains(upper),
                    "{} names {upper}: {layer} is below it",
                    f.display()
                );
            }
        }
    }
}

#[test]
fn the_registry_lists_every_check_module() {
    let registry = code(&root().join("src/checks/mod.rs"));
    for check in checks() {
        assert!(
            registry.contains(&format!("pub mod {check};"))
                && registry.contains(&format!("{check}::CHECK")),
            "src/checks/{check} is not in checks::ALL"
        );
    }
    let names: Vec<&str> = artifact_check::checks::ALL.iter().map(|c| c.name).collect();
    assert_eq!(names.len(), checks().len(), "{names:?}");
}

/// The module path of a source file relative to `src` (`report/html/mod.rs`
/// is `report::html`, `lib.rs` the root, ``).
fn module_of(rel: &Path) -> String {
    let mut parts: Vec<String> = rel
        .with_extension("")
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if parts
        .last()
        .is_some_and(|l| l == "mod" || l == "lib" || l == "main")
    {
        parts.pop();
    }
    parts.join("::")
}

/// A file's code without comments and without its `#[cfg(test)]` items (a
/// test may use anything).
fn non_test_code(text: &str) -> String {
    let mut out = Vec::new();
    let (mut pending, mut depth) = (false, 0_i64);
    for line in text.lines() {
        let t = line.trim();
        if depth > 0 {
            depth += t.matches('{').count() as i64 - t.matches('}').count() as i64;
            continue;
        }
        if t.starts_with("#[cfg(test)]") {
            pending = true;
            continue;
        }
        if pending {
            pending = false;
            depth = t.matches('{').count() as i64 - t.matches('}').count() as i64;
            continue;
        }
        out.push(line);
    }
    out.join("\n")
}

fn ident_len(s: &str) -> usize {
    s.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .unwrap_or(s.len())
}

/// The paths a `use` tree or an expression path starting at `text` spells
/// (`a::{b, c::d}` is `a::b` and `a::c::d`), each with `prefix` in front.
fn expand(prefix: &str, text: &str, out: &mut Vec<String>) {
    let mut path = prefix.to_string();
    let mut rest = text;
    loop {
        rest = rest.trim_start();
        let n = ident_len(rest);
        if n == 0 {
            if let Some(group) = rest.strip_prefix('{') {
                let (mut depth, mut start) = (0, 0);
                for (i, c) in group.char_indices() {
                    match c {
                        '{' => depth += 1,
                        '}' if depth == 0 => {
                            expand(&path, &group[start..i], out);
                            return;
                        }
                        '}' => depth -= 1,
                        ',' if depth == 0 => {
                            expand(&path, &group[start..i], out);
                            start = i + 1;
                        }
                        _ => {}
                    }
                }
            }
            break;
        }
        if !path.is_empty() {
            path.push_str("::");
        }
        path.push_str(&rest[..n]);
        rest = &rest[n..];
        match rest.strip_prefix("::") {
            Some(r) => rest = r,
            None => break,
        }
    }
    out.push(path);
}

/// The library's module graph: for each module, the modules its non-test
/// code names through `crate::` paths (use trees expanded, root re-exports
/// followed to their module), `super::` paths, and its own children.
fn module_graph(src: &Path) -> BTreeMap<String, BTreeSet<String>> {
    // Each file once: its module and its code without comments.
    let read: Vec<(String, String)> = sources(src)
        .into_iter()
        .filter(|p| p.file_name().is_some_and(|n| n != "main.rs"))
        .map(|p| (module_of(p.strip_prefix(src).expect("under src")), code(&p)))
        .collect();
    // A module declared `#[cfg(test)] mod x;` is a test's: it may use anything.
    let test_only: BTreeSet<String> = read
        .iter()
        .flat_map(|(me, text)| {
            let lines: Vec<&str> = text.lines().map(str::trim).collect();
            lines
                .windows(2)
                .filter(|w| w[0].starts_with("#[cfg(test)]"))
                .filter_map(|w| {
                    w[1].strip_prefix("mod ")?
                        .strip_suffix(';')
                        .map(str::to_string)
                })
                .map(|child| {
                    if me.is_empty() {
                        child
                    } else {
                        format!("{me}::{child}")
                    }
                })
                .collect::<Vec<_>>()
        })
        .collect();
    let files: Vec<(String, String)> = read
        .iter()
        .filter(|(m, _)| !test_only.contains(m))
        .map(|(m, text)| (m.clone(), non_test_code(text)))
        .collect();
    let modules: BTreeSet<&str> = files.iter().map(|(m, _)| m.as_str()).collect();
    // `pub use crate::results::{Report, ..}` in lib.rs: `crate::Report` is
    // `results`.
    let mut reexports = BTreeMap::new();
    if let Some((_, lib)) = files.iter().find(|(m, _)| m.is_empty()) {
        for part in lib.split("pub use crate::").skip(1) {
            let mut paths = Vec::new();
            expand("", part, &mut paths);
            for path in paths {
                if let Some((module, item)) = path.rsplit_once("::") {
                    reexports.insert(item.to_string(), module.to_string());
                }
            }
        }
    }
    let resolve = |path: &str, me: &str| -> Option<String> {
        let segs: Vec<&str> = path.split("::").collect();
        let found = (1..=segs.len())
            .rev()
            .map(|k| segs[..k].join("::"))
            .find(|c| modules.contains(c.as_str()))
            .or_else(|| reexports.get(segs[0]).cloned())?;
        (found != me).then_some(found)
    };
    let mut graph = BTreeMap::new();
    for (me, body) in &files {
        let mut names = BTreeSet::new();
        for part in body.split("crate::").skip(1) {
            let mut paths = Vec::new();
            expand("", part, &mut paths);
            names.extend(paths.iter().filter_map(|p| resolve(p, me)));
        }
        for (i, _) in body.match_indices("super::") {
            // Only the first of a chain `super::super::x`.
            if body[..i].ends_with("super::") {
                continue;
            }
            let mut rest = &body[i..];
            let mut base: Vec<&str> = me.split("::").filter(|s| !s.is_empty()).collect();
            while let Some(r) = rest.strip_prefix("super::") {
                base.pop();
                rest = r;
            }
            let mut paths = Vec::new();
            expand(&base.join("::"), rest, &mut paths);
            names.extend(paths.iter().filter_map(|p| resolve(p, me)));
        }
        // A parent's use of its child (`html::render(..)`, `pub use
        // child::X`); the bare `mod child;` declaration is not a use.
        for line in body.lines() {
            let t = line.trim_start();
            if t.starts_with("mod ")
                || t.starts_with("pub mod ")
                || t.starts_with("pub(crate) mod ")
            {
                continue;
            }
            for m in modules.iter().filter(|m| {
                m.rsplit_once("::")
                    .map_or(me.is_empty() && !m.is_empty(), |(parent, _)| parent == me)
            }) {
                let child = m.rsplit("::").next().unwrap_or(m);
                let pattern = format!("{child}::");
                let used = line.match_indices(&pattern).any(|(i, _)| {
                    let before = line[..i].chars().next_back();
                    !before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
                        || line[..i].ends_with("self::")
                });
                if used {
                    names.insert(m.to_string());
                }
            }
        }
        graph.insert(me.clone(), names);
    }
    graph
}

/// The strongly connected sets of modules (import cycles) that span two or
/// more top-level modules.
fn cycles_across_modules(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    let nodes: Vec<&String> = graph.keys().collect();
    let index: BTreeMap<&String, usize> = nodes.iter().enumerate().map(|(i, n)| (*n, i)).collect();
    let n = nodes.len();
    let mut reach = vec![vec![false; n]; n];
    for (a, targets) in graph {
        for b in targets {
            if let Some(&j) = index.get(b) {
                reach[index[a]][j] = true;
            }
        }
    }
    // Warshall's transitive closure.
    for k in 0..n {
        let via = reach[k].clone();
        for row in reach.iter_mut().filter(|row| row[k]) {
            for (to, &through) in row.iter_mut().zip(&via) {
                *to |= through;
            }
        }
    }
    let top = |m: &str| m.split("::").next().unwrap_or("").to_string();
    let mut seen = vec![false; n];
    let mut out = Vec::new();
    for i in 0..n {
        if seen[i] {
            continue;
        }
        let set: Vec<usize> = (0..n)
            .filter(|&j| j == i || (reach[i][j] && reach[j][i]))
            .collect();
        for &j in &set {
            seen[j] = true;
        }
        let tops: BTreeSet<String> = set.iter().map(|&j| top(nodes[j])).collect();
        if set.len() > 1 && tops.len() > 1 {
            out.push(set.iter().map(|&j| nodes[j].clone()).collect());
        }
    }
    out
}

#[test]
fn no_import_cycle_spans_two_top_level_modules() {
    let graph = module_graph(&root().join("src"));
    assert!(graph.len() > 40, "{} modules", graph.len());
    // The graph sees what the layering rules below lean on.
    assert!(
        graph["checks"].contains("checks::prefix_cache"),
        "{:?}",
        graph["checks"]
    );
    assert!(
        graph["report"].contains("report::html"),
        "{:?}",
        graph["report"]
    );
    let cycles = cycles_across_modules(&graph);
    assert!(
        cycles.is_empty(),
        "import cycles through two top-level modules (docs/architecture.md's layers): {cycles:#?}"
    );
}

#[test]
fn the_cycle_detector_sees_a_cycle_through_a_parent() {
    // `checks` (the registry) uses its child `checks::a`, which names
    // `report`, which names `checks`: a cycle only a parent's use of its
    // child closes.
    let graph: BTreeMap<String, BTreeSet<String>> = [
        ("checks", vec!["checks::a"]),
        ("checks::a", vec!["report"]),
        ("report", vec!["checks"]),
        ("model", vec![]),
    ]
    .into_iter()
    .map(|(m, t)| (m.to_string(), t.into_iter().map(String::from).collect()))
    .collect();
    assert_eq!(cycles_across_modules(&graph).len(), 1);
    let mut inside = graph.clone();
    inside.insert("report".into(), BTreeSet::new());
    inside.insert("checks::a".into(), ["checks".to_string()].into());
    assert!(
        cycles_across_modules(&inside).is_empty(),
        "a cycle inside one module is its own affair"
    );
    let mut paths = Vec::new();
    expand("", "report::{fmt_opt, html::{self, dist}}, x", &mut paths);
    assert_eq!(
        paths,
        [
            "report::fmt_opt",
            "report::html::self",
            "report::html::dist"
        ]
    );
}

/// The top-level modules (or root re-exports) the non-test code of the
/// files under `dir` names, each with the file naming it.
fn named_by(dir: &str) -> Vec<(String, String)> {
    let graph = module_graph(&root().join("src"));
    graph
        .iter()
        .filter(|(m, _)| *m == dir || m.starts_with(&format!("{dir}::")))
        .flat_map(|(m, targets)| {
            targets
                .iter()
                .map(|t| (m.clone(), t.split("::").next().unwrap_or("").to_string()))
                .collect::<Vec<_>>()
        })
        .collect()
}

#[test]
fn renderers_read_only_the_report_data_the_findings_and_text() {
    let allowed = ["report", "results", "findings", "text"];
    let names = named_by("report");
    assert!(names.iter().any(|(_, t)| t == "results"), "{names:?}");
    for (module, target) in names {
        assert!(
            allowed.contains(&target.as_str()),
            "{module} names {target}: a renderer reads only the report data (results), the findings and text"
        );
    }
}

#[test]
fn checks_never_name_a_renderer_or_the_flow_above_them() {
    let below = [
        "checks",
        "artifacts",
        "model",
        "findings",
        "frameworks",
        "stats",
        "config",
        "results",
        "text",
        "files",
    ];
    let names = named_by("checks");
    assert!(names.iter().any(|(_, t)| t == "model"), "{names:?}");
    for (module, target) in names {
        assert!(
            below.contains(&target.as_str()),
            "{module} names {target}: a check reads the run's model and writes findings and report data"
        );
    }
}
