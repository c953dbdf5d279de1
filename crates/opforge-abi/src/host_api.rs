//! The host's tables of function pointers (`OpforgeHostApi` and its
//! sub-tables: registration, kernels, shape functions, gradients).

use crate::versioned::abi_struct;
use crate::*;
use core::ffi::c_void;

// ---------------------------------------------------------------------------
// The host tables
// ---------------------------------------------------------------------------

abi_struct! {
    /// Registration (inside init only; R7). Everything given is copied; a
    /// failed init leaves nothing registered.
    pub struct OpforgeRegistrationApi (min_size 48) {
        /// The host's size of the table (R1).
        pub struct_size: usize,
        /// Registers an op (an identical registered OpDef is shared).
        pub op: Option<
            unsafe extern "C" fn(
                registrar: *mut OpforgeRegistrar,
                def: *const OpforgeOpDef,
                status: *mut OpforgeStatus,
            ) -> OpforgeCode,
        >,
        /// Registers a kernel for a registered (or staged) op.
        pub kernel: Option<
            unsafe extern "C" fn(
                registrar: *mut OpforgeRegistrar,
                def: *const OpforgeKernelDef,
                status: *mut OpforgeStatus,
            ) -> OpforgeCode,
        >,
        /// Registers a gradient callback for `op`.
        pub gradient_fn: Option<
            unsafe extern "C" fn(
                registrar: *mut OpforgeRegistrar,
                op: OpforgeStr,
                fn_: OpforgeGradFn,
                user: *mut c_void,
                status: *mut OpforgeStatus,
            ) -> OpforgeCode,
        >,
        /// Registers a declarative gradient.
        pub gradient_function: Option<
            unsafe extern "C" fn(
                registrar: *mut OpforgeRegistrar,
                def: *const OpforgeGradientFunction,
                status: *mut OpforgeStatus,
            ) -> OpforgeCode,
        >,
        /// Declares `op` not differentiable.
        pub not_differentiable: Option<
            unsafe extern "C" fn(
                registrar: *mut OpforgeRegistrar,
                op: OpforgeStr,
                status: *mut OpforgeStatus,
            ) -> OpforgeCode,
        >,
    }
}

