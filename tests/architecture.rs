//! The layering of docs/architecture.md, held by reading the sources: a
//! check never names another check, lower layers never name the checks or
//! the renderers, and the registry lists every check module.

mod common;

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
        "findings.rs",
        "frameworks.rs",
        "stats.rs",
        "config.rs",
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
