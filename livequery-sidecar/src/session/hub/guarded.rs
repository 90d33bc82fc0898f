//! The hub's side of the rules stage (`session::guard`): the events of non-admin streams go
//! through the guard, which decides them with the rules evaluator before they are sent; the
//! hub builds each event's checks, carries out the guard's actions (send, end the stream with
//! `reset {permission}`, read looked-up documents in a task) and re-checks streams whose
//! looked-up documents or ruleset changed.

use std::collections::HashMap;
use std::sync::Arc;

use docstore_core::value::Map;
use docstore_core::ResourcePath;

use super::{Hub, Internal, DENIED};
use crate::matcher::{DocChange, Document, TargetDelta, TargetResult, TargetSpec, Write};
use crate::pg::RunAs;
use crate::session::events::{Frame, ResetReason};
use crate::session::guard::{load, Action, Check, Item, Loaded};

/// A read of looked-up documents, reported back to the hub.
#[derive(Debug)]
pub struct LookedUp {
    stream: String,
    serial: u64,
    result: Result<Vec<(ResourcePath, Option<Map>)>, String>,
}

impl Hub {
    /// Send `frame` to stream `id`: at once for the admin; otherwise once the rules allow
    /// the documents `changes` carry (their committed versions from `writes`, the
    /// transaction's writes in the stream's database) and the targets `whole` as a whole,
    /// after every earlier event of the stream.
    pub(super) fn send_checked(
        &mut self,
        id: &str,
        frame: Frame,
        logged: bool,
        changes: &[(String, TargetDelta)],
        whole: &[String],
        writes: Option<&Vec<Write>>,
    ) {
        let Some(stream) = self.streams.get(id) else {
            return;
        };
        let RunAs::Client { auth, .. } = &stream.caller.run_as else {
            self.deliver(id, frame, logged);
            return;
        };
        let mut checks = Vec::new();
        let committed: HashMap<&ResourcePath, &Document> = writes
            .into_iter()
            .flatten()
            .filter_map(|w| match w {
                Write::Set(d) => Some((&d.path, d)),
                _ => None,
            })
            .collect();
        for (name, delta) in changes {
            let Some(t) = stream.targets.get(name) else {
                continue;
            };
            match (delta, &t.spec) {
                (TargetDelta::Changes(list), TargetSpec::Query(query)) => {
                    let request_query = docstore_rules::list::request_query(query);
                    for change in list {
                        if let DocChange::Added { doc, .. } | DocChange::Modified { doc, .. } =
                            change
                        {
                            // A projection target reports selected fields: rules see
                            // the whole committed document.
                            let full = committed.get(&doc.path).copied().unwrap_or(doc);
                            checks.push(Check::Listed {
                                query: request_query.clone(),
                                path: full.path.clone(),
                                data: Arc::clone(&full.fields),
                            });
                        }
                    }
                }
                (TargetDelta::Changes(list), TargetSpec::Document(path)) => {
                    for change in list {
                        let data = match change {
                            DocChange::Added { doc, .. } | DocChange::Modified { doc, .. } => {
                                Some(Arc::clone(&doc.fields))
                            }
                            DocChange::Removed { .. } => None,
                        };
                        checks.push(Check::Got {
                            path: path.clone(),
                            data,
                        });
                    }
                }
                // An aggregation row carries no document: its query is decided again.
                (TargetDelta::Aggregate(_), TargetSpec::Query(query)) => {
                    checks.push(Check::Query(Arc::clone(query)));
                }
                _ => {}
            }
        }
        checks.extend(self.target_checks(id, whole));
        let (database, auth) = (stream.database.clone(), auth.clone());
        let item = Item {
            frame: Some((frame, logged)),
            checks,
        };
        let actions = self.guard.submit(id, &database, &auth, item);
        self.act(id, actions);
    }

