//! The evaluator: decides one request against a compiled ruleset.
//!
//! Every `allow` whose pattern matches the path and which names the method is evaluated in
//! source order; the first whose condition is `true` allows. Errors follow Firestore:
//! `error || true` is true, `error && false` is false (both sides absorb an error when the
//! other decides, like SQL's three-valued logic), an error anywhere else propagates, and an
//! error at the top of a condition is a denial.

use std::borrow::Cow;
use std::cell::OnceCell;
use std::collections::BTreeMap;
use std::rc::Rc;

use docstore_core::value::Map as CoreMap;
use docstore_core::{ResourcePath, Timestamp};
use serde_json::Value as Json;

use crate::ir::{Ir, LookupKind, Rule, Ruleset};
use crate::parse::ast::{Method, Version};
use crate::prim::{self, Map, Val};

/// A document as the caller holds it.
#[derive(Debug, Clone)]
pub struct Document {
    pub path: ResourcePath,
    pub data: CoreMap,
}

/// `request.query` of a list.
#[derive(Debug, Clone, Default)]
pub struct Query {
    pub limit: Option<i64>,
    pub offset: Option<i64>,
    /// Field path and `ASC` / `DESC`, in query order.
    pub order_by: Vec<(String, String)>,
}

/// One request, as rules see it.
#[derive(Debug, Clone)]
pub struct Request {
    pub method: Method,
    pub database: String,
    /// The document (or, for a list, the collection or the document) the request names.
    pub path: ResourcePath,
    /// The verified JWT claims; `None` when unauthenticated.
    pub auth: Option<Json>,
    /// The document as it would be after a create or update (`request.resource`).
    pub resource: Option<Document>,
    pub time: Timestamp,
    pub query: Option<Query>,
}

/// The documents `get()`/`exists()` read (before the request's writes) and
/// `getAfter()`/`existsAfter()` read (after all of the batch's writes).
pub trait Documents {
    fn get(&self, path: &ResourcePath) -> Option<CoreMap>;
    fn get_after(&self, path: &ResourcePath) -> Option<CoreMap>;

    /// What `get()` returns for `path` in `database` (the [`document_value`] of
    /// [`Documents::get`]): an implementation may share a value it converted before, when it
    /// knows the document is unchanged. The evaluator reads it by reference.
    fn get_value(&self, path: &ResourcePath, database: &str) -> Option<Rc<Val>> {
        self.get(path)
            .map(|data| Rc::new(document_value(database, path, &data)))
    }

    /// What `getAfter()` returns for `path` in `database` (see [`Documents::get_value`]).
    fn get_after_value(&self, path: &ResourcePath, database: &str) -> Option<Rc<Val>> {
        self.get_after(path)
            .map(|data| Rc::new(document_value(database, path, &data)))
    }
}

/// No documents at all (rules without lookups, tests).
pub struct NoDocuments;

impl Documents for NoDocuments {
    fn get(&self, _: &ResourcePath) -> Option<CoreMap> {
        None
    }
    fn get_after(&self, _: &ResourcePath) -> Option<CoreMap> {
        None
    }
}

/// Distinct documents a request may look up: 10 for a single request, 20 for a batch (the
/// same document twice counts once). A lookup over the budget is an error.
#[derive(Debug, Clone)]
pub struct Budget {
    pub limit: usize,
    pub looked_up: Vec<ResourcePath>,
}

impl Budget {
    pub fn single() -> Budget {
        Budget {
            limit: 10,
            looked_up: Vec::new(),
        }
    }

    pub fn batch() -> Budget {
        Budget {
            limit: 20,
            looked_up: Vec::new(),
        }
    }
}

/// What the rules decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    Allow,
    /// PERMISSION_DENIED, with the reason.
    Deny(String),
}

/// A document wildcard a list of a collection leaves unbound: a condition reading it is an
/// error.
pub(crate) const UNBOUND: &str = "\u{0}unbound";

/// `request.auth` from JWT claims: `{uid, token}` (uid is the `sub` claim), or null.
pub fn auth_value(claims: Option<&Json>) -> Val {
    let Some(claims) = claims else {
        return Val::Null;
    };
    let token = plain(claims);
    let uid = match claims.get("sub").or_else(|| claims.get("user_id")) {
        Some(Json::String(s)) => Val::Str(s.clone()),
        _ => Val::Null,
    };
    let mut m = Map::new();
    m.insert("uid".into(), uid);
    m.insert("token".into(), token);
    Val::Map(m)
}

