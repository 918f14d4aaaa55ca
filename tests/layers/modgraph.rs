//! The crate's module graph, read from the source with `syn`: which module
//! refers to which, so that `tests/layers.rs` can fail on an import cycle or
//! on an import that goes up a declared layer.
//!
//! A node is a module: a folder (with everything below it), or a file outside
//! one. For every module with children, its children are compared among
//! themselves: child `a` depends on child `b` when any file under `a` names an
//! item that lives under `b`. A reference up to an ancestor's own items, or
//! down into one's own children, is not an edge between siblings.
//!
//! What counts as a reference: every `use` path and every path in the code
//! (types, expressions, patterns, attributes' paths, and `crate::`/`super::`
//! paths inside macro calls) that starts with `crate`, `super`, `self` or the
//! name of a child module. Re-exports (`pub use`, also `pub use x::*`) are
//! followed to the module that defines the item. Test-only code
//! (`#[cfg(test)]`) is not part of the graph.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use syn::visit::Visit;

pub type ModPath = Vec<String>;

/// One module: where it is and what it names.
#[derive(Debug, Default)]
pub struct Module {
    pub file: PathBuf,
    pub children: BTreeSet<String>,
    /// Names of items defined here (not re-exports).
    pub items: BTreeSet<String>,
    /// `pub use` of one name: name -> the path it re-exports.
    pub reexports: BTreeMap<String, Vec<String>>,
    /// `pub use path::*`: the paths, as written.
    pub globs: Vec<Vec<String>>,
    /// Every path this module names, as written (relative ones unresolved).
    pub refs: Vec<Vec<String>>,
}

#[derive(Debug, Default)]
pub struct Crate {
    pub modules: BTreeMap<ModPath, Module>,
}

/// One dependency between two siblings, with one reference that makes it.
#[derive(Debug, Clone)]
pub struct Edge {
    pub parent: ModPath,
    pub from: String,
    pub to: String,
    /// A file under `from` and the path it names.
    pub witness: (PathBuf, String),
}

#[derive(Debug, thiserror::Error)]
pub enum GraphError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot parse {path}: {source}")]
    Parse { path: PathBuf, source: syn::Error },
    #[error("module {module} is declared in {decl} but neither {a} nor {b} exists")]
    MissingFile {
        module: String,
        decl: PathBuf,
        a: PathBuf,
        b: PathBuf,
    },
}

fn is_cfg_test(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|a| {
        a.path().is_ident("cfg")
            && a.parse_args::<syn::Meta>()
                .map(|m| m.path().is_ident("test"))
                .unwrap_or(false)
    })
}

fn item_attrs(item: &syn::Item) -> &[syn::Attribute] {
    use syn::Item::*;
    match item {
        Const(i) => &i.attrs,
        Enum(i) => &i.attrs,
        ExternCrate(i) => &i.attrs,
        Fn(i) => &i.attrs,
        ForeignMod(i) => &i.attrs,
        Impl(i) => &i.attrs,
        Macro(i) => &i.attrs,
        Mod(i) => &i.attrs,
        Static(i) => &i.attrs,
        Struct(i) => &i.attrs,
        Trait(i) => &i.attrs,
        TraitAlias(i) => &i.attrs,
        Type(i) => &i.attrs,
        Union(i) => &i.attrs,
        Use(i) => &i.attrs,
        _ => &[],
    }
}

fn item_name(item: &syn::Item) -> Option<String> {
    use syn::Item::*;
    let ident = match item {
        Const(i) => &i.ident,
        Enum(i) => &i.ident,
        Fn(i) => &i.sig.ident,
        Macro(i) => i.ident.as_ref()?,
        Mod(i) => &i.ident,
        Static(i) => &i.ident,
        Struct(i) => &i.ident,
        Trait(i) => &i.ident,
        Type(i) => &i.ident,
        Union(i) => &i.ident,
        _ => return None,
    };
    Some(ident.to_string())
}

