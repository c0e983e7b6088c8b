//! Layering of the workspace's own sources, read as text (no parser crate, no server): no import
//! circles between files, and no rule that imports another rule.
//!
//! # The graph [`no_import_circles`] checks
//!
//! - **Nodes**: every `.rs` file under `crates/*/src`, each crate on its own. `src/lib.rs` or
//!   `src/main.rs` is the crate root; `src/a/b.rs` and `src/a/b/mod.rs` are the module `a::b`.
//!   An inline `mod x { … }` in a file (a `#[cfg(test)] mod tests { … }`) is a node of its own,
//!   named `file.rs::x`, so `super::` in it is the file: tests that use a test helper which uses
//!   the file under test are not a circle.
//! - **Paths read**: `use` declarations that start with `crate::`, `super::`, `self::` or the name
//!   of a module the file declares (`mod x;`, `mod x { … }`), with their `{…}` trees; and paths
//!   in the code that start with `crate::`, `super::` or `self::` (not `$crate::`). Comments,
//!   strings and character literals are blanked first.
//! - **Resolution**: a path is made absolute, then resolved to the file of its longest prefix that
//!   is a module: `crate::a::b::C` is `src/a/b.rs` or `src/a/b/mod.rs`, failing that `src/a.rs` or
//!   `src/a/mod.rs`, failing that the crate root. If the next name is one that module re-exports
//!   (`pub use`, any `pub(…)`), the path is followed to the re-exported item (up to 8 steps):
//!   naming a type through a parent that merely re-exports it depends on the child that defines
//!   it, not on the parent.
//! - **Edges**: file F → file G for every path in F that resolves to G, except:
//!   - `mod x;` declarations (a parent declaring its children is not a use);
//!   - a re-export in F of something inside F's own descendants (a parent publishing its
//!     children's names: `pub use x::Y` in a `mod.rs` or `lib.rs`);
//!   - G and F in the same file (a file and its inline modules);
//!   - G a crate root (`lib.rs`, `main.rs`): the root is the top of its crate; its children use
//!     what it defines (the CLI's `exit` codes) while it dispatches to them, which is the shape of
//!     every crate and not a circle that matters.
//!
//! A **circle** is a cycle in this graph: two sibling files using each other, a child and its
//! (non-root) parent's own logic using each other, or a longer loop. Each elementary cycle is
//! listed as `a.rs -> b.rs -> a.rs`, starting at its smallest node by name (paths from the
//! workspace root); the test fails on any. At most 200 cycles are listed.
//!
//! What this does not see: an inherent method called on a type defined elsewhere (`impl T` blocks
//! in several files need no `use`), macros, and paths that start with a name brought in by a
//! glob import. It is a guard against circles of `use`, not a proof of layering.

use std::{
    collections::{BTreeMap, BTreeSet},
    fs,
    path::{Path, PathBuf},
};

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

#[test]
fn no_import_circles() {
    let root = workspace();
    let mut found = Vec::new();
    for krate in crate_dirs(&root) {
        let graph = Graph::of_crate(&root, &krate);
        found.extend(graph.cycles());
    }
    assert!(
        found.is_empty(),
        "import circles between files (see the definition in tests/it/layering.rs): move what both sides use into a module of its own\n  {}",
        found.join("\n  ")
    );
}

#[test]
fn no_rule_imports_another_rule() {
    let dir = workspace().join("crates/rules/src/rules");
    let mut found = Vec::new();
    let mut files: Vec<PathBuf> = fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    for path in files {
        let name = path.file_stem().unwrap().to_str().unwrap().to_owned();
        if !is_rule_module(&name) {
            continue;
        }
        let code = blank(&fs::read_to_string(&path).unwrap());
        let mut named = BTreeSet::new();
        for token in tokens(&code) {
            if let Token::Ident(id) = token
                && is_rule_module(&id)
                && id != name
            {
                named.insert(id);
            }
        }
        for other in named {
            found.push((format!("crates/rules/src/rules/{name}.rs"), other));
        }
    }
    let new: Vec<String> = found.iter().map(|(f, o)| format!("{f} -> {o}")).collect();
    assert!(
        new.is_empty(),
        "a rule names another rule's module (share through a helper module instead):\n  {}",
        new.join("\n  ")
    );
}

