"""Time to first byte and total time of a 100,000-document query (docs/storage.md, "Query
results"), over HTTP (`:runQuery`, the sidecar of `make up`) and over the Postgres protocol in
the two call forms: in FROM (Postgres collects the whole result before the first row: the form
the sidecar used before) and in the select list (rows leave as they are read). The runs
alternate; medians of each. Usage (after `make up`, `source .docstore/dev.env`):
    .venv/bin/python scripts/bench_query_stream.py [runs]"""

import os
import statistics
import sys
import time

import httpx
import psycopg

N = 100_000
RUNS = int(sys.argv[1]) if len(sys.argv) > 1 else 5
DSN = os.environ.get(
    "DOCSTORE_DSN",
    f"host=127.0.0.1 port={os.environ.get('DOCSTORE_PG_PORT', '5433')} user=postgres dbname=docstore",
)
URL = os.environ["DOCSTORE_URL"]
KEY = os.environ["DOCSTORE_ADMIN_KEY"]
QUERY = "select * from /benchstream"
FORMS = {
    "sql-from": "select path, data, update_time from docstore.query(%s)",
    "sql-select-list": "select (r).path, (r).data, (r).update_time "
    "from (select docstore.query(%s) as r offset 0) q",
}


def seed(conn):
    have = conn.execute(
        "select count(*) from docstore.entities where collection_id = 'benchstream'"
    ).fetchone()[0]
    if have < N:
        conn.execute(
            "select count(docstore.set('benchstream/d' || lpad(i::text, 6, '0'), "
            "jsonb_build_object('i', i, 'pad', repeat('x', 400)))) from generate_series(1, %s) i",
            (N,),
        )


def sql_run(conn, sql):
    start = time.perf_counter()
    first = None
    rows = 0
    with conn.cursor(name="bench") as cur:  # server-side cursor: rows as the server sends them
        cur.itersize = 1000
        cur.execute(sql, (QUERY,))
        for _ in cur:
            rows += 1
            if first is None:
                first = time.perf_counter() - start
    conn.commit()
    assert rows == N, rows
    return first, time.perf_counter() - start


def http_run(client):
    start = time.perf_counter()
    first = None
    size = 0
    with client.stream(
        "POST",
        "/v1/databases/(default):runQuery",
        headers={"Authorization": f"Bearer {KEY}"},
        json={"sql": QUERY},
    ) as r:
        assert r.status_code == 200
        for chunk in r.iter_raw():
            if first is None:
                first = time.perf_counter() - start
            size += len(chunk)
    return first, time.perf_counter() - start, size


def main():
    with psycopg.connect(DSN, autocommit=True) as conn:
        seed(conn)
    results = {k: [] for k in [*FORMS, "http"]}
    size = 0
    with psycopg.connect(DSN) as conn, httpx.Client(base_url=URL, timeout=300) as client:
        for _ in range(RUNS):
            for name, sql in FORMS.items():
                results[name].append(sql_run(conn, sql))
            first, total, size = http_run(client)
            results["http"].append((first, total))
    print(f"{N} documents, {size / 1e6:.1f} MB over HTTP, {RUNS} alternating runs, medians:")
    for name, runs in results.items():
        first = statistics.median(r[0] for r in runs)
        total = statistics.median(r[1] for r in runs)
        print(f"  {name:16} first row {first * 1000:8.1f} ms   total {total * 1000:8.1f} ms")


main()
