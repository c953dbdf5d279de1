//! opforge's op-library C ABI, mirrored in Rust.
//!
//! The normative definition is the C header `include/opforge/opforge.h`;
//! this crate is its `#[repr(C)]` mirror, field for field and name for name:
//! every struct (same name as the C typedef), every function-pointer typedef
//! (as `Option<unsafe extern "C" fn(..)>`, so that a NULL slot is `None`),
//! every opaque handle type and every `OPFORGE_*` constant. The test
//! `tests/layout.rs` compiles the header with the system C compiler and
//! compares every size, alignment, offset, field type and constant with
//! this crate, so the two cannot drift apart.
//!
//! The rules the header states (R1-R10: `struct_size` first and append-only,
//! fixed-width integers, enums as integers, TensorFlow dtype numbers and
//! codes, strings as pointer + length, whoever allocates frees, lifetimes,
//! errors, threads, no unwinding) apply to the Rust side unchanged. The
//! versioning rules for library authors are in this crate's README.
//!
//! Beyond the mirror, the crate holds what both sides of the boundary need
//! and must agree on: the layout of every struct ([`layout`]), the layout
//! hash ([`layout_hash`], pinned per minor in [`KNOWN_LAYOUTS`]), version
//! negotiation ([`negotiate`]), and prefix reads and writes of versioned
//! structs ([`Versioned`]). It has no dependencies and is `no_std`, so a
//! plugin built on it carries nothing of opforge.

#![no_std]
#![warn(missing_docs)]

#[cfg(not(target_pointer_width = "64"))]
compile_error!("the opforge C ABI 1.x is defined for 64-bit targets only (rule R2)");

// The mirror, by part of the header (each module's items are re-exported
// here, so every name is `opforge_abi::NAME`, as in C).
mod constants;
mod host_api;
mod manifest;
mod negotiate;
mod structs;
mod types;
mod versioned;

pub mod layout;

pub use constants::*;
pub use host_api::*;
pub use layout::{
    known_layout_hash, layout_hash, FieldLayout, StructLayout, KNOWN_LAYOUTS, STRUCTS,
};
pub use manifest::*;
pub use negotiate::*;
pub use structs::*;
pub use types::*;
pub use versioned::{StructSizeError, Versioned};

// ---------------------------------------------------------------------------
// Versions
// ---------------------------------------------------------------------------

/// The ABI major this crate (and the header) defines: a library and a host
/// of different majors never load each other. Also the suffix of the entry
/// points (`opforge_plugin_init_v1`).
pub const OPFORGE_ABI_MAJOR: u32 = 1;
/// The ABI minor this crate defines: what a library built with it has
/// available (the library record's `abi.minor`).
pub const OPFORGE_ABI_MINOR: u32 = 1;
/// The layout hash of this minor ([`layout_hash`], equal to the header's
/// `OPFORGE_LAYOUT_HASH`; both checked by tests).
pub const OPFORGE_LAYOUT_HASH: u64 = 0xd369_ae65_736d_e423;
/// [`OPFORGE_LAYOUT_HASH`] as the 16 lower-case hex digits the manifest
/// carries.
pub const OPFORGE_LAYOUT_HASH_STR: &str = "d369ae65736de423";
/// The lowest host minor a library needs, by default (the header's
/// `OPFORGE_MIN_HOST_MINOR` when the library does not define it): the minor
/// it was built with, which is always safe.
pub const OPFORGE_MIN_HOST_MINOR: u32 = OPFORGE_ABI_MINOR;

#[cfg(test)]
mod tests;
