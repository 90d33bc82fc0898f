//! The guard's decisions with a chat ruleset (rooms with members; a room's messages readable
//! by its members through one get() of the room), no Postgres: lookups are handed in as a
//! read would return them.

use std::collections::HashMap;
use std::sync::Arc;

use docstore_core::query::parse_query;
use docstore_core::value::{Map, Value};
use docstore_core::{ResourcePath, Timestamp};
use docstore_rules::eval::Auth;
use serde_json::json;

use super::{decide, Action, Check, Guard, Item, Loaded, Outcome, Rules};
use crate::matcher::{Document, Write};
use crate::session::events;
use crate::source::Lsn;

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

const DB: &str = "(default)";

fn chat() -> Rules {
    Rules::Compiled(Arc::new(docstore_rules::compile(CHAT).unwrap()))
}

fn loaded(stamp: &str, rules: Rules) -> HashMap<String, Loaded> {
    HashMap::from([(
        DB.to_owned(),
        Loaded {
            stamp: stamp.to_owned(),
            rules,
        },
    )])
}

fn path(p: &str) -> ResourcePath {
    ResourcePath::parse(p).unwrap()
}

fn room(members: &[&str]) -> Map {
    let members = members.iter().map(|m| Value::String((*m).into())).collect();
    Map::from([("members".to_owned(), Value::Array(members))])
}

fn message(text: &str, secret: bool) -> Map {
    Map::from([
        ("text".to_owned(), Value::String(text.into())),
        ("secret".to_owned(), Value::Boolean(secret)),
    ])
}

fn listed(p: &str, data: Map) -> Check {
    let query = parse_query("select * from /rooms/r1/messages").unwrap();
    Check::Listed {
        query: docstore_rules::list::request_query(&query),
        path: path(p),
        data: Arc::new(data),
    }
}

fn messages_query() -> Check {
    Check::Query(Arc::new(
        parse_query("select * from /rooms/r1/messages").unwrap(),
    ))
}

fn alice() -> String {
    json!({"sub": "alice"}).to_string()
}

fn time() -> Timestamp {
    Timestamp::from_micros(1_700_000_000_000_000).unwrap()
}

fn frame(n: u64) -> Item {
    Item {
        frame: Some((events::heartbeat("s", Lsn(n), events::At::default()), true)),
        checks: Vec::new(),
    }
}

fn delivered(actions: &[Action]) -> Vec<u64> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::Deliver(f, _) => Some(f.position.0),
            _ => None,
        })
        .collect()
}

fn fetch(actions: &[Action]) -> Option<(u64, Vec<ResourcePath>)> {
    actions.iter().find_map(|a| match a {
        Action::Fetch { serial, paths, .. } => Some((*serial, paths.clone())),
        _ => None,
    })
}

fn denied(actions: &[Action]) -> bool {
    actions.iter().any(|a| matches!(a, Action::Deny(_)))
}

#[test]
fn a_message_needs_its_room_then_follows_membership() {
    let auth = Auth::new(Some(json!({"sub": "alice"})));
    let check = listed("rooms/r1/messages/m1", message("hi", false));
    let none = HashMap::new();
    assert_eq!(
        decide(&chat(), DB, &auth, &check, &none, time()),
        Outcome::Missing(vec![path("rooms/r1")])
    );
    let member = HashMap::from([(path("rooms/r1"), Some(room(&["alice"])))]);
    assert_eq!(
        decide(&chat(), DB, &auth, &check, &member, time()),
        Outcome::Allow
    );
    let other = HashMap::from([(path("rooms/r1"), Some(room(&["bob"])))]);
    assert!(matches!(
        decide(&chat(), DB, &auth, &check, &other, time()),
        Outcome::Deny(_)
    ));
    let gone = HashMap::from([(path("rooms/r1"), None)]);
    assert!(matches!(
        decide(&chat(), DB, &auth, &check, &gone, time()),
        Outcome::Deny(_)
    ));
    // Unauthenticated: denied without a lookup (`&&` stops first).
    assert!(matches!(
        decide(&chat(), DB, &Auth::default(), &check, &none, time()),
        Outcome::Deny(_)
    ));
}

