//! The data structs of the header: strings, tensor views, attr values, op,
//! kernel and gradient definitions, foreign tensors, extension headers.

use crate::versioned::abi_struct;
use crate::*;
use core::ffi::{c_char, c_void};

abi_struct! {
    /// A string: pointer + length, not NUL-terminated (R5). `ptr` may be
    /// NULL when `len` is 0. Names, specs, docs and messages are UTF-8; attr
    /// strings and string-tensor elements are bytes.
    pub struct OpforgeStr {
        /// The first byte.
        pub ptr: *const c_char,
        /// The number of bytes.
        pub len: usize,
    }
}

impl OpforgeStr {
    /// The empty string (NULL, 0).
    pub const EMPTY: OpforgeStr = OpforgeStr::new();

    /// A string over `bytes` (borrowed: it must outlive every use of the
    /// result).
    pub const fn from_bytes(bytes: &[u8]) -> OpforgeStr {
        OpforgeStr {
            ptr: bytes.as_ptr().cast::<c_char>(),
            len: bytes.len(),
        }
    }

    /// A string over `text` (borrowed, as [`from_bytes`](Self::from_bytes)).
    pub const fn from_text(text: &str) -> OpforgeStr {
        OpforgeStr::from_bytes(text.as_bytes())
    }

    /// The bytes.
    ///
    /// # Safety
    ///
    /// Unless `len` is 0, `ptr` must point to `len` readable bytes that stay
    /// valid and unchanged for `'a` (R7 says for how long the other side
    /// lends them).
    pub unsafe fn as_bytes<'a>(self) -> &'a [u8] {
        if self.len == 0 {
            return &[];
        }
        // SAFETY: the caller guarantees `ptr` is valid for `len` bytes for
        // 'a; `len > 0`, so `ptr` is not NULL by that guarantee.
        unsafe { core::slice::from_raw_parts(self.ptr.cast::<u8>(), self.len) }
    }
}

impl From<&str> for OpforgeStr {
    fn from(text: &str) -> OpforgeStr {
        OpforgeStr::from_text(text)
    }
}

/// [`OpforgeTensor::flags`]: the view's data may be written.
pub const OPFORGE_TENSOR_WRITABLE: u32 = 1;
/// [`OpforgeTensor::flags`]: dense row-major; the strides are the row-major
/// ones.
pub const OPFORGE_TENSOR_CONTIGUOUS: u32 = 2;
/// [`OpforgeTensor::flags`]: data is host memory the CPU may read (always
/// set by 1.0 hosts).
pub const OPFORGE_TENSOR_HOST_MEMORY: u32 = 4;

abi_struct! {
    /// A borrowed view of a tensor (an out-struct: the caller sets
    /// `struct_size`). Made by the host (inputs, outputs, temporaries,
    /// constant inputs of shape functions, tensor attrs), it lives as R7
    /// says; element `(i0, .., ik)` is at `data + sum(i_j * strides[j])`
    /// elements. `DT_STRING` views point at `num_elements` [`OpforgeStr`].
    /// Made by the plugin (a gradient constant), `strides` NULL means
    /// row-major.
    pub struct OpforgeTensor (min_size 64) {
        /// Set by the caller to its size of the struct (R1).
        pub struct_size: usize,
        /// The element type.
        pub dtype: OpforgeDType,
        /// The number of dims.
        pub rank: u32,
        /// `rank` sizes (may be NULL when `rank` is 0).
        pub dims: *const i64,
        /// `rank` strides, in elements (not bytes).
        pub strides: *const i64,
        /// The first element; writable only with
        /// [`OPFORGE_TENSOR_WRITABLE`].
        pub data: *mut c_void,
        /// Bytes from `data` to one past the last element.
        pub byte_len: u64,
        /// The product of `dims` (1 for a scalar).
        pub num_elements: i64,
        /// `OPFORGE_TENSOR_*` bits.
        pub flags: u32,
    }
}

