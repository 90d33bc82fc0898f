//! The session hub against a real cluster, without HTTP: a stream's first frame is a
//! `snapshot` equal to the query's rows, a multi-document transaction arrives as one `change`
//! event carrying every target's changes, positions only grow, and a resume after a
//! disconnect replays exactly the events after the token's position; with a partitioned
//! matcher, a transaction over several write partitions is still one event.
//!
//! Needs `DOCSTORE_TEST_DSN` (see tests/source_replication.rs); without it the test says so
//! and passes vacuously, unless `DOCSTORE_REQUIRE_CLUSTER=1` (a failure
//! then). It creates and finally drops a slot of its own.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use docstore_core::path::ResourcePath;
use docstore_sidecar::changelog::Limits;
use docstore_sidecar::http::sse;
use docstore_sidecar::matcher::{write_partition, MatcherConfig, TargetSpec};
use docstore_sidecar::pg::{Db, RunAs};
use docstore_sidecar::session::events::parse_token;
use docstore_sidecar::session::{
    Caller, Connection, Frame, ResetReason, Resumed, Session, Settings, StreamCaps, TargetRequest,
};
use serde_json::Value as Json;
use tokio_postgres::NoTls;

/// How long one event may take before the test reports a hang (not a performance bound).
const HANG: Duration = Duration::from_secs(60);

fn data(frame: &Frame) -> (String, Json) {
    let mut kind = String::new();
    let mut data = Json::Null;
    for line in sse::text(frame).lines() {
        if let Some(k) = line.strip_prefix("event: ") {
            kind = k.to_owned();
        } else if let Some(d) = line.strip_prefix("data: ") {
            data = serde_json::from_str(d).unwrap();
        }
    }
    (kind, data)
}

/// The entry of `target` in an event's `targets`.
fn entry<'a>(targets: &'a Json, target: &str) -> &'a Json {
    targets
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["target"] == target)
        .unwrap_or_else(|| panic!("no target {target} in {targets}"))
}

/// The next frame that is not a heartbeat.
async fn next(connection: &mut Connection) -> Frame {
    loop {
        let frame = tokio::time::timeout(HANG, connection.frames.recv())
            .await
            .expect("no event")
            .expect("the stream ended");
        if !sse::text(&frame).starts_with("event: heartbeat") {
            return frame;
        }
    }
}

async fn exec(dsn: &str, sql: &str) {
    let (client, connection) = tokio_postgres::connect(dsn, NoTls).await.unwrap();
    tokio::spawn(connection);
    client.batch_execute(sql).await.unwrap();
}

/// Run `body(dsn, collection, session)` against a session of its own slot (`matcher`: the
/// matcher's tuning), then drop the slot.
fn with_session(
    test: &str,
    matcher: MatcherConfig,
    body: impl AsyncFnOnce(String, String, Session),
) {
    with_tuned_session(test, matcher, |_| {}, body);
}

/// [`with_session`] with its settings changed by `tune` first.
fn with_tuned_session(
    test: &str,
    matcher: MatcherConfig,
    tune: impl FnOnce(&mut Settings),
    body: impl AsyncFnOnce(String, String, Session),
) {
    let Some(dsn) = docstore_core::test_env::cluster_dsn(test) else {
        return;
    };
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    let slot = format!("docstore_session_test_{}", nanos % 1_000_000_000);
    let coll = format!("s{}", nanos % 1_000_000_000);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        runtime.block_on(async {
            let db = Db::connect(&dsn, 4).unwrap();
            let mut settings = Settings {
                postgres: docstore_sidecar::pg::tls::Postgres::plain(dsn.parse().unwrap()),
                slot: slot.clone(),
                heartbeat: Duration::from_millis(200),
                grace: Duration::from_secs(60),
                queue: 64,
                replay: 64,
                replay_bytes: 256 << 20,
                limits: Limits::default(),
                matcher,
                caps: StreamCaps::default(),
            };
            tune(&mut settings);
            let session = Session::start(db, settings, Vec::new(), None);
            body(dsn.clone(), coll, session).await;
        })
    }));
    // The hub's tasks and connections end with the runtime; then the slot can go.
    drop(runtime);
    let cleanup = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    cleanup.block_on(support::drop_slot_when_idle(&dsn, &slot));
    if let Err(panic) = outcome {
        std::panic::resume_unwind(panic);
    }
}

