//! Firebase's published rules examples with their expected outcomes, as test tables.
//!
//! Sources (rules quoted in full, Apache-2.0 / CC-BY-4.0):
//! - firebase/snippets-rules `rules/field-changes/example.rules` and its
//!   `tests/field-changes.test.ts`;
//! - firebase/snippets-rules `rules/solution-rbac/step5.rules` and `tests/solution-rbac.test.ts`
//!   (the read rule of step5 calls `isOneOfRoles` with one argument where the function takes
//!   two; we refuse that file with 42601, see `rbac_step5_as_published_is_refused`, and test
//!   the rules with the call fixed; upstream has fixed it since: the file at `6328731`, in
//!   the corpus of `tests/corpus.rs`, compiles);
//! - firebase.google.com/docs/rules/data-validation (the `ranking` and `visibility` examples);
//! - firebase.google.com/docs/firestore/security/rules-conditions (content owner only, and
//!   role-based access), and a chat app with owners and members in the style of those pages.
//!
//! Each case is decided by our evaluator (must equal the published expectation) and by the
//! hidane-rules crate; the rows where hidane differs are named in `HIDANE_DIFFERS`.

#![allow(clippy::unwrap_used, clippy::panic)]

mod common;

use common::*;
use serde_json::json;

const FIELD_CHANGES: &str = r#"service cloud.firestore {

  // Determine if the value of the field "key" is the same
  // before and after the request.
  function unchanged(key) {
    return (key in resource.data)
      && (key in request.resource.data)
      && (resource.data[key] == request.resource.data[key]);
  }

  match /databases/{database}/documents {
    match /{document=**} {
      allow read: if true;

      // Allow writes if the data has all of the same fields and
      // the "name" field is unchanged.
      allow update: if (request.resource.data.keys() == resource.data.keys())
        && unchanged("name");
    }
  }
}
"#;

const RBAC_STEP5: &str = r#"service cloud.firestore {
   match /databases/{database}/documents {
     match /stories/{story} {
        function isSignedIn() {
          return request.auth != null;
        }

        function getRole(rsc) {
          return rsc.data.roles[request.auth.uid];
        }

        function isOneOfRoles(rsc, array) {
          return isSignedIn() && (getRole(rsc) in array);
        }

        function isValidNewStory() {
          return request.resource.data.roles[request.auth.uid] == 'owner';
        }

        function onlyContentChanged() {
          // Ensure that title and roles are unchanged and that no new
          // fields are added to the document.
          return request.resource.data.title == resource.data.title
            && request.resource.data.roles == resource.data.roles
            && request.resource.size() == resource.size();
        }

        // Split writing into creation, deletion, and updating. Only an
        // owner can create or delete a story but a writer can update
        // story content.
        allow create: if isValidNewStory();
        allow delete: if isOneOfRoles(resource, ['owner']);
        allow update: if isOneOfRoles(resource, ['owner'])
                      || (isOneOfRoles(resource, ['writer']) && onlyContentChanged());
        allow read: if isOneOfRoles(FIXED_ARG['owner', 'writer', 'commenter', 'reader']);

        match /comments/{comment} {
          allow read: if isOneOfRoles(get(/databases/$(database)/documents/stories/$(story)),
                                      ['owner', 'writer', 'commenter', 'reader']);
          allow create: if isOneOfRoles(get(/databases/$(database)/documents/stories/$(story)),
                                        ['owner', 'writer', 'commenter', 'reader'])
                        && request.resource.data.user == request.auth.uid;
        }
     }
   }
}
"#;

const VALIDATION: &str = r#"service cloud.firestore {
  match /databases/{database}/documents {
    // Disallow
    match /cities/{city} {
      allow create: if !("ranking" in request.resource.data)
      allow read: if resource.data.visibility == 'public';
    }
  }
}
"#;

const OWNER_ONLY: &str = r#"service cloud.firestore {
  match /databases/{database}/documents {
    // Allow only authenticated content owners access
    match /some_collection/{userId}/{documents=**} {
      allow read, write: if request.auth != null && request.auth.uid == userId
    }
  }
}
"#;

const ROLES: &str = r#"rules_version = '2';
service cloud.firestore {
  match /databases/{database}/documents {
    // Assumes that user documents have an 'admin' boolean field
    match /users/{user} {
      allow read: if request.auth != null;
      allow write: if get(/databases/$(database)/documents/users/$(request.auth.uid)).data.admin == true;
    }
    // Only verified e-mail addresses may write posts.
    match /posts/{post} {
      allow read: if true;
      allow create: if request.auth.token.email_verified
                    && request.resource.data.author == request.auth.uid
                    && request.resource.data.title is string
                    && request.resource.data.title.size() <= 100
                    && request.resource.data.published_at == request.time;
    }
  }
}
"#;

