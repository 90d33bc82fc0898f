//! The module graph of docstore-core is a DAG, and its leaves import nothing from core:
//! `limits`, `reserved` and `error` are read by every other module, so they must not read
//! any (src/lib.rs describes the layers). Reads the sources; test modules are ignored.
#![allow(clippy::unwrap_used, clippy::panic)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Top-level module -> the top-level modules it names through `crate::`.
fn graph() -> BTreeMap<String, BTreeSet<String>> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut files = vec![src.clone()];
    while let Some(path) = files.pop() {
        if path.is_dir() {
            files.extend(std::fs::read_dir(&path).unwrap().map(|e| e.unwrap().path()));
            continue;
        }
        let relative = path.strip_prefix(&src).unwrap();
        let module = relative
            .components()
            .next()
            .unwrap()
            .as_os_str()
            .to_string_lossy()
            .trim_end_matches(".rs")
            .to_owned();
        if module == "lib" {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        let code = text.split("#[cfg(test)]").next().unwrap();
        let deps = graph.entry(module.clone()).or_default();
        for line in code.lines().filter(|l| !l.trim_start().starts_with("//")) {
            for (i, _) in line.match_indices("crate::") {
                let name: String = line[i + "crate::".len()..]
                    .chars()
                    .take_while(|c| c.is_ascii_lowercase() || *c == '_')
                    .collect();
                if !name.is_empty() && name != module {
                    deps.insert(name);
                }
            }
        }
    }
    graph
}

#[test]
fn the_leaves_import_nothing_from_core() {
    let graph = graph();
    for leaf in ["limits", "reserved", "error"] {
        assert_eq!(graph.get(leaf), Some(&BTreeSet::new()), "{leaf}");
    }
    assert!(graph["path"]
        .iter()
        .all(|d| ["limits", "reserved", "error"].contains(&d.as_str())));
}

#[test]
fn the_module_graph_has_no_cycle() {
    let graph = graph();
    assert!(graph.len() >= 14, "{graph:?}");
    // Kahn's algorithm: repeatedly remove modules whose imports are all removed.
    let mut left = graph.clone();
    while !left.is_empty() {
        let ready: Vec<String> = left
            .iter()
            .filter(|(_, deps)| deps.iter().all(|d| !left.contains_key(d)))
            .map(|(m, _)| m.clone())
            .collect();
        assert!(!ready.is_empty(), "a cycle among {left:?}");
        for m in ready {
            left.remove(&m);
        }
    }
}