/// Plain JSON (claims) as a value: integers that fit int64 are ints, other numbers floats.
fn plain(json: &Json) -> Val {
    match json {
        Json::Null => Val::Null,
        Json::Bool(b) => Val::Bool(*b),
        Json::Number(n) => match n.as_i64() {
            Some(i) if !n.to_string().contains(['.', 'e', 'E']) => Val::Int(i),
            _ => Val::Float(n.as_f64().unwrap_or(f64::NAN)),
        },
        Json::String(s) => Val::Str(s.clone()),
        Json::Array(items) => Val::List(items.iter().map(plain).collect()),
        Json::Object(m) => Val::Map(m.iter().map(|(k, v)| (k.clone(), plain(v))).collect()),
    }
}

/// A document as rules see it (`resource`, what `get()` returns): `id`, `__name__` and
/// `data`, its values converted with [`prim::value_from_core`].
pub fn document_value(database: &str, path: &ResourcePath, data: &CoreMap) -> Val {
    let data = data
        .iter()
        .map(|(k, v)| (k.clone(), prim::value_from_core(v, database)))
        .collect();
    prim::json::resource(prim::json::document_path(database, path), data)
}

/// The `request` map: auth, method, path, query, resource, time. The SQL back end's
/// `request` jsonb is `prim::to_json` of this.
pub fn request_value(r: &Request) -> Val {
    let mut m = Map::new();
    m.insert("auth".into(), auth_value(r.auth.as_ref()));
    m.insert("method".into(), Val::str(r.method.name()));
    m.insert(
        "path".into(),
        Val::Path(prim::json::document_path(&r.database, &r.path)),
    );
    m.insert(
        "time".into(),
        Val::Timestamp(i128::from(r.time.micros()) * 1_000),
    );
    // `request.resource` only on writes (null for a delete), `request.query` only on lists:
    // elsewhere reading them is an error, as in Firestore.
    match r.method {
        Method::Create | Method::Update | Method::Delete => {
            let resource = r
                .resource
                .as_ref()
                .map_or(Val::Null, |d| document_value(&r.database, &d.path, &d.data));
            m.insert("resource".into(), resource);
        }
        Method::List => {
            let q = r.query.clone().unwrap_or_default();
            let mut qm = Map::new();
            qm.insert("limit".into(), q.limit.map_or(Val::Null, Val::Int));
            qm.insert("offset".into(), Val::Int(q.offset.unwrap_or(0)));
            qm.insert(
                "orderBy".into(),
                Val::Map(
                    q.order_by
                        .iter()
                        .map(|(f, d)| (f.clone(), Val::Str(d.clone())))
                        .collect(),
                ),
            );
            m.insert("query".into(), Val::Map(qm));
        }
        Method::Get => {}
    }
    Val::Map(m)
}

/// Decide `request` against `ruleset`. `stored` is the document as stored (`resource`;
/// `None` when it does not exist).
pub fn evaluate(
    ruleset: &Ruleset,
    request: &Request,
    stored: Option<&Document>,
    documents: &dyn Documents,
    budget: &mut Budget,
) -> Decision {
    let mut path = prim::json::document_path(&request.database, &request.path);
    if request.method == Method::List && !request.path.is_document() {
        path.push(UNBOUND.to_owned());
    }
    let resource = stored.map_or(Val::Null, |d| {
        document_value(&request.database, &d.path, &d.data)
    });
    decide(
        ruleset,
        request,
        &path,
        |_| true,
        Resource {
            value: resource,
            known: None,
            contains: Vec::new(),
        },
        documents,
        budget,
    )
}

/// `resource` as a condition sees it: the whole document, or (for the list check of a query)
/// only the parts the query fixes.
pub(crate) struct Resource {
    pub value: Val,
    /// `Some`: only reads of `resource` along one of these key chains (or below them) are
    /// defined; any other read of `resource` is an error.
    pub known: Option<Vec<Vec<String>>>,
    /// Lists the query fixes to contain a value (`array_contains`): `x in resource.data.f`
    /// is true when `x` is that value.
    pub contains: Vec<(Vec<String>, Val)>,
}