#[test]
fn the_document_itself_is_decided() {
    let auth = Auth::new(Some(json!({"sub": "alice"})));
    let member = HashMap::from([(path("rooms/r1"), Some(room(&["alice"])))]);
    let secret = listed("rooms/r1/messages/m2", message("psst", true));
    assert!(matches!(
        decide(&chat(), DB, &auth, &secret, &member, time()),
        Outcome::Deny(_)
    ));
    let got = Check::Got {
        path: path("rooms/r1"),
        data: Some(Arc::new(room(&["alice"]))),
    };
    assert_eq!(
        decide(&chat(), DB, &auth, &got, &member, time()),
        Outcome::Allow
    );
    let got_other = Check::Got {
        path: path("rooms/r1"),
        data: Some(Arc::new(room(&["bob"]))),
    };
    assert!(matches!(
        decide(&chat(), DB, &auth, &got_other, &member, time()),
        Outcome::Deny(_)
    ));
}

#[test]
fn a_query_is_decided_as_at_subscribe() {
    let auth = Auth::new(Some(json!({"sub": "alice"})));
    let member = HashMap::from([(path("rooms/r1"), Some(room(&["alice"])))]);
    // `resource.data.secret != true` is not fixed by the query: rules are not filters.
    assert!(matches!(
        decide(&chat(), DB, &auth, &messages_query(), &member, time()),
        Outcome::Deny(_)
    ));
    let fixed = Check::Query(Arc::new(
        parse_query("select * from /rooms/r1/messages where secret = false").unwrap(),
    ));
    assert_eq!(
        decide(&chat(), DB, &auth, &fixed, &member, time()),
        Outcome::Allow
    );
    assert_eq!(
        decide(&chat(), DB, &auth, &fixed, &HashMap::new(), time()),
        Outcome::Missing(vec![path("rooms/r1")])
    );
}

#[test]
fn broken_rules_deny() {
    let check = listed("rooms/r1/messages/m1", message("hi", false));
    let auth = Auth::new(Some(json!({"sub": "alice"})));
    assert!(matches!(
        decide(
            &Rules::Broken("no".into()),
            DB,
            &auth,
            &check,
            &HashMap::new(),
            time()
        ),
        Outcome::Deny(_)
    ));
}

#[test]
fn events_wait_for_the_first_read_of_the_rules() {
    let mut guard = Guard::default();
    assert!(guard.submit("s", DB, &alice(), frame(1)).is_empty());
    // A read that was asked for before the stream was registered is not enough: the ruleset
    // in force at its subscribe may be newer.
    guard.set_rules(HashMap::new(), 0);
    assert!(delivered(&guard.drain("s")).is_empty());
    // Read since: events that need no decision go, in order.
    guard.set_rules(HashMap::new(), 1);
    assert_eq!(delivered(&guard.drain("s")), vec![1]);
    assert_eq!(
        delivered(&guard.submit("s", DB, &alice(), frame(2))),
        vec![2]
    );
}

#[test]
fn a_database_without_rules_denies_every_check() {
    let mut guard = Guard::default();
    guard.set_rules(HashMap::new(), u64::MAX);
    let item = Item {
        frame: Some((events::heartbeat("s", Lsn(1), events::At::default()), true)),
        checks: vec![listed("rooms/r1/messages/m1", message("hi", false))],
    };
    let actions = guard.submit("s", DB, &alice(), item);
    assert!(denied(&actions));
    assert!(delivered(&actions).is_empty());
    // Rules set, then dropped: the stream's re-check is denied.
    guard.set_rules(loaded("t1", chat()), u64::MAX);
    let recheck = || Item {
        frame: None,
        checks: vec![messages_query_fixed()],
    };
    assert!(!denied(&guard.submit("s2", DB, &alice(), recheck())));
    assert_eq!(
        guard.set_rules(HashMap::new(), u64::MAX),
        vec![DB.to_owned()]
    );
    assert!(denied(&guard.submit("s2", DB, &alice(), recheck())));
}

