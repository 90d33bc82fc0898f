//! Stage 4b: security rules on live queries (docs/listen.md, "Security rules", and
//! docs/rules.md).
//!
//! A target's first read already runs as the caller through the extension (the `list` check
//! of its query, or the `get` rule of its document). This stage decides what the hub sends
//! *afterwards*, with the rules crate's evaluator (`docstore_rules::eval::evaluate` and
//! `list::decide_query`, the code the extension runs):
//!
//! - every document a `change` event carries for a query target is decided by the `list`
//!   rule (`resource` = the document as committed, `request.query` = the target's), for a
//!   single-document target by the `get` rule;
//! - a `snapshot` event's targets are decided as at subscribe (the query's `list` check, the
//!   document's `get`);
//! - when a document a decision looked up with `get()`/`exists()` is written, or when the
//!   database's ruleset changes, every target of the stream is decided again.
//!
//! A denial ends the stream with `reset {reason: permission}` and nothing of the denied
//! event is sent. The admin key is never checked; a database without rules is locked (every
//! check of a non-admin stream denies, as the extension denies its clients there).
//!
//! Lookups: each stream keeps the documents its decisions read ([`Watch::deps`]), kept current
//! by the change stream ([`Guard::observe`]). A decision that needs a document not held yet
//! cannot be made in the hub (a Postgres read): the stream's events wait in its queue, the hub
//! reads the documents in a task ([`load::lookup`], one `REPEATABLE READ` snapshot) and hands
//! them back ([`Guard::looked_up`]); the queue is then decided in order. An event leaves the
//! queue whole (a transaction is never split) and only after every earlier one.

pub mod load;

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Arc;

use docstore_core::query::Query;
use docstore_core::value::Map;
use docstore_core::{ResourcePath, Timestamp};
use docstore_rules::eval::{self, Budget, Decision, Documents, Request};
use docstore_rules::{Method, Ruleset};
use serde_json::Value as Json;

use super::events::Frame;
use crate::matcher::Write;

/// A database's ruleset as the sidecar last read it from `docstore.rules`.
#[derive(Debug, Clone)]
pub enum Rules {
    /// Compiled by the rules crate.
    Compiled(Arc<Ruleset>),
    /// The stored source does not compile here: every decision denies (never fail open).
    Broken(String),
}

/// One row of `docstore.rules`: its `updated_at` (text, compared for changes) and rules.
#[derive(Debug, Clone)]
pub struct Loaded {
    pub stamp: String,
    pub rules: Rules,
}

/// One decision an event needs before it may be sent.
#[derive(Debug, Clone)]
pub enum Check {
    /// A document a query target sends: the `list` rule with `resource` = the document.
    Listed {
        query: eval::Query,
        path: ResourcePath,
        data: Arc<Map>,
    },
    /// A single-document target's document (`None`: it does not exist): the `get` rule.
    Got {
        path: ResourcePath,
        data: Option<Arc<Map>>,
    },
    /// A query target as a whole: the `list` check of its query (as at subscribe).
    Query(Arc<Query>),
}

/// What one check decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Allow,
    Deny(String),
    /// Documents the rules look up that the stream does not hold yet (the decision waits).
    Missing(Vec<ResourcePath>),
}

/// The documents a stream's decisions looked up, as of the hub's position (or later).
type Deps = HashMap<ResourcePath, Option<Map>>;

/// Lookups from a stream's held documents; a document not held is recorded as missing.
struct Held<'a> {
    deps: &'a Deps,
    missing: std::cell::RefCell<Vec<ResourcePath>>,
}

impl Documents for Held<'_> {
    fn get(&self, path: &ResourcePath) -> Option<Map> {
        match self.deps.get(path) {
            Some(doc) => doc.clone(),
            None => {
                self.missing.borrow_mut().push(path.clone());
                None
            }
        }
    }

    // A read has no batch: after = before.
    fn get_after(&self, path: &ResourcePath) -> Option<Map> {
        self.get(path)
    }
}

/// The collection a query reads (what the extension's list check names as `request.path`).
fn query_path(query: &Query) -> Option<ResourcePath> {
    query.source.path_under_parent().ok()
}