/// Evaluate the rules of `request.method` whose pattern matches `path` (and which `eligible`
/// accepts), in source order; the first true condition allows.
#[allow(clippy::too_many_arguments)]
pub(crate) fn decide(
    ruleset: &Ruleset,
    request: &Request,
    path: &[String],
    eligible: impl Fn(&Rule) -> bool,
    resource: Resource,
    documents: &dyn Documents,
    budget: &mut Budget,
) -> Decision {
    let version = match ruleset.version {
        Version::V1 => 1,
        Version::V2 => 2,
    };
    let request_val = request_value(request);
    let known = resource.known;
    let fetched: [OnceCell<Rc<Val>>; FETCHED] = std::array::from_fn(|_| OnceCell::new());
    let mut state = State {
        refused: None,
        budget,
        fetched: 0,
    };
    let mut outcomes = Vec::new();
    for rule in applicable(ruleset, request.method).filter(|r| eligible(r)) {
        let Some(bindings) = prim::ops::match_path(&rule.pattern, version, path) else {
            continue;
        };
        let bindings: Map = bindings
            .into_iter()
            .filter(|(_, v)| match v {
                Val::Str(s) => s != UNBOUND,
                Val::Path(p) => !p.iter().any(|s| s == UNBOUND),
                _ => true,
            })
            .collect();
        state.refused = None;
        let mut ctx = Context {
            request: &request_val,
            resource: &resource.value,
            known: known.as_deref(),
            contains: &resource.contains,
            bindings: &bindings,
            database: &request.database,
            documents,
            fetched: &fetched,
            state: &mut state,
        };
        match ctx.eval(&rule.condition).as_deref().and_then(prim::truth) {
            Some(true) => return Decision::Allow,
            Some(false) => outcomes.push(format!("false at line {}", rule.line)),
            None => match state.refused.take() {
                Some(read) => outcomes.push(format!(
                    "error at line {} (reads {read}, which the query does not fix)",
                    rule.line
                )),
                None => outcomes.push(format!("error at line {}", rule.line)),
            },
        }
    }
    if outcomes.is_empty() {
        Decision::Deny(format!(
            "no allow statement for '{}' matches {}",
            request.method.name(),
            request.path
        ))
    } else {
        Decision::Deny(format!(
            "'{}' on {} denied: {}",
            request.method.name(),
            request.path,
            outcomes.join(", ")
        ))
    }
}

fn applicable(ruleset: &Ruleset, method: Method) -> impl Iterator<Item = &Rule> {
    ruleset
        .rules
        .iter()
        .filter(move |r| r.methods.contains(&method))
}

/// What a condition's evaluation changes: the lookups' budget and the first refused read.
struct State<'b> {
    /// The first read of `resource` outside `known` (for the denial's reason).
    refused: Option<String>,
    budget: &'b mut Budget,
    /// How many of [`Context::fetched`] hold a document.
    fetched: usize,
}

/// How many documents one decision's lookups keep for reading by reference; a lookup past
/// them copies its document.
const FETCHED: usize = 16;

/// One condition's evaluation. The roots (`request`, `resource`, the path's bindings) and the
/// ruleset are borrowed for `'r`, so reading a field of a root or a literal returns a
/// reference to it ([`Cow::Borrowed`]): only values a primitive makes are owned.
struct Context<'r, 's, 'b> {
    request: &'r Val,
    resource: &'r Val,
    /// See [`Resource::known`].
    known: Option<&'r [Vec<String>]>,
    /// See [`Resource::contains`].
    contains: &'r [(Vec<String>, Val)],
    bindings: &'r Map,
    database: &'r str,
    documents: &'r dyn Documents,
    /// The documents the decision's lookups returned (filled in order, see
    /// [`State::fetched`]), so `get(p).data.f` reads `f` by reference.
    fetched: &'r [OnceCell<Rc<Val>>],
    state: &'s mut State<'b>,
}

