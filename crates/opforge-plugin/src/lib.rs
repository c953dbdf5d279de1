//! opforge-plugin: the Rust SDK for opforge op libraries.
//!
//! An op library is a `cdylib` that opforge loads at run time through its C
//! ABI (`include/opforge/opforge.h`, mirrored by `opforge-abi`). With this
//! crate its author writes ordinary Rust that reads like opforge's own op
//! code: ops declared with TensorFlow's spec strings ([`OpDefBuilder`]),
//! kernels ([`OpKernel`], [`CreateKernel`], [`KernelDefBuilder`],
//! [`OpKernelConstruction`], [`OpKernelContext`]), shape
//! functions ([`InferenceContext`]) and gradients ([`GradientContext`]), gathered by
//! [`export!`], which defines the library's entry points and writes its
//! manifest into the file.
//!
//! ```ignore
//! use opforge_plugin::prelude::*;
//!
//! const ZERO_OUT: OpDefBuilder = OpDefBuilder::new("ZeroOut")
//!     .attr("T: realnumbertype = DT_INT32")
//!     .input("to_zero: T")
//!     .output("zeroed: T")
//!     .set_shape_fn(shape::unchanged_shape)
//!     .doc("Zeros out every element of the input except the first.");
//!
//! struct ZeroOut;
//! impl CreateKernel for ZeroOut {
//!     fn create(_: &OpKernelConstruction<'_>) -> Result<Self> { Ok(ZeroOut) }
//! }
//! impl OpKernel for ZeroOut {
//!     fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> { /* ... */ Ok(()) }
//! }
//!
//! export! {
//!     name: "zero_out",
//!     version: env!("CARGO_PKG_VERSION"),
//!     ops: [ZERO_OUT],
//!     kernels: [KernelDefBuilder::new("ZeroOut")
//!         .type_constraint_list("T", DataType::REAL_NUMBER_TYPES)
//!         .build::<ZeroOut>()],
//! }
//! ```
//!
//! # What the SDK guarantees
//!
//! - **No second registry.** The crate depends only on `opforge-abi`; a
//!   library registers through the host's tables at init, nothing else.
//! - **Versions.** The library record says ABI 1.1 (`abi.minor` the SDK's,
//!   `min_host_minor` 0 by default: every call checks that the host has the
//!   slot, and a missing one is `Unimplemented`, never a crash; every kernel
//!   is registered with both the 1.0 and the 1.1 compute entries).
//! - **Fast dispatch.** A 1.1 host calls a kernel with its inputs' views
//!   made and its declared outputs
//!   ([`KernelDefBuilder::output_like`]) set, so an elementwise kernel
//!   makes no call back into the host; [`OpKernel::compute`] runs the same
//!   either way (the [`kernel`] module says how).
//! - **The manifest is data.** It is computed at compile time from the same
//!   `const` declarations init registers, so `opforge lib inspect` reads
//!   exactly what loading registers, without running any code of the file.
//! - **No unwinding into the host.** Every callback (init, kernel create,
//!   compute and destroy, shape functions, gradients, `parallel_for`
//!   bodies) runs under `catch_unwind`; a panic becomes `INTERNAL` with
//!   "compute of kernel ZeroOut (library zero_out 0.1.0) panicked at
//!   src/lib.rs:42:9: MESSAGE" and the status flag `PANICKED`. A kernel
//!   instance whose compute panicked is poisoned: its later computes answer
//!   `INTERNAL` until the host makes a new one.
//! - **`panic = "abort"` is refused.** A library built with it could not
//!   turn panics into errors; [`export!`] makes that build fail with a
//!   `compile_error!`, and init refuses such a library too (should the
//!   check be bypassed), with `FAILED_PRECONDITION`. The manifest's `panic`
//!   field records the strategy.

#![warn(missing_docs)]

pub mod attr;
pub mod dtype;
pub mod grad;
pub mod grad_nodes;
mod host;
pub mod kernel;
pub mod manifest;
pub mod panic;
pub mod registry;
pub mod shape;
pub mod status;

pub use attr::{AttrValue, FromAttrValue, FuncAttr, ShapeAttr, TensorAttr};
pub use dtype::{BFloat16, DataType, Element, Half};
pub use grad::{GradientContext, Sym, SymArg};
pub use grad_nodes::{ArgRef, GradArg, GradNode, GradSource, GradientFunction, NodeAttr};
pub use kernel::{
    CreateKernel, InputViews, OpKernel, OpKernelConstruction, OpKernelContext, OutputRequest,
    Tensor, TensorMut, ThreadPool,
};
pub use registry::{GradientDef, GradientForm, KernelDef, KernelDefBuilder, Library, OpDefBuilder};
pub use shape::{DimOrConst, DimensionHandle, InferenceContext, ShapeHandle};
pub use status::{Code, Result, Status};

/// Logging through the host (`host->log`, prefixed with the library's
/// name by the host). Outside init..fini, or on a host without the slot,
/// messages are dropped.
pub mod log {
    use opforge_abi::{
        OpforgeStr, OPFORGE_LOG_DEBUG, OPFORGE_LOG_ERROR, OPFORGE_LOG_INFO, OPFORGE_LOG_WARNING,
    };