/// The check itself: it sees a circle between siblings, and none in a parent re-exporting its
/// children, a file's own tests, comments or strings.
#[test]
fn the_check_sees_circles_and_only_circles() {
    let root = tempfile::tempdir().unwrap();
    let krate = root.path().join("crates/x");
    let files = [
        ("lib.rs", "mod a;\nmod b;\npub mod c;\npub use c::d::D;\n"),
        ("a.rs", "use crate::b::B;\npub struct A;\n"),
        (
            "b.rs",
            "pub struct B;\nfn f() -> crate::a::A { todo!() }\n// crate::c::helper\nconst S: &str = \"crate::c::d::D\";\n",
        ),
        (
            "c/mod.rs",
            "mod d;\npub use d::D;\npub(crate) fn helper() {}\n",
        ),
        (
            "c/d.rs",
            "pub struct D;\n#[cfg(test)]\nmod tests {\n    use super::*;\n    use crate::D as _;\n    use crate::c::helper;\n}\n",
        ),
    ];
    for (name, text) in files {
        let path = krate.join("src").join(name);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, text).unwrap();
    }
    let graph = Graph::of_crate(root.path(), &krate);
    assert_eq!(
        graph.cycles(),
        ["crates/x/src/a.rs -> crates/x/src/b.rs -> crates/x/src/a.rs"]
    );
    // And a child's logic against its (non-root) parent's: c/d.rs's tests use c/mod.rs's
    // helper; once c/mod.rs's own code uses d, that is a circle.
    fs::write(
        krate.join("src/c/mod.rs"),
        "mod d;\npub use d::D;\npub(crate) fn helper() -> d::D { d::D }\nuse d::D as Same;\n",
    )
    .unwrap();
    fs::write(
        krate.join("src/c/d.rs"),
        "pub struct D;\nfn g() { super::helper(); }\n",
    )
    .unwrap();
    assert_eq!(
        Graph::of_crate(root.path(), &krate).cycles(),
        [
            "crates/x/src/a.rs -> crates/x/src/b.rs -> crates/x/src/a.rs",
            "crates/x/src/c/d.rs -> crates/x/src/c/mod.rs -> crates/x/src/c/d.rs",
        ]
    );
}

/// `pdNNN_name`: a rule's module.
fn is_rule_module(name: &str) -> bool {
    let b = name.as_bytes();
    b.len() > 6 && b.starts_with(b"pd") && b[2..5].iter().all(u8::is_ascii_digit) && b[5] == b'_'
}

/// `crates/*` directories with a `src/`, sorted.
fn crate_dirs(root: &Path) -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = fs::read_dir(root.join("crates"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("src").is_dir())
        .collect();
    dirs.sort();
    dirs
}

fn rs_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<PathBuf> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            rs_files(&p, out);
        } else if p.extension().is_some_and(|e| e == "rs") {
            out.push(p);
        }
    }
}

type ModPath = Vec<String>;

/// One path a module names.
struct Named {
    /// The node of the module it is named in.
    from: usize,
    path: Vec<String>,
    /// Part of a re-export (`pub use`).
    reexport: bool,
}

/// A file, or an inline module in it (`file.rs::tests`).
struct Node {
    /// From the workspace root, for messages.
    name: String,
    module: ModPath,
    file: usize,
    root: bool,
}

/// One crate's modules and the edges between them.
struct Graph {
    nodes: Vec<Node>,
    /// Module → its node.
    modules: BTreeMap<ModPath, usize>,
    /// Module → (name → absolute path of what it re-exports under that name).
    reexports: BTreeMap<ModPath, BTreeMap<String, Vec<String>>>,
    edges: BTreeMap<usize, BTreeSet<usize>>,
}