    /// The checks of targets `names` of stream `id` as a whole: a query's `list` check, a
    /// document's `get` with its current version.
    fn target_checks(&self, id: &str, names: &[String]) -> Vec<Check> {
        let Some(stream) = self.streams.get(id) else {
            return Vec::new();
        };
        let matcher = self.matchers.get(&stream.database);
        names
            .iter()
            .filter_map(|name| {
                let t = stream.targets.get(name)?;
                Some(match &t.spec {
                    TargetSpec::Query(query) => Check::Query(Arc::clone(query)),
                    TargetSpec::Document(path) => {
                        let data = match matcher.and_then(|m| m.result(t.id)) {
                            Some(TargetResult::Documents(docs)) => {
                                docs.first().map(|d| Arc::clone(&d.fields))
                            }
                            _ => None,
                        };
                        Check::Got {
                            path: path.clone(),
                            data,
                        }
                    }
                })
            })
            .collect()
    }

    /// Decide every target of a non-admin stream again (before any later event of it).
    pub(super) fn recheck(&mut self, id: &str) {
        let Some(stream) = self.streams.get(id) else {
            self.guard.forget(id);
            return;
        };
        let RunAs::Client { auth, .. } = &stream.caller.run_as else {
            return;
        };
        let (database, auth) = (stream.database.clone(), auth.clone());
        let names: Vec<String> = stream.targets.keys().cloned().collect();
        let checks = self.target_checks(id, &names);
        let actions = self.guard.submit(
            id,
            &database,
            &auth,
            Item {
                frame: None,
                checks,
            },
        );
        self.act(id, actions);
    }

    /// A committed transaction's writes, before its events: streams whose looked-up
    /// documents it changed are re-checked first.
    pub(super) fn observe_lookups(&mut self, by_db: &HashMap<String, Vec<Write>>, truncated: bool) {
        let mut changed = Vec::new();
        for (database, writes) in by_db {
            changed.extend(self.guard.observe(database, writes));
        }
        if truncated {
            let databases: Vec<String> = self.matchers.keys().cloned().collect();
            for database in databases {
                changed.extend(self.guard.observe(&database, &[Write::Truncate]));
            }
        }
        changed.sort();
        changed.dedup();
        for id in changed {
            self.recheck(&id);
        }
    }

    /// The rulesets `docstore.rules` holds now: streams of the databases whose rules changed
    /// are re-checked; events that waited for the first read go on.
    pub(super) fn on_rules(&mut self, rules: HashMap<String, Loaded>, read: u64) {
        for database in self.guard.set_rules(rules, read) {
            tracing::info!(%database, "security rules changed: re-checking its live queries");
            for id in self.guard.streams_of(&database) {
                self.recheck(&id);
            }
        }
        for id in self.guard.waiting() {
            let actions = self.guard.drain(&id);
            self.act(&id, actions);
        }
    }

    pub(super) fn on_looked_up(&mut self, looked: LookedUp) {
        match looked.result {
            Ok(documents) => {
                let actions = self
                    .guard
                    .looked_up(&looked.stream, looked.serial, documents);
                self.act(&looked.stream, actions);
            }
            Err(message) => {
                if self.guard.lookup_failed(&looked.stream, looked.serial) {
                    tracing::warn!(stream = %looked.stream, error = %message, "reading the documents rules look up failed: the stream ends");
                    self.close(
                        &looked.stream,
                        ResetReason::RetentionPassed,
                        "the documents the security rules look up could not be read; reconnect",
                    );
                }
            }
        }
    }

    fn act(&mut self, id: &str, actions: Vec<Action>) {
        for action in actions {
            match action {
                Action::Deliver(frame, logged) => self.deliver(id, frame, logged),
                Action::Deny(reason) => {
                    // The reason (which rules failed, and how) depends on the documents the
                    // rules read, a deleted one included: the log keeps it, the client reads
                    // the same text whatever happened (docs/rules.md, "What a denial tells").
                    tracing::info!(stream = %id, %reason, "the security rules denied a stream");
                    self.guard.forget(id);
                    self.close(id, ResetReason::Permission, DENIED);
                }
                Action::Fetch {
                    serial,
                    database,
                    paths,
                } => {
                    let db = self.db.clone();
                    let internal = self.internal.clone();
                    let stream = id.to_owned();
                    tokio::spawn(async move {
                        let result = load::lookup(&db, &database, &paths)
                            .await
                            .map_err(|e| e.to_string());
                        let looked = LookedUp {
                            stream,
                            serial,
                            result,
                        };
                        let _ = internal.send(Internal::LookedUp(looked)).await;
                    });
                }
            }
        }
    }
}
