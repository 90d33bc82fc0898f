//! `docstore-sidecar`: see the crate documentation of `docstore_sidecar`.

fn main() {}