/// Decide one check against `rules` for `auth` (the stream's claims, converted once), with
/// the lookups `deps` holds. A decision that looked up a document `deps` does not hold is
/// [`Outcome::Missing`], whatever it decided without it.
pub fn decide(
    rules: &Rules,
    database: &str,
    auth: &eval::Auth,
    check: &Check,
    deps: &Deps,
    time: Timestamp,
) -> Outcome {
    let ruleset = match rules {
        Rules::Compiled(r) => r,
        Rules::Broken(message) => return Outcome::Deny(message.clone()),
    };
    let held = Held {
        deps,
        missing: std::cell::RefCell::new(Vec::new()),
    };
    let mut budget = Budget::single();
    let request = |method, path: &ResourcePath, query| Request {
        method,
        database: database.to_owned(),
        path: path.clone(),
        auth: auth.clone(),
        resource: None,
        time,
        query,
    };
    let decision = match check {
        Check::Listed { query, path, data } => {
            let stored = eval::Document {
                path: path.clone(),
                data: Map::clone(data),
            };
            let request = request(Method::List, path, Some(query.clone()));
            eval::evaluate(ruleset, &request, Some(&stored), &held, &mut budget)
        }
        Check::Got { path, data } => {
            let stored = data.as_ref().map(|d| eval::Document {
                path: path.clone(),
                data: Map::clone(d),
            });
            let request = request(Method::Get, path, None);
            eval::evaluate(ruleset, &request, stored.as_ref(), &held, &mut budget)
        }
        Check::Query(query) => {
            let Some(path) = query_path(query) else {
                return Outcome::Deny("the query names no collection".into());
            };
            let request = request(Method::List, &path, None);
            docstore_rules::list::decide_query(ruleset, &request, query, &held, &mut budget)
        }
    };
    let mut missing = held.missing.into_inner();
    if !missing.is_empty() {
        missing.sort();
        missing.dedup();
        return Outcome::Missing(missing);
    }
    match decision {
        Decision::Allow => Outcome::Allow,
        Decision::Deny(reason) => Outcome::Deny(reason),
    }
}

/// Why a check of a non-admin stream in `database`, which has no ruleset (or is not listed),
/// is denied: the extension's denial of its clients there (docs/rules.md).
fn locked(database: &str) -> String {
    format!(
        "database {database} has no security rules: clients are denied until an administrator sets them (docstore.set_rules)"
    )
}

/// An event waiting for its decisions (`frame: None`: a re-check of the stream's targets).
#[derive(Debug)]
pub struct Item {
    pub frame: Option<(Frame, bool)>,
    pub checks: Vec<Check>,
}

/// What the hub must do for a stream.
#[derive(Debug)]
pub enum Action {
    /// Send (and log when `.1`) the frame.
    Deliver(Frame, bool),
    /// End the stream with `reset {permission}`.
    Deny(String),
    /// Read these documents (at one snapshot) and hand them to [`Guard::looked_up`].
    Fetch {
        serial: u64,
        database: String,
        paths: Vec<ResourcePath>,
    },
}

/// The rules state of one non-admin stream.
#[derive(Debug)]
pub struct Watch {
    database: String,
    /// Its claims as `request.auth`, converted once per stream.
    auth: eval::Auth,
    /// The documents its decisions looked up, kept current by [`Guard::observe`].
    deps: Deps,
    queue: VecDeque<Item>,
    /// The outstanding read: its serial and paths, and what the change stream wrote to
    /// those paths meanwhile (newer than or as new as what the read returns).
    fetching: Option<(u64, HashSet<ResourcePath>)>,
    written: Deps,
    /// Its events wait for a read of `docstore.rules` numbered at least this (one that
    /// started after the stream was registered, so after its subscribe-time read).
    since: u64,
}

/// Rulesets by database and the state of every non-admin stream.
#[derive(Debug, Default)]
pub struct Guard {
    rules: HashMap<String, Loaded>,
    /// Whether `docstore.rules` was read once: until then non-admin events wait.
    loaded: bool,
    streams: HashMap<String, Watch>,
    next_fetch: u64,
    /// Reads of `docstore.rules` asked for (one per new stream) and the last one done: a
    /// ruleset set before a stream's subscribe is in force for its first event.
    wanted: u64,
    read: u64,
    /// Asks the poller for a read now (`None` in tests).
    reload: Option<tokio::sync::watch::Sender<u64>>,
    /// Database -> document -> the streams that hold it or are reading it: the streams a
    /// write concerns, so that a write costs no visit of every stream.
    watchers: HashMap<String, HashMap<ResourcePath, HashSet<String>>>,
}

/// Drop `id`'s entries from `watchers` (its stream ends).
fn unwatch(
    watchers: &mut HashMap<String, HashMap<ResourcePath, HashSet<String>>>,
    id: &str,
    watch: &Watch,
) {
    let Some(by_path) = watchers.get_mut(&watch.database) else {
        return;
    };
    let fetching = watch.fetching.iter().flat_map(|(_, paths)| paths.iter());
    for path in watch.deps.keys().chain(fetching) {
        if let Some(ids) = by_path.get_mut(path) {
            ids.remove(id);
            if ids.is_empty() {
                by_path.remove(path);
            }
        }
    }
    if by_path.is_empty() {
        watchers.remove(&watch.database);
    }
}

