//! The checker: what the grammar lets through but Firebase's compiler (or pg_docstore)
//! refuses. Names and arity are checked while [`crate::ir`] resolves them (one walk with
//! the scopes); this module holds the structural checks and the limits both use.
//!
//! Firebase's limits (the quotas page): a call depth of 20 functions, 7 arguments per
//! function, 10 `let` bindings per function, no recursion (direct or indirect). Wildcards:
//! in version 1 `{x=**}` only as the last segment of a (full) match path, matching one or
//! more segments; in version 2 anywhere, matching zero or more, at most one per path (a
//! second is refused as unsupported). Only `service cloud.firestore` is supported.

use std::collections::{HashMap, HashSet};

use crate::error::{CompileError, Span};
use crate::parse::ast::{Block, Expr, ExprKind, File, Function, Segment, SegmentKind, Version};

/// Deepest chain of function calls.
pub const MAX_CALL_DEPTH: usize = 20;
/// Most parameters of a function.
pub const MAX_FUNCTION_ARGS: usize = 7;
/// Most `let` bindings in a function.
pub const MAX_LETS: usize = 10;
/// Largest condition after inlining (IR nodes), and its deepest tree: bounds on the work
/// of every later stage (recursive evaluation and SQL generation included).
pub const MAX_IR_NODES: usize = 50_000;
pub const MAX_IR_DEPTH: usize = 1_000;

/// Namespaces of the built-in functions (`math.abs(x)`).
pub const NAMESPACES: [&str; 5] = ["math", "hashing", "timestamp", "duration", "latlng"];
/// Global functions that read documents.
pub const LOOKUPS: [&str; 4] = ["get", "exists", "getAfter", "existsAfter"];

/// Check the declarations of a parsed file.
///
/// # Errors
/// Unsupported services (0A000), misplaced `**` wildcards (42601 in version 1, where
/// Firebase refuses them; 0A000 in version 2), repeated wildcard names, functions over the
/// argument or `let` limits, duplicate function or parameter names, recursion (42601).
pub fn check_file(source: &str, file: &File) -> Result<(), CompileError> {
    functions(source, &file.functions)?;
    no_recursion(source, file)?;
    for service in &file.services {
        if service.name != "cloud.firestore" {
            return Err(CompileError::unimplemented(
                source,
                service.span,
                format!(
                    "service '{}' is not supported (only cloud.firestore)",
                    service.name
                ),
            ));
        }
        block(source, file.version, &service.body, &mut Vec::new())?;
    }
    Ok(())
}

fn block(
    source: &str,
    version: Version,
    b: &Block,
    path: &mut Vec<Segment>,
) -> Result<(), CompileError> {
    functions(source, &b.functions)?;
    for m in &b.matches {
        let before = path.len();
        for seg in &m.path {
            let after_recursive = path
                .iter()
                .find(|p| matches!(p.kind, SegmentKind::Recursive(_)));
            if let Some(prev) = after_recursive {
                if version == Version::V1 {
                    return misplaced_recursive(source, prev);
                }
                if matches!(seg.kind, SegmentKind::Recursive(_)) {
                    return Err(CompileError::unimplemented(
                        source,
                        seg.span,
                        "more than one recursive wildcard {name=**} in a match path",
                    ));
                }
            }
            // A name twice in one match's path is an error (Firebase: "Variable x already
            // exists in the PathTemplate."); a nested match may bind an enclosing match's
            // name again, and shadows it (see `ir`).
            if let SegmentKind::Single(name) | SegmentKind::Recursive(name) = &seg.kind {
                let taken = path[before..].iter().any(|p| {
                    matches!(&p.kind, SegmentKind::Single(n) | SegmentKind::Recursive(n) if n == name)
                });
                if taken {
                    return Err(CompileError::syntax(
                        source,
                        seg.span,
                        format!("wildcard '{name}' appears twice in one match path"),
                    ));
                }
            }
            path.push(seg.clone());
        }
        if let Some(last) = path.last() {
            let recursive = matches!(last.kind, SegmentKind::Recursive(_));
            if recursive && !m.body.matches.is_empty() && version == Version::V1 {
                let last = last.clone();
                return misplaced_recursive(source, &last);
            }
        }
        block(source, version, &m.body, path)?;
        path.truncate(before);
    }
    Ok(())
}

fn misplaced_recursive(source: &str, seg: &Segment) -> Result<(), CompileError> {
    Err(CompileError::syntax(
        source,
        seg.span,
        "in rules_version '1' a recursive wildcard {name=**} must be the last segment of a match path",
    ))
}

