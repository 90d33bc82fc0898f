//! A harness in the style of Firebase's rules-unit-testing: an authenticated or
//! unauthenticated context, a store of documents, and `assert_succeeds` / `assert_fails`
//! for each operation, decided by the evaluator.

#![allow(dead_code)]

use std::collections::BTreeMap;

use docstore_core::value::Map as CoreMap;
use docstore_core::{typed_json, ResourcePath, Timestamp};
use docstore_rules::eval::{evaluate, Budget, Decision, Document, Documents, Query, Request};
use docstore_rules::{compile, Method, Ruleset};
use serde_json::{json, Value as Json};

/// Documents before and after the request's writes.
#[derive(Default, Clone)]
pub struct Store {
    pub docs: BTreeMap<String, CoreMap>,
}

impl Store {
    pub fn with(mut self, path: &str, data: Json) -> Self {
        self.docs.insert(path.to_owned(), map(&data));
        self
    }
}

pub fn map(data: &Json) -> CoreMap {
    typed_json::map_from_json(data).unwrap()
}

impl Documents for Store {
    fn get(&self, path: &ResourcePath) -> Option<CoreMap> {
        self.docs.get(&path.to_string()).cloned()
    }
    fn get_after(&self, path: &ResourcePath) -> Option<CoreMap> {
        self.docs.get(&path.to_string()).cloned()
    }
}

/// Who asks: `None` is unauthenticated; otherwise the JWT claims.
#[derive(Clone)]
pub struct Ctx {
    pub auth: Option<Json>,
}

pub fn unauthenticated() -> Ctx {
    Ctx { auth: None }
}

pub fn authenticated(uid: &str) -> Ctx {
    Ctx {
        auth: Some(json!({"sub": uid})),
    }
}

pub fn authenticated_with(uid: &str, claims: Json) -> Ctx {
    let mut c = claims;
    c["sub"] = json!(uid);
    Ctx { auth: Some(c) }
}

#[derive(Clone, Debug)]
pub enum Op {
    Get(&'static str),
    List(&'static str),
    Create(&'static str, Json),
    /// The document as it would be after the update.
    Update(&'static str, Json),
    Delete(&'static str),
}

pub fn rules(source: &str) -> Ruleset {
    match compile(source) {
        Ok(r) => r,
        Err(e) => panic!("does not compile: {e}"),
    }
}

/// Rules for one condition on one collection, like the docs' snippets.
pub fn wrap(allow: &str) -> String {
    format!(
        "rules_version = '2';\nservice cloud.firestore {{\n  match /databases/{{database}}/documents {{\n    match /docs/{{doc}} {{\n      {allow}\n    }}\n  }}\n}}\n"
    )
}

/// request.time: 2023-11-14T22:13:21Z (one second after the test documents' `when`).
pub const TIME_MICROS: i64 = 1_700_000_001_000_000;

pub fn decide(rs: &Ruleset, store: &Store, ctx: &Ctx, op: &Op) -> Decision {
    let (method, path, new) = match op {
        Op::Get(p) => (Method::Get, *p, None),
        Op::List(p) => (Method::List, *p, None),
        Op::Create(p, d) => (Method::Create, *p, Some(d)),
        Op::Update(p, d) => (Method::Update, *p, Some(d)),
        Op::Delete(p) => (Method::Delete, *p, None),
    };
    let path = ResourcePath::parse(path).unwrap();
    let stored = store.docs.get(&path.to_string()).map(|data| Document {
        path: path.clone(),
        data: data.clone(),
    });
    let request = Request {
        method,
        database: "(default)".into(),
        path: path.clone(),
        auth: ctx.auth.clone().into(),
        resource: new.map(|d| Document {
            path: path.clone(),
            data: map(d),
        }),
        time: Timestamp::from_micros(TIME_MICROS).unwrap(),
        query: (method == Method::List).then(|| Query {
            limit: Some(10),
            offset: None,
            order_by: vec![],
        }),
    };
    let stored = if method == Method::List && !path.is_document() {
        None
    } else {
        stored
    };
    evaluate(rs, &request, stored.as_ref(), store, &mut Budget::single())
}

#[track_caller]
pub fn assert_succeeds(rs: &Ruleset, store: &Store, ctx: &Ctx, op: Op) {
    let d = decide(rs, store, ctx, &op);
    assert_eq!(d, Decision::Allow, "expected {op:?} to succeed");
}

#[track_caller]
pub fn assert_fails(rs: &Ruleset, store: &Store, ctx: &Ctx, op: Op) {
    let d = decide(rs, store, ctx, &op);
    assert!(matches!(d, Decision::Deny(_)), "expected {op:?} to fail");
}

/// A table row: condition(s), who, the store, the operation, allowed?
pub struct Case {
    pub allow: &'static str,
    pub ctx: Ctx,
    pub store: Store,
    pub op: Op,
    pub allowed: bool,
}

#[track_caller]
pub fn run_table(cases: Vec<Case>) -> usize {
    let mut failures = Vec::new();
    for (i, c) in cases.iter().enumerate() {
        let rs = rules(&wrap(c.allow));
        let d = decide(&rs, &c.store, &c.ctx, &c.op);
        if (d == Decision::Allow) != c.allowed {
            failures.push(format!(
                "case {i}: `{}` {:?}: expected {}, got {d:?}",
                c.allow,
                c.op,
                if c.allowed { "allow" } else { "deny" }
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    cases.len()
}

pub mod hidane;

/// The same case decided by hidane-rules (true for allow); `None` if hidane refuses the rules.
pub fn decide_hidane(source: &str, store: &Store, ctx: &Ctx, op: &Op) -> Option<bool> {
    let rs = hidane::compile(source).ok()?;
    let (method, path, new) = match op {
        Op::Get(p) => (Method::Get, *p, None),
        Op::List(p) => (Method::List, *p, None),
        Op::Create(p, d) => (Method::Create, *p, Some(map(d))),
        Op::Update(p, d) => (Method::Update, *p, Some(map(d))),
        Op::Delete(p) => (Method::Delete, *p, None),
    };
    Some(hidane::decide(
        &rs,
        &store.docs,
        ctx.auth.as_ref(),
        method,
        path,
        new.as_ref(),
        TIME_MICROS,
    ))
}