abi_struct! {
    /// A shape as a value (shape attrs): `rank` [`OPFORGE_UNKNOWN_RANK`] =
    /// unknown rank; a dim [`OPFORGE_UNKNOWN_DIM`] = unknown size.
    pub struct OpforgeShapeValue (min_size 24) {
        /// Its size of the struct (R1).
        pub struct_size: usize,
        /// The rank, or [`OPFORGE_UNKNOWN_RANK`].
        pub rank: i32,
        /// `rank` dims (NULL when `rank <= 0`).
        pub dims: *const i64,
    }
}

/// [`OpforgeAttrValue::kind`]: no value.
pub const OPFORGE_ATTR_NONE: u32 = 0;
/// `int`: field `i`.
pub const OPFORGE_ATTR_INT: u32 = 1;
/// `float`: field `f`.
pub const OPFORGE_ATTR_FLOAT: u32 = 2;
/// `bool`: field `b`.
pub const OPFORGE_ATTR_BOOL: u32 = 3;
/// `type`: field `type` (`OpforgeAttrValue::r#type` in Rust).
pub const OPFORGE_ATTR_TYPE: u32 = 4;
/// `string`: field `s` (bytes).
pub const OPFORGE_ATTR_STRING: u32 = 5;
/// `shape`: field `shape`.
pub const OPFORGE_ATTR_SHAPE: u32 = 6;
/// `tensor`: field `tensor` (a read-only view).
pub const OPFORGE_ATTR_TENSOR: u32 = 7;
/// `func`: field `func` (a function name with attrs bound to it).
pub const OPFORGE_ATTR_FUNC: u32 = 8;
/// A reference to an attr of the forward op, by name in field `s`
/// (TensorFlow's `$T`); only in declarative gradient nodes.
pub const OPFORGE_ATTR_PLACEHOLDER: u32 = 9;
/// Flag: a list of the element kind (`kind & OPFORGE_ATTR_KIND_MASK`) in
/// `list`/`list_len`: `i64`, `f32`, `u8`, [`OpforgeDType`], [`OpforgeStr`],
/// [`OpforgeShapeValue`], [`OpforgeTensor`] or [`OpforgeFuncValue`]
/// elements; arrays of structs step by the first element's `struct_size`.
pub const OPFORGE_ATTR_LIST: u32 = 0x100;
/// The element kind of an [`OpforgeAttrValue::kind`].
pub const OPFORGE_ATTR_KIND_MASK: u32 = 0xff;

abi_struct! {
    /// A `func` attr value (TensorFlow's `NameAttrList`).
    pub struct OpforgeFuncValue (min_size 40) {
        /// Its size of the struct (R1).
        pub struct_size: usize,
        /// The function's name.
        pub name: OpforgeStr,
        /// Its attrs (`num_attrs` of them).
        pub attrs: *const OpforgeNamedAttr,
        /// The number of attrs.
        pub num_attrs: usize,
    }
}

abi_struct! {
    /// An attr value of any type: a tagged record whose `kind` says which
    /// field holds the value (the others are zero). Filled by the host (an
    /// out-struct: the caller sets `struct_size`) or by the plugin (attrs of
    /// gradient calls and declarative gradient nodes). Everything it points
    /// to lives as the value (R7).
    pub struct OpforgeAttrValue (min_size 88) {
        /// Its size of the struct (R1).
        pub struct_size: usize,
        /// `OPFORGE_ATTR_*`, possibly with [`OPFORGE_ATTR_LIST`].
        pub kind: u32,
        /// TYPE (`type` in C, a Rust keyword).
        pub r#type: OpforgeDType,
        /// INT.
        pub i: i64,
        /// FLOAT.
        pub f: f32,
        /// BOOL (0 or 1).
        pub b: u8,
        /// STRING (bytes); PLACEHOLDER (the forward op's attr name).
        pub s: OpforgeStr,
        /// SHAPE.
        pub shape: *const OpforgeShapeValue,
        /// TENSOR.
        pub tensor: *const OpforgeTensor,
        /// FUNC.
        pub func: *const OpforgeFuncValue,
        /// LIST: the elements (see [`OPFORGE_ATTR_LIST`]).
        pub list: *const c_void,
        /// LIST: the number of elements.
        pub list_len: usize,
    }
}