impl<'r> Context<'r, '_, '_> {
    /// A chain of `.field` / `[key]` reads from a root, by reference (no copy of the root).
    fn read(&self, ir: &Ir) -> Option<Option<&'r Val>> {
        match ir {
            Ir::Request => Some(Some(self.request)),
            Ir::Resource => Some(Some(self.resource)),
            Ir::Wildcard(n) => Some(self.bindings.get(n)),
            Ir::Prim("member", args) => match args.as_slice() {
                [obj, Ir::Lit(Val::Str(f))] => {
                    let parent = self.read(obj)?;
                    Some(parent.and_then(|p| match p {
                        Val::Map(m) => m.get(f),
                        _ => None,
                    }))
                }
                _ => None,
            },
            _ => None,
        }
    }

    /// Whether `ir` is a read of `resource` that `known` does not define (recording it).
    fn refuses(&mut self, ir: &Ir) -> bool {
        let Some(known) = self.known else {
            return false;
        };
        let Some(keys) = resource_chain(ir) else {
            return false;
        };
        if known.iter().any(|k| keys.starts_with(k)) {
            return false;
        }
        if self.state.refused.is_none() {
            let mut read = String::from("resource");
            for k in &keys {
                read.push('.');
                read.push_str(k);
            }
            self.state.refused = Some(read);
        }
        true
    }

    /// `x in resource.data.f` where the query fixes that `f` contains a value: true when `x`
    /// is that value, else unknown (an error).
    fn contained(&mut self, ir: &'r Ir) -> Option<Option<Val>> {
        if self.contains.is_empty() {
            return None;
        }
        let Ir::Prim("in", args) = ir else {
            return None;
        };
        let [x, list] = args.as_slice() else {
            return None;
        };
        let keys = resource_chain(list)?;
        let value = self
            .contains
            .iter()
            .find(|(k, _)| *k == keys)
            .map(|(_, v)| v.clone())?;
        let x = self.eval(x);
        Some(x.and_then(|x| {
            prim::apply_refs("in", &[&x, &Val::List(vec![value])])
                .filter(|b| matches!(b, Val::Bool(true)))
        }))
    }

    fn eval(&mut self, ir: &'r Ir) -> Option<Cow<'r, Val>> {
        if let Some(decided) = self.contained(ir) {
            return decided.map(Cow::Owned);
        }
        if self.refuses(ir) {
            return None;
        }
        if let Some(v) = self.read(ir) {
            return v.map(Cow::Borrowed);
        }
        match ir {
            Ir::Lit(v) => Some(Cow::Borrowed(v)),
            Ir::Request | Ir::Resource | Ir::Wildcard(_) => None,
            Ir::Prim(name @ ("member" | "index"), args) => match args.as_slice() {
                [obj, key] => {
                    let obj = self.eval(obj)?;
                    let key = self.eval(key)?;
                    select(name, obj, &key)
                }
                _ => None,
            },
            // Up to three arguments on the stack (every fixed-arity primitive but one).
            Ir::Prim(name, args) => match args.as_slice() {
                [a] => {
                    let a = self.eval(a)?;
                    prim::apply_refs(name, &[&a]).map(Cow::Owned)
                }
                [a, b] => {
                    let a = self.eval(a)?;
                    let b = self.eval(b)?;
                    prim::apply_refs(name, &[&a, &b]).map(Cow::Owned)
                }
                [a, b, c] => {
                    let a = self.eval(a)?;
                    let b = self.eval(b)?;
                    let c = self.eval(c)?;
                    prim::apply_refs(name, &[&a, &b, &c]).map(Cow::Owned)
                }
                _ => {
                    let mut vals = Vec::with_capacity(args.len());
                    for a in args {
                        vals.push(self.eval(a)?);
                    }
                    let refs: Vec<&Val> = vals.iter().map(|v| &**v).collect();
                    prim::apply_refs(name, &refs).map(Cow::Owned)
                }
            },
            Ir::And(a, b) => {
                let l = self.eval(a).as_deref().and_then(prim::truth);
                if l == Some(false) {
                    return Some(Cow::Owned(Val::Bool(false)));
                }
                let r = self.eval(b).as_deref().and_then(prim::truth);
                match (l, r) {
                    (_, Some(false)) => Some(Cow::Owned(Val::Bool(false))),
                    (Some(true), Some(true)) => Some(Cow::Owned(Val::Bool(true))),
                    _ => None,
                }
            }
            Ir::Or(a, b) => {
                let l = self.eval(a).as_deref().and_then(prim::truth);
                if l == Some(true) {
                    return Some(Cow::Owned(Val::Bool(true)));
                }
                let r = self.eval(b).as_deref().and_then(prim::truth);
                match (l, r) {
                    (_, Some(true)) => Some(Cow::Owned(Val::Bool(true))),
                    (Some(false), Some(false)) => Some(Cow::Owned(Val::Bool(false))),
                    _ => None,
                }
            }
            Ir::Cond(c, a, b) => match self.eval(c).as_deref().and_then(prim::truth)? {
                true => self.eval(a),
                false => self.eval(b),
            },
            Ir::Lookup(kind, p) => {
                let p = self.eval(p)?;
                let Val::Path(segments) = &*p else {
                    return None;
                };
                self.lookup(*kind, segments)
            }
        }
    }

    fn lookup(&mut self, kind: LookupKind, segments: &[String]) -> Option<Cow<'r, Val>> {
        // Only documents of the request's database, by their full path.
        let rest = match segments {
            [d, db, docs, rest @ ..]
                if d == "databases" && db == self.database && docs == "documents" =>
            {
                rest
            }
            _ => return None,
        };
        let path = ResourcePath::from_segments(rest.to_vec()).ok()?;
        if !path.is_document() {
            return None;
        }
        let after = matches!(kind, LookupKind::GetAfter | LookupKind::ExistsAfter);
        let budget = &mut *self.state.budget;
        if !budget.looked_up.contains(&path) {
            if budget.looked_up.len() >= budget.limit {
                return None;
            }
            budget.looked_up.push(path.clone());
        }
        let found = if after {
            self.documents.get_after_value(&path, self.database)
        } else {
            self.documents.get_value(&path, self.database)
        };
        Some(match (kind, found) {
            (LookupKind::Exists | LookupKind::ExistsAfter, found) => {
                Cow::Owned(Val::Bool(found.is_some()))
            }
            (_, None) => Cow::Owned(Val::Null),
            (_, Some(document)) => self.keep(document),
        })
    }

    /// `document` for the rest of the decision: by reference from [`Context::fetched`], or
    /// (all of them taken) a copy.
    fn keep(&mut self, document: Rc<Val>) -> Cow<'r, Val> {
        let fetched: &'r [OnceCell<Rc<Val>>] = self.fetched;
        if let Some(slot) = fetched.get(self.state.fetched) {
            self.state.fetched += 1;
            if slot.set(Rc::clone(&document)).is_ok() {
                if let Some(kept) = slot.get() {
                    return Cow::Borrowed(&**kept);
                }
            }
        }
        Cow::Owned(Rc::unwrap_or_clone(document))
    }
}