/// Write `{coll}/a` (`{"n": 1}`) and open an admin stream of `targets`: its connection and
/// its first frame, a `snapshot`.
async fn opened_over_a(
    dsn: &str,
    coll: &str,
    session: &Session,
    targets: Vec<TargetRequest>,
) -> (Connection, Frame) {
    exec(
        dsn,
        &format!("select docstore.set('{coll}/a', '{{\"n\": 1}}')"),
    )
    .await;
    let mut connection = session
        .open("(default)", admin(), targets, None)
        .await
        .unwrap();
    let first = next(&mut connection).await;
    assert_eq!(data(&first).0, "snapshot");
    (connection, first)
}

fn admin() -> Caller {
    Caller {
        key: "admin".into(),
        quota: None,
        run_as: RunAs::Admin,
    }
}

#[test]
fn streams_snapshot_change_and_resume() {
    with_session(
        "streams_snapshot_change_and_resume",
        MatcherConfig::default(),
        async |dsn, coll, session| {
            let targets = vec![
                TargetRequest {
                    id: "q".into(),
                    spec: TargetSpec::parse_text(&format!("select * from /{coll} order by n"))
                        .unwrap(),
                },
                TargetRequest {
                    id: "d".into(),
                    spec: TargetSpec::document(&format!("{coll}/b")).unwrap(),
                },
            ];
            let (mut connection, first) = opened_over_a(&dsn, &coll, &session, targets).await;
            let (_, snapshot) = data(&first);
            assert_eq!(
                entry(&snapshot["targets"], "q")["documents"][0]["path"],
                format!("{coll}/a")
            );
            assert_eq!(
                entry(&snapshot["targets"], "d")["documents"],
                Json::Array(vec![])
            );

            exec(
                &dsn,
                &format!(
                    "select docstore.commit('[{{\"set\": \"{coll}/b\", \"data\": {{\"n\": 0}}}}, \
                 {{\"update\": \"{coll}/a\", \"fields\": {{\"n\": 5}}}}]')"
                ),
            )
            .await;
            let change = next(&mut connection).await;
            assert!(change.position > first.position);
            let (kind, body) = data(&change);
            assert_eq!(kind, "change");
            let targets: Vec<&str> = body["targets"]
                .as_array()
                .unwrap()
                .iter()
                .map(|t| t["target"].as_str().unwrap())
                .collect();
            assert_eq!(targets, ["d", "q"], "one event, both targets: {body}");
            // b enters the query before a (n 0 < 5): added at 0; a, then at 1, stays at 1.
            let q = &entry(&body["targets"], "q")["changes"];
            assert_eq!(q[0]["type"], "added");
            assert_eq!(q[0]["newIndex"], 0);
            assert_eq!(q[1]["type"], "modified");
            assert_eq!(
                (q[1]["oldIndex"].as_u64(), q[1]["newIndex"].as_u64()),
                (Some(1), Some(1))
            );

            // Disconnect, write twice, resume from the change: exactly those two events.
            let token = sse::text(&change)
                .lines()
                .find_map(|l| l.strip_prefix("id: "))
                .unwrap()
                .to_owned();
            drop(connection);
            exec(&dsn, &format!("select docstore.delete('{coll}/b')")).await;
            exec(
                &dsn,
                &format!("select docstore.set('{coll}/c', '{{\"n\": 9}}')"),
            )
            .await;
            let (stream, position) = parse_token(&token).unwrap();
            // The writes may still be on their way: resume until both are replayed.
            let mut replayed: Vec<Frame> = Vec::new();
            let deadline = tokio::time::Instant::now() + HANG;
            while replayed.len() < 2 {
                assert!(tokio::time::Instant::now() < deadline, "no replay");
                let Resumed::Connection(mut resumed) = session
                    .resume("(default)", &stream, position, &admin())
                    .await
                    .unwrap()
                else {
                    panic!("the stream is gone");
                };
                replayed = resumed.first.drain(..).collect();
                while replayed.len() < 2 {
                    match tokio::time::timeout(Duration::from_secs(5), resumed.frames.recv()).await
                    {
                        Ok(Some(f)) if !sse::text(&f).starts_with("event: heartbeat") => {
                            replayed.push(f)
                        }
                        Ok(Some(_)) => {}
                        _ => break,
                    }
                }
            }
            assert!(replayed.iter().all(|f| f.position > position));
            assert!(replayed[0].position < replayed[1].position);
            let kinds: Vec<String> = replayed.iter().map(|f| data(f).0).collect();
            assert_eq!(kinds, ["change", "change"]);
            assert_eq!(
                entry(&data(&replayed[1]).1["targets"], "q")["changes"][0]["document"]["path"],
                format!("{coll}/c")
            );
            // Someone else's resume is refused as unknown.
            assert!(matches!(
                session
                    .resume(
                        "(default)",
                        &stream,
                        position,
                        &Caller {
                            key: "user:\"eve\"".into(),
                            ..admin()
                        }
                    )
                    .await
                    .unwrap(),
                Resumed::Unknown(_)
            ));
        },
    );
}

