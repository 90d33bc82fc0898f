# Postgres 15 with pg_docstore built in. The container route of the README; `make up` is the
# tested route. Build context: the repository root.
FROM postgres:15-bookworm AS build
RUN apt-get update \
 && apt-get install -y --no-install-recommends build-essential ca-certificates curl git \
      libclang-dev clang pkg-config libssl-dev postgresql-server-dev-15 \
 && rm -rf /var/lib/apt/lists/*
RUN curl --proto '=https' --tlsv1.2 -sSf https://sh.rustup.rs | sh -s -- -y --profile minimal --default-toolchain 1.95.0
ENV PATH=/root/.cargo/bin:$PATH
RUN cargo install cargo-pgrx --version =0.18.1 --locked \
 && cargo pgrx init --pg15 /usr/lib/postgresql/15/bin/pg_config
WORKDIR /src
COPY . .
RUN cargo pgrx package -p pg_docstore --pg-config /usr/lib/postgresql/15/bin/pg_config

FROM postgres:15-bookworm
COPY --from=build /src/target/release/pg_docstore-pg15/usr/ /usr/
COPY docker/initdb.sql /docker-entrypoint-initdb.d/10-pg_docstore.sql
COPY sql/sidecar_role.sql /docstore/sidecar_role.sql
COPY docker/sidecar_role.sh /docker-entrypoint-initdb.d/20-sidecar_role.sh
