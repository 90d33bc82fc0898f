// @google-cloud/firestore (Node), unchanged, against pg_docstore's Firestore gRPC front end at
// FIRESTORE_EMULATOR_HOST (the SDK then connects without TLS and sends `Bearer owner`, as it does
// to Google's emulator): CRUD, a query, an onSnapshot listener (the SDK's Listen, target id 1)
// and concurrent runTransaction increments.
// Run by scripts/node_sdk_tests.sh (`node --test`); each test is bounded by --test-timeout.
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, test } from 'node:test';

import { FieldValue, Firestore } from '@google-cloud/firestore';

const host = process.env.FIRESTORE_EMULATOR_HOST;
const projectId = process.env.GCLOUD_PROJECT || 'demo-docstore';
// One collection per run: a run never sees another run's documents.
const root = `node-sdk-${randomUUID()}`;
// How long the first request may take before the server counts as unreachable: the SDK retries
// an unreachable server for a minute, the first answer (even UNIMPLEMENTED) ends the wait.
const PREFLIGHT_MS = 10_000;

// gRPC status codes the SDK puts on its errors.
const NOT_FOUND = 5;
const ALREADY_EXISTS = 6;

let db;

before(async () => {
  assert.ok(host, 'FIRESTORE_EMULATOR_HOST must name the server (host:port)');
  db = new Firestore({ projectId });
  let timer;
  const unreachable = new Promise((_, reject) => {
    timer = setTimeout(
      () => reject(new Error(`no Firestore gRPC server answered at ${host} within ${PREFLIGHT_MS} ms`)),
      PREFLIGHT_MS,
    );
  });
  const answered = db
    .collection(root)
    .doc('preflight')
    .get()
    .catch(() => undefined);
  try {
    await Promise.race([answered, unreachable]);
  } finally {
    clearTimeout(timer);
  }
});

after(async () => {
  await db?.terminate();
});

test('create, read, update, merge and delete a document', async () => {
  const ref = db.collection(root).doc('ada');
  await ref.create({ name: 'Ada', born: 1815, tags: ['math'] });
  await assert.rejects(ref.create({ name: 'again' }), (error) => error.code === ALREADY_EXISTS);

  let snapshot = await ref.get();
  assert.equal(snapshot.exists, true);
  assert.deepEqual(snapshot.data(), { name: 'Ada', born: 1815, tags: ['math'] });

  await ref.update({ born: FieldValue.increment(1), tags: FieldValue.arrayUnion('logic') });
  await ref.set({ country: 'UK' }, { merge: true });
  snapshot = await ref.get();
  assert.deepEqual(snapshot.data(), { name: 'Ada', born: 1816, tags: ['math', 'logic'], country: 'UK' });

  await ref.delete();
  snapshot = await ref.get();
  assert.equal(snapshot.exists, false);
  await assert.rejects(ref.update({ born: 1 }), (error) => error.code === NOT_FOUND);
});

test('a query with a filter, an order and a limit', async () => {
  const cities = db.collection(`${root}/query/cities`);
  const batch = db.batch();
  const populations = { a: 500, b: 2_000, c: 8_000, d: 4_000, e: 1_000 };
  for (const [id, population] of Object.entries(populations)) {
    batch.set(cities.doc(id), { population, big: population > 1_000 });
  }
  await batch.commit();

  const result = await cities.where('population', '>', 1_000).orderBy('population', 'desc').limit(2).get();
  assert.deepEqual(
    result.docs.map((doc) => [doc.id, doc.get('population')]),
    [
      ['c', 8_000],
      ['d', 4_000],
    ],
  );
  const count = await cities.where('big', '==', true).count().get();
  assert.equal(count.data().count, 3);
});

// Snapshots of a listener, in order: next() resolves with the next one (or rejects on the
// listener's error).
function listen(query) {
  const queue = [];
  const waiting = [];
  let failure;
  const deliver = (item) => {
    const waiter = waiting.shift();
    if (waiter) waiter(item);
    else queue.push(item);
  };
  const unsubscribe = query.onSnapshot(
    (snapshot) => deliver({ snapshot }),
    (error) => {
      failure = error;
      deliver({ error });
    },
  );
  const next = async () => {
    const item = queue.length > 0 ? queue.shift() : await new Promise((resolve) => waiting.push(resolve));
    if (item.error) throw item.error;
    return item.snapshot;
  };
  return { next, unsubscribe, failed: () => failure };
}

const ids = (snapshot) => snapshot.docs.map((doc) => doc.id);
const changes = (snapshot) => snapshot.docChanges().map((change) => [change.type, change.doc.id]);

test('onSnapshot: the initial result, then each change', async () => {
  const rooms = db.collection(`${root}/listen/rooms`);
  await rooms.doc('a').set({ open: true });
  const listener = listen(rooms.where('open', '==', true));
  try {
    let snapshot = await listener.next();
    assert.deepEqual(ids(snapshot), ['a']);
    assert.deepEqual(changes(snapshot), [['added', 'a']]);

    await rooms.doc('b').set({ open: true });
    snapshot = await listener.next();
    assert.deepEqual(ids(snapshot), ['a', 'b']);
    assert.deepEqual(changes(snapshot), [['added', 'b']]);

    await rooms.doc('b').update({ seats: 4 });
    snapshot = await listener.next();
    assert.deepEqual(changes(snapshot), [['modified', 'b']]);
    assert.equal(snapshot.docs[1].get('seats'), 4);

    await rooms.doc('a').update({ open: false });
    snapshot = await listener.next();
    assert.deepEqual(ids(snapshot), ['b']);
    assert.deepEqual(changes(snapshot), [['removed', 'a']]);
    assert.equal(listener.failed(), undefined);
  } finally {
    listener.unsubscribe();
  }
});

// runTransaction: the SDK's first read sends new_transaction, its commit names the transaction;
// concurrent read-modify-write increments conflict (ABORTED, which the SDK retries), so the
// counter ends exact.
test('runTransaction: concurrent read-modify-write increments end exact', async () => {
  const counter = db.collection(`${root}/transactions/counters`).doc('c');
  await counter.set({ n: 0 });
  const WORKERS = 4;
  const EACH = 3;
  const worker = async () => {
    for (let i = 0; i < EACH; i += 1) {
      await db.runTransaction(
        async (tx) => {
          const snapshot = await tx.get(counter);
          tx.update(counter, { n: snapshot.get('n') + 1 });
        },
        { maxAttempts: 50 },
      );
    }
  };
  await Promise.all(Array.from({ length: WORKERS }, worker));
  const snapshot = await counter.get();
  assert.equal(snapshot.get('n'), WORKERS * EACH);
});
