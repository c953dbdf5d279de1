//! MXNet/NNVM's operator-attribute route on opforge: an op described by a
//! table of attributes with MXNet's names (`FInferShape`, `FInferType`,
//! `FCompute`, `FGradient`, `FResourceRequest`, `FListInputNames`,
//! `FListOutputNames`, `FNumVisibleOutputs`, `FMutateInputs`,
//! `TIsBackward`, and core's `FInplaceOption`/`FInplaceIdentity`),
//! registered in the style of `NNVM_REGISTER_OP(name).describe(..)
//! .set_num_inputs(2).set_attr<FInferShape>(..)`:
//!
//! ```
//! use opforge_nnvm::{FCompute, FInferShape, NnvmOp, NodeAttrs, OpContext, TShape};
//! use opforge_core::kernel::OutputRequest;
//! use opforge_core::{Result, Tensor};
//! use std::sync::Arc;
//!
//! fn shape(_: &NodeAttrs<'_>, ins: &mut [TShape], outs: &mut [TShape]) -> Result<bool> {
//!     outs[0].assign(&ins[0], "DocTwice: output 0")?;
//!     Ok(outs[0].is_known())
//! }
//! fn twice(_: &NodeAttrs<'_>, _: &OpContext<'_, '_>, ins: &[Tensor], req: &[OutputRequest],
//!          outs: &mut [Tensor]) -> Result<()> {
//!     let x = ins[0].flat::<f32>()?;
//!     for (o, &v) in outs[0].flat_mut::<f32>()?.iter_mut().zip(x) {
//!         match req[0] {
//!             OutputRequest::Add => *o += 2.0 * v,
//!             OutputRequest::Null => {}
//!             _ => *o = 2.0 * v,
//!         }
//!     }
//!     Ok(())
//! }
//!
//! let registry = Arc::new(opforge_core::Registry::new());
//! NnvmOp::new("DocTwice")
//!     .set_attr::<FInferShape>(Arc::new(shape))
//!     .set_attr::<FCompute>(Arc::new(twice))
//!     .finish(&registry)
//!     .unwrap();
//! let dev = Arc::new(opforge_core::device::CpuDevice::new(1).unwrap());
//! let ctx = opforge_core::eager::EagerContext::with_registry(dev, registry);
//! let x = Tensor::from_vec(&[2], vec![1.0f32, -3.0]).unwrap();
//! let y = ctx.op("DocTwice").input(x).run1().unwrap();
//! assert_eq!(y.flat::<f32>().unwrap(), &[2.0, -6.0]);
//! ```
//!
//! The values live in the registry's per-op attribute tables
//! (`registry.attr::<FInferShape>(op)`, `registry.ops_with_attr::<FGradient>()`,
//! or [`Op::get_attr`] and [`OpMap`]), and [`NnvmOp::finish`] turns them
//! into an op like any other: it runs eagerly and in graphs, takes
//! gradients (graph `gradients()` and the eager tape), and is listed by the
//! registry (so the Python package generates a wrapper for it).
//!
//! # The synthesis rule
//!
//! For an op given by NNVM attributes, [`NnvmOp::finish`] makes:
//!
//! - **Inputs**: `set_num_inputs` of them (1 if unset), named by
//!   `FListInputNames` (called with no attrs), else `data` for one input
//!   and `arg0`, `arg1`, ... for several.
//! - **Outputs**: the first `FNumVisibleOutputs` (all if unset) of the
//!   `set_num_outputs` outputs (1 if unset), named by `FListOutputNames`,
//!   else `output`, `output1`, `output2`, ... Hidden outputs are not in the
//!   OpDef: the compute function and `FInferShape` still get them, and the
//!   kernel drops them.
//! - **Type attrs**: one shared `T` (`T: type`) if `FInferType`, given
//!   only the first input's dtype, gives every input and output that dtype
//!   (MXNet's elementwise type rule). Otherwise one per input (`T` for one
//!   input, `T0`, `T1`, ... for several), and each output is typed like the
//!   input whose dtype `FInferType` gives it (probed with distinct floating
//!   and complex dtypes, so at most six untied inputs), or with the fixed
//!   dtype it always gives. Without `FInferType`, one attr per input and
//!   outputs typed like the first input.
//! - **Parameter attrs**: the fields of `set_attr_parser`'s struct
//!   ([`opforge_core::param::Parameter`]), through `OpDefBuilder::params`:
//!   attrs of the matching types, defaults and descriptions; bounds are
//!   checked when a node's attrs are parsed.
//! - **Docs**: `describe` (summary, then description) and the
//!   `add_argument` descriptions of the inputs.
//! - **Stateful** when `FMutateInputs` lists an input.
//! - **Shape function**: core's `ShapeFn` from `FInferShape`
//!   ([`adapt::shape_fn_from_infer_shape`]), or, for an op given a
//!   `ShapeFn`, an `FInferShape` from it ([`adapt::infer_shape_from_shape_fn`]).
//! - **Gradient**: core's `Gradient` from `FGradient`
//!   ([`adapt::gradient_from_fgradient`]), or the reverse
//!   ([`adapt::fgradient_from_gradient`]).
//! - **Kernels**: one per `FCompute` device, through the adapter of
//!   [`compute`] (which honours `Null` and `Add` output requests and sizes
//!   outputs with `FInferShape`).
//!
//! Everything set is registered as a per-op attribute of the op, with the
//! op (all or nothing), under the caller's origin.
//!
//! # Several files, one op
//!
//! [`nnvm_register_op!`] pieces (in any file or crate of the binary) are
//! collected by `inventory`; [`register_static`] applies the pieces of each
//! op in source order and finishes it into a registry (call it once with
//! `Registry::global()` at start-up: opforge-core's own static
//! registrations do not know this crate's). A kind set twice with
//! different values is `InvalidArgument` naming the op and the kind.

pub mod adapt;
mod attrs;
pub mod compute;
mod op;
mod synth;

pub use attrs::{
    Argument, Arguments, AttrParser, ComputeFn, Cpu, Describe, DeviceKind, FCompute, FGradient,
    FGradientFn, FInferShape, FInferType, FListInputNames, FListOutputNames, FMutateInputs,
    FNumVisibleOutputs, FResourceRequest, InferShapeFn, InferTypeFn, NnvmAttr, NodeAttrs,
    NumInputs, NumOutputs, Parsed, ParserInfo, ResourceFn, ResourceRequest, TIsBackward, TShape,
};
pub use compute::OpContext;
pub use op::{register_static, NnvmOp, Op, OpMap, StaticPiece};
pub use opforge_core::kernel::{FInplaceIdentity, FInplaceOption};

#[doc(hidden)]
pub use opforge_core::inventory as __inventory;