    fn log(level: u32, message: &str) {
        if let Some(host) = crate::host::host() {
            if let Some(f) = host.api.log {
                // SAFETY: `raw` is the table init received, as `log` asks
                // (R7); the message is copied (R5).
                unsafe { f(host.raw, level, OpforgeStr::from_text(message)) };
            }
        }
    }

    /// Logs at DEBUG.
    pub fn debug(message: &str) {
        log(OPFORGE_LOG_DEBUG, message)
    }
    /// Logs at INFO.
    pub fn info(message: &str) {
        log(OPFORGE_LOG_INFO, message)
    }
    /// Logs at WARNING.
    pub fn warning(message: &str) {
        log(OPFORGE_LOG_WARNING, message)
    }
    /// Logs at ERROR.
    pub fn error(message: &str) {
        log(OPFORGE_LOG_ERROR, message)
    }
}

/// The ABI crate, for the code [`export!`] generates.
#[doc(hidden)]
pub use opforge_abi as abi;

/// What a plugin author uses: `use opforge_plugin::prelude::*;`.
pub mod prelude {
    pub use crate::shape;
    pub use crate::{
        dispatch, ensure, export, ArgRef, AttrValue, CreateKernel, DataType, DimOrConst,
        DimensionHandle, Element, GradArg, GradSource, GradientContext, GradientDef,
        GradientFunction, InferenceContext, KernelDefBuilder, NodeAttr, OpDefBuilder, OpKernel,
        OpKernelConstruction, OpKernelContext, Result, ShapeHandle, Status, Sym, SymArg,
    };
}

/// Defines the library: its entry points `opforge_plugin_init_v1` (which
/// registers every op, kernel and gradient through the host's tables) and
/// `opforge_plugin_fini_v1`, the exported manifest anchor, and the manifest
/// records in the file's `opforge_manifest` section. Once per library, at
/// the crate's top level:
///
/// ```ignore
/// opforge_plugin::export! {
///     name: "zero_out",
///     version: env!("CARGO_PKG_VERSION"),
///     // min_host_minor: 0,   (optional; 0 is the default)
///     ops: [ZERO_OUT, ZERO_OUT_INT32],
///     kernels: [ZERO_OUT_KERNEL],
///     gradients: [GradientDef::new("ZeroOut", zero_out_grad)],   (optional)
/// }
/// ```
///
/// Every item must be a constant expression (the manifest is computed at
/// compile time). A build with `panic = "abort"` fails here.
#[macro_export]
macro_rules! export {
    (
        name: $name:expr,
        version: $version:expr,
        $(min_host_minor: $min:expr,)?
        ops: [$($op:expr),* $(,)?],
        kernels: [$($kernel:expr),* $(,)?]
        $(, gradients: [$($grad:expr),* $(,)?])?
        $(,)?
    ) => {
        #[cfg(panic = "abort")]
        ::core::compile_error!(
            "an opforge op library must be built with panic = \"unwind\": with \
             panic = \"abort\" a panic in any of its code would abort the host process \
             (set panic = \"unwind\" in the [profile.*] sections)"
        );

        const _: () = {
            const LIBRARY: $crate::Library = $crate::Library {
                name: $name,
                version: $version,
                min_host_minor: $crate::export!(@min $($min)?),
                panic_abort: ::core::cfg!(panic = "abort"),
                ops: &[$($op),*],
                kernels: &[$($kernel),*],
                gradients: &[$($($grad),*)?],
            };
            static LIBRARY_STATIC: $crate::Library = LIBRARY;

            #[cfg_attr(
                any(target_os = "macos", target_os = "ios"),
                unsafe(link_section = "__DATA,__opforge_mf")
            )]
            #[cfg_attr(windows, unsafe(link_section = ".opfmf$b"))]
            #[cfg_attr(
                not(any(target_os = "macos", target_os = "ios", windows)),
                unsafe(link_section = "opforge_manifest")
            )]
            #[used]
            static MANIFEST: $crate::manifest::Manifest<
                { $crate::manifest::encoded_len(&LIBRARY) },
            > = $crate::manifest::encode(&LIBRARY);

            /// The manifest's anchor (keeps the records under --gc-sections).
            #[unsafe(no_mangle)]
            pub static opforge_manifest_anchor_v1: $crate::manifest::Anchor =
                $crate::manifest::Anchor(&MANIFEST as *const _ as *const ::core::ffi::c_void);

            /// The library's init entry point (opforge C ABI 1.x).
            ///
            /// # Safety
            ///
            /// Called by the host with its table, registrar and status.
            #[unsafe(no_mangle)]
            pub unsafe extern "C" fn opforge_plugin_init_v1(
                host: *const $crate::abi::OpforgeHostApi,
                registrar: *mut $crate::abi::OpforgeRegistrar,
                status: *mut $crate::abi::OpforgeStatus,
            ) -> $crate::abi::OpforgeCode {
                // SAFETY: the host calls init with the arguments the ABI
                // describes (R7), which `init` requires.
                unsafe { $crate::registry::init(&LIBRARY_STATIC, host, registrar, status) }
            }

            /// The library's fini entry point.
            #[unsafe(no_mangle)]
            pub extern "C" fn opforge_plugin_fini_v1() {
                $crate::registry::fini()
            }
        };
    };
    (@min) => { 0 };
    (@min $min:expr) => { $min };
}