#[test]
fn lookups_are_read_then_events_go_in_order() {
    let mut guard = Guard::default();
    assert_eq!(
        guard.set_rules(loaded("t1", chat()), u64::MAX),
        vec![DB.to_owned()]
    );
    let item = Item {
        frame: Some((events::heartbeat("s", Lsn(1), events::At::default()), true)),
        checks: vec![listed("rooms/r1/messages/m1", message("hi", false))],
    };
    let actions = guard.submit("s", DB, &alice(), item);
    assert!(delivered(&actions).is_empty());
    let (serial, paths) = fetch(&actions).unwrap();
    assert_eq!(paths, vec![path("rooms/r1")]);
    // A later event with nothing to decide waits behind it (order, no fetch twice).
    let actions = guard.submit("s", DB, &alice(), frame(2));
    assert!(actions.is_empty());
    assert!(guard.is_waiting("s"));
    // A stale read is ignored.
    assert!(guard.looked_up("s", serial + 7, Vec::new()).is_empty());
    let actions = guard.looked_up(
        "s",
        serial,
        vec![(path("rooms/r1"), Some(room(&["alice"])))],
    );
    assert_eq!(delivered(&actions), vec![1, 2]);
    assert!(!guard.is_waiting("s"));
    // Held now: the next message is decided at once.
    let item = Item {
        frame: Some((events::heartbeat("s", Lsn(3), events::At::default()), true)),
        checks: vec![listed("rooms/r1/messages/m3", message("yo", false))],
    };
    assert_eq!(delivered(&guard.submit("s", DB, &alice(), item)), vec![3]);
}

#[test]
fn a_denied_event_is_never_sent_nor_anything_after_it() {
    let mut guard = Guard::default();
    guard.set_rules(loaded("t1", chat()), u64::MAX);
    let member = vec![(path("rooms/r1"), Some(room(&["alice"])))];
    let item = Item {
        frame: Some((events::heartbeat("s", Lsn(1), events::At::default()), true)),
        checks: vec![listed("rooms/r1/messages/m1", message("hi", false))],
    };
    let (serial, _) = fetch(&guard.submit("s", DB, &alice(), item)).unwrap();
    assert_eq!(delivered(&guard.looked_up("s", serial, member)), vec![1]);
    let item = Item {
        frame: Some((events::heartbeat("s", Lsn(2), events::At::default()), true)),
        checks: vec![
            listed("rooms/r1/messages/m2", message("ok", false)),
            listed("rooms/r1/messages/m3", message("psst", true)),
        ],
    };
    let actions = guard.submit("s", DB, &alice(), item);
    assert!(denied(&actions));
    assert!(delivered(&actions).is_empty());
}

#[test]
fn a_write_to_a_looked_up_document_is_seen_and_rechecks() {
    let mut guard = Guard::default();
    guard.set_rules(loaded("t1", chat()), u64::MAX);
    let item = Item {
        frame: Some((events::heartbeat("s", Lsn(1), events::At::default()), true)),
        checks: vec![messages_query_fixed()],
    };
    let (serial, _) = fetch(&guard.submit("s", DB, &alice(), item)).unwrap();
    let actions = guard.looked_up(
        "s",
        serial,
        vec![(path("rooms/r1"), Some(room(&["alice"])))],
    );
    assert_eq!(delivered(&actions), vec![1]);
    // Another database's write, or a document no decision read: nothing to re-check.
    let other = Write::Set(Document::new(path("rooms/r2"), room(&[]), time(), time()));
    assert!(guard.observe(DB, std::slice::from_ref(&other)).is_empty());
    let removed = Write::Set(Document::new(
        path("rooms/r1"),
        room(&["bob"]),
        time(),
        time(),
    ));
    assert!(guard
        .observe("other", std::slice::from_ref(&removed))
        .is_empty());
    assert_eq!(guard.observe(DB, &[removed]), vec!["s".to_owned()]);
    let recheck = Item {
        frame: None,
        checks: vec![messages_query_fixed()],
    };
    let actions = guard.submit("s", DB, &alice(), recheck);
    assert!(denied(&actions));
    assert!(fetch(&actions).is_none());
}