impl Graph {
    fn of_crate(root: &Path, krate: &Path) -> Graph {
        let src = krate.join("src");
        let mut paths = Vec::new();
        rs_files(&src, &mut paths);
        let mut g = Graph {
            nodes: Vec::new(),
            modules: BTreeMap::new(),
            reexports: BTreeMap::new(),
            edges: BTreeMap::new(),
        };
        let mut named = Vec::new();
        for (file, path) in paths.iter().enumerate() {
            let rel = path.strip_prefix(&src).unwrap();
            let mut module: ModPath = rel
                .with_extension("")
                .iter()
                .map(|s| s.to_str().unwrap().to_owned())
                .collect();
            let is_root = module == ["lib"] || module == ["main"];
            if is_root || module.last().is_some_and(|l| l == "mod") {
                module.pop();
            }
            let name = path
                .strip_prefix(root)
                .unwrap_or(path)
                .display()
                .to_string();
            let parsed = parse(&blank(&fs::read_to_string(path).unwrap()), &module);
            g.modules.insert(module.clone(), g.nodes.len());
            g.nodes.push(Node {
                name: name.clone(),
                module: module.clone(),
                file,
                root: is_root,
            });
            for inline in parsed.inline_modules {
                g.modules.insert(inline.clone(), g.nodes.len());
                g.nodes.push(Node {
                    name: format!("{name}::{}", inline[module.len()..].join("::")),
                    module: inline,
                    file,
                    root: false,
                });
            }
            for n in parsed.named {
                if n.reexport
                    && let Some(last) = n.path.last()
                {
                    let alias = n.alias.clone().unwrap_or_else(|| last.clone());
                    if alias != "*" && alias != "self" {
                        g.reexports
                            .entry(n.from.clone())
                            .or_default()
                            .insert(alias, n.path.clone());
                    }
                }
                named.push(Named {
                    from: g.modules[&n.from],
                    path: n.path,
                    reexport: n.reexport,
                });
            }
        }
        for n in &named {
            let Some(target) = g.resolve(&n.path, 0) else {
                continue;
            };
            let (from, to) = (&g.nodes[n.from], &g.nodes[target]);
            if from.file == to.file || to.root {
                continue;
            }
            if n.reexport
                && to.module.len() > from.module.len()
                && to.module.starts_with(&from.module)
            {
                continue;
            }
            g.edges.entry(n.from).or_default().insert(target);
        }
        g
    }

    /// The file an absolute path lives in, following re-exports.
    fn resolve(&self, path: &[String], depth: usize) -> Option<usize> {
        for len in (0..=path.len()).rev() {
            let prefix = &path[..len];
            let Some(&file) = self.modules.get(prefix) else {
                continue;
            };
            if depth < 8
                && let Some(next) = path.get(len)
                && let Some(target) = self.reexports.get(prefix).and_then(|r| r.get(next))
                && target.as_slice() != path
            {
                let mut followed = target.clone();
                followed.extend(path[len + 1..].iter().cloned());
                if let Some(f) = self.resolve(&followed, depth + 1) {
                    return Some(f);
                }
            }
            return Some(file);
        }
        None
    }

    /// Every elementary cycle, as `a.rs -> b.rs -> a.rs` from its smallest file.
    fn cycles(&self) -> Vec<String> {
        let n = self.nodes.len();
        // Order nodes by name, so each cycle is found once, from its smallest file.
        let mut order: Vec<usize> = (0..n).collect();
        order.sort_by(|a, b| self.nodes[*a].name.cmp(&self.nodes[*b].name));
        let mut rank = vec![0; n];
        for (r, &i) in order.iter().enumerate() {
            rank[i] = r;
        }
        let mut out = Vec::new();
        for &start in &order {
            let mut stack = vec![start];
            self.walk(start, start, &rank, &mut stack, &mut out);
        }
        out.sort();
        out.dedup();
        out
    }

    fn walk(
        &self,
        start: usize,
        at: usize,
        rank: &[usize],
        stack: &mut Vec<usize>,
        out: &mut Vec<String>,
    ) {
        // Enough for any real tangle; a runaway one is reported by its first cycles.
        if out.len() >= 200 {
            return;
        }
        for &next in self.edges.get(&at).into_iter().flatten() {
            if next == start {
                let mut names: Vec<&str> =
                    stack.iter().map(|&i| self.nodes[i].name.as_str()).collect();
                names.push(&self.nodes[start].name);
                out.push(names.join(" -> "));
            } else if rank[next] > rank[start] && !stack.contains(&next) {
                stack.push(next);
                self.walk(start, next, rank, stack, out);
                stack.pop();
            }
        }
    }
}

