//! The IR: every `match` flattened into rules (full path pattern, methods, condition), every
//! function call inlined (parameters and `let`s substituted), every name resolved, every
//! operator and built-in a call of a primitive ([`crate::prim`]). Both back ends read this
//! and nothing else.

use std::collections::HashMap;

use crate::check::{self, LOOKUPS, MAX_CALL_DEPTH, NAMESPACES};
use crate::error::{CompileError, Span};
use crate::parse::ast::{
    BinaryOp, Block, Expr, ExprKind, File, Function, Method, PathPart, SegmentKind, UnaryOp,
    Version,
};
use crate::prim::{self, Val};

/// A compiled ruleset.
#[derive(Debug, Clone)]
pub struct Ruleset {
    pub version: Version,
    pub rules: Vec<Rule>,
}

/// One `allow` statement under its full match path.
#[derive(Debug, Clone)]
pub struct Rule {
    /// The full pattern as written in `match`es: `/databases/{database}/documents/users/{uid}`.
    pub pattern: String,
    /// `pattern` split into segments (what the evaluator matches paths with).
    pub path: prim::ops::PathPattern,
    pub methods: Vec<Method>,
    pub condition: Ir,
    /// 1-based line of the `allow` (reasons name it).
    pub line: usize,
}

/// Which document function.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LookupKind {
    Get,
    Exists,
    GetAfter,
    ExistsAfter,
}

impl LookupKind {
    pub fn name(self) -> &'static str {
        match self {
            LookupKind::Get => "get",
            LookupKind::Exists => "exists",
            LookupKind::GetAfter => "getAfter",
            LookupKind::ExistsAfter => "existsAfter",
        }
    }
}

/// A condition.
#[derive(Debug, Clone)]
pub enum Ir {
    Lit(Val),
    /// The `request` map.
    Request,
    /// The `resource` map (null when there is no document).
    Resource,
    /// A wildcard of the rule's pattern.
    Wildcard(String),
    /// A strict primitive.
    Prim(&'static str, Vec<Ir>),
    /// `&&` and `||`: error-absorbing, short-circuiting.
    And(Box<Ir>, Box<Ir>),
    Or(Box<Ir>, Box<Ir>),
    /// `c ? a : b`: an error or a non-boolean condition is an error.
    Cond(Box<Ir>, Box<Ir>, Box<Ir>),
    Lookup(LookupKind, Box<Ir>),
}

/// Lower a checked file.
///
/// # Errors
/// Unknown names, functions or methods, wrong arity (42601), recursion or calls deeper than
/// 20 (42601), conditions too large after inlining (0A000).
pub fn lower(source: &str, file: &File) -> Result<Ruleset, CompileError> {
    check::check_file(source, file)?;
    let mut rules = Vec::new();
    let top = Scope::default().with_functions(&file.functions);
    for service in &file.services {
        let mut l = Lowerer {
            source,
            rules: &mut rules,
        };
        l.block(&service.body, &top, String::new(), &mut Vec::new())?;
    }
    Ok(Ruleset {
        version: file.version,
        rules,
    })
}

#[derive(Clone, Default)]
struct Scope<'a> {
    /// Functions visible here, innermost declaration last, each with the number of
    /// functions and wildcards visible where it is declared (its lexical scope is a prefix
    /// of every scope that sees it).
    functions: Vec<(&'a Function, usize, usize)>,
    /// Values of parameters and lets.
    locals: HashMap<String, Ir>,
    /// Wildcards visible here, outermost first: (name in the source, name in the rule's
    /// pattern). A nested match may bind an enclosing match's name again; the inner one
    /// shadows it and is renamed `name~k` in the pattern (`~` is no identifier character),
    /// so each name of a pattern is bound once and functions still see the binding of
    /// their definition (Firebase's lexical scoping, checked against hidane-rules).
    wildcards: Vec<(String, String)>,
}

impl<'a> Scope<'a> {
    fn with_functions(mut self, fs: &'a [Function]) -> Self {
        let visible = self.functions.len() + fs.len();
        let wildcards = self.wildcards.len();
        self.functions
            .extend(fs.iter().map(|f| (f, visible, wildcards)));
        self
    }