abi_struct! {
    /// Kernel construction and compute (`OpKernelConstruction` and
    /// `OpKernelContext`). Indices are flat argument indices; a bad index
    /// or name is INVALID_ARGUMENT.
    pub struct OpforgeKernelApi (min_size 232) {
        /// The host's size of the table (R1).
        pub struct_size: usize,
        /// The op's name.
        pub init_op_name: Option<unsafe extern "C" fn(init: *const OpforgeKernelInit) -> OpforgeStr>,
        /// The node's name (the op's name for eager calls).
        pub init_node_name:
            Option<unsafe extern "C" fn(init: *const OpforgeKernelInit) -> OpforgeStr>,
        /// The device type the kernel is built for (`"CPU"`).
        pub init_device_type:
            Option<unsafe extern "C" fn(init: *const OpforgeKernelInit) -> OpforgeStr>,
        /// The number of flat inputs.
        pub init_num_inputs: Option<unsafe extern "C" fn(init: *const OpforgeKernelInit) -> usize>,
        /// The dtype of flat input `i`.
        pub init_input_dtype:
            Option<unsafe extern "C" fn(init: *const OpforgeKernelInit, i: usize) -> OpforgeDType>,
        /// The number of flat outputs.
        pub init_num_outputs: Option<unsafe extern "C" fn(init: *const OpforgeKernelInit) -> usize>,
        /// The dtype of flat output `i`.
        pub init_output_dtype:
            Option<unsafe extern "C" fn(init: *const OpforgeKernelInit, i: usize) -> OpforgeDType>,
        /// The flat range `[*start, *stop)` of an input or output argument.
        pub init_arg_range: Option<
            unsafe extern "C" fn(
                init: *const OpforgeKernelInit,
                name: OpforgeStr,
                is_output: u8,
                start: *mut usize,
                stop: *mut usize,
                status: *mut OpforgeStatus,
            ) -> OpforgeCode,
        >,
        /// Attr `name` of the node, of any type (lives until destroy).
        pub init_attr: Option<
            unsafe extern "C" fn(
                init: *const OpforgeKernelInit,
                name: OpforgeStr,
                value: *mut OpforgeAttrValue,
                status: *mut OpforgeStatus,
            ) -> OpforgeCode,
        >,
        /// The op's name.
        pub op_name: Option<unsafe extern "C" fn(ctx: *const OpforgeKernelCtx) -> OpforgeStr>,
        /// The node's name.
        pub node_name: Option<unsafe extern "C" fn(ctx: *const OpforgeKernelCtx) -> OpforgeStr>,
        /// The number of flat inputs.
        pub num_inputs: Option<unsafe extern "C" fn(ctx: *const OpforgeKernelCtx) -> usize>,
        /// The number of flat outputs.
        pub num_outputs: Option<unsafe extern "C" fn(ctx: *const OpforgeKernelCtx) -> usize>,
        /// The dtype of flat input `i`.
        pub input_dtype:
            Option<unsafe extern "C" fn(ctx: *const OpforgeKernelCtx, i: usize) -> OpforgeDType>,
        /// The dtype output `i` must have.
        pub output_dtype:
            Option<unsafe extern "C" fn(ctx: *const OpforgeKernelCtx, i: usize) -> OpforgeDType>,
        /// The flat range `[*start, *stop)` of an input or output argument.
        pub arg_range: Option<
            unsafe extern "C" fn(
                ctx: *const OpforgeKernelCtx,
                name: OpforgeStr,
                is_output: u8,
                start: *mut usize,
                stop: *mut usize,
                status: *mut OpforgeStatus,
            ) -> OpforgeCode,
        >,
        /// A read-only view of input `i`.
        pub input: Option<
            unsafe extern "C" fn(
                ctx: *const OpforgeKernelCtx,
                i: usize,
                view: *mut OpforgeTensor,
                status: *mut OpforgeStatus,
            ) -> OpforgeCode,
        >,
        /// A writable view of output `i` once it is set.
        pub output: Option<
            unsafe extern "C" fn(
                ctx: *const OpforgeKernelCtx,
                i: usize,
                view: *mut OpforgeTensor,
                status: *mut OpforgeStatus,
            ) -> OpforgeCode,
        >,
        /// What the host asks of output `i` (`OPFORGE_REQ_*`).
        pub output_request: Option<unsafe extern "C" fn(ctx: *const OpforgeKernelCtx, i: usize) -> u32>,
        /// Allocates output `i` of the given shape.
        pub allocate_output: Option<
            unsafe extern "C" fn(
                ctx: *mut OpforgeKernelCtx,
                i: usize,
                dims: *const i64,
                rank: u32,
                view: *mut OpforgeTensor,
                status: *mut OpforgeStatus,
            ) -> OpforgeCode,
        >,
        /// Reuses a candidate input's buffer for output `i`, else
        /// allocates.
        pub forward_input_or_allocate_output: Option<
            unsafe extern "C" fn(
                ctx: *mut OpforgeKernelCtx,
                candidates: *const usize,
                num_candidates: usize,
                i: usize,
                dims: *const i64,
                rank: u32,
                forwarded_from: *mut i64,
                view: *mut OpforgeTensor,
                status: *mut OpforgeStatus,
            ) -> OpforgeCode,
        >,
        /// Output `output` is input `input`, shared.
        pub set_output_from_input: Option<
            unsafe extern "C" fn(
                ctx: *mut OpforgeKernelCtx,
                output: usize,
                input: usize,
                status: *mut OpforgeStatus,
            ) -> OpforgeCode,
        >,
        /// Output `i` wraps plugin memory.
        pub set_output_foreign: Option<
            unsafe extern "C" fn(
                ctx: *mut OpforgeKernelCtx,
                i: usize,
                tensor: *const OpforgeForeignTensor,
                status: *mut OpforgeStatus,
            ) -> OpforgeCode,
        >,
        /// Sets `DT_STRING` output `i` to these elements (copied).
        pub set_output_strings: Option<
            unsafe extern "C" fn(
                ctx: *mut OpforgeKernelCtx,
                i: usize,
                dims: *const i64,
                rank: u32,
                elements: *const OpforgeStr,
                status: *mut OpforgeStatus,
            ) -> OpforgeCode,
        >,
        /// A scratch tensor, freed when compute returns.
        pub allocate_temp: Option<
            unsafe extern "C" fn(
                ctx: *mut OpforgeKernelCtx,
                dtype: OpforgeDType,
                dims: *const i64,
                rank: u32,
                view: *mut OpforgeTensor,
                status: *mut OpforgeStatus,
            ) -> OpforgeCode,
        >,
        /// Attr `name` of the node (lives until compute returns).
        pub attr: Option<
            unsafe extern "C" fn(
                ctx: *const OpforgeKernelCtx,
                name: OpforgeStr,
                value: *mut OpforgeAttrValue,
                status: *mut OpforgeStatus,
            ) -> OpforgeCode,
        >,
        /// Threads of the pool `parallel_for` runs on.
        pub num_threads: Option<unsafe extern "C" fn(ctx: *const OpforgeKernelCtx) -> u32>,
        /// TensorFlow's Shard: `[0, total)` split by `cost_per_unit`.
        pub parallel_for: Option<
            unsafe extern "C" fn(
                ctx: *mut OpforgeKernelCtx,
                total: u64,
                cost_per_unit: u64,
                work: OpforgeWorkFn,
                user: *mut c_void,
                status: *mut OpforgeStatus,
            ) -> OpforgeCode,
        >,
    }
}

