"""A login role that is not a superuser, for a sidecar of its own (test_client_read.py,
test_client_create.py): a member of docstore_client that may set the request's settings, with
its function calls tracked, and a database of the tests' with a ruleset."""

import time
from contextlib import contextmanager


@contextmanager
def login_role(stack, role: str, database: str, rules: str):
    """Create `role` and `database` (ruled by `rules`); yields the role's database URL."""
    stack.sql(f"create role {role} login")
    stack.sql(f"grant docstore_client to {role}")
    stack.sql(f"grant set on parameter docstore.auth, docstore.request to {role}")
    stack.sql(f"alter role {role} set track_functions = 'all'")
    stack.sql("insert into docstore.databases (id) values (%s) on conflict do nothing", database)
    stack.sql("select docstore.set_rules(%s, %s)", rules, database)
    try:
        yield stack.cluster.url().replace("postgres@", f"{role}@", 1)
    finally:
        stack.sql("select docstore.drop_rules(%s)", database)
        stack.sql("select docstore.drop_database(%s)", database)
        stack.sql(f"revoke set on parameter docstore.auth, docstore.request from {role}")
        stack.sql(f"drop owned by {role}")
        stack.sql(f"drop role {role}")


def calls(stack, function: str) -> int:
    """How many calls of `docstore.<function>` finished without an error (track_functions)."""
    return stack.sql(
        "select coalesce(sum(calls), 0)::int from pg_stat_user_functions "
        "where schemaname = 'docstore' and funcname = %s",
        function,
    )[0][0]


def assert_calls(stack, function: str, expected: int, label) -> None:
    """Wait for the count to reach `expected` (a backend reports its calls when it exits, so
    after its sidecar stopped), then assert it."""
    deadline = time.monotonic() + 10
    while calls(stack, function) != expected and time.monotonic() < deadline:
        time.sleep(0.2)
    assert calls(stack, function) == expected, label
