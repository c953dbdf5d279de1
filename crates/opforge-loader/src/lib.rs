//! opforge's op-library loader: the host side of the C ABI
//! (`include/opforge/opforge.h`, mirrored by `opforge-abi`).
//!
//! - [`inspect`] reads a library's manifest from the file **without loading
//!   it** (the `object` crate finds the `opforge_manifest` section; no code
//!   of the file runs), and [`Manifest::to_json`] is what `opforge lib
//!   inspect` prints.
//! - [`Loader::load`] negotiates the ABI version from the manifest
//!   (`opforge_abi::negotiate`) before `dlopen`, runs the library's
//!   `opforge_plugin_init_v1` with a per-library host table, and commits what
//!   init registered (ops from spec strings, kernels, shape functions,
//!   gradient callbacks, declarative gradients, non-differentiable markers)
//!   into the registry under a new owner, all or
//!   nothing. Loading the same file again (same path, a symlink, or a copy
//!   with the same content) returns the same [`LibraryHandle`].
//! - Plugin kernels run as core `OpKernel`s through the header's kernel API,
//!   plugin shape functions as core shape functions through its shape API,
//!   plugin gradient callbacks as core gradients through its gradient API
//!   (over autodiff's `Ops`: the tape eagerly, `GraphOps` in graphs).
//!   A callback error is a `Status` with the callback's canonical code,
//!   naming the op and the library; a kernel failure marked
//!   `OPFORGE_STATUS_PANICKED` (a caught panic or C++ exception) also
//!   takes the instance's state out of service and creates a new one (the
//!   instance's first state is destroyed with the instance, later ones at
//!   once: see `kernel::PluginKernel`).
//! - The ABI's rules are kept against hostile libraries (`ctx`): a
//!   context pointer is used only if it is the context lent to the
//!   callback running on the calling thread (R9; a forged one, another
//!   thread's, a finished callback's or one of another kind is
//!   INVALID_ARGUMENT, never dereferenced), shape, dim and value handles
//!   carry their call's epoch (R7: a handle of an earlier call is refused),
//!   a callback's unknown code is UNKNOWN with the integer it returned
//!   (R3), and no shape above TensorFlow's 254 dimensions is made from
//!   what a plugin passes. Every function of the kernel, shape and
//!   gradient tables is written through one macro (`host_fn!`) that does
//!   the panic guard, the context check and the status.
//! - A kernel with the 1.1 views entry (`compute_views`) is called with
//!   every input's view made and its declared outputs (`output_like`) set,
//!   so an elementwise kernel makes no call back into the host; its eager
//!   dispatch costs about what the same kernel compiled in costs
//!   (`benches/plugin_dispatch.rs`).
//! - [`Loader::unload`] removes the library's entries (`Registry::unload`),
//!   then finalises (`opforge_plugin_fini_v1`) and unmaps it when nothing
//!   holds it any more, and says when it could not. Before it, a host finds
//!   the library of a file ([`Loader::find`]), lets its own caches go
//!   (`EagerContext::release_kernels`) and asks what still holds it
//!   ([`Loader::holders`]); after it, [`Loader::unloaded_library_of`] names
//!   the library an op came from, for "not registered" errors.
//! - The manifest is checked before anything else: an op, kernel or
//!   gradient declared twice is refused, a damaged record (C writes no CRC)
//!   is told apart from a missing library record, and
//!   [`Manifest::check_host`] is negotiation's verdict, which `opforge lib
//!   inspect` reports too. A declaration that differs from what init
//!   registers is refused naming the first difference (the op's field
//!   with both values, the kernel, the gradient's form).
//!
//! - Attr values of every type cross the ABI both ways, tensor and func
//!   included: a `tensor` attr is lent as a read-only, contiguous
//!   `OpforgeTensor` view of a host tensor the context's arena keeps (for
//!   kernel creation: until destroy; `DT_STRING` as `OpforgeStr` elements),
//!   a `func` attr as an `OpforgeFuncValue` (the name and its attrs, sorted
//!   by name); lists of both likewise. A plugin's tensor and func values
//!   (attrs of gradient calls) are copied in.
//! - [`inspect`] also reads a sealed declaration (section
//!   `opforge_manifest_sealed`, written by [`seal()`] for `opforge lib
//!   seal`) of a library that registers by code, and [`Loader::load`]
//!   checks init against it as against a manifest's declaration.
//!
//! Not implemented yet (each answers UNIMPLEMENTED with a message, never a
//! crash): resource and variant tensors (as attr values too), host
//! extensions.
#![warn(missing_docs)]

pub mod build_flags;
mod ctx;
mod decl;
mod elf_edit;
mod grad;
mod host;
mod kernel;
mod library;
pub mod manifest;
pub mod seal;
mod shape;

pub use library::{Holders, LibraryHandle, Loader, UnloadReport};
pub use manifest::{inspect, Manifest};
/// The C ABI this host speaks (`opforge_abi`: its version, constants and
/// negotiation), for callers that report it.
pub use opforge_abi as abi;
pub use seal::{seal, SealOutcome};
