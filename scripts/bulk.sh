#!/usr/bin/env bash
# Unbounded bulk writes: one transaction creates 200,000 documents with docstore.set (each one
# a document that does not exist yet, so each takes a creation claim) at the default
# max_locks_per_transaction, then 10% of that in one docstore.commit per 500, and check_indexes is
# clean. Before claims (a transaction advisory lock per new document) this failed with "out of
# shared memory" after about 6,000 documents. Usage: scripts/bulk.sh [documents (default 200000)]
source "$(dirname "$0")/lib.sh"
DOCS="${1:-200000}"
DB=docstore_bulk
cluster_running || die "the cluster is not running: run 'make up' first"
fresh_database "${DB}"
sql() { "${PSQL[@]}" -d "${DB}" -Atc "$1"; }
sql "create extension pg_docstore" >/dev/null
locks="$(sql "show max_locks_per_transaction")"
[ "${locks}" = 64 ] || die "max_locks_per_transaction is ${locks}, the test is meant for the default (64)"

got="$(sql "select count(docstore.set('bulk/d' || i, jsonb_build_object('x', i))) from generate_series(1, ${DOCS}) i")"
[ "${got}" = "${DOCS}" ] || die "set returned ${got} update times, expected ${DOCS}"
[ "$(sql "select count(*) from docstore.entities where collection_id = 'bulk'")" = "${DOCS}" ] || die "not every document was stored"
check_passed "one statement created ${DOCS} documents with docstore.set"

# Batches through docstore.commit in one transaction (a DO block): sets with the precondition
# that the document does not exist, 10% of DOCS (still over the old limit).
BATCHES=$((DOCS / 5000))
sql "do \$\$ begin
  for b in 0 .. $((BATCHES - 1)) loop
    perform docstore.commit((select jsonb_agg(jsonb_build_object('set', 'bulk2/d' || i, 'data', jsonb_build_object('i', i),
                                                          'precondition', jsonb_build_object('exists', false)))
                             from generate_series(b * 500 + 1, b * 500 + 500) i));
  end loop;
end \$\$" >/dev/null
[ "$(sql "select count(*) from docstore.entities where collection_id = 'bulk2'")" = $((BATCHES * 500)) ] ||
  die "not every batched document was stored"
check_passed "one transaction created $((BATCHES * 500)) documents in commits of 500"
problems="$(sql "select count(*) from docstore.check_indexes()")"
[ "${problems}" = 0 ] || die "check_indexes reports ${problems} problems"
check_passed "check_indexes is clean"
"${PSQL[@]}" -d postgres -qc "drop database ${DB}"
