//! Empty: cargo resolves `[build-dependencies]` only for a package with a
//! build script, and this crate's build dependencies are what unify the
//! host's features (see `Cargo.toml`).
fn main() {}
