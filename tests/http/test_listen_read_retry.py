"""A read of a stream's targets that fails for a moment (docs/listen.md, "Snapshots and
hand-off"): the database refuses new connections (as while Postgres restarts), so the read
of a new stream's targets cannot get one; the sidecar tries the read again until it can,
and the stream's first event is its snapshot (it answered 503 before; a running stream's
re-read, an adoption's say, ended the stream with a reset)."""

from __future__ import annotations

import threading
import time
import uuid
from types import SimpleNamespace

from conftest import own_sidecar, sidecar_login
from test_listen import Listener, View, follow, fresh, has_doc


def test_a_read_refused_for_a_moment_is_tried_again_not_reset(stack, coll):
    role = "reread_" + uuid.uuid4().hex[:8]
    url = sidecar_login(stack.cluster, role=role)
    sql = f"select * from /{coll} order by n"
    stack.sql("select docstore.set(%s, '{\"n\": 1}')", f"{coll}/a")
    try:
        with own_sidecar(stack, slot=role, database_url=url) as base:
            sidecar = SimpleNamespace(url=base, admin=stack.admin)
            # No new connection for the sidecar's login; its open ones (but the slot's) end,
            # so the next read needs a new one.
            stack.sql(f"alter role {role} connection limit 0")
            stack.sql(
                "select pg_terminate_backend(pid) from pg_stat_activity "
                "where usename = %s and backend_type = 'client backend'",
                role,
            )
            # Connections come back a little later, as after a restart.
            reopen = threading.Timer(
                2.0, lambda: stack.sql(f"alter role {role} connection limit -1")
            )
            reopen.start()
            started = time.monotonic()
            listener = Listener(sidecar, params=[("sql", sql)])
            try:
                assert listener.status == 200, listener.error_body
                first = listener.next()
                assert first["event"] == "snapshot", first
                # The read waited for the connections to come back (a sanity check of the
                # test's set-up, not a timing bound: it cannot have read before).
                assert time.monotonic() - started >= 1.0
                view = View()
                view.apply(first)
                assert has_doc("0", f"{coll}/a")(first, view)
                stack.sql("select docstore.set(%s, '{\"n\": 2}')", f"{coll}/b")
                follow(listener, view, has_doc("0", f"{coll}/b"))
                with stack.client() as client:
                    assert view.docs("0") == fresh(stack, client, sql)
                assert [ev for ev in listener.received if ev["event"] == "reset"] == []
            finally:
                listener.close()
                reopen.cancel()
    finally:
        stack.sql(f"alter role {role} connection limit -1")
        stack.sql("select pg_terminate_backend(pid) from pg_stat_activity where usename = %s", role)
        stack.sql(f"drop owned by {role}")
        stack.sql(f"drop role if exists {role}")