const CHAT: &str = r#"rules_version = '2';
service cloud.firestore {
  match /databases/{database}/documents {
    function signedIn() { return request.auth != null; }
    function room(id) { return get(/databases/$(database)/documents/rooms/$(id)).data; }
    function isMember(id) { return signedIn() && request.auth.uid in room(id).members; }

    match /rooms/{roomId} {
      allow get: if isMember(roomId);
      allow create: if signedIn()
                    && request.resource.data.owner == request.auth.uid
                    && request.auth.uid in request.resource.data.members;
      allow update: if signedIn() && resource.data.owner == request.auth.uid
                    && request.resource.data.diff(resource.data).affectedKeys().hasOnly(['members', 'name']);
      allow delete: if signedIn() && resource.data.owner == request.auth.uid;

      match /messages/{messageId} {
        allow read: if isMember(roomId);
        allow create: if isMember(roomId)
                      && request.resource.data.sender == request.auth.uid
                      && request.resource.data.text is string
                      && request.resource.data.text.size() > 0
                      && request.resource.data.keys().hasOnly(['sender', 'text', 'sent']);
        allow update, delete: if signedIn() && resource.data.sender == request.auth.uid;
      }
    }
  }
}
"#;

/// Rows (by name) where hidane-rules decides otherwise, with the reason we judge.
const HIDANE_DIFFERS: &[&str] = &[];

struct Row {
    name: &'static str,
    rules: &'static str,
    store: Store,
    ctx: Ctx,
    op: Op,
    allowed: bool,
}

fn rbac() -> String {
    RBAC_STEP5.replace("FIXED_ARG", "resource, ")
}

fn rbac_store() -> Store {
    Store::default()
        .with("stories/story1", json!({"title": "Story 1", "content": "The quick brown fox...", "roles": {"owneruser": "owner", "writeruser": "writer", "readeruser": "reader"}}))
        .with("stories/storywithcomments", json!({"title": "Story With Comments", "content": "The quick brown fox...", "roles": {"owneruser": "owner", "readeruser": "reader", "commenteruser": "commenter"}}))
        .with("stories/storywithcomments/comments/comment1", json!({"text": "This is a comment", "user": "randomuser"}))
}

fn chat_store() -> Store {
    Store::default()
        .with(
            "rooms/r1",
            json!({"owner": "alice", "members": ["alice", "bob"], "name": "r1"}),
        )
        .with(
            "rooms/r1/messages/m1",
            json!({"sender": "bob", "text": "hi"}),
        )
}

