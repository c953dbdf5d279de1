//! The header's typedefs (scalar and function-pointer types) and its opaque
//! host objects.

use crate::*;
use core::ffi::c_void;
use core::marker::{PhantomData, PhantomPinned};

// ---------------------------------------------------------------------------
// Typedefs
// ---------------------------------------------------------------------------

/// A typedef of the header and the Rust type that mirrors it, as written in
/// this crate (what the layout test checks against the C compiler).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Typedef {
    /// The typedef's name, as in the header.
    pub name: &'static str,
    /// The Rust type, as written in this crate.
    pub rust_type: &'static str,
}

macro_rules! abi_typedefs {
    ($( $(#[$meta:meta])* pub type $name:ident = $ty:ty; )*) => {
        $( $(#[$meta])* pub type $name = $ty; )*

        /// Every scalar and function-pointer typedef of the header, in
        /// header order.
        pub const TYPEDEFS: &[Typedef] = &[
            $( Typedef { name: stringify!($name), rust_type: stringify!($ty) } ),*
        ];
    };
}

abi_typedefs! {
    /// A status code: 0 = OK, 1..16 = TensorFlow's canonical codes (R3, R4).
    /// An unknown value survives as its integer.
    pub type OpforgeCode = i32;
    /// A tensor element type: TensorFlow's `DataType` number (R4), without
    /// the `*_REF` types. An unknown value survives as its integer.
    pub type OpforgeDType = i32;
    /// A shape in a shape-inference context (TensorFlow's `ShapeHandle`):
    /// opaque, of one context (R7); compare with `==` for identity.
    pub type OpforgeShape = u64;
    /// A dimension in a shape-inference context (TensorFlow's
    /// `DimensionHandle`).
    pub type OpforgeDim = u64;
    /// A value (graph output or eager tensor) in a gradient context.
    pub type OpforgeSym = u64;
    /// Makes a kernel instance for one node (or eager call signature): reads
    /// attrs and dtypes from `init` (valid during this call), validates
    /// them, and stores its state in `*state` (may stay NULL). `user` is
    /// [`OpforgeKernelDef::user`].
    pub type OpforgeKernelCreateFn = Option<
        unsafe extern "C" fn(
            init: *const OpforgeKernelInit,
            user: *mut c_void,
            state: *mut *mut c_void,
            status: *mut OpforgeStatus,
        ) -> OpforgeCode,
    >;
    /// Runs the kernel once. Concurrent calls on one state are possible
    /// unless the kernel is [`OPFORGE_KERNEL_NOT_THREAD_SAFE`] (R9).
    pub type OpforgeKernelComputeFn = Option<
        unsafe extern "C" fn(
            state: *mut c_void,
            ctx: *mut OpforgeKernelCtx,
            status: *mut OpforgeStatus,
        ) -> OpforgeCode,
    >;
    /// Frees a kernel instance's state; called once, after its last compute.
    pub type OpforgeKernelDestroyFn =
        Option<unsafe extern "C" fn(state: *mut c_void, user: *mut c_void)>;
    /// A shape function: reads input shapes, sets every output's shape.
    pub type OpforgeShapeFn = Option<
        unsafe extern "C" fn(
            ctx: *mut OpforgeShapeCtx,
            user: *mut c_void,
            status: *mut OpforgeStatus,
        ) -> OpforgeCode,
    >;
    /// A gradient function over the host's graph builder
    /// ([`OpforgeGradApi`]).
    pub type OpforgeGradFn = Option<
        unsafe extern "C" fn(
            ctx: *mut OpforgeGradCtx,
            user: *mut c_void,
            status: *mut OpforgeStatus,
        ) -> OpforgeCode,
    >;
    /// One shard of a `parallel_for`: units `[begin, end)`. Each shard has
    /// its own status; the first failing shard's code and message win.
    pub type OpforgeWorkFn = Option<
        unsafe extern "C" fn(
            begin: u64,
            end: u64,
            user: *mut c_void,
            status: *mut OpforgeStatus,
        ) -> OpforgeCode,
    >;
    /// Releases plugin memory that backed an output
    /// ([`OpforgeForeignTensor`]): called exactly once, on any thread, when
    /// the last tensor using it is gone, always before fini.
    pub type OpforgeReleaseFn = Option<unsafe extern "C" fn(data: *mut c_void, user: *mut c_void)>;
    /// (1.1) Runs the kernel once with its views made
    /// ([`OpforgeKernelViews`]): every input's, and every output declared
    /// in [`OpforgeKernelDef::output_like`] already set. Everything
    /// [`OpforgeKernelComputeFn`] says holds (`ctx` is the same context).
    pub type OpforgeKernelComputeViewsFn = Option<
        unsafe extern "C" fn(
            state: *mut c_void,
            ctx: *mut OpforgeKernelCtx,
            views: *const OpforgeKernelViews,
            status: *mut OpforgeStatus,
        ) -> OpforgeCode,
    >;
    /// The type of `opforge_plugin_init_v1`, the entry point every library
    /// exports.
    pub type OpforgePluginInitFn = Option<
        unsafe extern "C" fn(
            host: *const OpforgeHostApi,
            registrar: *mut OpforgeRegistrar,
            status: *mut OpforgeStatus,
        ) -> OpforgeCode,
    >;
    /// The type of `opforge_plugin_fini_v1`, the optional entry point called
    /// once just before the library is unmapped.
    pub type OpforgePluginFiniFn = Option<unsafe extern "C" fn()>;
}

// ---------------------------------------------------------------------------
// Opaque host objects
// ---------------------------------------------------------------------------

macro_rules! abi_opaque {
    ($( $(#[$meta:meta])* pub struct $name:ident; )*) => {
        $(
            $(#[$meta])*
            ///
            /// Opaque: only ever handled through a pointer the host gives.
            #[repr(C)]
            pub struct $name {
                _opaque: [u8; 0],
                _not_send_sync_unpin: PhantomData<(*mut u8, PhantomPinned)>,
            }
        )*

        /// The names of the opaque types of the header, in header order.
        pub const OPAQUE_TYPES: &[&str] = &[$( stringify!($name) ),*];
    };
}

abi_opaque! {
    /// A status: a code and a message, written by
    /// [`OpforgeHostApi::set_status`].
    pub struct OpforgeStatus;
    /// Where init registers the library's ops, kernels and gradients (init
    /// only).
    pub struct OpforgeRegistrar;
    /// What a kernel's create reads: attrs, dtypes, names (create only).
    pub struct OpforgeKernelInit;
    /// One run of a kernel: inputs, outputs, temporaries, threads.
    pub struct OpforgeKernelCtx;
    /// One shape-function call (TensorFlow's `InferenceContext`).
    pub struct OpforgeShapeCtx;
    /// One gradient-function call: the forward op and the graph builder.
    pub struct OpforgeGradCtx;
}