    /// Bind wildcard `name` here; returns its name in the pattern.
    fn bind(&mut self, name: &str) -> String {
        let shadowed = self.wildcards.iter().filter(|(w, _)| w == name).count();
        let internal = if shadowed == 0 {
            name.to_owned()
        } else {
            format!("{name}~{}", shadowed + 1)
        };
        self.wildcards.push((name.to_owned(), internal.clone()));
        internal
    }

    /// The pattern name of wildcard `name` as seen here (the innermost binding).
    fn wildcard(&self, name: &str) -> Option<&str> {
        self.wildcards
            .iter()
            .rev()
            .find(|(w, _)| w == name)
            .map(|(_, internal)| internal.as_str())
    }

    fn function(&self, name: &str) -> Option<(&'a Function, usize, usize)> {
        self.functions
            .iter()
            .rev()
            .find(|(f, _, _)| f.name == name)
            .copied()
    }
}

struct Lowerer<'s, 'r> {
    source: &'s str,
    rules: &'r mut Vec<Rule>,
}

impl Lowerer<'_, '_> {
    fn err(&self, span: Span, message: impl Into<String>) -> CompileError {
        CompileError::syntax(self.source, span, message)
    }

    fn block<'a>(
        &mut self,
        b: &'a Block,
        outer: &Scope<'a>,
        pattern: String,
        stack: &mut Vec<*const Function>,
    ) -> Result<(), CompileError> {
        let scope = outer.clone().with_functions(&b.functions);
        for allow in &b.allows {
            let condition = match &allow.condition {
                Some(c) => {
                    let ir = self.expr(c, &scope, stack)?;
                    let (nodes, depth) = size(&ir);
                    if nodes > check::MAX_IR_NODES || depth > check::MAX_IR_DEPTH {
                        return Err(CompileError::unimplemented(
                            self.source,
                            c.span,
                            format!(
                                "condition too large after inlining functions ({nodes} nodes, depth {depth}; limits {} and {})",
                                check::MAX_IR_NODES,
                                check::MAX_IR_DEPTH
                            ),
                        ));
                    }
                    ir
                }
                None => Ir::Lit(Val::Bool(true)),
            };
            if pattern.is_empty() {
                continue;
            }
            let line = CompileError::syntax(self.source, allow.span, "").line;
            self.rules.push(Rule {
                path: prim::ops::PathPattern::parse(&pattern),
                pattern: pattern.clone(),
                methods: allow.methods.clone(),
                condition,
                line,
            });
        }
        for m in &b.matches {
            let mut inner = scope.clone();
            let mut p = pattern.clone();
            for seg in &m.path {
                p.push('/');
                match &seg.kind {
                    SegmentKind::Literal(s) => p.push_str(s),
                    SegmentKind::Single(n) => {
                        let internal = inner.bind(n);
                        p.push_str(&format!("{{{internal}}}"));
                    }
                    SegmentKind::Recursive(n) => {
                        let internal = inner.bind(n);
                        p.push_str(&format!("{{{internal}=**}}"));
                    }
                }
            }
            self.block(&m.body, &inner, p, stack)?;
        }
        Ok(())
    }