/// `request.time` of a read decided now.
fn now() -> Option<Timestamp> {
    let micros = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_micros()).unwrap_or(i64::MAX));
    Timestamp::from_micros(micros)
}

/// The claims of a client's `docstore.auth` text (`null` or unparsable: unauthenticated).
pub fn claims(auth: &str) -> Option<Json> {
    match serde_json::from_str::<Json>(auth) {
        Ok(Json::Null) | Err(_) => None,
        Ok(claims) => Some(claims),
    }
}

impl Guard {
    /// A guard whose new streams ask `reload` for a read of the rules.
    pub fn new(reload: tokio::sync::watch::Sender<u64>) -> Guard {
        Guard {
            reload: Some(reload),
            ..Guard::default()
        }
    }

    /// Queue `item` for a non-admin stream (created on first use with its claims) and decide
    /// what can be decided now.
    pub fn submit(&mut self, stream: &str, database: &str, auth: &str, item: Item) -> Vec<Action> {
        if !self.streams.contains_key(stream) {
            self.wanted += 1;
            if let Some(reload) = &self.reload {
                reload.send_replace(self.wanted);
            }
        }
        let since = self.wanted;
        let watch = self
            .streams
            .entry(stream.to_owned())
            .or_insert_with(|| Watch {
                database: database.to_owned(),
                auth: eval::Auth::new(claims(auth)),
                deps: Deps::new(),
                queue: VecDeque::new(),
                fetching: None,
                written: Deps::new(),
                since,
            });
        watch.queue.push_back(item);
        self.drain(stream)
    }

    /// Decide a stream's queue in order, as far as its held documents allow.
    pub fn drain(&mut self, stream: &str) -> Vec<Action> {
        let mut actions = Vec::new();
        if !self.loaded {
            return actions;
        }
        let Some(watch) = self.streams.get_mut(stream) else {
            return actions;
        };
        if self.read < watch.since {
            return actions;
        }
        let rules = self.rules.get(&watch.database).map(|l| &l.rules);
        let Some(time) = now() else {
            watch.queue.clear();
            actions.push(Action::Deny("the clock is outside years 1-9999".into()));
            return actions;
        };
        while let Some(item) = watch.queue.front() {
            let mut missing = Vec::new();
            for check in &item.checks {
                let outcome = match rules {
                    Some(rules) => decide(
                        rules,
                        &watch.database,
                        &watch.auth,
                        check,
                        &watch.deps,
                        time,
                    ),
                    None => Outcome::Deny(locked(&watch.database)),
                };
                match outcome {
                    Outcome::Allow => {}
                    Outcome::Deny(reason) => {
                        watch.queue.clear();
                        actions.push(Action::Deny(reason));
                        return actions;
                    }
                    Outcome::Missing(paths) => missing.extend(paths),
                }
            }
            if !missing.is_empty() {
                if watch.fetching.is_none() {
                    missing.sort();
                    missing.dedup();
                    self.next_fetch += 1;
                    watch.fetching = Some((self.next_fetch, missing.iter().cloned().collect()));
                    let by_path = self.watchers.entry(watch.database.clone()).or_default();
                    for path in &missing {
                        by_path
                            .entry(path.clone())
                            .or_default()
                            .insert(stream.to_owned());
                    }
                    actions.push(Action::Fetch {
                        serial: self.next_fetch,
                        database: watch.database.clone(),
                        paths: missing,
                    });
                }
                return actions;
            }
            if let Some(Item {
                frame: Some((frame, logged)),
                ..
            }) = watch.queue.pop_front()
            {
                actions.push(Action::Deliver(frame, logged));
            }
        }
        actions
    }

    /// The documents a stream's read returned (`serial` of its [`Action::Fetch`]); the queue
    /// is then decided again. A write the change stream brought meanwhile wins over the read.
    pub fn looked_up(
        &mut self,
        stream: &str,
        serial: u64,
        documents: Vec<(ResourcePath, Option<Map>)>,
    ) -> Vec<Action> {
        let Some(watch) = self.streams.get_mut(stream) else {
            return Vec::new();
        };
        if watch.fetching.as_ref().is_none_or(|(s, _)| *s != serial) {
            return Vec::new();
        }
        watch.fetching = None;
        let written = std::mem::take(&mut watch.written);
        for (path, doc) in documents {
            let doc = written.get(&path).cloned().unwrap_or(doc);
            watch.deps.insert(path, doc);
        }
        self.drain(stream)
    }