fn functions(source: &str, fs: &[crate::parse::ast::Function]) -> Result<(), CompileError> {
    let mut names = HashSet::new();
    for f in fs {
        if !names.insert(f.name.as_str()) {
            return Err(CompileError::syntax(
                source,
                f.name_span,
                format!("function '{}' is declared twice in this scope", f.name),
            ));
        }
        if f.params.len() > MAX_FUNCTION_ARGS {
            return Err(CompileError::syntax(
                source,
                f.name_span,
                format!(
                    "function '{}' has {} parameters; the limit is {MAX_FUNCTION_ARGS}",
                    f.name,
                    f.params.len()
                ),
            ));
        }
        if f.lets.len() > MAX_LETS {
            return Err(CompileError::syntax(
                source,
                f.lets[MAX_LETS].1,
                format!(
                    "function '{}' has {} let bindings; the limit is {MAX_LETS}",
                    f.name,
                    f.lets.len()
                ),
            ));
        }
        let mut params = HashSet::new();
        for (p, span) in &f.params {
            if !params.insert(p.as_str()) {
                return Err(CompileError::syntax(
                    source,
                    *span,
                    format!("parameter '{p}' is declared twice"),
                ));
            }
        }
        for (name, span, _) in &f.lets {
            if params.contains(name.as_str()) {
                return Err(CompileError::syntax(
                    source,
                    *span,
                    format!("'{name}' is already a parameter of '{}'", f.name),
                ));
            }
        }
    }
    Ok(())
}

/// No function calls itself, directly or through others, whether or not a rule calls it
/// (Firebase's compiler: "Recursive call is not allowed"). A call resolves as in
/// [`crate::ir`]: to the innermost function of that name visible where the caller is declared
/// (its own block's and the enclosing blocks').
fn no_recursion(source: &str, file: &File) -> Result<(), CompileError> {
    // Every function with the functions visible from its body, outermost first.
    fn collect<'a>(
        b: &'a Block,
        visible: &mut Vec<&'a Function>,
        decls: &mut Vec<(&'a Function, Vec<&'a Function>)>,
    ) {
        let before = visible.len();
        visible.extend(b.functions.iter());
        for f in &b.functions {
            decls.push((f, visible.clone()));
        }
        for m in &b.matches {
            collect(&m.body, visible, decls);
        }
        visible.truncate(before);
    }
    let mut decls = Vec::new();
    let mut visible: Vec<&Function> = file.functions.iter().collect();
    for f in &file.functions {
        decls.push((f, visible.clone()));
    }
    for service in &file.services {
        collect(&service.body, &mut visible, &mut decls);
    }
    let index: HashMap<*const Function, usize> = decls
        .iter()
        .enumerate()
        .map(|(i, (f, _))| (*f as *const Function, i))
        .collect();
    // Calls of each function: (callee, the call's span).
    let edges: Vec<Vec<(usize, Span)>> = decls
        .iter()
        .map(|(f, visible)| {
            let mut found = Vec::new();
            for (_, _, e) in &f.lets {
                calls(e, &mut found);
            }
            calls(&f.body, &mut found);
            found
                .into_iter()
                .filter_map(|(name, span)| {
                    let callee = visible.iter().rev().find(|g| g.name == name)?;
                    Some((index[&(*callee as *const Function)], span))
                })
                .collect()
        })
        .collect();
    // Depth-first search without recursion (a file may declare many functions): a call to a
    // function still on the path is a cycle.
    let mut state = vec![0u8; decls.len()]; // 0 unseen, 1 on the path, 2 done
    for start in 0..decls.len() {
        if state[start] != 0 {
            continue;
        }
        let mut path = vec![(start, 0usize)];
        state[start] = 1;
        while let Some((node, next)) = path.last_mut() {
            let node = *node;
            let Some(&(callee, span)) = edges[node].get(*next) else {
                state[node] = 2;
                path.pop();
                continue;
            };
            *next += 1;
            match state[callee] {
                0 => {
                    state[callee] = 1;
                    path.push((callee, 0));
                }
                1 => {
                    let (caller, called) = (&decls[node].0.name, &decls[callee].0.name);
                    let message = if callee == node {
                        format!("function '{caller}' calls itself (recursion is not allowed)")
                    } else {
                        format!(
                            "function '{caller}' calls '{called}', which calls '{caller}' again (recursion is not allowed)"
                        )
                    };
                    return Err(CompileError::syntax(source, span, message));
                }
                _ => {}
            }
        }
    }
    Ok(())
}

/// The plain calls `name(..)` in `e` (not methods, not namespaced functions), with spans.
fn calls<'e>(e: &'e Expr, out: &mut Vec<(&'e str, Span)>) {
    if let ExprKind::Call(name, _) = &e.kind {
        out.push((name, e.span));
    }
    e.kind.for_each_child(|child| calls(child, out));
}