// -- reading the source -------------------------------------------------------------------

/// The source with comments, string and character literals replaced by spaces (newlines kept).
fn blank(text: &str) -> String {
    let c: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    let space = |ch: char| if ch == '\n' { '\n' } else { ' ' };
    while i < c.len() {
        let at = |k: usize| c.get(i + k).copied().unwrap_or('\0');
        if at(0) == '/' && at(1) == '/' {
            while i < c.len() && c[i] != '\n' {
                out.push(' ');
                i += 1;
            }
        } else if at(0) == '/' && at(1) == '*' {
            let mut depth = 0;
            while i < c.len() {
                if c[i] == '/' && c.get(i + 1) == Some(&'*') {
                    depth += 1;
                    out.push_str("  ");
                    i += 2;
                } else if c[i] == '*' && c.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    out.push_str("  ");
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    out.push(space(c[i]));
                    i += 1;
                }
            }
        } else if (at(0) == 'r' || (at(0) == 'b' && at(1) == 'r')) && !prev_is_ident(&c, i) && {
            let s = if at(0) == 'b' { 2 } else { 1 };
            let mut k = s;
            while at(k) == '#' {
                k += 1;
            }
            at(k) == '"'
        } {
            // Raw string: r"…", r#"…"#, br"…".
            let s = if at(0) == 'b' { 2 } else { 1 };
            let mut hashes = 0;
            while at(s + hashes) == '#' {
                hashes += 1;
            }
            for _ in 0..s + hashes + 1 {
                out.push(' ');
            }
            i += s + hashes + 1;
            while i < c.len() {
                if c[i] == '"' && (1..=hashes).all(|h| c.get(i + h) == Some(&'#')) {
                    for _ in 0..=hashes {
                        out.push(' ');
                    }
                    i += hashes + 1;
                    break;
                }
                out.push(space(c[i]));
                i += 1;
            }
        } else if at(0) == '"' {
            out.push(' ');
            i += 1;
            while i < c.len() && c[i] != '"' {
                if c[i] == '\\' {
                    out.push(' ');
                    i += 1;
                }
                if i < c.len() {
                    out.push(space(c[i]));
                    i += 1;
                }
            }
            out.push(' ');
            i += 1;
        } else if at(0) == '\'' {
            // A character literal ('x', '\n', '\u{1F600}') or a lifetime ('a).
            let len = if at(1) == '\\' {
                let mut k = 2;
                while i + k < c.len() && c[i + k] != '\'' && k < 12 {
                    k += 1;
                }
                if at(k) == '\'' { Some(k + 1) } else { None }
            } else if at(2) == '\'' {
                Some(3)
            } else {
                None
            };
            match len {
                Some(len) => {
                    for _ in 0..len {
                        out.push(' ');
                    }
                    i += len;
                }
                None => {
                    out.push('\'');
                    i += 1;
                }
            }
        } else {
            out.push(c[i]);
            i += 1;
        }
    }
    out
}