/// Flattens a use tree into paths; a glob ends in `*`, a rename keeps the
/// original name (what it refers to) and reports the alias separately.
fn use_paths(tree: &syn::UseTree, prefix: &mut Vec<String>, out: &mut Vec<(Vec<String>, String)>) {
    match tree {
        syn::UseTree::Path(p) => {
            prefix.push(p.ident.to_string());
            use_paths(&p.tree, prefix, out);
            prefix.pop();
        }
        syn::UseTree::Name(n) => {
            let name = n.ident.to_string();
            let mut path = prefix.clone();
            if name != "self" {
                path.push(name.clone());
            }
            let alias = if name == "self" {
                prefix.last().cloned().unwrap_or_default()
            } else {
                name
            };
            out.push((path, alias));
        }
        syn::UseTree::Rename(r) => {
            let mut path = prefix.clone();
            if r.ident != "self" {
                path.push(r.ident.to_string());
            }
            out.push((path, r.rename.to_string()));
        }
        syn::UseTree::Glob(_) => {
            let mut path = prefix.clone();
            path.push("*".into());
            out.push((path, "*".into()));
        }
        syn::UseTree::Group(g) => {
            for t in &g.items {
                use_paths(t, prefix, out);
            }
        }
    }
}

/// Collects every path in an item, and `crate::`/`super::`/`self::` paths in
/// macro tokens; skips `#[cfg(test)]` items nested anywhere.
#[derive(Default)]
struct Paths {
    out: Vec<Vec<String>>,
}

impl<'ast> Visit<'ast> for Paths {
    fn visit_path(&mut self, p: &'ast syn::Path) {
        self.out
            .push(p.segments.iter().map(|s| s.ident.to_string()).collect());
        syn::visit::visit_path(self, p);
    }
    fn visit_macro(&mut self, m: &'ast syn::Macro) {
        scan_tokens(m.tokens.clone(), &mut self.out);
        syn::visit::visit_macro(self, m);
    }
    fn visit_item(&mut self, i: &'ast syn::Item) {
        if !is_cfg_test(item_attrs(i)) {
            syn::visit::visit_item(self, i);
        }
    }
    fn visit_impl_item_fn(&mut self, f: &'ast syn::ImplItemFn) {
        if !is_cfg_test(&f.attrs) {
            syn::visit::visit_impl_item_fn(self, f);
        }
    }
}

fn scan_tokens(tokens: proc_macro2::TokenStream, out: &mut Vec<Vec<String>>) {
    use proc_macro2::TokenTree;
    let flat: Vec<TokenTree> = tokens.into_iter().collect();
    let mut i = 0;
    while i < flat.len() {
        match &flat[i] {
            TokenTree::Group(g) => scan_tokens(g.stream(), out),
            TokenTree::Ident(id)
                if ["crate", "super", "self"].contains(&id.to_string().as_str()) =>
            {
                let mut path = vec![id.to_string()];
                let mut j = i + 1;
                // `::` is two Punct tokens, then an ident.
                while j + 2 < flat.len() + 1 {
                    match (flat.get(j), flat.get(j + 1), flat.get(j + 2)) {
                        (
                            Some(TokenTree::Punct(a)),
                            Some(TokenTree::Punct(b)),
                            Some(TokenTree::Ident(n)),
                        ) if a.as_char() == ':' && b.as_char() == ':' => {
                            path.push(n.to_string());
                            j += 3;
                        }
                        _ => break,
                    }
                }
                if path.len() > 1 {
                    out.push(path);
                }
                i = j.max(i + 1);
                continue;
            }
            _ => {}
        }
        i += 1;
    }
}

impl Crate {
    /// Reads the crate whose root is `root` (`src/lib.rs`).
    pub fn load(root: &Path) -> Result<Crate, GraphError> {
        let mut krate = Crate::default();
        let dir = root.parent().unwrap_or(Path::new(".")).to_path_buf();
        krate.load_file(root, &dir, Vec::new())?;
        Ok(krate)
    }

    fn load_file(&mut self, file: &Path, dir: &Path, path: ModPath) -> Result<(), GraphError> {
        let text = std::fs::read_to_string(file).map_err(|source| GraphError::Read {
            path: file.into(),
            source,
        })?;
        let parsed = syn::parse_file(&text).map_err(|source| GraphError::Parse {
            path: file.into(),
            source,
        })?;
        self.load_items(&parsed.items, file, dir, path)
    }