    fn exprs<'a>(
        &mut self,
        es: &'a [Expr],
        scope: &Scope<'a>,
        stack: &mut Vec<*const Function>,
    ) -> Result<Vec<Ir>, CompileError> {
        es.iter().map(|e| self.expr(e, scope, stack)).collect()
    }

    fn expr<'a>(
        &mut self,
        e: &'a Expr,
        scope: &Scope<'a>,
        stack: &mut Vec<*const Function>,
    ) -> Result<Ir, CompileError> {
        Ok(match &e.kind {
            ExprKind::Null => Ir::Lit(Val::Null),
            ExprKind::Bool(b) => Ir::Lit(Val::Bool(*b)),
            ExprKind::Int(i) => Ir::Lit(Val::Int(*i)),
            ExprKind::Float(f) => Ir::Lit(Val::Float(*f)),
            ExprKind::Str(s) => Ir::Lit(Val::Str(s.clone())),
            ExprKind::Bytes(b) => Ir::Lit(Val::Bytes(b.clone())),
            ExprKind::Ident(name) => self.name(name, e.span, scope)?,
            ExprKind::Path(parts) => {
                let mut args = Vec::new();
                for p in parts {
                    args.push(match p {
                        PathPart::Segment(s) => Ir::Lit(Val::Str(s.clone())),
                        PathPart::Expr(x) => self.expr(x, scope, stack)?,
                    });
                }
                fold("path", args)
            }
            ExprKind::List(items) => fold("list", self.exprs(items, scope, stack)?),
            ExprKind::Map(entries) => {
                let mut args = Vec::new();
                for (k, v) in entries {
                    args.push(self.expr(k, scope, stack)?);
                    args.push(self.expr(v, scope, stack)?);
                }
                fold("map", args)
            }
            ExprKind::Unary(op, x) => {
                let x = self.expr(x, scope, stack)?;
                fold(
                    match op {
                        UnaryOp::Not => "not",
                        UnaryOp::Neg => "neg",
                    },
                    vec![x],
                )
            }
            ExprKind::Binary(op, a, b) => {
                let (a, b) = (self.expr(a, scope, stack)?, self.expr(b, scope, stack)?);
                match op {
                    BinaryOp::And => Ir::And(Box::new(a), Box::new(b)),
                    BinaryOp::Or => Ir::Or(Box::new(a), Box::new(b)),
                    op => fold(binary_prim(*op), vec![a, b]),
                }
            }
            ExprKind::Is(x, t) => {
                let x = self.expr(x, scope, stack)?;
                fold("is", vec![x, Ir::Lit(Val::Str(t.clone()))])
            }
            ExprKind::Ternary(c, a, b) => Ir::Cond(
                Box::new(self.expr(c, scope, stack)?),
                Box::new(self.expr(a, scope, stack)?),
                Box::new(self.expr(b, scope, stack)?),
            ),
            ExprKind::Member(x, name) => {
                let x = self.expr(x, scope, stack)?;
                fold("member", vec![x, Ir::Lit(Val::Str(name.clone()))])
            }
            ExprKind::Index(x, i) => {
                let args = vec![self.expr(x, scope, stack)?, self.expr(i, scope, stack)?];
                fold("index", args)
            }
            ExprKind::Range(x, a, b) => {
                let args = vec![
                    self.expr(x, scope, stack)?,
                    self.expr(a, scope, stack)?,
                    self.expr(b, scope, stack)?,
                ];
                fold("range", args)
            }
            ExprKind::Call(name, args) => self.call(e, name, args, scope, stack)?,
            ExprKind::Method(recv, name, args) => {
                let namespace = match &recv.kind {
                    ExprKind::Ident(ns)
                        if NAMESPACES.contains(&ns.as_str())
                            && !scope.locals.contains_key(ns)
                            && scope.wildcard(ns).is_none() =>
                    {
                        Some(ns.as_str())
                    }
                    _ => None,
                };
                if let Some(ns) = namespace {
                    let Some(p) = prim::function_prim(Some(ns), name) else {
                        return Err(self.err(e.span, format!("unknown function '{ns}.{name}'")));
                    };
                    let args = self.exprs(args, scope, stack)?;
                    self.prim_call(e.span, &p, args, &format!("{ns}.{name}"))?
                } else {
                    let Some(p) = prim::method_prim(name) else {
                        return Err(self.err(e.span, format!("unknown method '{name}'")));
                    };
                    let mut all = vec![self.expr(recv, scope, stack)?];
                    all.extend(self.exprs(args, scope, stack)?);
                    self.prim_call(e.span, &p, all, name)?
                }
            }
        })
    }

    fn prim_call(
        &self,
        span: Span,
        p: &str,
        args: Vec<Ir>,
        shown: &str,
    ) -> Result<Ir, CompileError> {
        let Some((name, arity)) = prim::CATALOG.iter().find(|(n, _)| *n == p) else {
            return Err(self.err(span, format!("unknown function '{shown}'")));
        };
        if !arity.accepts(args.len()) {
            return Err(self.err(
                span,
                format!("'{shown}' does not take {} argument(s)", args.len()),
            ));
        }
        Ok(fold(name, args))
    }

    fn name(&self, name: &str, span: Span, scope: &Scope<'_>) -> Result<Ir, CompileError> {
        if let Some(v) = scope.locals.get(name) {
            return Ok(v.clone());
        }
        if let Some(internal) = scope.wildcard(name) {
            return Ok(Ir::Wildcard(internal.to_owned()));
        }
        match name {
            "request" => Ok(Ir::Request),
            "resource" => Ok(Ir::Resource),
            _ => Err(self.err(span, format!("unknown name '{name}'"))),
        }
    }

    fn call<'a>(
        &mut self,
        e: &'a Expr,
        name: &str,
        args: &'a [Expr],
        scope: &Scope<'a>,
        stack: &mut Vec<*const Function>,
    ) -> Result<Ir, CompileError> {
        if let Some((f, visible, wildcards)) = scope.function(name) {
            if args.len() != f.params.len() {
                return Err(self.err(
                    e.span,
                    format!(
                        "function '{name}' takes {} argument(s), not {}",
                        f.params.len(),
                        args.len()
                    ),
                ));
            }
            let id: *const Function = f;
            if stack.contains(&id) {
                return Err(self.err(
                    e.span,
                    format!("function '{name}' calls itself (recursion is not allowed)"),
                ));
            }
            if stack.len() >= MAX_CALL_DEPTH {
                return Err(self.err(
                    e.span,
                    format!("function calls nested deeper than {MAX_CALL_DEPTH}"),
                ));
            }
            let values = self.exprs(args, scope, stack)?;
            // The body sees the functions and wildcards of its definition (lexical scope).
            let mut inner = Scope {
                functions: scope.functions[..visible.min(scope.functions.len())].to_vec(),
                locals: HashMap::new(),
                wildcards: scope.wildcards[..wildcards.min(scope.wildcards.len())].to_vec(),
            };
            for ((p, _), v) in f.params.iter().zip(values) {
                inner.locals.insert(p.clone(), v);
            }
            stack.push(id);
            for (n, _, x) in &f.lets {
                let v = self.expr(x, &inner, stack)?;
                inner.locals.insert(n.clone(), v);
            }
            let body = self.expr(&f.body, &inner, stack)?;
            stack.pop();
            if size(&body).0 > check::MAX_IR_NODES {
                return Err(CompileError::unimplemented(
                    self.source,
                    e.span,
                    format!(
                        "call of '{name}' too large after inlining (limit {} nodes)",
                        check::MAX_IR_NODES
                    ),
                ));
            }
            return Ok(body);
        }
        if let Some(kind) = LOOKUPS.iter().position(|l| *l == name) {
            let [arg] = args else {
                return Err(self.err(e.span, format!("'{name}' takes one path argument")));
            };
            let kind = [
                LookupKind::Get,
                LookupKind::Exists,
                LookupKind::GetAfter,
                LookupKind::ExistsAfter,
            ][kind];
            return Ok(Ir::Lookup(kind, Box::new(self.expr(arg, scope, stack)?)));
        }
        let Some(p) = prim::function_prim(None, name) else {
            return Err(self.err(e.span, format!("unknown function '{name}'")));
        };
        let args = self.exprs(args, scope, stack)?;
        self.prim_call(e.span, &p, args, name)
    }
}

