//! Firebase's documented rules examples, as test tables: (ruleset, auth, path, method,
//! resource, request.resource, query) -> allow or deny, decided by our evaluator and, where it
//! can decide the same case, by the hidane-rules crate, which must agree.
//!
//! The rulesets restate, in our own words, the examples and the outcomes the documentation
//! gives for them:
//! - firebase/snippets-rules `rules/open.rules`, `rules/closed.rules` and their tests
//!   (`tests/open.test.ts`: any read succeeds; `tests/closed.test.ts`: any read fails);
//! - firebase.google.com/docs/firestore/security/rules-conditions: authentication
//!   (`request.auth.uid == userId`), data validation (`population > 0`, name unchanged),
//!   access to other documents (`exists()` of the user's profile to create, `get()` of it
//!   with `admin == true` to delete), custom functions (`signedInOrPublic`), custom claims
//!   and an e-mail domain with `matches`;
//! - .../security/rules-structure: recursive wildcards in rules_version 1 (one or more
//!   segments) and 2 (zero or more), collection-group matches (`/{path=**}/posts/{post}`),
//!   overlapping matches (any allow wins);
//! - .../security/rules-query: stories readable when published or by their author, and
//!   `request.query.limit <= 50` on list.
//!
//! A list here is decided for one document in flight (`resource` is that document), as the
//! sidecar does; hidane decides a list from the query alone, so list rows that read
//! `resource` are ours only (the `hidane` column says which rows it decides).

#![allow(clippy::unwrap_used, clippy::panic)]

mod common;

use common::*;
use docstore_core::{ResourcePath, Timestamp};
use docstore_rules::eval::{evaluate, Budget, Decision, Document, Query, Request};
use docstore_rules::Method;
use serde_json::{json, Value as Json};

const OPEN: &str = "service cloud.firestore {
  match /databases/{database}/documents {
    match /{document=**} { allow read, write; }
  }
}";

const CLOSED: &str = "service cloud.firestore {
  match /databases/{database}/documents {
    match /{document=**} { allow read, write: if false; }
  }
}";

const USERS: &str = "rules_version = '2';
service cloud.firestore {
  match /databases/{database}/documents {
    match /users/{userId} {
      allow create: if request.auth != null;
      allow read, update, delete: if request.auth != null && request.auth.uid == userId;
    }
  }
}";

const CITIES: &str = "rules_version = '2';
service cloud.firestore {
  match /databases/{database}/documents {
    match /cities/{city} {
      allow read: if resource.data.visibility == 'public';
      allow update: if request.resource.data.population > 0
                    && request.resource.data.name == resource.data.name;
      allow create: if request.auth != null
                    && exists(/databases/$(database)/documents/users/$(request.auth.uid));
      allow delete: if request.auth != null
                    && get(/databases/$(database)/documents/users/$(request.auth.uid)).data.admin == true;
    }
  }
}";

const FUNCTIONS: &str = "rules_version = '2';
service cloud.firestore {
  match /databases/{database}/documents {
    function signedInOrPublic() {
      return request.auth.uid != null || resource.data.visibility == 'public';
    }
    match /articles/{article} {
      allow read: if signedInOrPublic();
    }
  }
}";

const CLAIMS: &str = "rules_version = '2';
service cloud.firestore {
  match /databases/{database}/documents {
    match /reports/{report} {
      allow read: if request.auth.token.admin == true;
      allow create: if request.auth.token.email_verified == true
                    && request.auth.token.email.matches('.*@example[.]com$');
    }
  }
}";

const RECURSIVE_V1: &str = "service cloud.firestore {
  match /databases/{database}/documents {
    match /cities/{city}/{document=**} { allow read; }
  }
}";

const RECURSIVE_V2: &str = "rules_version = '2';
service cloud.firestore {
  match /databases/{database}/documents {
    match /cities/{city}/{document=**} { allow read; }
  }
}";

const GROUP: &str = "rules_version = '2';
service cloud.firestore {
  match /databases/{database}/documents {
    match /{path=**}/posts/{post} { allow read: if resource.data.published == true; }
  }
}";