abi_struct! {
    /// Shape inference (TensorFlow's `InferenceContext`, same semantics and
    /// error texts). Queries never fail: an unknown or invalid handle reads
    /// as unknown.
    pub struct OpforgeShapeApi (min_size 240) {
        /// The host's size of the table (R1).
        pub struct_size: usize,
        /// The number of flat inputs.
        pub num_inputs: Option<unsafe extern "C" fn(ctx: *const OpforgeShapeCtx) -> usize>,
        /// The number of flat outputs.
        pub num_outputs: Option<unsafe extern "C" fn(ctx: *const OpforgeShapeCtx) -> usize>,
        /// The shape of input `i`.
        pub input: Option<unsafe extern "C" fn(ctx: *const OpforgeShapeCtx, i: usize) -> OpforgeShape>,
        /// The flat range `[*start, *stop)` of an input or output argument.
        pub arg_range: Option<
            unsafe extern "C" fn(
                ctx: *const OpforgeShapeCtx,
                name: OpforgeStr,
                is_output: u8,
                start: *mut usize,
                stop: *mut usize,
                status: *mut OpforgeStatus,
            ) -> OpforgeCode,
        >,
        /// Sets output `i`'s shape.
        pub set_output: Option<
            unsafe extern "C" fn(
                ctx: *mut OpforgeShapeCtx,
                i: usize,
                shape: OpforgeShape,
                status: *mut OpforgeStatus,
            ) -> OpforgeCode,
        >,
        /// The shape output `i` was set to.
        pub output: Option<unsafe extern "C" fn(ctx: *const OpforgeShapeCtx, i: usize) -> OpforgeShape>,
        /// The rank, or [`OPFORGE_UNKNOWN_RANK`].
        pub rank: Option<unsafe extern "C" fn(ctx: *const OpforgeShapeCtx, shape: OpforgeShape) -> i32>,
        /// Dim `index` (negative counts from the end).
        pub dim: Option<
            unsafe extern "C" fn(
                ctx: *mut OpforgeShapeCtx,
                shape: OpforgeShape,
                index: i64,
                out: *mut OpforgeDim,
                status: *mut OpforgeStatus,
            ) -> OpforgeCode,
        >,
        /// The size, or [`OPFORGE_UNKNOWN_DIM`].
        pub value: Option<unsafe extern "C" fn(ctx: *const OpforgeShapeCtx, dim: OpforgeDim) -> i64>,
        /// The number of elements, or -1 if not fully defined.
        pub num_elements:
            Option<unsafe extern "C" fn(ctx: *const OpforgeShapeCtx, shape: OpforgeShape) -> i64>,
        /// A new dim of this size.
        pub make_dim: Option<unsafe extern "C" fn(ctx: *mut OpforgeShapeCtx, value: i64) -> OpforgeDim>,
        /// A new shape of these dims.
        pub make_shape: Option<
            unsafe extern "C" fn(
                ctx: *mut OpforgeShapeCtx,
                dims: *const OpforgeDim,
                rank: usize,
                out: *mut OpforgeShape,
                status: *mut OpforgeStatus,
            ) -> OpforgeCode,
        >,
        /// A new shape of these sizes.
        pub make_shape_from_values: Option<
            unsafe extern "C" fn(
                ctx: *mut OpforgeShapeCtx,
                dims: *const i64,
                rank: usize,
                out: *mut OpforgeShape,
                status: *mut OpforgeStatus,
            ) -> OpforgeCode,
        >,
        /// A shape of this rank with unknown dims, or of unknown rank.
        pub unknown_shape: Option<unsafe extern "C" fn(ctx: *mut OpforgeShapeCtx, rank: i32) -> OpforgeShape>,
        /// TensorFlow's WithRank.
        pub with_rank: Option<
            unsafe extern "C" fn(
                ctx: *mut OpforgeShapeCtx,
                shape: OpforgeShape,
                rank: i32,
                out: *mut OpforgeShape,
                status: *mut OpforgeStatus,
            ) -> OpforgeCode,
        >,
        /// TensorFlow's WithRankAtLeast.
        pub with_rank_at_least: Option<
            unsafe extern "C" fn(
                ctx: *mut OpforgeShapeCtx,
                shape: OpforgeShape,
                rank: i32,
                out: *mut OpforgeShape,
                status: *mut OpforgeStatus,
            ) -> OpforgeCode,
        >,
        /// TensorFlow's WithRankAtMost.
        pub with_rank_at_most: Option<
            unsafe extern "C" fn(
                ctx: *mut OpforgeShapeCtx,
                shape: OpforgeShape,
                rank: i32,
                out: *mut OpforgeShape,
                status: *mut OpforgeStatus,
            ) -> OpforgeCode,
        >,
        /// TensorFlow's WithValue.
        pub with_value: Option<
            unsafe extern "C" fn(
                ctx: *mut OpforgeShapeCtx,
                dim: OpforgeDim,
                value: i64,
                out: *mut OpforgeDim,
                status: *mut OpforgeStatus,
            ) -> OpforgeCode,
        >,
        /// TensorFlow's Merge (shapes).
        pub merge: Option<
            unsafe extern "C" fn(
                ctx: *mut OpforgeShapeCtx,
                a: OpforgeShape,
                b: OpforgeShape,
                out: *mut OpforgeShape,
                status: *mut OpforgeStatus,
            ) -> OpforgeCode,
        >,
        /// TensorFlow's Merge (dims).
        pub merge_dim: Option<
            unsafe extern "C" fn(
                ctx: *mut OpforgeShapeCtx,
                a: OpforgeDim,
                b: OpforgeDim,
                out: *mut OpforgeDim,
                status: *mut OpforgeStatus,
            ) -> OpforgeCode,
        >,
        /// TensorFlow's MergePrefix.
        pub merge_prefix: Option<
            unsafe extern "C" fn(
                ctx: *mut OpforgeShapeCtx,
                shape: OpforgeShape,
                prefix: OpforgeShape,
                shape_out: *mut OpforgeShape,
                prefix_out: *mut OpforgeShape,
                status: *mut OpforgeStatus,
            ) -> OpforgeCode,
        >,
        /// TensorFlow's Subshape (with stride).
        pub subshape: Option<
            unsafe extern "C" fn(
                ctx: *mut OpforgeShapeCtx,
                shape: OpforgeShape,
                start: i64,
                end: i64,
                stride: i64,
                out: *mut OpforgeShape,
                status: *mut OpforgeStatus,
            ) -> OpforgeCode,
        >,
        /// TensorFlow's Concatenate.
        pub concatenate: Option<
            unsafe extern "C" fn(
                ctx: *mut OpforgeShapeCtx,
                a: OpforgeShape,
                b: OpforgeShape,
                out: *mut OpforgeShape,
                status: *mut OpforgeStatus,
            ) -> OpforgeCode,
        >,
        /// TensorFlow's ReplaceDim.
        pub replace_dim: Option<
            unsafe extern "C" fn(
                ctx: *mut OpforgeShapeCtx,
                shape: OpforgeShape,
                index: i64,
                dim: OpforgeDim,
                out: *mut OpforgeShape,
                status: *mut OpforgeStatus,
            ) -> OpforgeCode,
        >,
        /// `a op b` for `op` an `OPFORGE_DIM_*`.
        pub dim_op: Option<
            unsafe extern "C" fn(
                ctx: *mut OpforgeShapeCtx,
                op: u32,
                a: OpforgeDim,
                b: OpforgeDim,
                out: *mut OpforgeDim,
                status: *mut OpforgeStatus,
            ) -> OpforgeCode,
        >,
        /// The value of input `i` if it is a constant: 1 and a view; else 0.
        pub input_tensor: Option<
            unsafe extern "C" fn(ctx: *const OpforgeShapeCtx, i: usize, view: *mut OpforgeTensor) -> u8,
        >,
        /// Input `i` (a shape tensor) as a shape (MakeShapeFromShapeTensor).
        pub input_as_shape: Option<
            unsafe extern "C" fn(
                ctx: *mut OpforgeShapeCtx,
                i: usize,
                out: *mut OpforgeShape,
                status: *mut OpforgeStatus,
            ) -> OpforgeCode,
        >,
        /// Attr `name` of the node.
        pub attr: Option<
            unsafe extern "C" fn(
                ctx: *const OpforgeShapeCtx,
                name: OpforgeStr,
                value: *mut OpforgeAttrValue,
                status: *mut OpforgeStatus,
            ) -> OpforgeCode,
        >,
        /// A shape as text (`"[2,?,3]"` or `"?"`).
        pub shape_string:
            Option<unsafe extern "C" fn(ctx: *const OpforgeShapeCtx, shape: OpforgeShape) -> OpforgeStr>,
    }
}