/// A stream a matcher ends for good (`Session::end`, as for an event larger than a gateway
/// takes): its connection's last frame is `reset {lagged}` at the stream's position, and a
/// resume at the last position the client read gets a reset with that reason and a new
/// stream, never the same events again (a stream left detached was resumed into the same
/// too-large event). Ending a stream that is not running changes nothing.
#[test]
fn a_stream_ended_for_good_closes_with_a_lagged_reset_and_is_not_resumed() {
    with_session(
        "a_stream_ended_for_good_closes_with_a_lagged_reset_and_is_not_resumed",
        MatcherConfig::default(),
        async |dsn, coll, session| {
            let caller = admin();
            let targets = vec![TargetRequest {
                id: "q".into(),
                spec: TargetSpec::parse_text(&format!("select * from /{coll}")).unwrap(),
            }];
            let (mut connection, first) = opened_over_a(&dsn, &coll, &session, targets).await;
            let stream = connection.stream.clone();
            session
                .end(&stream, ResetReason::Lagged, "too large")
                .await
                .unwrap();
            let last = tokio::time::timeout(HANG, &mut connection.closed)
                .await
                .expect("no closing reset")
                .expect("the stream closed without its reset");
            let (kind, body) = data(&last);
            assert_eq!(kind, "reset");
            assert_eq!(body["reason"], "lagged", "{body}");
            assert!(last.position >= first.position);
            let resumed = session
                .resume("(default)", &stream, first.position, &caller)
                .await
                .unwrap();
            assert!(
                matches!(resumed, Resumed::Unknown(ResetReason::Lagged)),
                "{resumed:?}"
            );
            session
                .end("no-such-stream", ResetReason::Lagged, "too large")
                .await
                .unwrap();
        },
    );
}

/// A connection whose client lets its queue fill: the stream ends with `reset {lagged}` as
/// the connection's last frame, after the events that fit; a resume resets too.
#[test]
fn a_full_queue_ends_the_stream_lagged() {
    with_tuned_session(
        "a_full_queue_ends_the_stream_lagged",
        MatcherConfig::default(),
        |settings| settings.queue = 4,
        async |dsn, coll, session| {
            let targets = vec![TargetRequest {
                id: "q".into(),
                spec: TargetSpec::parse_text(&format!("select * from /{coll}")).unwrap(),
            }];
            let (mut connection, first) = opened_over_a(&dsn, &coll, &session, targets).await;
            let stream = connection.stream.clone();
            for i in 0..10 {
                exec(
                    &dsn,
                    &format!("select docstore.set('{coll}/x{i}', '{{\"n\": {i}}}')"),
                )
                .await;
            }
            let mut queued = 0;
            loop {
                match tokio::time::timeout(HANG, connection.frames.recv()).await {
                    Ok(Some(_)) => queued += 1,
                    Ok(None) => break,
                    Err(_) => panic!("the lagged connection never ended"),
                }
            }
            assert!(queued <= 4, "{queued} frames queued past the queue of 4");
            let reset = tokio::time::timeout(HANG, &mut connection.closed)
                .await
                .expect("the closer hangs")
                .expect("no closing reset");
            assert_eq!(data(&reset).1["reason"], "lagged");
            let resumed = session
                .resume("(default)", &stream, first.position, &admin())
                .await
                .unwrap();
            assert!(
                matches!(resumed, Resumed::Unknown(ResetReason::Lagged)),
                "{resumed:?}"
            );
        },
    );
}

