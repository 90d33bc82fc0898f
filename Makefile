# pg_docstore: the two commands of the README, plus a few for development.
#   make up     install what is missing, build, start Postgres (:5433) with the extension and
#               the sidecar (HTTP, :8787), load the demo, make .venv/ and .docstore/dev.env
#   make test   run every test (lint, Rust unit/property, pgrx, SQL regression, ..., end-to-end)
.PHONY: up down test lint test-core test-pgrx test-regress test-e2e test-sdk install-ext bench bench-http fuzz clean

up:
	bash scripts/up.sh

down:
	bash scripts/down.sh

test: up
	bash scripts/test.sh

lint:
	bash scripts/test.sh lint

test-core:
	bash scripts/test.sh core

test-pgrx:
	bash scripts/test.sh pgrx

test-regress:
	bash scripts/test.sh regress

test-e2e:
	bash scripts/test.sh e2e

test-sdk:
	bash scripts/test.sh sdk

bench:
	cargo bench -p docstore-core --bench values

bench-http:
	bash scripts/bench_http.sh

fuzz:
	bash scripts/fuzz.sh 60

clean: down
	rm -rf .pgdata target .venv