fn binary_prim(op: BinaryOp) -> &'static str {
    match op {
        BinaryOp::Eq => "eq",
        BinaryOp::Ne => "ne",
        BinaryOp::Lt => "lt",
        BinaryOp::Le => "le",
        BinaryOp::Gt => "gt",
        BinaryOp::Ge => "ge",
        BinaryOp::In => "in",
        BinaryOp::Add => "add",
        BinaryOp::Sub => "sub",
        BinaryOp::Mul => "mul",
        BinaryOp::Div => "div",
        // And/Or never reach here.
        BinaryOp::Mod | BinaryOp::And | BinaryOp::Or => "mod",
    }
}

/// A primitive call, computed now when every argument is a literal and the result is not
/// an error (an error stays a call, and is an error at run time like any other).
///
/// `name` is one of the lowering's own names (every one is in [`prim::CATALOG`]: the test
/// `every_name_lowering_uses_is_a_primitive` lowers every construct). A name that were not
/// would fail closed: the evaluator's call is an error (denies) and the SQL function does not
/// exist (`set_rules` fails).
fn fold(name: &'static str, args: Vec<Ir>) -> Ir {
    debug_assert!(
        prim::CATALOG.iter().any(|(n, _)| *n == name),
        "lowering uses '{name}', which is no primitive"
    );
    let lits: Option<Vec<Val>> = args
        .iter()
        .map(|a| match a {
            Ir::Lit(v) => Some(v.clone()),
            _ => None,
        })
        .collect();
    if let Some(vals) = lits {
        if let Some(v) = prim::apply(name, &vals) {
            return Ir::Lit(v);
        }
    }
    Ir::Prim(name, args)
}

