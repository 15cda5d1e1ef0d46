//! The tree's layers, checked from the sources: `src/cache` (the library core) imports nothing from
//! `src/broker` or `src/lab`, `src/broker` nothing from `src/lab`, and no two modules import each
//! other, directly or round a longer loop. A module here is a folder or file one level inside a
//! layer (`cache/range_cache`, `broker/ledger`, `lab/replay`), or `config`, `error`, `python`.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

const LAYERS: [&str; 3] = ["cache", "broker", "lab"];

fn rust_files(dir: &Path, found: &mut Vec<PathBuf>) {
    for entry in fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, found);
        } else if path.extension().is_some_and(|e| e == "rs") {
            found.push(path);
        }
    }
}

/// The module a source file belongs to, named from `src/`.
fn module_of(relative: &Path) -> String {
    let parts: Vec<String> = relative
        .iter()
        .map(|p| p.to_string_lossy().trim_end_matches(".rs").to_string())
        .collect();
    if LAYERS.contains(&parts[0].as_str()) && parts.len() > 1 && parts[1] != "mod" {
        format!("{}/{}", parts[0], parts[1])
    } else {
        parts[0].clone()
    }
}

/// The modules a file names through `crate::` paths (in `use` items, types and doc links alike:
/// a doc link to a later layer is a dependency a reader follows too).
fn imports(text: &str) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    for (at, _) in text.match_indices("crate::") {
        let rest = &text[at + "crate::".len()..];
        let names: Vec<&str> = rest
            .split("::")
            .take(2)
            .map(|s| {
                s.split(|c: char| !(c.is_alphanumeric() || c == '_'))
                    .next()
                    .unwrap_or("")
            })
            .collect();
        match names.as_slice() {
            [layer, module, ..] if LAYERS.contains(layer) && !module.is_empty() => {
                found.insert(format!("{layer}/{module}"));
            }
            [top, ..] if !top.is_empty() => {
                found.insert((*top).to_string());
            }
            _ => {}
        }
    }
    found
}

fn graph() -> BTreeMap<String, BTreeSet<String>> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for file in files {
        let relative = file.strip_prefix(&src).unwrap();
        let module = module_of(relative);
        let names = imports(&fs::read_to_string(&file).unwrap());
        let edges = graph.entry(module.clone()).or_default();
        edges.extend(
            names
                .into_iter()
                .filter(|n| *n != module && !LAYERS.contains(&n.as_str())),
        );
    }
    graph
}

fn layer(module: &str) -> Option<usize> {
    LAYERS
        .iter()
        .position(|l| module.starts_with(&format!("{l}/")))
}

#[test]
fn imports_run_from_the_lab_to_the_broker_to_the_core() {
    let graph = graph();
    assert!(graph.contains_key("cache/range_cache") && graph.contains_key("lab/replay"));
    let mut wrong = Vec::new();
    for (module, edges) in &graph {
        let Some(from) = layer(module) else { continue };
        for to in edges {
            if layer(to).is_some_and(|to_layer| to_layer > from) {
                wrong.push(format!("{module} imports {to}"));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "imports against the layers:\n{}",
        wrong.join("\n")
    );
}

#[test]
fn no_two_modules_import_each_other() {
    let graph = graph();
    // Depth-first search for a back edge; the loop it closes is reported.
    fn visit(
        node: &str,
        graph: &BTreeMap<String, BTreeSet<String>>,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
        loops: &mut Vec<String>,
    ) {
        if let Some(at) = path.iter().position(|p| p == node) {
            loops.push(format!("{} -> {node}", path[at..].join(" -> ")));
            return;
        }
        if !done.insert(node.to_string()) {
            return;
        }
        path.push(node.to_string());
        for next in graph.get(node).into_iter().flatten() {
            visit(next, graph, path, done, loops);
        }
        path.pop();
    }
    let mut loops = Vec::new();
    let mut done = BTreeSet::new();
    for node in graph.keys() {
        visit(node, &graph, &mut Vec::new(), &mut done, &mut loops);
    }
    assert!(loops.is_empty(), "import loops:\n{}", loops.join("\n"));
}

#[test]
fn the_checker_sees_a_loop_and_a_wrong_way_import() {
    let names = imports("use crate::lab::replay::engine;\n/// see [`crate::cache::entry::X`]\nuse crate::config::CacheConfig;");
    assert_eq!(
        names,
        BTreeSet::from([
            "lab/replay".to_string(),
            "cache/entry".to_string(),
            "config".to_string()
        ])
    );
    assert_eq!(
        module_of(Path::new("cache/manager/pass.rs")),
        "cache/manager"
    );
    assert_eq!(module_of(Path::new("cache/mod.rs")), "cache");
    assert_eq!(layer("broker/ledger"), Some(1));
}

/// Files outside a test-only module that name `Strategy::<name>`.
fn files_naming(constant: &str) -> BTreeSet<String> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let pattern = format!("Strategy::{constant}");
    files
        .iter()
        .filter(|file| {
            let text = fs::read_to_string(file).unwrap();
            let code = text.split("#[cfg(test)]\nmod tests").next().unwrap_or("");
            code.lines().any(|l| {
                l.match_indices(&pattern).any(|(at, _)| {
                    !l[at + pattern.len()..].starts_with(|c: char| c.is_alphanumeric() || c == '_')
                })
            })
        })
        .filter(|file| {
            // A module declared test-only by its parent (the toy design).
            let stem = file.file_stem().unwrap().to_string_lossy().to_string();
            let parent = file.parent().unwrap().join("mod.rs");
            !fs::read_to_string(parent)
                .is_ok_and(|p| p.contains(&format!("#[cfg(test)]\nmod {stem};")))
        })
        .map(|file| {
            file.strip_prefix(&src)
                .unwrap()
                .to_string_lossy()
                .into_owned()
        })
        .collect()
}

/// Adding a design touches three files: its registry entry and constant (`config/designs.rs`), its
/// strategy (`lab/replay/strategy/<name>.rs`) and the arm that builds it
/// (`lab/replay/strategy/mod.rs`). Nothing else may name a design, except the settings PIP-430's
/// defaults and its FIFO variant select (`config/mod.rs`) and the request log's reference flow.
#[test]
fn a_design_is_named_only_where_it_is_declared_and_built() {
    let designs =
        fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("src/config/designs.rs"))
            .unwrap();
    let constants: Vec<&str> = designs
        .lines()
        .filter_map(|l| l.trim().strip_prefix("pub const "))
        .filter(|l| l.contains(": Strategy = Strategy("))
        .map(|l| l.split(':').next().unwrap())
        .collect();
    assert_eq!(constants.len(), 6, "{constants:?}");
    for constant in constants {
        let mut allowed = BTreeSet::from(["lab/replay/strategy/mod.rs".to_string()]);
        if constant.starts_with("Pip430") {
            allowed.insert("config/mod.rs".to_string());
        }
        if constant == "Lru" {
            // The request log replays the reference read flow over a cache that holds nothing.
            allowed.insert("lab/replay/mod.rs".to_string());
        }
        let named = files_naming(constant);
        assert!(
            named.is_subset(&allowed),
            "Strategy::{constant} is named in {named:?}: read the registry entry instead"
        );
        assert!(
            named.contains("lab/replay/strategy/mod.rs"),
            "{constant} is built"
        );
    }
}
