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
use std::sync::Arc;

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
    /// The verified JWT claims; none when unauthenticated.
    pub auth: Auth,
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

/// A caller's verified JWT claims (none: unauthenticated) with `request.auth` as rules read
/// it ([`auth_value`]), converted once: a caller's many requests share one `Auth` (cloning it
/// clones a pointer).
#[derive(Debug, Clone, Default)]
pub struct Auth(Option<Arc<(Json, Val)>>);

impl Auth {
    pub fn new(claims: Option<Json>) -> Auth {
        Auth(claims.map(|claims| {
            let value = auth_value(Some(&claims));
            Arc::new((claims, value))
        }))
    }

    /// The claims, `None` when unauthenticated.
    pub fn claims(&self) -> Option<&Json> {
        self.0.as_deref().map(|(claims, _)| claims)
    }

    /// `request.auth`: `{uid, token}`, or null when unauthenticated.
    pub fn value(&self) -> &Val {
        static NULL: Val = Val::Null;
        self.0.as_deref().map_or(&NULL, |(_, value)| value)
    }
}

impl From<Option<Json>> for Auth {
    fn from(claims: Option<Json>) -> Auth {
        Auth::new(claims)
    }
}

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
    prim::json::resource(
        prim::json::document_path(database, path),
        data_value(database, data),
    )
}

/// A document's `data` as rules see it (`resource.data`).
fn data_value(database: &str, data: &CoreMap) -> Map {
    data.iter()
        .map(|(k, v)| (k.clone(), prim::value_from_core(v, database)))
        .collect()
}

/// The `request` map: auth, method, path, query, resource, time. The SQL back end's
/// `request` jsonb is `prim::to_json` of this.
pub fn request_value(r: &Request) -> Val {
    Val::Map(
        REQUEST_KEYS
            .iter()
            .filter_map(|&key| Some((key.to_owned(), request_field(r, key)?)))
            .collect(),
    )
}

/// Every key `request` may have ([`request_field`]).
const REQUEST_KEYS: [&str; 6] = ["auth", "method", "path", "query", "resource", "time"];

/// `request.<key>`, `None` when `request` has no such key: `request.resource` only on writes
/// (null for a delete), `request.query` only on lists; elsewhere reading them is an error, as
/// in Firestore.
fn request_field(r: &Request, key: &str) -> Option<Val> {
    Some(match key {
        "auth" => r.auth.value().clone(),
        "method" => Val::str(r.method.name()),
        "path" => Val::Path(prim::json::document_path(&r.database, &r.path)),
        "time" => Val::Timestamp(i128::from(r.time.micros()) * 1_000),
        "resource" => match r.method {
            Method::Create | Method::Update | Method::Delete => r
                .resource
                .as_ref()
                .map_or(Val::Null, |d| document_value(&r.database, &d.path, &d.data)),
            Method::Get | Method::List => return None,
        },
        "query" => {
            if r.method != Method::List {
                return None;
            }
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
            Val::Map(qm)
        }
        _ => return None,
    })
}

/// `request` as conditions read it: a field is built on its first read and kept for the
/// decision, `auth` is borrowed from the caller's [`Auth`], and the whole map is built only
/// when a condition reads `request` itself. A create's condition that reads
/// `request.auth.uid` and `request.resource.data` builds nothing else.
struct RequestRoot<'a> {
    request: &'a Request,
    /// One per key of [`REQUEST_KEYS`] (the slot of `auth` stays empty).
    fields: [OnceCell<Option<Val>>; REQUEST_KEYS.len()],
    /// `request.resource.data` read without the rest of `request.resource`.
    resource_data: OnceCell<Option<Val>>,
    whole: OnceCell<Val>,
}

