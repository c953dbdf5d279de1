//! No code: this crate's dependencies give every build of the workspace one
//! feature set per dependency (see its `Cargo.toml`).
#![no_std]