    fn load_items(
        &mut self,
        items: &[syn::Item],
        file: &Path,
        dir: &Path,
        path: ModPath,
    ) -> Result<(), GraphError> {
        let mut module = Module {
            file: file.to_path_buf(),
            ..Module::default()
        };
        let mut children = Vec::new();
        for item in items {
            if is_cfg_test(item_attrs(item)) {
                continue;
            }
            if let Some(name) = item_name(item) {
                module.items.insert(name);
            }
            match item {
                syn::Item::Mod(m) => {
                    module.children.insert(m.ident.to_string());
                    children.push(m);
                }
                syn::Item::Use(u) => {
                    let mut paths = Vec::new();
                    use_paths(&u.tree, &mut Vec::new(), &mut paths);
                    let public = !matches!(u.vis, syn::Visibility::Inherited);
                    for (p, alias) in paths {
                        if public {
                            if alias == "*" {
                                module.globs.push(p[..p.len() - 1].to_vec());
                            } else {
                                module.reexports.insert(alias, p.clone());
                            }
                        }
                        module.refs.push(p);
                    }
                }
                other => {
                    let mut v = Paths::default();
                    v.visit_item(other);
                    module.refs.extend(v.out);
                }
            }
        }
        self.modules.insert(path.clone(), module);
        for m in children {
            let name = m.ident.to_string();
            let mut child = path.clone();
            child.push(name.clone());
            match &m.content {
                Some((_, items)) => {
                    let sub = dir.join(&name);
                    self.load_items(items, file, &sub, child)?;
                }
                None => {
                    let a = dir.join(format!("{name}.rs"));
                    let b = dir.join(&name).join("mod.rs");
                    let target = if a.exists() {
                        a
                    } else if b.exists() {
                        b
                    } else {
                        return Err(GraphError::MissingFile {
                            module: child.join("::"),
                            decl: file.into(),
                            a,
                            b,
                        });
                    };
                    let sub = dir.join(&name);
                    self.load_file(&target, &sub, child)?;
                }
            }
        }
        Ok(())
    }

    /// The absolute path a path written in `module` names, or None when it
    /// is outside the crate.
    fn absolute(&self, module: &ModPath, written: &[String]) -> Option<Vec<String>> {
        let first = written.first()?;
        let mut base: Vec<String>;
        let mut rest = written;
        match first.as_str() {
            "crate" => {
                base = Vec::new();
                rest = &written[1..];
            }
            "self" => {
                base = module.clone();
                rest = &written[1..];
            }
            "super" => {
                base = module.clone();
                while rest.first().map(String::as_str) == Some("super") {
                    base.pop();
                    rest = &rest[1..];
                }
                if rest.first().map(String::as_str) == Some("self") {
                    rest = &rest[1..];
                }
            }
            name => {
                let m = self.modules.get(module)?;
                if !m.children.contains(name) {
                    return None;
                }
                base = module.clone();
            }
        }
        base.extend(rest.iter().cloned());
        Some(base)
    }

    /// The module that defines what an absolute path names, following
    /// re-exports (a bounded number of hops).
    fn owner(&self, abs: &[String], hops: usize) -> ModPath {
        let mut module: ModPath = Vec::new();
        let mut i = 0;
        while i < abs.len() {
            let mut next = module.clone();
            next.push(abs[i].clone());
            if self.modules.contains_key(&next) {
                module = next;
                i += 1;
            } else {
                break;
            }
        }
        if i < abs.len()
            && hops > 0
            && let Some(m) = self.modules.get(&module)
            && !m.items.contains(&abs[i])
        {
            let name = &abs[i];
            if let Some(target) = m.reexports.get(name)
                && let Some(mut t) = self.absolute(&module, target)
            {
                t.extend(abs[i + 1..].iter().cloned());
                return self.owner(&t, hops - 1);
            }
            for glob in &m.globs {
                if let Some(mut t) = self.absolute(&module, glob) {
                    let gm = self.owner(&t, hops - 1);
                    let defines = self
                        .modules
                        .get(&gm)
                        .is_some_and(|g| g.items.contains(name) || g.reexports.contains_key(name));
                    if gm == t && defines {
                        t.extend(abs[i..].iter().cloned());
                        return self.owner(&t, hops - 1);
                    }
                }
            }
        }
        module
    }