abi_struct! {
    /// Gradient callbacks (autodiff's `Ops` interface plus the forward op):
    /// every value is an [`OpforgeSym`] of the context.
    pub struct OpforgeGradApi (min_size 112) {
        /// The host's size of the table (R1).
        pub struct_size: usize,
        /// The forward op's name.
        pub op_name: Option<unsafe extern "C" fn(ctx: *const OpforgeGradCtx) -> OpforgeStr>,
        /// Attr `name` of the forward node.
        pub attr: Option<
            unsafe extern "C" fn(
                ctx: *const OpforgeGradCtx,
                name: OpforgeStr,
                value: *mut OpforgeAttrValue,
                status: *mut OpforgeStatus,
            ) -> OpforgeCode,
        >,
        /// The number of the forward op's flat inputs.
        pub num_inputs: Option<unsafe extern "C" fn(ctx: *const OpforgeGradCtx) -> usize>,
        /// The forward op's flat input `i`.
        pub input: Option<unsafe extern "C" fn(ctx: *const OpforgeGradCtx, i: usize) -> OpforgeSym>,
        /// The number of the forward op's flat outputs.
        pub num_outputs: Option<unsafe extern "C" fn(ctx: *const OpforgeGradCtx) -> usize>,
        /// The forward op's flat output `i`.
        pub output: Option<unsafe extern "C" fn(ctx: *const OpforgeGradCtx, i: usize) -> OpforgeSym>,
        /// The flat range of the forward op's input/output argument `name`.
        pub arg_range: Option<
            unsafe extern "C" fn(
                ctx: *const OpforgeGradCtx,
                name: OpforgeStr,
                is_output: u8,
                start: *mut usize,
                stop: *mut usize,
                status: *mut OpforgeStatus,
            ) -> OpforgeCode,
        >,
        /// The gradient flowing into output `i`: 1 and `*grad`, or 0.
        pub output_grad: Option<
            unsafe extern "C" fn(ctx: *const OpforgeGradCtx, i: usize, grad: *mut OpforgeSym) -> u8,
        >,
        /// The dtype of a value.
        pub dtype: Option<unsafe extern "C" fn(ctx: *const OpforgeGradCtx, sym: OpforgeSym) -> OpforgeDType>,
        /// What is known of a value's shape: the rank, and the first
        /// `min(rank, cap)` dims written to `dims`.
        pub shape: Option<
            unsafe extern "C" fn(
                ctx: *const OpforgeGradCtx,
                sym: OpforgeSym,
                dims: *mut i64,
                cap: usize,
            ) -> i32,
        >,
        /// Calls registered op `op` on `args` with `attrs`.
        pub call: Option<
            unsafe extern "C" fn(
                ctx: *mut OpforgeGradCtx,
                op: OpforgeStr,
                args: *const OpforgeSymArg,
                num_args: usize,
                attrs: *const OpforgeNamedAttr,
                num_attrs: usize,
                outs: *mut OpforgeSym,
                cap: usize,
                num_outs: *mut usize,
                status: *mut OpforgeStatus,
            ) -> OpforgeCode,
        >,
        /// A constant (the view's memory is copied).
        pub constant: Option<
            unsafe extern "C" fn(
                ctx: *mut OpforgeGradCtx,
                value: *const OpforgeTensor,
                out: *mut OpforgeSym,
                status: *mut OpforgeStatus,
            ) -> OpforgeCode,
        >,
        /// Sets the gradient of flat input `i`.
        pub set_input_grad: Option<
            unsafe extern "C" fn(
                ctx: *mut OpforgeGradCtx,
                i: usize,
                grad: OpforgeSym,
                status: *mut OpforgeStatus,
            ) -> OpforgeCode,
        >,
    }
}