const OVERLAP: &str = "rules_version = '2';
service cloud.firestore {
  match /databases/{database}/documents {
    match /cities/{city} { allow read, write: if false; }
    match /cities/{document=**} { allow read, write: if true; }
  }
}";

const QUERIES: &str = "rules_version = '2';
service cloud.firestore {
  match /databases/{database}/documents {
    match /stories/{storyid} {
      allow read: if request.auth != null
                  && (resource.data.published == true || request.auth.uid == resource.data.author);
    }
    match /posts/{post} {
      allow get: if true;
      allow list: if request.query.limit <= 50;
    }
  }
}";

/// The shape of the rules Firebase's Stripe extension documents (`/products/{id}` with
/// `/prices/{id}` inside): a nested match binds an enclosing match's wildcard name again.
/// The inner binding shadows the outer one in the inner match; a function declared in the
/// outer match sees the outer one (lexical scope), as hidane-rules decides.
const SHADOWED: &str = "rules_version = '2';
service cloud.firestore {
  match /databases/{database}/documents {
    match /products/{id} {
      function outerIsPublic() { return id == 'public'; }
      allow read: if id == 'public';
      match /prices/{id} {
        allow read: if id == 'listed' || outerIsPublic();
      }
    }
  }
}";

/// One documented case.
struct Row {
    name: &'static str,
    rules: &'static str,
    ctx: Ctx,
    method: Method,
    path: &'static str,
    /// `request.resource.data` of a create or update.
    new: Option<Json>,
    /// `request.query` of a list (limit).
    limit: Option<i64>,
    allowed: bool,
    /// Whether hidane-rules decides the same case (see the module comment).
    hidane: bool,
}

fn row(
    name: &'static str,
    rules: &'static str,
    ctx: Ctx,
    method: Method,
    path: &'static str,
) -> Row {
    Row {
        name,
        rules,
        ctx,
        method,
        path,
        new: None,
        limit: None,
        allowed: false,
        hidane: true,
    }
}

impl Row {
    fn allow(mut self) -> Row {
        self.allowed = true;
        self
    }
    fn deny(mut self) -> Row {
        self.allowed = false;
        self
    }
    fn with(mut self, data: Json) -> Row {
        self.new = Some(data);
        self
    }
    fn limit(mut self, limit: Option<i64>) -> Row {
        self.limit = limit;
        self
    }
    fn ours_only(mut self) -> Row {
        self.hidane = false;
        self
    }
}

fn store() -> Store {
    Store::default()
        .with("users/alice", json!({"name": "Alice", "admin": true}))
        .with("users/bob", json!({"name": "Bob", "admin": false}))
        .with(
            "cities/SF",
            json!({"name": "San Francisco", "population": 870000, "visibility": "public"}),
        )
        .with(
            "cities/LA",
            json!({"name": "Los Angeles", "population": 3900000, "visibility": "private"}),
        )
        .with("cities/SF/landmarks/coit", json!({"name": "Coit Tower"}))
        .with("articles/pub", json!({"visibility": "public"}))
        .with("articles/priv", json!({"visibility": "private"}))
        .with("reports/q1", json!({"total": 1}))
        .with("users/u1/posts/p1", json!({"published": true}))
        .with("users/u1/posts/p2", json!({"published": false}))
        .with("blogs/b1/posts/p3", json!({"published": true}))
        .with("stories/s1", json!({"author": "bob", "published": true}))
        .with("stories/s2", json!({"author": "bob", "published": false}))
        .with("posts/p1", json!({"title": "hello"}))
        .with("products/public", json!({}))
        .with("products/secret", json!({}))
        .with("products/secret/prices/listed", json!({}))
        .with("products/public/prices/x", json!({}))
        .with("products/secret/prices/x", json!({}))
        .with("products/x/prices/public", json!({}))
}