    /// Every dependency between siblings, one witness each.
    pub fn edges(&self) -> Vec<Edge> {
        let mut seen: BTreeMap<(ModPath, String, String), Edge> = BTreeMap::new();
        for (path, module) in &self.modules {
            for written in &module.refs {
                let Some(abs) = self.absolute(path, written) else {
                    continue;
                };
                let target = self.owner(&abs, 8);
                let common = path.iter().zip(&target).take_while(|(a, b)| a == b).count();
                if common == path.len() || common == target.len() {
                    continue; // up to an ancestor, or down to a descendant
                }
                let parent = path[..common].to_vec();
                let from = path[common].clone();
                let to = target[common].clone();
                seen.entry((parent.clone(), from.clone(), to.clone()))
                    .or_insert(Edge {
                        parent,
                        from,
                        to,
                        witness: (module.file.clone(), written.join("::")),
                    });
            }
        }
        seen.into_values().collect()
    }
}

/// The cycles among siblings: each strongly connected set of two or more
/// children of one parent, with the edges inside it.
pub fn cycles(edges: &[Edge]) -> Vec<(ModPath, Vec<String>, Vec<Edge>)> {
    let mut by_parent: BTreeMap<&ModPath, Vec<&Edge>> = BTreeMap::new();
    for e in edges {
        by_parent.entry(&e.parent).or_default().push(e);
    }
    let mut out = Vec::new();
    for (parent, es) in by_parent {
        let nodes: BTreeSet<&str> = es
            .iter()
            .flat_map(|e| [e.from.as_str(), e.to.as_str()])
            .collect();
        let reach = |start: &str| -> BTreeSet<String> {
            let mut seen = BTreeSet::new();
            let mut stack = vec![start.to_string()];
            while let Some(n) = stack.pop() {
                for e in es.iter().filter(|e| e.from == n) {
                    if seen.insert(e.to.clone()) {
                        stack.push(e.to.clone());
                    }
                }
            }
            seen
        };
        let reaches: BTreeMap<&str, BTreeSet<String>> =
            nodes.iter().map(|n| (*n, reach(n))).collect();
        let mut done = BTreeSet::new();
        for n in &nodes {
            if done.contains(*n) {
                continue;
            }
            let scc: Vec<String> = nodes
                .iter()
                .filter(|m| reaches[*n].contains(**m) && reaches[**m].contains(*n))
                .map(|m| m.to_string())
                .collect();
            if scc.len() > 1 {
                let inside: Vec<Edge> = es
                    .iter()
                    .filter(|e| scc.contains(&e.from) && scc.contains(&e.to))
                    .map(|e| (*e).clone())
                    .collect();
                done.extend(scc.iter().cloned());
                out.push((parent.clone(), scc, inside));
            }
        }
    }
    out
}

/// A readable report of cycles, one per paragraph.
pub fn report(cycles: &[(ModPath, Vec<String>, Vec<Edge>)]) -> String {
    let mut s = String::new();
    for (parent, scc, edges) in cycles {
        let at = if parent.is_empty() {
            "crate".to_string()
        } else {
            format!("crate::{}", parent.join("::"))
        };
        s.push_str(&format!("cycle under {at}: {}\n", scc.join(", ")));
        for e in edges {
            // The file from `src/` on, so a report reads the same in any checkout.
            let file = e.witness.0.display().to_string();
            let file = file
                .rfind("/src/")
                .map_or(file.as_str(), |i| &file[i + 1..]);
            s.push_str(&format!(
                "  {} -> {}   ({file} names {})\n",
                e.from, e.to, e.witness.1
            ));
        }
    }
    s
}
