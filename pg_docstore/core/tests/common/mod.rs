//! Code shared by several test binaries (each binary compiles this module on its own).

// Each test binary uses only some of the generators.
#![allow(dead_code)]

pub mod generators;
pub mod values;