    /// A read of a stream's lookups failed: forget it (the hub ends the stream).
    pub fn lookup_failed(&mut self, stream: &str, serial: u64) -> bool {
        match self.streams.get_mut(stream) {
            Some(watch) if watch.fetching.as_ref().is_some_and(|(s, _)| *s == serial) => {
                self.forget(stream);
                true
            }
            _ => false,
        }
    }

    /// Bring the held documents up to a committed transaction's `writes` in `database`;
    /// returns the streams one of whose looked-up documents changed (to be re-checked). Only
    /// the streams that hold or read a written document are visited ([`Guard::watchers`]).
    pub fn observe(&mut self, database: &str, writes: &[Write]) -> Vec<String> {
        let mut changed = HashSet::new();
        for write in writes {
            let (path, doc) = match write {
                Write::Set(d) => (&d.path, Some(&d.fields)),
                Write::Delete(path) => (path, None),
                Write::Truncate => {
                    self.truncated(database, &mut changed);
                    continue;
                }
            };
            let Some(ids) = self.watchers.get(database).and_then(|m| m.get(path)) else {
                continue;
            };
            for id in ids {
                let Some(watch) = self.streams.get_mut(id) else {
                    continue;
                };
                let doc = doc.map(|f| Map::clone(f));
                if let Some(held) = watch.deps.get_mut(path) {
                    held.clone_from(&doc);
                    changed.insert(id.clone());
                }
                if watch
                    .fetching
                    .as_ref()
                    .is_some_and(|(_, paths)| paths.contains(path))
                {
                    watch.written.insert(path.clone(), doc);
                }
            }
        }
        let mut changed: Vec<String> = changed.into_iter().collect();
        changed.sort();
        changed
    }

    /// `TRUNCATE docstore.entities`: every held document of `database` is gone.
    fn truncated(&mut self, database: &str, changed: &mut HashSet<String>) {
        for (id, watch) in &mut self.streams {
            if watch.database != database {
                continue;
            }
            if !watch.deps.is_empty() {
                changed.insert(id.clone());
            }
            for v in watch.deps.values_mut() {
                *v = None;
            }
            if let Some((_, paths)) = &watch.fetching {
                for p in paths {
                    watch.written.insert(p.clone(), None);
                }
            }
        }
    }

    /// Replace the rulesets with what `docstore.rules` holds now (read `read`, the number
    /// of the request it answers); returns the databases whose rules changed (their
    /// non-admin streams are to be re-checked).
    pub fn set_rules(&mut self, now: HashMap<String, Loaded>, read: u64) -> Vec<String> {
        self.read = self.read.max(read);
        let mut changed: Vec<String> = now
            .iter()
            .filter(|(db, l)| self.rules.get(*db).is_none_or(|old| old.stamp != l.stamp))
            .map(|(db, _)| db.clone())
            .collect();
        changed.extend(
            self.rules
                .keys()
                .filter(|db| !now.contains_key(*db))
                .cloned(),
        );
        self.rules = now;
        self.loaded = true;
        changed
    }

    /// The non-admin streams of `database`.
    pub fn streams_of(&self, database: &str) -> Vec<String> {
        self.streams
            .iter()
            .filter(|(_, w)| w.database == database)
            .map(|(id, _)| id.clone())
            .collect()
    }

    /// Every stream with events waiting (after the first load of the rules).
    pub fn waiting(&self) -> Vec<String> {
        self.streams
            .iter()
            .filter(|(_, w)| !w.queue.is_empty())
            .map(|(id, _)| id.clone())
            .collect()
    }

    /// Drop a stream's waiting events (its state is discarded: a reset and a snapshot follow).
    pub fn discard(&mut self, stream: &str) {
        if let Some(watch) = self.streams.get_mut(stream) {
            watch.queue.clear();
        }
    }

    /// Whether a stream has events waiting (a later event must queue behind them).
    pub fn is_waiting(&self, stream: &str) -> bool {
        self.streams
            .get(stream)
            .is_some_and(|w| !w.queue.is_empty())
    }

    /// Forget a stream (it ended).
    pub fn forget(&mut self, stream: &str) {
        if let Some(watch) = self.streams.remove(stream) {
            unwatch(&mut self.watchers, stream, &watch);
        }
    }

    /// Forget the streams `keep` rejects (closed or expired).
    pub fn retain(&mut self, keep: impl Fn(&str) -> bool) {
        let watchers = &mut self.watchers;
        self.streams.retain(|id, watch| {
            let kept = keep(id);
            if !kept {
                unwatch(watchers, id, watch);
            }
            kept
        });
    }
}

#[cfg(test)]
mod tests;