fn rows() -> Vec<Row> {
    let rbac: &'static str = Box::leak(rbac().into_boxed_str());
    let fc = || Store::default().with("docs/test", json!({"name": "test-doc", "age": 1}));
    let story1 = json!({"title": "Story 1", "content": "The quick brown fox...", "roles": {"owneruser": "owner", "writeruser": "writer", "readeruser": "reader"}});
    let with = |f: &dyn Fn(&mut serde_json::Value)| {
        let mut d = story1.clone();
        f(&mut d);
        d
    };
    vec![
        Row {
            name: "field-changes: read any path",
            rules: FIELD_CHANGES,
            store: fc(),
            ctx: unauthenticated(),
            op: Op::Get("any/doc"),
            allowed: true,
        },
        Row {
            name: "field-changes: write a non-name field",
            rules: FIELD_CHANGES,
            store: fc(),
            ctx: unauthenticated(),
            op: Op::Update("docs/test", json!({"name": "test-doc", "age": 2})),
            allowed: true,
        },
        Row {
            name: "field-changes: name changes",
            rules: FIELD_CHANGES,
            store: fc(),
            ctx: unauthenticated(),
            op: Op::Update("docs/test", json!({"name": "sam", "age": 1})),
            allowed: false,
        },
        Row {
            name: "field-changes: field added",
            rules: FIELD_CHANGES,
            store: fc(),
            ctx: unauthenticated(),
            op: Op::Update(
                "docs/test",
                json!({"name": "test-doc", "age": 1, "other": "new-data"}),
            ),
            allowed: false,
        },
        Row {
            name: "rbac: owners can create stories",
            rules: rbac,
            store: rbac_store(),
            ctx: authenticated("user1234"),
            op: Op::Create(
                "stories/new",
                json!({"title": "New Story", "roles": {"user1234": "owner"}}),
            ),
            allowed: true,
        },
        Row {
            name: "rbac: readers cannot create stories",
            rules: rbac,
            store: rbac_store(),
            ctx: authenticated("user1234"),
            op: Op::Create(
                "stories/new",
                json!({"title": "New Story", "roles": {"user1234": "reader"}}),
            ),
            allowed: false,
        },
        Row {
            name: "rbac: owner reads",
            rules: rbac,
            store: rbac_store(),
            ctx: authenticated("owneruser"),
            op: Op::Get("stories/story1"),
            allowed: true,
        },
        Row {
            name: "rbac: reader reads",
            rules: rbac,
            store: rbac_store(),
            ctx: authenticated("readeruser"),
            op: Op::Get("stories/story1"),
            allowed: true,
        },
        Row {
            name: "rbac: stranger cannot read",
            rules: rbac,
            store: rbac_store(),
            ctx: authenticated("stranger"),
            op: Op::Get("stories/story1"),
            allowed: false,
        },
        Row {
            name: "rbac: any role reads comments",
            rules: rbac,
            store: rbac_store(),
            ctx: authenticated("readeruser"),
            op: Op::Get("stories/storywithcomments/comments/comment1"),
            allowed: true,
        },
        Row {
            name: "rbac: commenter creates comments",
            rules: rbac,
            store: rbac_store(),
            ctx: authenticated("commenteruser"),
            op: Op::Create(
                "stories/storywithcomments/comments/new",
                json!({"user": "commenteruser", "text": "A new comment!"}),
            ),
            allowed: true,
        },
        Row {
            name: "rbac: reader cannot create another's comment",
            rules: rbac,
            store: rbac_store(),
            ctx: authenticated("readeruser"),
            op: Op::Create(
                "stories/storywithcomments/comments/new",
                json!({"user": "commenteruser", "text": "A new comment!"}),
            ),
            allowed: false,
        },
        Row {
            name: "rbac: comments must have the right user id",
            rules: rbac,
            store: rbac_store(),
            ctx: authenticated("commenteruser"),
            op: Op::Create(
                "stories/storywithcomments/comments/comment2",
                json!({"user": "commenteruser-blah", "text": "A new comment!"}),
            ),
            allowed: false,
        },
        Row {
            name: "rbac: writer updates content only",
            rules: rbac,
            store: rbac_store(),
            ctx: authenticated("writeruser"),
            op: Op::Update(
                "stories/story1",
                with(&|d| d["content"] = json!("Something new!")),
            ),
            allowed: true,
        },
        Row {
            name: "rbac: writer cannot update title",
            rules: rbac,
            store: rbac_store(),
            ctx: authenticated("writeruser"),
            op: Op::Update(
                "stories/story1",
                with(&|d| d["title"] = json!("A new name")),
            ),
            allowed: false,
        },
        Row {
            name: "rbac: owner deletes",
            rules: rbac,
            store: rbac_store(),
            ctx: authenticated("owneruser"),
            op: Op::Delete("stories/story1"),
            allowed: true,
        },
        Row {
            name: "rbac: writer cannot delete",
            rules: rbac,
            store: rbac_store(),
            ctx: authenticated("writeruser"),
            op: Op::Delete("stories/story1"),
            allowed: false,
        },
        Row {
            name: "validation: create without ranking",
            rules: VALIDATION,
            store: Store::default(),
            ctx: unauthenticated(),
            op: Op::Create("cities/sf", json!({"name": "SF"})),
            allowed: true,
        },
        Row {
            name: "validation: create with ranking",
            rules: VALIDATION,
            store: Store::default(),
            ctx: unauthenticated(),
            op: Op::Create("cities/sf", json!({"name": "SF", "ranking": 1})),
            allowed: false,
        },
        Row {
            name: "validation: public city readable",
            rules: VALIDATION,
            store: Store::default().with("cities/sf", json!({"visibility": "public"})),
            ctx: unauthenticated(),
            op: Op::Get("cities/sf"),
            allowed: true,
        },
        Row {
            name: "validation: private city not readable",
            rules: VALIDATION,
            store: Store::default().with("cities/sf", json!({"visibility": "private"})),
            ctx: unauthenticated(),
            op: Op::Get("cities/sf"),
            allowed: false,
        },
        Row {
            name: "validation: missing city not readable",
            rules: VALIDATION,
            store: Store::default(),
            ctx: unauthenticated(),
            op: Op::Get("cities/sf"),
            allowed: false,
        },
        Row {
            name: "owner-only: owner reads own",
            rules: OWNER_ONLY,
            store: Store::default(),
            ctx: authenticated("u1"),
            op: Op::Get("some_collection/u1/notes/n1"),
            allowed: true,
        },
        Row {
            name: "owner-only: other user denied",
            rules: OWNER_ONLY,
            store: Store::default(),
            ctx: authenticated("u2"),
            op: Op::Get("some_collection/u1/notes/n1"),
            allowed: false,
        },
        Row {
            name: "owner-only: unauthenticated denied",
            rules: OWNER_ONLY,
            store: Store::default(),
            ctx: unauthenticated(),
            op: Op::Create("some_collection/u1/notes/n1", json!({})),
            allowed: false,
        },
        Row {
            name: "owner-only: v1 ** does not match the user document itself",
            rules: OWNER_ONLY,
            store: Store::default(),
            ctx: authenticated("u1"),
            op: Op::Get("some_collection/u1"),
            allowed: false,
        },
        Row {
            name: "roles: admin writes users",
            rules: ROLES,
            store: Store::default().with("users/boss", json!({"admin": true})),
            ctx: authenticated("boss"),
            op: Op::Update("users/x", json!({"a": 1})),
            allowed: true,
        },
        Row {
            name: "roles: non-admin cannot write users",
            rules: ROLES,
            store: Store::default().with("users/joe", json!({"admin": false})),
            ctx: authenticated("joe"),
            op: Op::Update("users/x", json!({"a": 1})),
            allowed: false,
        },
        Row {
            name: "roles: unknown user cannot write users",
            rules: ROLES,
            store: Store::default(),
            ctx: authenticated("ghost"),
            op: Op::Update("users/x", json!({"a": 1})),
            allowed: false,
        },
        Row {
            name: "roles: verified author posts at request.time",
            rules: ROLES,
            store: Store::default(),
            ctx: authenticated_with("ann", json!({"email_verified": true})),
            op: Op::Create(
                "posts/p",
                json!({"author": "ann", "title": "t", "published_at": {"$timestamp": "2023-11-14T22:13:21.000000Z"}}),
            ),
            allowed: true,
        },
        Row {
            name: "roles: unverified author cannot post",
            rules: ROLES,
            store: Store::default(),
            ctx: authenticated_with("ann", json!({"email_verified": false})),
            op: Op::Create(
                "posts/p",
                json!({"author": "ann", "title": "t", "published_at": {"$timestamp": "2023-11-14T22:13:21.000000Z"}}),
            ),
            allowed: false,
        },
        Row {
            name: "roles: missing claim denies",
            rules: ROLES,
            store: Store::default(),
            ctx: authenticated("ann"),
            op: Op::Create(
                "posts/p",
                json!({"author": "ann", "title": "t", "published_at": {"$timestamp": "2023-11-14T22:13:21.000000Z"}}),
            ),
            allowed: false,
        },
        Row {
            name: "roles: wrong time denies",
            rules: ROLES,
            store: Store::default(),
            ctx: authenticated_with("ann", json!({"email_verified": true})),
            op: Op::Create(
                "posts/p",
                json!({"author": "ann", "title": "t", "published_at": {"$timestamp": "2023-11-14T22:13:20.000000Z"}}),
            ),
            allowed: false,
        },
        Row {
            name: "chat: member reads room",
            rules: CHAT,
            store: chat_store(),
            ctx: authenticated("bob"),
            op: Op::Get("rooms/r1"),
            allowed: true,
        },
        Row {
            name: "chat: non-member cannot read room",
            rules: CHAT,
            store: chat_store(),
            ctx: authenticated("eve"),
            op: Op::Get("rooms/r1"),
            allowed: false,
        },
        Row {
            name: "chat: unauthenticated cannot read room",
            rules: CHAT,
            store: chat_store(),
            ctx: unauthenticated(),
            op: Op::Get("rooms/r1"),
            allowed: false,
        },
        Row {
            name: "chat: member reads messages",
            rules: CHAT,
            store: chat_store(),
            ctx: authenticated("alice"),
            op: Op::Get("rooms/r1/messages/m1"),
            allowed: true,
        },
        Row {
            name: "chat: member posts as self",
            rules: CHAT,
            store: chat_store(),
            ctx: authenticated("bob"),
            op: Op::Create(
                "rooms/r1/messages/m2",
                json!({"sender": "bob", "text": "yo"}),
            ),
            allowed: true,
        },
        Row {
            name: "chat: member cannot post as another",
            rules: CHAT,
            store: chat_store(),
            ctx: authenticated("bob"),
            op: Op::Create(
                "rooms/r1/messages/m2",
                json!({"sender": "alice", "text": "yo"}),
            ),
            allowed: false,
        },
        Row {
            name: "chat: empty message refused",
            rules: CHAT,
            store: chat_store(),
            ctx: authenticated("bob"),
            op: Op::Create("rooms/r1/messages/m2", json!({"sender": "bob", "text": ""})),
            allowed: false,
        },
        Row {
            name: "chat: extra field refused",
            rules: CHAT,
            store: chat_store(),
            ctx: authenticated("bob"),
            op: Op::Create(
                "rooms/r1/messages/m2",
                json!({"sender": "bob", "text": "x", "admin": true}),
            ),
            allowed: false,
        },
        Row {
            name: "chat: non-member cannot post",
            rules: CHAT,
            store: chat_store(),
            ctx: authenticated("eve"),
            op: Op::Create(
                "rooms/r1/messages/m2",
                json!({"sender": "eve", "text": "x"}),
            ),
            allowed: false,
        },
        Row {
            name: "chat: create room owning it",
            rules: CHAT,
            store: chat_store(),
            ctx: authenticated("eve"),
            op: Op::Create(
                "rooms/r2",
                json!({"owner": "eve", "members": ["eve"], "name": "x"}),
            ),
            allowed: true,
        },
        Row {
            name: "chat: create room for someone else",
            rules: CHAT,
            store: chat_store(),
            ctx: authenticated("eve"),
            op: Op::Create(
                "rooms/r2",
                json!({"owner": "bob", "members": ["eve"], "name": "x"}),
            ),
            allowed: false,
        },
        Row {
            name: "chat: owner renames",
            rules: CHAT,
            store: chat_store(),
            ctx: authenticated("alice"),
            op: Op::Update(
                "rooms/r1",
                json!({"owner": "alice", "members": ["alice", "bob"], "name": "new"}),
            ),
            allowed: true,
        },
        Row {
            name: "chat: owner cannot hand over ownership",
            rules: CHAT,
            store: chat_store(),
            ctx: authenticated("alice"),
            op: Op::Update(
                "rooms/r1",
                json!({"owner": "bob", "members": ["alice", "bob"], "name": "r1"}),
            ),
            allowed: false,
        },
        Row {
            name: "chat: member cannot rename",
            rules: CHAT,
            store: chat_store(),
            ctx: authenticated("bob"),
            op: Op::Update(
                "rooms/r1",
                json!({"owner": "alice", "members": ["alice", "bob"], "name": "new"}),
            ),
            allowed: false,
        },
        Row {
            name: "chat: sender deletes own message",
            rules: CHAT,
            store: chat_store(),
            ctx: authenticated("bob"),
            op: Op::Delete("rooms/r1/messages/m1"),
            allowed: true,
        },
        Row {
            name: "chat: others cannot delete it",
            rules: CHAT,
            store: chat_store(),
            ctx: authenticated("alice"),
            op: Op::Delete("rooms/r1/messages/m1"),
            allowed: false,
        },
    ]
}