/// `obj.f` / `obj[i]` ([`prim::ops::select`]) without copying `obj`: a borrowed `obj` gives a
/// borrowed value, an owned map gives up the field.
fn select<'r>(name: &str, obj: Cow<'r, Val>, key: &Val) -> Option<Cow<'r, Val>> {
    match obj {
        Cow::Borrowed(o) => match prim::ops::select(name, o, key) {
            Some(found) => found.map(Cow::Borrowed),
            None => prim::apply_refs(name, &[o, key]).map(Cow::Owned),
        },
        Cow::Owned(Val::Map(mut m)) => match key {
            Val::Str(k) => m.remove(k).map(Cow::Owned),
            _ => prim::apply_refs(name, &[&Val::Map(m), key]).map(Cow::Owned),
        },
        Cow::Owned(o) => match prim::ops::select(name, &o, key) {
            Some(found) => found.cloned().map(Cow::Owned),
            None => prim::apply_refs(name, &[&o, key]).map(Cow::Owned),
        },
    }
}

/// The keys of a read `resource.k1.k2...` (by `.field` or `['literal']`), or `None`.
fn resource_chain(ir: &Ir) -> Option<Vec<String>> {
    let mut keys = Vec::new();
    let mut at = ir;
    loop {
        match at {
            Ir::Resource => break,
            Ir::Prim("member", args) => match args.as_slice() {
                [obj, Ir::Lit(Val::Str(f))] => {
                    keys.push(f.clone());
                    at = obj;
                }
                _ => return None,
            },
            _ => return None,
        }
    }
    keys.reverse();
    Some(keys)
}

/// For tests and tools: the bindings of `pattern` on a document path.
pub fn bindings(pattern: &str, version: Version, path: &[String]) -> Option<BTreeMap<String, Val>> {
    let v = match version {
        Version::V1 => 1,
        Version::V2 => 2,
    };
    prim::ops::match_path(pattern, v, path)
}