abi_struct! {
    /// An attr by name.
    pub struct OpforgeNamedAttr (min_size 32) {
        /// Its size of the struct (R1).
        pub struct_size: usize,
        /// The attr's name.
        pub name: OpforgeStr,
        /// Its value.
        pub value: *const OpforgeAttrValue,
    }
}

/// [`OpforgeOpDef::flags`]: the op is stateful.
pub const OPFORGE_OP_STATEFUL: u32 = 1;
/// [`OpforgeOpDef::flags`]: the op is commutative.
pub const OPFORGE_OP_COMMUTATIVE: u32 = 2;
/// [`OpforgeOpDef::flags`]: the op is an aggregate.
pub const OPFORGE_OP_AGGREGATE: u32 = 4;
/// [`OpforgeOpDef::flags`]: the op allows uninitialized inputs.
pub const OPFORGE_OP_ALLOWS_UNINITIALIZED_INPUT: u32 = 8;
/// [`OpforgeOpDef::flags`]: the op communicates across processes.
pub const OPFORGE_OP_DISTRIBUTED_COMMUNICATION: u32 = 16;

abi_struct! {
    /// An op, in the spec language of `REGISTER_OP` / `register_op!`
    /// (attrs `"T: {float, int32} = DT_INT32"`, inputs `"to_zero: T"`,
    /// outputs `"zeroed: T"`); the host builds the OpDef with the same
    /// builder as `register_op!`.
    pub struct OpforgeOpDef (min_size 144) {
        /// Its size of the struct (R1).
        pub struct_size: usize,
        /// The op's name.
        pub name: OpforgeStr,
        /// Attr specs.
        pub attrs: *const OpforgeStr,
        /// The number of attr specs.
        pub num_attrs: usize,
        /// Input specs.
        pub inputs: *const OpforgeStr,
        /// The number of input specs.
        pub num_inputs: usize,
        /// Output specs.
        pub outputs: *const OpforgeStr,
        /// The number of output specs.
        pub num_outputs: usize,
        /// Names of control outputs (rare).
        pub control_outputs: *const OpforgeStr,
        /// The number of control outputs.
        pub num_control_outputs: usize,
        /// `OPFORGE_OP_*` bits.
        pub flags: u32,
        /// The GraphDef version that deprecated the op; 0: not deprecated.
        pub deprecation_version: i32,
        /// Why, and what to use instead (with `deprecation_version`).
        pub deprecation_explanation: OpforgeStr,
        /// The documentation, in `REGISTER_OP`'s `.Doc()` format.
        pub doc: OpforgeStr,
        /// The op's shape function; `None`: outputs of unknown shape.
        pub shape_fn: OpforgeShapeFn,
        /// Passed to `shape_fn`; valid until fini (R7).
        pub shape_fn_user: *mut c_void,
    }
}

/// [`OpforgeKernelDef::flags`]: compute is not thread-safe; the host
/// serialises computes of one instance.
pub const OPFORGE_KERNEL_NOT_THREAD_SAFE: u32 = 1;
/// [`OpforgeKernelDef::flags`]: `parallel_for` runs shards whose waiting
/// thread runs nothing else (`ThreadPool::shard_isolated`).
pub const OPFORGE_KERNEL_PARALLEL_ISOLATED: u32 = 2;
/// [`OpforgeKernelDef::flags`]: the kernel handles every output request
/// (`OPFORGE_REQ_*`); without it the host asks only for WRITE.
pub const OPFORGE_KERNEL_OUTPUT_REQUESTS: u32 = 4;

