"""Development mode's databases (docs/grpc.md, "Names"): with --dev-mode a database a gRPC request
names that does not exist is created on first use, with automatic composite indexes on, as the
Firebase emulator serves any database; concurrent first requests all succeed and create it once.
Without --dev-mode such a request is NOT_FOUND and creates nothing. The least-privilege login of
sql/sidecar_role.sql creates them when the script ran with `-v dev_mode=on` (as under make up:
EXECUTE on docstore.create_database_for_dev); without it (the default) the sidecar answers
FAILED_PRECONDITION and creates nothing."""

import uuid
from concurrent.futures import ThreadPoolExecutor

import grpc
import pytest
from conftest import free_port, grpc_sidecar, own_sidecar, sidecar_login
from google.api_core import exceptions
from google.cloud import firestore
from google.cloud.firestore_v1.base_query import FieldFilter
from google.cloud.firestore_v1.types import firestore as firestore_types


def sdk_client(monkeypatch, address: str, database: str) -> firestore.Client:
    monkeypatch.setenv("FIRESTORE_EMULATOR_HOST", address)
    return firestore.Client(project="demo", database=database)


def new_database_id() -> str:
    return "dev-" + uuid.uuid4().hex[:12]


def catalog_row(stack, database: str) -> list[tuple]:
    return stack.sql(
        "select auto_composite_indexes from docstore.databases where id = %s", database
    )


def test_a_named_database_is_created_on_first_use(monkeypatch, stack, firestore_emulator_host):
    database = new_database_id()
    assert catalog_row(stack, database) == []
    db = sdk_client(monkeypatch, firestore_emulator_host, database)
    db.collection("c").document("a").set({"k": 1, "n": 2})
    db.collection("c").document("b").set({"k": 1, "n": 1})
    assert db.collection("c").document("a").get().to_dict() == {"k": 1, "n": 2}
    assert catalog_row(stack, database) == [(True,)]
    # A query that needs a composite index (equality on k, order on n): built on demand.
    got = [
        s.id
        for s in db.collection("c").where(filter=FieldFilter("k", "==", 1)).order_by("n").stream()
    ]
    assert got == ["b", "a"]


def test_concurrent_first_requests_all_succeed(monkeypatch, stack, firestore_emulator_host):
    database = new_database_id()
    db = sdk_client(monkeypatch, firestore_emulator_host, database)

    def write(i: int) -> None:
        db.collection("c").document(f"d{i}").set({"i": i})

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(write, range(8)))
    assert catalog_row(stack, database) == [(True,)]
    assert sorted(s.id for s in db.collection("c").stream()) == [f"d{i}" for i in range(8)]


def test_without_dev_mode_a_missing_database_is_not_found(stack):
    database = new_database_id()
    with grpc_sidecar(stack) as address:
        channel = grpc.insecure_channel(address)
        list_ids = channel.unary_unary(
            "/google.firestore.v1.Firestore/ListCollectionIds",
            request_serializer=firestore_types.ListCollectionIdsRequest.serialize,
            response_deserializer=lambda b: b,
        )
        parent = f"projects/demo/databases/{database}/documents"
        with pytest.raises(grpc.RpcError) as raised:
            list_ids(
                firestore_types.ListCollectionIdsRequest(parent=parent),
                metadata=[("authorization", f"Bearer {stack.admin_key}")],
            )
        channel.close()
    assert raised.value.code() == grpc.StatusCode.NOT_FOUND
    assert f'database "{database}" does not exist' in raised.value.details()
    assert catalog_row(stack, database) == []


def test_the_least_privilege_login_in_dev_mode_creates_the_database(monkeypatch, stack):
    url = sidecar_login(stack.cluster, "dev_mode=on")
    database = new_database_id()
    address = f"127.0.0.1:{free_port()}"
    with own_sidecar(stack, "--grpc-listen", address, "--dev-mode", database_url=url):
        db = sdk_client(monkeypatch, address, database)
        db.collection("c").document("a").set({"x": 1})
        assert db.collection("c").document("a").get().to_dict() == {"x": 1}
    assert catalog_row(stack, database) == [(True,)]


def test_a_login_that_may_not_create_databases_is_refused(monkeypatch, stack):
    # Granted first, then the script again without dev_mode: the default revokes the right.
    sidecar_login(stack.cluster, "dev_mode=on")
    url = sidecar_login(stack.cluster)
    database = new_database_id()
    address = f"127.0.0.1:{free_port()}"
    with own_sidecar(stack, "--grpc-listen", address, "--dev-mode", database_url=url):
        db = sdk_client(monkeypatch, address, database)
        with pytest.raises(exceptions.FailedPrecondition) as raised:
            db.collection("c").document("a").set({"x": 1})
    assert "development mode cannot create it" in str(raised.value)
    assert catalog_row(stack, database) == []