fn rows() -> Vec<Row> {
    use Method::*;
    let anon = unauthenticated;
    let alice = || authenticated("alice");
    let bob = || authenticated("bob");
    let carol = || authenticated("carol");
    let claims = |c: Json| authenticated_with("dana", c);
    vec![
        row("open: any read", OPEN, anon(), Get, "any/doc").allow(),
        row("open: any write", OPEN, anon(), Create, "any/doc")
            .with(json!({"a": 1}))
            .allow(),
        row("closed: any read", CLOSED, anon(), Get, "any/doc").deny(),
        row(
            "closed: even signed in",
            CLOSED,
            alice(),
            Get,
            "users/alice",
        )
        .deny(),
        row("closed: any write", CLOSED, alice(), Create, "any/doc")
            .with(json!({}))
            .deny(),
        // rules-conditions: authentication.
        row("users: own profile", USERS, alice(), Get, "users/alice").allow(),
        row("users: another's profile", USERS, bob(), Get, "users/alice").deny(),
        row("users: signed out", USERS, anon(), Get, "users/alice").deny(),
        row(
            "users: create signed in",
            USERS,
            carol(),
            Create,
            "users/carol",
        )
        .with(json!({"name": "C"}))
        .allow(),
        row("users: create signed out", USERS, anon(), Create, "users/x")
            .with(json!({}))
            .deny(),
        row("users: update own", USERS, bob(), Update, "users/bob")
            .with(json!({"name": "B"}))
            .allow(),
        row(
            "users: update another's",
            USERS,
            bob(),
            Update,
            "users/alice",
        )
        .with(json!({"name": "A"}))
        .deny(),
        row("users: delete own", USERS, alice(), Delete, "users/alice").allow(),
        // rules-conditions: data validation.
        row("cities: public readable", CITIES, anon(), Get, "cities/SF").allow(),
        row("cities: private not", CITIES, alice(), Get, "cities/LA").deny(),
        row(
            "cities: missing city (resource null)",
            CITIES,
            alice(),
            Get,
            "cities/NY",
        )
        .deny(),
        row(
            "cities: population grows",
            CITIES,
            bob(),
            Update,
            "cities/SF",
        )
        .with(json!({"name": "San Francisco", "population": 900000, "visibility": "public"}))
        .allow(),
        row(
            "cities: population zero",
            CITIES,
            bob(),
            Update,
            "cities/SF",
        )
        .with(json!({"name": "San Francisco", "population": 0, "visibility": "public"}))
        .deny(),
        row("cities: renamed", CITIES, bob(), Update, "cities/SF")
            .with(json!({"name": "SF", "population": 900000, "visibility": "public"}))
            .deny(),
        row(
            "cities: population not a number (error)",
            CITIES,
            bob(),
            Update,
            "cities/SF",
        )
        .with(json!({"name": "San Francisco", "population": "many"}))
        .deny(),
        row(
            "cities: population removed (error)",
            CITIES,
            bob(),
            Update,
            "cities/SF",
        )
        .with(json!({"name": "San Francisco"}))
        .deny(),
        // rules-conditions: access other documents.
        row(
            "cities: create with a profile",
            CITIES,
            bob(),
            Create,
            "cities/NY",
        )
        .with(json!({"name": "New York"}))
        .allow(),
        row(
            "cities: create without a profile",
            CITIES,
            carol(),
            Create,
            "cities/NY",
        )
        .with(json!({"name": "New York"}))
        .deny(),
        row(
            "cities: create signed out",
            CITIES,
            anon(),
            Create,
            "cities/NY",
        )
        .with(json!({"name": "New York"}))
        .deny(),
        row(
            "cities: admin deletes",
            CITIES,
            alice(),
            Delete,
            "cities/LA",
        )
        .allow(),
        row(
            "cities: non-admin cannot",
            CITIES,
            bob(),
            Delete,
            "cities/LA",
        )
        .deny(),
        row(
            "cities: no profile, get() is null (error)",
            CITIES,
            carol(),
            Delete,
            "cities/LA",
        )
        .deny(),
        // rules-conditions: custom functions (the error of request.auth.uid when signed
        // out is absorbed by ||).
        row(
            "functions: public, signed out",
            FUNCTIONS,
            anon(),
            Get,
            "articles/pub",
        )
        .allow(),
        row(
            "functions: private, signed out",
            FUNCTIONS,
            anon(),
            Get,
            "articles/priv",
        )
        .deny(),
        row(
            "functions: private, signed in",
            FUNCTIONS,
            bob(),
            Get,
            "articles/priv",
        )
        .allow(),
        // Custom claims and the e-mail domain.
        row(
            "claims: admin claim",
            CLAIMS,
            claims(json!({"admin": true})),
            Get,
            "reports/q1",
        )
        .allow(),
        row(
            "claims: admin false",
            CLAIMS,
            claims(json!({"admin": false})),
            Get,
            "reports/q1",
        )
        .deny(),
        row(
            "claims: no claim (missing key)",
            CLAIMS,
            claims(json!({})),
            Get,
            "reports/q1",
        )
        .deny(),
        row("claims: signed out", CLAIMS, anon(), Get, "reports/q1").deny(),
        row(
            "claims: verified example.com",
            CLAIMS,
            claims(json!({"email": "d@example.com", "email_verified": true})),
            Create,
            "reports/q2",
        )
        .with(json!({"total": 2}))
        .allow(),
        row(
            "claims: unverified",
            CLAIMS,
            claims(json!({"email": "d@example.com", "email_verified": false})),
            Create,
            "reports/q2",
        )
        .with(json!({"total": 2}))
        .deny(),
        row(
            "claims: other domain",
            CLAIMS,
            claims(json!({"email": "d@example.com.evil.org", "email_verified": true})),
            Create,
            "reports/q2",
        )
        .with(json!({"total": 2}))
        .deny(),
        // rules-structure: recursive wildcards by version.
        row(
            "v1: {document=**} needs a segment",
            RECURSIVE_V1,
            anon(),
            Get,
            "cities/SF",
        )
        .deny(),
        row(
            "v1: subcollection document",
            RECURSIVE_V1,
            anon(),
            Get,
            "cities/SF/landmarks/coit",
        )
        .allow(),
        row(
            "v2: {document=**} matches zero segments",
            RECURSIVE_V2,
            anon(),
            Get,
            "cities/SF",
        )
        .allow(),
        row(
            "v2: subcollection document",
            RECURSIVE_V2,
            anon(),
            Get,
            "cities/SF/landmarks/coit",
        )
        .allow(),
        row(
            "v2: other collection",
            RECURSIVE_V2,
            anon(),
            Get,
            "users/alice",
        )
        .deny(),
        row(
            "group: published post under users",
            GROUP,
            anon(),
            Get,
            "users/u1/posts/p1",
        )
        .allow(),
        row(
            "group: unpublished post",
            GROUP,
            anon(),
            Get,
            "users/u1/posts/p2",
        )
        .deny(),
        row(
            "group: published post under blogs",
            GROUP,
            anon(),
            Get,
            "blogs/b1/posts/p3",
        )
        .allow(),
        row("overlap: any allow wins", OVERLAP, anon(), Get, "cities/SF").allow(),
        row("overlap: writes too", OVERLAP, anon(), Update, "cities/SF")
            .with(json!({"name": "x"}))
            .allow(),
        // rules-query: published or own stories.
        row(
            "query: published story",
            QUERIES,
            alice(),
            Get,
            "stories/s1",
        )
        .allow(),
        row(
            "query: another's draft",
            QUERIES,
            alice(),
            Get,
            "stories/s2",
        )
        .deny(),
        row("query: own draft", QUERIES, bob(), Get, "stories/s2").allow(),
        row("query: signed out", QUERIES, anon(), Get, "stories/s1").deny(),
        row(
            "query: list, own draft in flight",
            QUERIES,
            bob(),
            List,
            "stories/s2",
        )
        .limit(Some(10))
        .ours_only()
        .allow(),
        row(
            "query: list, another's draft in flight",
            QUERIES,
            alice(),
            List,
            "stories/s2",
        )
        .limit(Some(10))
        .ours_only()
        .deny(),
        // rules-query: limit.
        row("query: limit 10", QUERIES, alice(), List, "posts")
            .limit(Some(10))
            .allow(),
        row("query: limit 50", QUERIES, alice(), List, "posts")
            .limit(Some(50))
            .allow(),
        row("query: limit 51", QUERIES, alice(), List, "posts")
            .limit(Some(51))
            .deny(),
        row(
            "query: no limit (null <= 50 is an error)",
            QUERIES,
            alice(),
            List,
            "posts",
        )
        .limit(None)
        .deny(),
        row("query: get is not list", QUERIES, anon(), Get, "posts/p1").allow(),
        // A wildcard name bound again by a nested match (the Stripe extension's rules).
        row(
            "shadowed: outer product",
            SHADOWED,
            anon(),
            Get,
            "products/public",
        )
        .allow(),
        row(
            "shadowed: other product",
            SHADOWED,
            anon(),
            Get,
            "products/secret",
        )
        .deny(),
        row(
            "shadowed: inner id is the price",
            SHADOWED,
            anon(),
            Get,
            "products/secret/prices/listed",
        )
        .allow(),
        row(
            "shadowed: the function sees the product",
            SHADOWED,
            anon(),
            Get,
            "products/public/prices/x",
        )
        .allow(),
        row(
            "shadowed: neither",
            SHADOWED,
            anon(),
            Get,
            "products/secret/prices/x",
        )
        .deny(),
        row(
            "shadowed: the price named like the product",
            SHADOWED,
            anon(),
            Get,
            "products/x/prices/public",
        )
        .deny(),
    ]
}

