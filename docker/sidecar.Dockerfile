# The sidecar, docstore-sidecar (HTTP API on :8787), for docker-compose.yml. `make up` is the
# tested route. Build context: the repository root.
FROM rust:1.95-bookworm AS build
WORKDIR /src
COPY . .
RUN cargo build --release --locked -p docstore-sidecar

FROM debian:bookworm-slim
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates curl \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --system --no-create-home docstore
COPY --from=build /src/target/release/docstore-sidecar /usr/local/bin/docstore-sidecar
USER docstore
ENV DOCSTORE_LISTEN=0.0.0.0:8787
EXPOSE 8787
HEALTHCHECK --interval=5s --timeout=3s --retries=12 CMD curl -fsS http://127.0.0.1:8787/healthz || exit 1
ENTRYPOINT ["docstore-sidecar"]