#[test]
fn a_write_during_the_read_wins_over_the_read() {
    let mut guard = Guard::default();
    guard.set_rules(loaded("t1", chat()), u64::MAX);
    let item = Item {
        frame: Some((events::heartbeat("s", Lsn(1), events::At::default()), true)),
        checks: vec![messages_query_fixed()],
    };
    let (serial, _) = fetch(&guard.submit("s", DB, &alice(), item)).unwrap();
    // The change stream brings the room's removal of alice before the read answers with
    // the older version (the read's snapshot was taken before that commit was visible).
    let removed = Write::Set(Document::new(
        path("rooms/r1"),
        room(&["bob"]),
        time(),
        time(),
    ));
    guard.observe(DB, &[removed]);
    let actions = guard.looked_up(
        "s",
        serial,
        vec![(path("rooms/r1"), Some(room(&["alice"])))],
    );
    assert!(denied(&actions));
    assert!(delivered(&actions).is_empty());
}

#[test]
fn a_changed_ruleset_is_reported_and_decides_later_events() {
    let mut guard = Guard::default();
    guard.set_rules(loaded("t1", chat()), u64::MAX);
    assert!(guard.set_rules(loaded("t1", chat()), u64::MAX).is_empty());
    guard.submit("s", DB, &alice(), frame(1));
    assert_eq!(guard.streams_of(DB), vec!["s".to_owned()]);
    let deny_all = r"rules_version = '2';
service cloud.firestore { match /databases/{database}/documents { match /{d=**} { allow read: if false; } } }";
    let deny = Rules::Compiled(Arc::new(docstore_rules::compile(deny_all).unwrap()));
    assert_eq!(
        guard.set_rules(loaded("t2", deny), u64::MAX),
        vec![DB.to_owned()]
    );
    let recheck = Item {
        frame: None,
        checks: vec![messages_query_fixed()],
    };
    assert!(denied(&guard.submit("s", DB, &alice(), recheck)));
    // Rules dropped: reported too.
    assert_eq!(
        guard.set_rules(HashMap::new(), u64::MAX),
        vec![DB.to_owned()]
    );
}

#[test]
fn a_reset_discards_waiting_events() {
    let mut guard = Guard::default();
    guard.submit("s", DB, &alice(), frame(1));
    assert!(guard.is_waiting("s"));
    guard.discard("s");
    guard.set_rules(HashMap::new(), u64::MAX);
    assert!(delivered(&guard.drain("s")).is_empty());
    guard.forget("s");
    assert!(guard.streams_of(DB).is_empty());
}

#[test]
fn an_ended_stream_is_no_longer_watched() {
    let mut guard = Guard::default();
    guard.set_rules(loaded("t1", chat()), u64::MAX);
    for s in ["s1", "s2"] {
        let item = Item {
            frame: Some((events::heartbeat(s, Lsn(1), events::At::default()), true)),
            checks: vec![messages_query_fixed()],
        };
        let (serial, _) = fetch(&guard.submit(s, DB, &alice(), item)).unwrap();
        let room = vec![(path("rooms/r1"), Some(room(&["alice"])))];
        assert_eq!(delivered(&guard.looked_up(s, serial, room)), vec![1]);
    }
    let write = Write::Delete(path("rooms/r1"));
    assert_eq!(
        guard.observe(DB, std::slice::from_ref(&write)),
        vec!["s1".to_owned(), "s2".to_owned()]
    );
    guard.forget("s1");
    assert_eq!(
        guard.observe(DB, std::slice::from_ref(&write)),
        vec!["s2".to_owned()]
    );
    guard.retain(|id| id != "s2");
    assert!(guard.observe(DB, &[write]).is_empty());
    assert!(guard.watchers.is_empty());
    // A truncate reaches every stream holding documents of the database.
    let item = Item {
        frame: Some((events::heartbeat("s3", Lsn(2), events::At::default()), true)),
        checks: vec![messages_query_fixed()],
    };
    let (serial, _) = fetch(&guard.submit("s3", DB, &alice(), item)).unwrap();
    guard.looked_up(
        "s3",
        serial,
        vec![(path("rooms/r1"), Some(room(&["alice"])))],
    );
    assert_eq!(guard.observe(DB, &[Write::Truncate]), vec!["s3".to_owned()]);
}

fn messages_query_fixed() -> Check {
    Check::Query(Arc::new(
        parse_query("select * from /rooms/r1/messages where secret = false").unwrap(),
    ))
}