fn ours(r: &Row, store: &Store) -> bool {
    let rs = rules(r.rules);
    let path = ResourcePath::parse(r.path).unwrap();
    let stored = store.docs.get(&path.to_string()).map(|data| Document {
        path: path.clone(),
        data: data.clone(),
    });
    let request = Request {
        method: r.method,
        database: "(default)".into(),
        path: path.clone(),
        auth: r.ctx.auth.clone().into(),
        resource: r.new.as_ref().map(|d| Document {
            path: path.clone(),
            data: map(d),
        }),
        time: Timestamp::from_micros(TIME_MICROS).unwrap(),
        query: (r.method == Method::List).then(|| Query {
            limit: r.limit,
            offset: None,
            order_by: vec![],
        }),
    };
    evaluate(&rs, &request, stored.as_ref(), store, &mut Budget::single()) == Decision::Allow
}

fn theirs(r: &Row, store: &Store) -> Option<bool> {
    let rs = common::hidane::compile(r.rules).ok()?;
    let query = (r.method == Method::List).then(|| Query {
        limit: r.limit,
        offset: None,
        order_by: vec![],
    });
    Some(common::hidane::decide_with_query(
        &rs,
        &store.docs,
        r.ctx.auth.as_ref(),
        r.method,
        r.path,
        r.new.as_ref().map(map).as_ref(),
        TIME_MICROS,
        query.as_ref(),
    ))
}

#[test]
fn documented_examples_decide_as_documented() {
    let store = store();
    let rows = rows();
    let mut wrong = Vec::new();
    let mut disagree = Vec::new();
    let mut compared = 0;
    for r in &rows {
        if ours(r, &store) != r.allowed {
            wrong.push(format!(
                "{}: expected {}",
                r.name,
                if r.allowed { "allow" } else { "deny" }
            ));
        }
        if r.hidane {
            compared += 1;
            let h = theirs(r, &store);
            if h != Some(r.allowed) {
                disagree.push(format!("{}: hidane {h:?}", r.name));
            }
        }
    }
    eprintln!(
        "{} documented cases, {compared} also decided by hidane-rules",
        rows.len()
    );
    assert!(wrong.is_empty(), "our evaluator:\n{}", wrong.join("\n"));
    assert!(
        disagree.is_empty(),
        "hidane-rules:\n{}",
        disagree.join("\n")
    );
    // Both outcomes occur, and the table is not trivially one-sided.
    assert!(rows.iter().filter(|r| r.allowed).count() >= 20);
    assert!(rows.iter().filter(|r| !r.allowed).count() >= 20);
}