#[test]
fn published_examples() {
    let rows = rows();
    let mut ours_wrong = Vec::new();
    let mut hidane_differs = Vec::new();
    for r in &rows {
        let rs = rules(r.rules);
        let ours = decide(&rs, &r.store, &r.ctx, &r.op) == docstore_rules::eval::Decision::Allow;
        if ours != r.allowed {
            ours_wrong.push(r.name);
        }
        let theirs = decide_hidane(r.rules, &r.store, &r.ctx, &r.op);
        if theirs != Some(r.allowed) {
            hidane_differs.push(format!("{} (hidane: {theirs:?})", r.name));
        }
    }
    eprintln!(
        "{} published cases; hidane-rules differs on {}: {hidane_differs:#?}",
        rows.len(),
        hidane_differs.len()
    );
    assert!(ours_wrong.is_empty(), "{ours_wrong:#?}");
    let named: Vec<&str> = hidane_differs
        .iter()
        .map(|s| s.split(" (hidane").next().unwrap_or(""))
        .collect();
    assert_eq!(named, HIDANE_DIFFERS);
}

#[test]
fn rbac_step5_as_published_is_refused() {
    let published = RBAC_STEP5.replace("FIXED_ARG", "");
    let e = docstore_rules::compile(&published).unwrap_err();
    assert_eq!(e.sqlstate(), "42601");
    assert!(e.message.contains("takes 2 argument(s), not 1"), "{e}");
    assert_eq!((e.line, e.column), (35, 24));
    eprintln!(
        "hidane on the published file: {:?}",
        common::hidane::compile(&published).err()
    );
}