abi_struct! {
    /// The dtypes a kernel accepts for one `type` or `list(type)` attr.
    pub struct OpforgeTypeConstraint (min_size 40) {
        /// Its size of the struct (R1).
        pub struct_size: usize,
        /// The attr's name.
        pub attr: OpforgeStr,
        /// The accepted dtypes.
        pub types: *const OpforgeDType,
        /// The number of accepted dtypes.
        pub num_types: usize,
    }
}

/// [`OpforgeOutputLike::flags`]: the host may give the output the input's
/// own buffer (forwarding: the kernel then computes in place); without it
/// the host allocates. (1.1)
pub const OPFORGE_OUTPUT_FORWARD: u32 = 1;

abi_struct! {
    /// (1.1) One declaration of [`OpforgeKernelDef::output_like`]: flat
    /// output `output` has the dims of flat input `input` (and its own
    /// dtype); the host sets it (forwarded or allocated) before each
    /// `compute_views` call and passes its writable view.
    pub struct OpforgeOutputLike (min_size 32) {
        /// Its size of the struct (R1).
        pub struct_size: usize,
        /// The flat output index (at most one declaration per output).
        pub output: usize,
        /// The flat input index whose dims the output takes.
        pub input: usize,
        /// `OPFORGE_OUTPUT_*` bits.
        pub flags: u32,
    }
}

abi_struct! {
    /// (1.1) What `compute_views` receives, made by the host for the call
    /// and valid until it returns: a read-only view per flat input, a view
    /// per flat output (writable for a declared output; `flags` 0 and NULL
    /// data for one not set yet), and per output the input it was
    /// forwarded from ([`OPFORGE_NOT_FORWARDED`] if none). The header says
    /// the details.
    pub struct OpforgeKernelViews (min_size 48) {
        /// The host's size of the struct (R1).
        pub struct_size: usize,
        /// `num_inputs` views (step by the first one's `struct_size`).
        pub inputs: *const OpforgeTensor,
        /// The number of flat inputs.
        pub num_inputs: usize,
        /// `num_outputs` views (step by the first one's `struct_size`).
        pub outputs: *const OpforgeTensor,
        /// The number of flat outputs.
        pub num_outputs: usize,
        /// `num_outputs` entries: the flat input each output took the
        /// buffer of, or [`OPFORGE_NOT_FORWARDED`].
        pub forwarded_from: *const i64,
    }
}

abi_struct! {
    /// A kernel (TensorFlow's `REGISTER_KERNEL_BUILDER`): which op, device
    /// and dtypes it serves, and its callbacks. Selection is TensorFlow's
    /// (device, constraints, label, then the highest priority).
    pub struct OpforgeKernelDef (min_size 128) {
        /// Its size of the struct (R1).
        pub struct_size: usize,
        /// The op (registered by this library, an earlier one, or built
        /// in).
        pub op: OpforgeStr,
        /// `"CPU"` (1.0 hosts answer UNIMPLEMENTED for other device types).
        pub device_type: OpforgeStr,
        /// Type constraints (arrays of structs step by `struct_size`).
        pub constraints: *const OpforgeTypeConstraint,
        /// The number of type constraints.
        pub num_constraints: usize,
        /// Input or output argument names kept in host memory.
        pub host_memory_args: *const OpforgeStr,
        /// The number of host-memory argument names.
        pub num_host_memory_args: usize,
        /// The kernel label (`""` for none; selected by the `_kernel` attr).
        pub label: OpforgeStr,
        /// Higher wins among matching kernels; 0 is the default.
        pub priority: i32,
        /// `OPFORGE_KERNEL_*` bits.
        pub flags: u32,
        /// `None`: the state is `user` itself.
        pub create: OpforgeKernelCreateFn,
        /// Required in 1.0; from 1.1 it may be `None` when `compute_views`
        /// is set (the library's `min_host_minor` must then be at least 1).
        pub compute: OpforgeKernelComputeFn,
        /// `None`: nothing to free.
        pub destroy: OpforgeKernelDestroyFn,
        /// Passed to create and destroy; valid until fini (R7).
        pub user: *mut c_void,
        /// (1.1) The views entry; `None`: `compute` only. A 1.1 host calls
        /// it instead of `compute` when it is set.
        pub compute_views: OpforgeKernelComputeViewsFn,
        /// (1.1) The outputs the host sets before `compute_views` runs
        /// (steps by the first one's `struct_size`); only with
        /// `compute_views`.
        pub output_like: *const OpforgeOutputLike,
        /// (1.1) The number of `output_like` declarations.
        pub num_output_like: usize,
    }
}