fn prev_is_ident(c: &[char], i: usize) -> bool {
    i > 0 && (c[i - 1].is_alphanumeric() || c[i - 1] == '_')
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Token {
    Ident(String),
    /// `::`
    Sep,
    Punct(char),
}

fn tokens(code: &str) -> Vec<Token> {
    let c: Vec<char> = code.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < c.len() {
        let ch = c[i];
        if ch.is_alphabetic() || ch == '_' {
            let s = i;
            while i < c.len() && (c[i].is_alphanumeric() || c[i] == '_') {
                i += 1;
            }
            let word: String = c[s..i].iter().collect();
            // r#ident
            if word == "r" && c.get(i) == Some(&'#') {
                i += 1;
                continue;
            }
            out.push(Token::Ident(word));
        } else if ch.is_ascii_digit() {
            while i < c.len() && (c[i].is_alphanumeric() || c[i] == '_' || c[i] == '.') {
                i += 1;
            }
        } else if ch == ':' && c.get(i + 1) == Some(&':') {
            out.push(Token::Sep);
            i += 2;
        } else if ch.is_whitespace() {
            i += 1;
        } else {
            out.push(Token::Punct(ch));
            i += 1;
        }
    }
    out
}

struct RawNamed {
    from: ModPath,
    path: Vec<String>,
    alias: Option<String>,
    reexport: bool,
}

struct Parsed {
    named: Vec<RawNamed>,
    inline_modules: Vec<ModPath>,
}

/// The paths a file names (absolute) and the inline modules it holds.
fn parse(code: &str, module: &ModPath) -> Parsed {
    let toks = tokens(code);
    let ident = |k: usize, w: &str| matches!(toks.get(k), Some(Token::Ident(x)) if x == w);
    // Modules this file declares, by the module they are declared in.
    let mut declared: BTreeMap<ModPath, BTreeSet<String>> = BTreeMap::new();
    // First pass: the module at every token, and declared modules.
    let mut at_module: Vec<ModPath> = Vec::with_capacity(toks.len());
    let mut inline_modules = Vec::new();
    let mut stack: Vec<(String, usize)> = Vec::new();
    let mut depth = 0usize;
    let mut current = module.clone();
    for (k, t) in toks.iter().enumerate() {
        at_module.push(current.clone());
        match t {
            Token::Ident(w) if w == "mod" => {
                if let Some(Token::Ident(name)) = toks.get(k + 1) {
                    match toks.get(k + 2) {
                        Some(Token::Punct(';')) | Some(Token::Punct('{')) => {
                            declared
                                .entry(current.clone())
                                .or_default()
                                .insert(name.clone());
                        }
                        _ => {}
                    }
                    if toks.get(k + 2) == Some(&Token::Punct('{')) {
                        stack.push((name.clone(), depth + 1));
                    }
                }
            }
            Token::Punct('{') => {
                depth += 1;
                if let Some((name, d)) = stack.last()
                    && *d == depth
                    && current.len() < module.len() + stack.len()
                {
                    current.push(name.clone());
                    inline_modules.push(current.clone());
                }
            }
            Token::Punct('}') => {
                if let Some((_, d)) = stack.last()
                    && *d == depth
                {
                    stack.pop();
                    current.pop();
                }
                depth = depth.saturating_sub(1);
            }
            _ => {}
        }
    }

    let mut named = Vec::new();
    let absolute = |from: &ModPath, path: &[String], in_use: bool| -> Option<Vec<String>> {
        let first = path.first()?;
        let mut abs: Vec<String> = match first.as_str() {
            "crate" => Vec::new(),
            "self" => from.clone(),
            "super" => {
                let mut m = from.clone();
                let mut rest = path;
                while rest.first().is_some_and(|s| s == "super") {
                    m.pop()?;
                    rest = &rest[1..];
                }
                m.extend(rest.iter().cloned());
                return Some(m);
            }
            name if in_use && declared.get(from).is_some_and(|d| d.contains(name)) => {
                let mut m = from.clone();
                m.push(name.to_owned());
                m.extend(path[1..].iter().cloned());
                return Some(m);
            }
            _ => return None,
        };
        abs.extend(path[1..].iter().cloned());
        Some(abs)
    };

    let mut k = 0;
    while k < toks.len() {
        if ident(k, "use") {
            let reexport = is_pub_before(&toks, k);
            let mut end = k + 1;
            while end < toks.len() && toks[end] != Token::Punct(';') {
                end += 1;
            }
            let mut leaves = Vec::new();
            use_tree(&toks[k + 1..end], &mut Vec::new(), &mut leaves);
            let from = &at_module[k];
            for (path, alias) in leaves {
                if let Some(abs) = absolute(from, &path, true) {
                    named.push(RawNamed {
                        from: from.clone(),
                        path: abs,
                        alias,
                        reexport,
                    });
                }
            }
            k = end + 1;
            continue;
        }
        let starts_path = matches!(&toks[k], Token::Ident(w) if w == "crate" || w == "super" || w == "self")
            && toks.get(k + 1) == Some(&Token::Sep)
            && !matches!(toks.get(k.wrapping_sub(1)), Some(Token::Sep) | Some(Token::Punct('$')))
            // Not the path of a `pub(in crate::a)` visibility.
            && !(k >= 2 && toks[k - 1] == Token::Ident("in".into()) && toks[k - 2] == Token::Punct('('));
        if starts_path {
            let mut path = Vec::new();
            let mut j = k;
            while let Some(Token::Ident(w)) = toks.get(j) {
                path.push(w.clone());
                if toks.get(j + 1) == Some(&Token::Sep) {
                    j += 2;
                } else {
                    j += 1;
                    break;
                }
            }
            let from = &at_module[k];
            if let Some(abs) = absolute(from, &path, false) {
                named.push(RawNamed {
                    from: from.clone(),
                    path: abs,
                    alias: None,
                    reexport: false,
                });
            }
            k = j.max(k + 1);
            continue;
        }
        k += 1;
    }
    Parsed {
        named,
        inline_modules,
    }
}

/// `pub use`, `pub(crate) use`, `pub(in …) use`.
fn is_pub_before(toks: &[Token], k: usize) -> bool {
    match k.checked_sub(1).map(|p| &toks[p]) {
        Some(Token::Ident(w)) => w == "pub",
        Some(Token::Punct(')')) => {
            let mut p = k - 1;
            while p > 0 && toks[p] != Token::Punct('(') {
                p -= 1;
            }
            p > 0 && toks[p - 1] == Token::Ident("pub".into())
        }
        _ => false,
    }
}

/// The leaves of a use tree: each full path and its `as` alias (`*` for a glob).
fn use_tree(
    toks: &[Token],
    prefix: &mut Vec<String>,
    out: &mut Vec<(Vec<String>, Option<String>)>,
) {
    let mut i = 0;
    let base = prefix.len();
    while i < toks.len() {
        match &toks[i] {
            Token::Sep => i += 1,
            Token::Ident(w) if w == "as" => {
                if let (Some(last), Some(Token::Ident(alias))) = (out.last_mut(), toks.get(i + 1)) {
                    last.1 = Some(alias.clone());
                }
                i += 2;
            }
            Token::Ident(w) => {
                prefix.push(w.clone());
                i += 1;
                if toks.get(i) != Some(&Token::Sep) {
                    // A leaf: `self` names the prefix itself.
                    let mut path = prefix.clone();
                    let alias = if w == "self" {
                        path.pop();
                        Some("self".to_owned())
                    } else {
                        None
                    };
                    out.push((path, alias));
                    prefix.truncate(base);
                }
            }
            Token::Punct('*') => {
                out.push((prefix.clone(), Some("*".to_owned())));
                prefix.truncate(base);
                i += 1;
            }
            Token::Punct('{') => {
                // The matching brace.
                let mut depth = 0;
                let mut j = i;
                loop {
                    match toks.get(j) {
                        Some(Token::Punct('{')) => depth += 1,
                        Some(Token::Punct('}')) => {
                            depth -= 1;
                            if depth == 0 {
                                break;
                            }
                        }
                        None => break,
                        _ => {}
                    }
                    j += 1;
                }
                // Split the inside at top-level commas.
                let inner = &toks[i + 1..j.min(toks.len())];
                let mut d = 0;
                let mut s = 0;
                for (n, t) in inner.iter().enumerate() {
                    match t {
                        Token::Punct('{') => d += 1,
                        Token::Punct('}') => d -= 1,
                        Token::Punct(',') if d == 0 => {
                            let mut p = prefix.clone();
                            use_tree(&inner[s..n], &mut p, out);
                            s = n + 1;
                        }
                        _ => {}
                    }
                }
                let mut p = prefix.clone();
                use_tree(&inner[s..], &mut p, out);
                prefix.truncate(base);
                i = j + 1;
            }
            Token::Punct(',') => {
                prefix.truncate(base);
                i += 1;
            }
            _ => i += 1,
        }
    }
}