/// Nodes and depth of a condition (iterative: the tree may be deep).
pub fn size(ir: &Ir) -> (usize, usize) {
    let mut nodes = 0;
    let mut depth = 0;
    let mut todo = vec![(ir, 1usize)];
    while let Some((n, d)) = todo.pop() {
        nodes += 1;
        depth = depth.max(d);
        if nodes > check::MAX_IR_NODES {
            break;
        }
        match n {
            Ir::Prim(_, args) => todo.extend(args.iter().map(|a| (a, d + 1))),
            Ir::And(a, b) | Ir::Or(a, b) => todo.extend([(&**a, d + 1), (&**b, d + 1)]),
            Ir::Cond(a, b, c) => todo.extend([(&**a, d + 1), (&**b, d + 1), (&**c, d + 1)]),
            Ir::Lookup(_, a) => todo.push((a, d + 1)),
            _ => {}
        }
    }
    (nodes, depth)
}

#[cfg(test)]
mod tests {
    /// Every construct the lowering turns into a primitive by a name of its own (paths, lists,
    /// maps, unary and binary operators, `is`, members, indexes, ranges): `fold` asserts each
    /// name is in the catalog, so a misspelt one fails here rather than denying at run time.
    #[test]
    fn every_name_lowering_uses_is_a_primitive() {
        let source = r"rules_version = '2';
service cloud.firestore {
  match /databases/{database}/documents {
    match /c/{id} {
      allow read: if !(request.auth == null) && -1 < 2 && 1 <= 2 && 2 > 1 && 2 >= 1
        && 1 != 2 && 'a' in ['a', 'b'] && {'k': 1 + 2 - 3 * 4 / 5 % 6}.k is int
        && resource.data.tags[0:1] == [resource.data.tags[0]]
        && exists(/databases/$(database)/documents/c/$(id));
    }
  }
}";
        let ruleset = crate::compile(source).expect("compiles");
        assert!(!ruleset.rules.is_empty());
    }
}