abi_struct! {
    /// The table the host passes to init: everything a plugin may call.
    /// Each library gets its own (R7).
    pub struct OpforgeHostApi (min_size 136) {
        /// The host's size of the table (R1).
        pub struct_size: usize,
        /// The host's ABI major (equal to the library's).
        pub abi_major: u32,
        /// The host's ABI minor.
        pub abi_minor: u32,
        /// The host's own version, e.g. `"opforge 0.1.0"`.
        pub host_version: OpforgeStr,
        /// Registration (init only).
        pub registration: *const OpforgeRegistrationApi,
        /// Kernel construction and compute.
        pub kernel: *const OpforgeKernelApi,
        /// Shape inference.
        pub shape: *const OpforgeShapeApi,
        /// Gradient callbacks.
        pub grad: *const OpforgeGradApi,
        /// Sets a status's code and message (copied); OK clears it.
        pub set_status: Option<
            unsafe extern "C" fn(status: *mut OpforgeStatus, code: OpforgeCode, message: OpforgeStr),
        >,
        /// A status's code.
        pub status_code: Option<unsafe extern "C" fn(status: *const OpforgeStatus) -> OpforgeCode>,
        /// A status's message (valid until the status changes).
        pub status_message: Option<unsafe extern "C" fn(status: *const OpforgeStatus) -> OpforgeStr>,
        /// Sets `OPFORGE_STATUS_*` flags.
        pub set_status_flags: Option<unsafe extern "C" fn(status: *mut OpforgeStatus, flags: u32)>,
        /// A status's flags.
        pub status_flags: Option<unsafe extern "C" fn(status: *const OpforgeStatus) -> u32>,
        /// A new OK status owned by the plugin (free with `status_delete`).
        pub status_new: Option<unsafe extern "C" fn() -> *mut OpforgeStatus>,
        /// Frees a status made by `status_new`.
        pub status_delete: Option<unsafe extern "C" fn(status: *mut OpforgeStatus)>,
        /// Logs a message at an `OPFORGE_LOG_*` level; `host` is the table
        /// the library's init received.
        pub log: Option<
            unsafe extern "C" fn(host: *const OpforgeHostApi, level: u32, message: OpforgeStr),
        >,
        /// An extension table by name, of at least `min_version`, or NULL.
        pub extension:
            Option<unsafe extern "C" fn(name: OpforgeStr, min_version: u32) -> *const c_void>,
    }
}

// The host tables are shared between threads: a host keeps them in
// statics, a plugin in a global.
//
// SAFETY: (for this impl and the nine below) a host table is filled once by
// the host and never written again; its function slots may be called from any
// thread (R9), and the pointers it holds (sub-tables, the host version
// string) point to data that is immutable for as long as the table lives
// (R7). Moving or sharing a table between threads is therefore sound.
unsafe impl Send for OpforgeRegistrationApi {}
// SAFETY: see above.
unsafe impl Sync for OpforgeRegistrationApi {}
// SAFETY: see above.
unsafe impl Send for OpforgeKernelApi {}
// SAFETY: see above.
unsafe impl Sync for OpforgeKernelApi {}
// SAFETY: see above.
unsafe impl Send for OpforgeShapeApi {}
// SAFETY: see above.
unsafe impl Sync for OpforgeShapeApi {}
// SAFETY: see above.
unsafe impl Send for OpforgeGradApi {}
// SAFETY: see above.
unsafe impl Sync for OpforgeGradApi {}
// SAFETY: see above.
unsafe impl Send for OpforgeHostApi {}
// SAFETY: see above.
unsafe impl Sync for OpforgeHostApi {}
