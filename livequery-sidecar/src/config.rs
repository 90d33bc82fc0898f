//! Flags and environment of `docstore-sidecar` (`--help` documents each).