/// With 2 write x 2 query partitions, a transaction whose documents fall in both write
/// partitions, followed by targets of both query partitions, still reaches the stream as one
/// `change` event carrying every target's changes; the next event is the next transaction's.
#[test]
fn partitioned_transaction_reaches_a_stream_as_one_event() {
    let matcher = MatcherConfig {
        write_partitions: 2,
        query_partitions: 2,
        ..MatcherConfig::default()
    };
    with_session(
        "partitioned_transaction_reaches_a_stream_as_one_event",
        matcher,
        async |dsn, coll, session| {
            let cell = |n: &str| write_partition(&ResourcePath::parse_document(n).unwrap(), 2);
            let mut names: Vec<String> = (0..8).map(|i| format!("{coll}/d{i}")).collect();
            // The collection's name is random: its first eight documents share a write
            // partition once in 128 runs (seen in `make test`); the last is then replaced by
            // the first later one of the other partition.
            if names.iter().all(|n| cell(n) == cell(&names[0])) {
                names[7] = (8..)
                    .map(|i| format!("{coll}/d{i}"))
                    .find(|n| cell(n) != cell(&names[0]))
                    .expect("a document of the other partition");
            }
            let cells: std::collections::HashSet<usize> = names.iter().map(|n| cell(n)).collect();
            assert_eq!(
                cells.len(),
                2,
                "the documents must span both write partitions"
            );
            let specs = [
                ("all", format!("select * from /{coll} order by n")),
                (
                    "top",
                    format!("select * from /{coll} order by n desc limit 3"),
                ),
                ("even", format!("select * from /{coll} where even = true")),
                ("count", format!("select count(*) from /{coll}")),
            ];
            let mut targets: Vec<TargetRequest> = specs
                .iter()
                .map(|(id, q)| TargetRequest {
                    id: (*id).into(),
                    spec: TargetSpec::parse_text(q).unwrap(),
                })
                .collect();
            targets.push(TargetRequest {
                id: "doc".into(),
                spec: TargetSpec::document(&names[7]).unwrap(),
            });
            let mut connection = session
                .open("(default)", admin(), targets, None)
                .await
                .unwrap();
            let (kind, _) = data(&next(&mut connection).await);
            assert_eq!(kind, "snapshot");

            let writes: Vec<String> = names
                .iter()
                .enumerate()
                .map(|(i, n)| {
                    format!(
                        "{{\"set\": \"{n}\", \"data\": {{\"n\": {i}, \"even\": {}}}}}",
                        i % 2 == 0
                    )
                })
                .collect();
            exec(
                &dsn,
                &format!("select docstore.commit('[{}]')", writes.join(", ")),
            )
            .await;
            let change = next(&mut connection).await;
            let (kind, body) = data(&change);
            assert_eq!(kind, "change", "{body}");
            let mut ids: Vec<&str> = body["targets"]
                .as_array()
                .unwrap()
                .iter()
                .map(|t| t["target"].as_str().unwrap())
                .collect();
            ids.sort_unstable();
            assert_eq!(ids, ["all", "count", "doc", "even", "top"], "{body}");
            let added = |target: &str| -> Vec<String> {
                entry(&body["targets"], target)["changes"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|c| c["document"]["path"].as_str().unwrap().to_owned())
                    .collect()
            };
            assert_eq!(added("all"), names, "every write, in order: {body}");
            assert_eq!(added("top"), [&*names[7], &*names[6], &*names[5]]);
            let even: Vec<&String> = names.iter().step_by(2).collect();
            assert_eq!(added("even").iter().collect::<Vec<_>>(), even);
            assert_eq!(added("doc"), [&*names[7]]);

            // Nothing of that transaction comes later: the next event is the next write's.
            exec(
                &dsn,
                &format!("select docstore.set('{coll}/z', '{{\"n\": 100}}')"),
            )
            .await;
            let later = next(&mut connection).await;
            assert!(later.position > change.position);
            let (kind, body) = data(&later);
            assert_eq!(kind, "change");
            assert_eq!(
                entry(&body["targets"], "all")["changes"][0]["document"]["path"],
                format!("{coll}/z"),
                "{body}"
            );
        },
    );
}
