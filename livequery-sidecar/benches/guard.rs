//! Per-event cost of the live-query rules guard (`session::guard::decide`): one chat message
//! a query target would send, decided by the `list` rule with one `get()` of its room (held
//! by the stream), as `request.auth` from typical Firebase-style JWT claims.
//!
//! - `held_auth`: the claims converted to `request.auth` once per stream (what the guard does);
//! - `auth_per_event`: converted again for each event (what it did before), the baseline;
//! - `if_true`: the same event under `allow list: if true`, the floor of a decision.
//!
//! Run: `cargo bench -p docstore-sidecar --bench guard`.
#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::collections::HashMap;
use std::hint::black_box;
use std::sync::Arc;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion};
use docstore_core::path::ResourcePath;
use docstore_core::query::parse_query;
use docstore_core::value::{Map, Timestamp, Value};
use docstore_rules::eval::Auth;
use docstore_sidecar::session::guard::{decide, Check, Outcome, Rules};
use serde_json::json;

const CHAT: &str = r"rules_version = '2';
service cloud.firestore {
  match /databases/{database}/documents {
    match /rooms/{room} {
      allow get: if request.auth != null && request.auth.uid in resource.data.members;
      match /messages/{message} {
        allow get, list: if request.auth != null
          && request.auth.uid in get(/databases/$(database)/documents/rooms/$(room)).data.members
          && resource.data.secret != true;
      }
    }
  }
}";

const OPEN: &str = r"rules_version = '2';
service cloud.firestore {
  match /databases/{database}/documents {
    match /{document=**} {
      allow list: if true;
    }
  }
}";

const DB: &str = "(default)";

fn rules(source: &str) -> Rules {
    Rules::Compiled(Arc::new(docstore_rules::compile(source).expect("rules")))
}

fn path(p: &str) -> ResourcePath {
    ResourcePath::parse(p).expect("path")
}

fn bench(c: &mut Criterion) {
    let claims = json!({
        "iss": "https://securetoken.google.com/demo",
        "aud": "demo",
        "auth_time": 1_700_000_000,
        "user_id": "alice",
        "sub": "alice",
        "iat": 1_700_000_000,
        "exp": 1_700_003_600,
        "email": "alice@example.com",
        "email_verified": true,
        "firebase": {"identities": {"email": ["alice@example.com"]}, "sign_in_provider": "password"}
    });
    let query = parse_query("select * from /rooms/r1/messages").expect("query");
    let check = Check::Listed {
        query: docstore_rules::list::request_query(&query),
        path: path("rooms/r1/messages/m1"),
        data: Arc::new(Map::from([
            ("text".to_owned(), Value::String("hello".into())),
            ("secret".to_owned(), Value::Boolean(false)),
            ("from".to_owned(), Value::String("alice".into())),
        ])),
    };
    let members = ["alice", "bob", "carol"]
        .iter()
        .map(|m| Value::String((*m).into()))
        .collect();
    let deps = HashMap::from([(
        path("rooms/r1"),
        Some(Map::from([("members".to_owned(), Value::Array(members))])),
    )]);
    let time = Timestamp::from_micros(1_700_000_000_000_000).expect("time");
    let chat = rules(CHAT);
    let open = rules(OPEN);
    let held = Auth::new(Some(claims.clone()));
    assert_eq!(
        decide(&chat, DB, &held, &check, &deps, time),
        Outcome::Allow
    );

    let mut group = c.benchmark_group("guard_decide_message");
    group.measurement_time(Duration::from_secs(5));
    group.bench_function("held_auth", |b| {
        b.iter(|| decide(&chat, DB, black_box(&held), &check, &deps, time));
    });
    group.bench_function("auth_per_event", |b| {
        b.iter(|| {
            let auth = Auth::new(Some(black_box(&claims).clone()));
            decide(&chat, DB, &auth, &check, &deps, time)
        });
    });
    group.bench_function("if_true", |b| {
        b.iter(|| decide(&open, DB, black_box(&held), &check, &deps, time));
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