impl<'a> RequestRoot<'a> {
    fn new(request: &'a Request) -> RequestRoot<'a> {
        RequestRoot {
            request,
            fields: std::array::from_fn(|_| OnceCell::new()),
            resource_data: OnceCell::new(),
            whole: OnceCell::new(),
        }
    }

    /// `request.<key>` ([`request_field`]).
    fn field(&self, key: &str) -> Option<&Val> {
        if key == "auth" {
            return Some(self.request.auth.value());
        }
        let slot = REQUEST_KEYS.iter().position(|k| *k == key)?;
        self.fields[slot]
            .get_or_init(|| request_field(self.request, key))
            .as_ref()
    }

    /// `request.resource.data`, what [`RequestRoot::field`]`("resource")` holds under `data`,
    /// without building the document's name and id.
    fn resource_data(&self) -> Option<&Val> {
        let r = self.request;
        self.resource_data
            .get_or_init(|| match (r.method, &r.resource) {
                (Method::Create | Method::Update | Method::Delete, Some(d)) => {
                    Some(Val::Map(data_value(&r.database, &d.data)))
                }
                // No `request.resource` (an error), or null (whose `.data` is an error).
                _ => None,
            })
            .as_ref()
    }

    /// `request` ([`request_value`]).
    fn whole(&self) -> &Val {
        self.whole.get_or_init(|| request_value(self.request))
    }
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
    let mut path: Vec<&str> = ["databases", &request.database, "documents"]
        .into_iter()
        .chain(request.path.segments().iter().map(String::as_str))
        .collect();
    if request.method == Method::List && !request.path.is_document() {
        path.push(UNBOUND);
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
pub(crate) fn decide<S: AsRef<str>>(
    ruleset: &Ruleset,
    request: &Request,
    path: &[S],
    eligible: impl Fn(&Rule) -> bool,
    resource: Resource,
    documents: &dyn Documents,
    budget: &mut Budget,
) -> Decision {
    let version = match ruleset.version {
        Version::V1 => 1,
        Version::V2 => 2,
    };
    let request_root = RequestRoot::new(request);
    let known = resource.known;
    let fetched: [OnceCell<Rc<Val>>; FETCHED] = std::array::from_fn(|_| OnceCell::new());
    let mut state = State {
        refused: None,
        budget,
        fetched: 0,
    };
    let mut outcomes = Vec::new();
    for rule in applicable(ruleset, request.method).filter(|r| eligible(r)) {
        let Some(mut bindings) = prim::ops::bind(&rule.path, version, path) else {
            continue;
        };
        bindings.retain(|(_, v)| match v {
            Val::Str(s) => s != UNBOUND,
            Val::Path(p) => !p.iter().any(|s| s == UNBOUND),
            _ => true,
        });
        state.refused = None;
        let mut ctx = Context {
            request: &request_root,
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
    request: &'r RequestRoot<'r>,
    resource: &'r Val,
    /// See [`Resource::known`].
    known: Option<&'r [Vec<String>]>,
    /// See [`Resource::contains`].
    contains: &'r [(Vec<String>, Val)],
    /// The path's wildcards (a name bound twice: the last binding counts, as in a map).
    bindings: &'r [(&'r str, Val)],
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
            Ir::Request => Some(Some(self.request.whole())),
            Ir::Resource => Some(Some(self.resource)),
            Ir::Wildcard(n) => Some(
                self.bindings
                    .iter()
                    .rev()
                    .find(|(name, _)| name == n)
                    .map(|(_, v)| v),
            ),
            Ir::Prim("member", args) => match args.as_slice() {
                [Ir::Request, Ir::Lit(Val::Str(f))] => Some(self.request.field(f)),
                [Ir::Prim("member", inner), Ir::Lit(Val::Str(f))]
                    if f == "data"
                        && matches!(inner.as_slice(),
                            [Ir::Request, Ir::Lit(Val::Str(r))] if r == "resource") =>
                {
                    Some(self.request.resource_data())
                }
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
            Ir::Lookup(kind, p) => match self.eval(p)? {
                Cow::Owned(Val::Path(segments)) => self.lookup(*kind, segments),
                Cow::Borrowed(Val::Path(segments)) => self.lookup(*kind, segments.clone()),
                _ => None,
            },
        }
    }

    fn lookup(&mut self, kind: LookupKind, mut segments: Vec<String>) -> Option<Cow<'r, Val>> {
        // Only documents of the request's database, by their full path.
        match segments.as_slice() {
            [d, db, docs, ..] if d == "databases" && db == self.database && docs == "documents" => {
                segments.drain(..3);
            }
            _ => return None,
        }
        let path = ResourcePath::from_segments(segments).ok()?;
        if !path.is_document() {
            return None;
        }
        let after = matches!(kind, LookupKind::GetAfter | LookupKind::ExistsAfter);
        let budget = &mut *self.state.budget;
        let at = match budget.looked_up.iter().position(|p| *p == path) {
            Some(at) => at,
            None if budget.looked_up.len() >= budget.limit => return None,
            None => {
                budget.looked_up.push(path);
                budget.looked_up.len() - 1
            }
        };
        let path = &budget.looked_up[at];
        let found = if after {
            self.documents.get_after_value(path, self.database)
        } else {
            self.documents.get_value(path, self.database)
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
