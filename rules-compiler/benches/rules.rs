//! Evaluator throughput per document in flight: a ~30-line chat ruleset (rooms with an owner
//! and members, messages in them; one `get()` of the room per message read) deciding a `get`
//! of a message, an `update` of a room and a `create` of a message (the extension's write
//! figure), against a trivial `allow read: if true` baseline in the same run. Run: `cargo bench -p docstore-rules --bench rules`.
#![allow(clippy::expect_used)]

use std::collections::BTreeMap;
use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use docstore_core::value::Map as CoreMap;
use docstore_core::{typed_json, ResourcePath, Timestamp};
use docstore_rules::eval::{evaluate, Budget, Decision, Document, Documents, Request};
use docstore_rules::{compile, Method, Ruleset};
use serde_json::{json, Value as Json};

const CHAT: &str = r#"rules_version = '2';
service cloud.firestore {
  match /databases/{database}/documents {
    function signedIn() { return request.auth != null; }
    function room(id) { return get(/databases/$(database)/documents/rooms/$(id)).data; }
    function isMember(id) { return signedIn() && request.auth.uid in room(id).members; }
    function isOwner() { return signedIn() && resource.data.owner == request.auth.uid; }

    match /rooms/{roomId} {
      allow get: if signedIn() && request.auth.uid in resource.data.members;
      allow create: if signedIn()
                    && request.resource.data.owner == request.auth.uid
                    && request.auth.uid in request.resource.data.members
                    && request.resource.data.name is string;
      allow update: if isOwner()
                    && request.resource.data.diff(resource.data).affectedKeys()
                         .hasOnly(['members', 'name', 'updated'])
                    && request.resource.data.name.size() <= 100
                    && request.resource.data.members.size() <= 50;
      allow delete: if isOwner();

      match /messages/{messageId} {
        allow get: if isMember(roomId);
        allow create: if isMember(roomId)
                      && request.resource.data.sender == request.auth.uid
                      && request.resource.data.text is string
                      && request.resource.data.text.size() > 0
                      && request.resource.data.text.size() <= 2000
                      && request.resource.data.keys().hasOnly(['sender', 'text', 'sent']);
        allow update, delete: if signedIn() && resource.data.sender == request.auth.uid;
      }
    }
  }
}
"#;

const TRIVIAL: &str = r#"rules_version = '2';
service cloud.firestore {
  match /databases/{database}/documents {
    match /{document=**} {
      allow read: if true;
    }
  }
}
"#;

struct Store(BTreeMap<String, CoreMap>);

impl Documents for Store {
    fn get(&self, path: &ResourcePath) -> Option<CoreMap> {
        self.0.get(&path.to_string()).cloned()
    }
    fn get_after(&self, path: &ResourcePath) -> Option<CoreMap> {
        self.0.get(&path.to_string()).cloned()
    }
}

fn map(data: &Json) -> CoreMap {
    typed_json::map_from_json(data).expect("bench document is typed JSON")
}

fn path(p: &str) -> ResourcePath {
    ResourcePath::parse(p).expect("bench path")
}

fn request(method: Method, p: &str, new: Option<&Json>) -> Request {
    Request {
        method,
        database: "(default)".into(),
        path: path(p),
        auth: Some(json!({"sub": "alice", "email": "alice@example.com"})).into(),
        resource: new.map(|d| Document {
            path: path(p),
            data: map(d),
        }),
        time: Timestamp::from_micros(1_700_000_001_000_000).expect("bench time"),
        query: None,
    }
}

fn rules(source: &str) -> Ruleset {
    compile(source).expect("bench ruleset compiles")
}

fn benches(c: &mut Criterion) {
    let chat = rules(CHAT);
    let trivial = rules(TRIVIAL);
    let room = json!({"owner": "alice", "name": "general", "members": ["alice", "bob", "carol"],
                      "updated": {"$timestamp": "2023-11-14T22:13:20Z"}});
    let message =
        json!({"sender": "bob", "text": "hello", "sent": {"$timestamp": "2023-11-14T22:13:20Z"}});
    let mut docs = BTreeMap::new();
    docs.insert("rooms/r1".to_owned(), map(&room));
    docs.insert("rooms/r1/messages/m1".to_owned(), map(&message));
    let store = Store(docs);

    let message_doc = Document {
        path: path("rooms/r1/messages/m1"),
        data: map(&message),
    };
    let room_doc = Document {
        path: path("rooms/r1"),
        data: map(&room),
    };
    let get_message = request(Method::Get, "rooms/r1/messages/m1", None);
    let mut renamed = room.clone();
    renamed["name"] = json!("general chat");
    let update_room = request(Method::Update, "rooms/r1", Some(&renamed));
    // The extension's write figure (scripts/bench_rules.sh section 3): a message create, one
    // get() of its room, checks of the sender, the text and the keys.
    let mut sent = message.clone();
    sent["sender"] = json!("alice");
    let create_message = request(Method::Create, "rooms/r1/messages/m2", Some(&sent));

    // Each case must decide as intended, or the numbers measure a denial path.
    for (rs, req, stored) in [
        (&chat, &get_message, &message_doc),
        (&chat, &update_room, &room_doc),
        (&trivial, &get_message, &message_doc),
    ] {
        let d = evaluate(rs, req, Some(stored), &store, &mut Budget::single());
        assert_eq!(d, Decision::Allow, "{:?} {}", req.method, req.path);
    }
    let d = evaluate(&chat, &create_message, None, &store, &mut Budget::single());
    assert_eq!(d, Decision::Allow, "create of a message");

    let mut group = c.benchmark_group("evaluate_one_document");
    group.throughput(Throughput::Elements(1));
    group.bench_function("baseline_allow_read_if_true_get", |b| {
        b.iter(|| {
            evaluate(
                black_box(&trivial),
                black_box(&get_message),
                Some(black_box(&message_doc)),
                &store,
                &mut Budget::single(),
            )
        })
    });
    group.bench_function("chat_get_message_with_room_lookup", |b| {
        b.iter(|| {
            evaluate(
                black_box(&chat),
                black_box(&get_message),
                Some(black_box(&message_doc)),
                &store,
                &mut Budget::single(),
            )
        })
    });
    group.bench_function("chat_update_room_diff", |b| {
        b.iter(|| {
            evaluate(
                black_box(&chat),
                black_box(&update_room),
                Some(black_box(&room_doc)),
                &store,
                &mut Budget::single(),
            )
        })
    });
    group.bench_function("chat_create_message_with_room_lookup", |b| {
        b.iter(|| {
            evaluate(
                black_box(&chat),
                black_box(&create_message),
                None,
                &store,
                &mut Budget::single(),
            )
        })
    });
    group.finish();
}

criterion_group!(rules_benches, benches);
criterion_main!(rules_benches);