/// [`OpforgeGradSource::kind`]: no value (in `input_grads`: no gradient).
pub const OPFORGE_GRAD_SRC_NONE: u32 = 0;
/// An input of the forward op.
pub const OPFORGE_GRAD_SRC_INPUT: u32 = 1;
/// An output of the forward op.
pub const OPFORGE_GRAD_SRC_OUTPUT: u32 = 2;
/// The gradient flowing into an output of the forward op (zeros of its
/// shape and dtype where none flows).
pub const OPFORGE_GRAD_SRC_OUTPUT_GRAD: u32 = 3;
/// An output of an earlier node of the list.
pub const OPFORGE_GRAD_SRC_NODE: u32 = 4;
/// [`OpforgeGradSource::index`]: the whole argument (a list as a list).
pub const OPFORGE_GRAD_WHOLE_ARG: i64 = -1;

abi_struct! {
    /// Where a value of a declarative gradient comes from (see the header
    /// for the meaning of `arg` and `index` per `kind`).
    pub struct OpforgeGradSource (min_size 40) {
        /// Its size of the struct (R1).
        pub struct_size: usize,
        /// `OPFORGE_GRAD_SRC_*`.
        pub kind: u32,
        /// NODE: the position of the node in the list.
        pub node: u32,
        /// The argument's name, or empty for a flat index.
        pub arg: OpforgeStr,
        /// The element of a list argument, [`OPFORGE_GRAD_WHOLE_ARG`], or a
        /// flat index.
        pub index: i64,
    }
}

abi_struct! {
    /// One argument of a declarative gradient node: a single tensor
    /// (`is_list` 0: one source) or a list (`is_list` 1).
    pub struct OpforgeGradArg (min_size 32) {
        /// Its size of the struct (R1).
        pub struct_size: usize,
        /// The sources (arrays of structs step by `struct_size`).
        pub sources: *const OpforgeGradSource,
        /// The number of sources.
        pub num_sources: usize,
        /// 1: a list argument.
        pub is_list: u8,
    }
}

abi_struct! {
    /// One node of a declarative gradient: a call of a registered op.
    pub struct OpforgeGradNode (min_size 72) {
        /// Its size of the struct (R1).
        pub struct_size: usize,
        /// Optional: names the node in graphs and messages (`""` for none).
        pub name: OpforgeStr,
        /// The op called.
        pub op: OpforgeStr,
        /// One per input argument of `op`, in order.
        pub inputs: *const OpforgeGradArg,
        /// The number of input arguments.
        pub num_inputs: usize,
        /// Attrs (defaults and type inference as for a gradient call).
        pub attrs: *const OpforgeNamedAttr,
        /// The number of attrs.
        pub num_attrs: usize,
    }
}

abi_struct! {
    /// The gradient of `op` as a node list (TensorFlow's
    /// `REGISTER_OP_GRADIENT` maps onto it).
    pub struct OpforgeGradientFunction (min_size 56) {
        /// Its size of the struct (R1).
        pub struct_size: usize,
        /// The forward op.
        pub op: OpforgeStr,
        /// The nodes, in evaluation order.
        pub nodes: *const OpforgeGradNode,
        /// The number of nodes.
        pub num_nodes: usize,
        /// One per input argument of the forward op, in order: its
        /// gradient.
        pub input_grads: *const OpforgeGradArg,
        /// The number of input gradients.
        pub num_input_grads: usize,
    }
}

abi_struct! {
    /// An output backed by memory the plugin allocated
    /// (`set_output_foreign`). On success the host owns it and calls
    /// `release(data, release_user)` exactly once when the last tensor
    /// sharing it is gone; on failure the plugin still owns it.
    pub struct OpforgeForeignTensor (min_size 64) {
        /// Its size of the struct (R1).
        pub struct_size: usize,
        /// Must be the output's dtype (not `DT_STRING`).
        pub dtype: OpforgeDType,
        /// The number of dims.
        pub rank: u32,
        /// `rank` sizes.
        pub dims: *const i64,
        /// In elements; NULL: row-major (1.0 hosts require row-major).
        pub strides: *const i64,
        /// The first element, aligned to the element size.
        pub data: *mut c_void,
        /// Bytes from `data` to one past the last element.
        pub byte_len: u64,
        /// Frees `data`.
        pub release: OpforgeReleaseFn,
        /// Passed to `release`.
        pub release_user: *mut c_void,
    }
}

/// Output request (MXNet's `OpReqType`): the output is not needed.
pub const OPFORGE_REQ_NULL: u32 = 0;
/// Output request: set the output and write it (the only request of 1.0
/// hosts).
pub const OPFORGE_REQ_WRITE: u32 = 1;
/// Output request: the output is bound to an input's memory; write there.
pub const OPFORGE_REQ_INPLACE: u32 = 2;
/// Output request: the output is bound and holds values; add into it.
pub const OPFORGE_REQ_ADD: u32 = 3;

abi_struct! {
    /// One input argument of a gradient `call`: a single value (`is_list`
    /// 0, one sym) or a list.
    pub struct OpforgeSymArg (min_size 32) {
        /// Its size of the struct (R1).
        pub struct_size: usize,
        /// The values.
        pub syms: *const OpforgeSym,
        /// The number of values.
        pub num_syms: usize,
        /// 1: a list argument.
        pub is_list: u8,
    }
}

/// `dim_op`: `a + b`.
pub const OPFORGE_DIM_ADD: u32 = 1;
/// `dim_op`: `a - b`.
pub const OPFORGE_DIM_SUB: u32 = 2;
/// `dim_op`: `a * b`.
pub const OPFORGE_DIM_MUL: u32 = 3;
/// `dim_op`: `a / b` (TensorFlow's Divide, not evenly divisible).
pub const OPFORGE_DIM_DIV: u32 = 4;
/// `dim_op`: `a / b`, an error unless evenly divisible.
pub const OPFORGE_DIM_DIV_EXACT: u32 = 5;
/// `dim_op`: `min(a, b)`.
pub const OPFORGE_DIM_MIN: u32 = 6;
/// `dim_op`: `max(a, b)`.
pub const OPFORGE_DIM_MAX: u32 = 7;

/// `log` level: debugging detail.
pub const OPFORGE_LOG_DEBUG: u32 = 0;
/// `log` level: information.
pub const OPFORGE_LOG_INFO: u32 = 1;
/// `log` level: a warning.
pub const OPFORGE_LOG_WARNING: u32 = 2;
/// `log` level: an error.
pub const OPFORGE_LOG_ERROR: u32 = 3;

/// Status flag: the error comes from a panic or exception the plugin caught
/// (the host evicts the kernel instance).
pub const OPFORGE_STATUS_PANICKED: u32 = 1;

abi_struct! {
    /// The start of every extension table `extension` returns.
    pub struct OpforgeExtensionHeader (min_size 16) {
        /// The table's size (R1, as a host table).
        pub struct_size: usize,
        /// The table's version (>= the `min_version` asked for).
        pub version: u32,
    }
}
