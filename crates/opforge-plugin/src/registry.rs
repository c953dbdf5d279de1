//! What a library declares: ops ([`OpDefBuilder`]), kernels
//! ([`KernelDefBuilder`] → [`KernelDef`]) and gradients ([`GradientDef`]),
//! gathered in a [`Library`] by [`export!`](crate::export).
//!
//! Every declaration is a `const` value, so the same data is registered
//! through the host's tables at init and written into the library's
//! manifest at compile time (see [`manifest`](crate::manifest)): what a
//! reader of the file sees is what init registers.

use core::ffi::c_void;

use opforge_abi::{
    OpforgeCode, OpforgeHostApi, OpforgeKernelComputeFn, OpforgeKernelComputeViewsFn,
    OpforgeKernelCreateFn, OpforgeKernelDef, OpforgeKernelDestroyFn, OpforgeOpDef,
    OpforgeOutputLike, OpforgeRegistrar, OpforgeStatus, OpforgeStr, OpforgeTypeConstraint,
    OPFORGE_INTERNAL, OPFORGE_KERNEL_NOT_THREAD_SAFE, OPFORGE_KERNEL_PARALLEL_ISOLATED, OPFORGE_OK,
    OPFORGE_OP_AGGREGATE, OPFORGE_OP_ALLOWS_UNINITIALIZED_INPUT, OPFORGE_OP_COMMUTATIVE,
    OPFORGE_OP_DISTRIBUTED_COMMUNICATION, OPFORGE_OP_STATEFUL, OPFORGE_OUTPUT_FORWARD,
};

use crate::dtype::DataType;
use crate::grad::GradientContext;
use crate::host::{self, slot, Host};
use crate::kernel::{self, CreateKernel};
use crate::shape::{self, InferenceContext};
use crate::status::{Result, Status};

/// The most attrs, inputs, outputs or control outputs of one op, type
/// constraints or host-memory arguments of one kernel (a compile-time
/// error beyond).
pub const MAX_ITEMS: usize = 32;
/// The most dtypes of one type constraint.
pub const MAX_TYPES: usize = 40;
/// The most output declarations ([`KernelDefBuilder::output_like`]) of one
/// kernel.
pub const MAX_OUTPUT_LIKE: usize = 8;

/// A shape function (TensorFlow's `SetShapeFn`).
pub type ShapeFn = fn(&mut InferenceContext<'_>) -> Result<()>;
/// A gradient function over the host's graph builder.
pub type GradFn = fn(&mut GradientContext<'_>) -> Result<()>;

/// A fixed-capacity list of `&'static str`, usable in `const` code.
#[derive(Clone, Copy, Debug)]
pub struct StrList {
    items: [&'static str; MAX_ITEMS],
    len: usize,
}

impl StrList {
    const EMPTY: StrList = StrList {
        items: [""; MAX_ITEMS],
        len: 0,
    };

    const fn push(mut self, s: &'static str, what: &'static str) -> StrList {
        if self.len == MAX_ITEMS {
            panic!("{}", what);
        }
        self.items[self.len] = s;
        self.len += 1;
        self
    }

    /// The items, in order.
    pub const fn as_slice(&self) -> &[&'static str] {
        self.items.split_at(self.len).0
    }
}

/// An op, declared with TensorFlow's spec language as opforge-core's
/// `OpDefBuilder` (the host builds the OpDef with that very builder, so
/// parsing, validation and messages are opforge's own). Every method is a
/// `const fn`: declare ops as constants.
///
/// ```
/// use opforge_plugin::{OpDefBuilder, shape};
/// const ZERO_OUT: OpDefBuilder = OpDefBuilder::new("ZeroOut")
///     .attr("T: realnumbertype = DT_INT32")
///     .input("to_zero: T")
///     .output("zeroed: T")
///     .set_shape_fn(shape::unchanged_shape)
///     .doc("Zeros out every element of the input except one.");
/// assert_eq!(ZERO_OUT.inputs(), ["to_zero: T"]);
/// ```
#[derive(Clone, Copy, Debug)]
pub struct OpDefBuilder {
    name: &'static str,
    attrs: StrList,
    inputs: StrList,
    outputs: StrList,
    control_outputs: StrList,
    flags: u32,
    deprecation: Option<(i32, &'static str)>,
    doc: &'static str,
    shape_fn: Option<ShapeFn>,
}

impl OpDefBuilder {
    /// An op named `name` with no arguments.
    pub const fn new(name: &'static str) -> OpDefBuilder {
        OpDefBuilder {
            name,
            attrs: StrList::EMPTY,
            inputs: StrList::EMPTY,
            outputs: StrList::EMPTY,
            control_outputs: StrList::EMPTY,
            flags: 0,
            deprecation: None,
            doc: "",
            shape_fn: None,
        }
    }

    /// Adds an attr: `"T: {float, int32} = DT_INT32"`, `"n: int >= 1"`.
    pub const fn attr(mut self, spec: &'static str) -> OpDefBuilder {
        self.attrs = self.attrs.push(spec, "too many attrs");
        self
    }

    /// Adds an input: `"to_zero: T"`, `"values: N * T"`.
    pub const fn input(mut self, spec: &'static str) -> OpDefBuilder {
        self.inputs = self.inputs.push(spec, "too many inputs");
        self
    }

    /// Adds an output: `"zeroed: T"`.
    pub const fn output(mut self, spec: &'static str) -> OpDefBuilder {
        self.outputs = self.outputs.push(spec, "too many outputs");
        self
    }

    /// Adds a control output by name.
    pub const fn control_output(mut self, name: &'static str) -> OpDefBuilder {
        self.control_outputs = self.control_outputs.push(name, "too many control outputs");
        self
    }

    /// Marks the op stateful (TensorFlow's `SetIsStateful`).
    pub const fn set_is_stateful(mut self) -> OpDefBuilder {
        self.flags |= OPFORGE_OP_STATEFUL;
        self
    }

    /// Marks the op commutative (`SetIsCommutative`).
    pub const fn set_is_commutative(mut self) -> OpDefBuilder {
        self.flags |= OPFORGE_OP_COMMUTATIVE;
        self
    }

    /// Marks the op aggregate (`SetIsAggregate`).
    pub const fn set_is_aggregate(mut self) -> OpDefBuilder {
        self.flags |= OPFORGE_OP_AGGREGATE;
        self
    }

    /// Allows uninitialized inputs (`SetAllowsUninitializedInput`).
    pub const fn set_allows_uninitialized_input(mut self) -> OpDefBuilder {
        self.flags |= OPFORGE_OP_ALLOWS_UNINITIALIZED_INPUT;
        self
    }

    /// Marks the op distributed communication
    /// (`SetIsDistributedCommunication`).
    pub const fn set_is_distributed_communication(mut self) -> OpDefBuilder {
        self.flags |= OPFORGE_OP_DISTRIBUTED_COMMUNICATION;
        self
    }

    /// Deprecates the op at GraphDef version `version` (`Deprecated`).
    pub const fn deprecated(mut self, version: i32, explanation: &'static str) -> OpDefBuilder {
        self.deprecation = Some((version, explanation));
        self
    }

    /// The documentation, in `REGISTER_OP`'s `.Doc()` format.
    pub const fn doc(mut self, doc: &'static str) -> OpDefBuilder {
        self.doc = doc;
        self
    }

    /// The shape function (TensorFlow's `SetShapeFn`).
    pub const fn set_shape_fn(mut self, f: ShapeFn) -> OpDefBuilder {
        self.shape_fn = Some(f);
        self
    }

    /// The op's name.
    pub const fn name(&self) -> &'static str {
        self.name
    }
    /// The attr specs.
    pub const fn attrs(&self) -> &[&'static str] {
        self.attrs.as_slice()
    }
    /// The input specs.
    pub const fn inputs(&self) -> &[&'static str] {
        self.inputs.as_slice()
    }
    /// The output specs.
    pub const fn outputs(&self) -> &[&'static str] {
        self.outputs.as_slice()
    }
    /// The control outputs' names.
    pub const fn control_outputs(&self) -> &[&'static str] {
        self.control_outputs.as_slice()
    }
    /// The `OPFORGE_OP_*` flags.
    pub const fn flags(&self) -> u32 {
        self.flags
    }
    /// The deprecation (version, explanation), if any.
    pub const fn deprecation(&self) -> Option<(i32, &'static str)> {
        self.deprecation
    }
    /// The documentation.
    pub const fn get_doc(&self) -> &'static str {
        self.doc
    }
    /// The shape function, if any.
    pub const fn shape_fn(&self) -> Option<ShapeFn> {
        self.shape_fn
    }
}

/// The dtypes a kernel accepts for one type attr.
#[derive(Clone, Copy, Debug)]
pub struct TypeConstraint {
    attr: &'static str,
    types: [DataType; MAX_TYPES],
    len: usize,
}

impl TypeConstraint {
    /// The attr.
    pub const fn attr(&self) -> &'static str {
        self.attr
    }
    /// The dtypes, in order.
    pub const fn types(&self) -> &[DataType] {
        self.types.split_at(self.len).0
    }
}

const fn str_eq(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}

/// A kernel's declaration that output `output` has the dims of input
/// `input` ([`KernelDefBuilder::output_like`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OutputLike {
    /// The flat output index.
    pub output: usize,
    /// The flat input index whose dims the output takes.
    pub input: usize,
    /// Whether the output may take over the input's buffer
    /// ([`KernelDefBuilder::output_like_forwarding`]).
    pub forward: bool,
}

/// A kernel's definition (TensorFlow's `KernelDefBuilder`): op, device,
/// type constraints, host-memory arguments, label, priority, whether its
/// compute is thread-safe, and the outputs the host sets before it runs
/// ([`output_like`](Self::output_like)). [`build`](Self::build) binds the
/// [`CreateKernel`] type that implements it. Every method is a `const fn`.
#[derive(Clone, Copy, Debug)]
pub struct KernelDefBuilder {
    op: &'static str,
    device: &'static str,
    constraints: [TypeConstraint; 8],
    num_constraints: usize,
    host_memory: StrList,
    label: &'static str,
    priority: i32,
    flags: u32,
    output_like: [OutputLike; MAX_OUTPUT_LIKE],
    num_output_like: usize,
}

impl KernelDefBuilder {
    /// A CPU kernel of `op` with no constraints.
    pub const fn new(op: &'static str) -> KernelDefBuilder {
        KernelDefBuilder {
            op,
            device: "CPU",
            constraints: [TypeConstraint {
                attr: "",
                types: [DataType::Invalid; MAX_TYPES],
                len: 0,
            }; 8],
            num_constraints: 0,
            host_memory: StrList::EMPTY,
            label: "",
            priority: 0,
            flags: 0,
            output_like: [OutputLike {
                output: 0,
                input: 0,
                forward: false,
            }; MAX_OUTPUT_LIKE],
            num_output_like: 0,
        }
    }

    /// The device type (`"CPU"`, the default; 1.0 hosts serve only CPU).
    pub const fn device(mut self, device: &'static str) -> KernelDefBuilder {
        self.device = device;
        self
    }

    /// Allows `dtype` for the type attr `attr` (repeatable: the types add
    /// up, as `TypeConstraint<T>` in TensorFlow).
    pub const fn type_constraint(
        mut self,
        attr: &'static str,
        dtype: DataType,
    ) -> KernelDefBuilder {
        let mut i = 0;
        while i < self.num_constraints {
            if str_eq(self.constraints[i].attr, attr) {
                break;
            }
            i += 1;
        }
        if i == self.num_constraints {
            if i == self.constraints.len() {
                panic!("too many type constraints");
            }
            self.constraints[i].attr = attr;
            self.num_constraints += 1;
        }
        let c = &mut self.constraints[i];
        if c.len == MAX_TYPES {
            panic!("too many dtypes in one type constraint");
        }
        c.types[c.len] = dtype;
        c.len += 1;
        self
    }

    /// Allows every dtype of `dtypes` for the type attr `attr`.
    pub const fn type_constraint_list(
        mut self,
        attr: &'static str,
        dtypes: &[DataType],
    ) -> KernelDefBuilder {
        let mut i = 0;
        while i < dtypes.len() {
            self = self.type_constraint(attr, dtypes[i]);
            i += 1;
        }
        self
    }

    /// Keeps the input or output argument `arg` in host memory
    /// (TensorFlow's `HostMemory`).
    pub const fn host_memory(mut self, arg: &'static str) -> KernelDefBuilder {
        self.host_memory = self.host_memory.push(arg, "too many host-memory args");
        self
    }

    /// The kernel label (selected by a node's `_kernel` attr).
    pub const fn label(mut self, label: &'static str) -> KernelDefBuilder {
        self.label = label;
        self
    }

    /// The priority: higher wins among matching kernels (default 0).
    pub const fn priority(mut self, priority: i32) -> KernelDefBuilder {
        self.priority = priority;
        self
    }

    /// The kernel's compute is not thread-safe: the host serialises the
    /// computes of one instance.
    pub const fn not_thread_safe(mut self) -> KernelDefBuilder {
        self.flags |= OPFORGE_KERNEL_NOT_THREAD_SAFE;
        self
    }

    /// `parallel_for` runs shards whose waiting thread runs nothing else
    /// (for kernels that shard while holding a lock).
    pub const fn parallel_isolated(mut self) -> KernelDefBuilder {
        self.flags |= OPFORGE_KERNEL_PARALLEL_ISOLATED;
        self
    }

    /// The kernel handles every output request (`OpKernelContext::output_request`:
    /// null, write, in place, add); without it the host asks only for
    /// write.
    pub const fn output_requests(mut self) -> KernelDefBuilder {
        self.flags |= opforge_abi::OPFORGE_KERNEL_OUTPUT_REQUESTS;
        self
    }

    /// Output `output` has the dims of input `input` (and its own dtype):
    /// it is set, allocated, when [`OpKernel::compute`](crate::OpKernel::compute) starts, and
    /// `ctx.output_mut(output)` (or `inputs_and_output`) is its writable
    /// view. The elementwise case: with it, the host makes the output
    /// before calling the kernel (ABI 1.1's `output_like`), so the kernel
    /// computes with no call back into the host. On a 1.0 host the SDK
    /// allocates it through the context first; the kernel sees no
    /// difference. A node whose `output` or `input` is out of range, or
    /// whose output is a string, resource or variant, fails when its
    /// kernel is made (`InvalidArgument`). At most one declaration per
    /// output, [`MAX_OUTPUT_LIKE`] in all.
    ///
    /// ```
    /// use opforge_plugin::prelude::*;
    ///
    /// struct Negate;
    /// impl CreateKernel for Negate {
    ///     fn create(_: &OpKernelConstruction<'_>) -> Result<Self> {
    ///         Ok(Negate)
    ///     }
    /// }
    /// impl OpKernel for Negate {
    ///     fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
    ///         // Output 0 is already allocated with input 0's dims.
    ///         let (ins, mut out) = ctx.inputs_and_output(0)?;
    ///         for (y, x) in out.flat_mut::<f32>()?.iter_mut().zip(ins[0].flat::<f32>()?) {
    ///             *y = -x;
    ///         }
    ///         Ok(())
    ///     }
    /// }
    ///
    /// const NEGATE_KERNEL: opforge_plugin::KernelDef =
    ///     KernelDefBuilder::new("MyNegate").output_like(0, 0).build::<Negate>();
    /// assert_eq!(NEGATE_KERNEL.def.output_likes()[0].input, 0);
    /// ```
    pub const fn output_like(self, output: usize, input: usize) -> KernelDefBuilder {
        self.push_output_like(output, input, false)
    }

    /// [`output_like`](Self::output_like), and the output may take over
    /// input `input`'s own buffer when nothing else holds it (TensorFlow's
    /// `forward_input_or_allocate_output`): the kernel then computes in
    /// place. [`OpKernelContext::forwarded_from`](crate::OpKernelContext::forwarded_from)
    /// says which happened. After forwarding, the input's view stays
    /// readable until the kernel first uses the output (it is the same
    /// memory: read each element before writing it); afterwards
    /// `ctx.input(input)` fails, and `inputs_and_output(output)` too (use
    /// `output_mut`). A 1.0 host never forwards.
    ///
    /// ```
    /// use opforge_plugin::prelude::*;
    ///
    /// struct Square;
    /// impl CreateKernel for Square {
    ///     fn create(_: &OpKernelConstruction<'_>) -> Result<Self> {
    ///         Ok(Square)
    ///     }
    /// }
    /// impl OpKernel for Square {
    ///     fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
    ///         if ctx.forwarded_from(0) == Some(0) {
    ///             // In place: output 0 is input 0's buffer.
    ///             for v in ctx.output_mut(0)?.flat_mut::<f32>()? {
    ///                 *v *= *v;
    ///             }
    ///         } else {
    ///             let (ins, mut out) = ctx.inputs_and_output(0)?;
    ///             for (y, x) in out.flat_mut::<f32>()?.iter_mut().zip(ins[0].flat::<f32>()?) {
    ///                 *y = x * x;
    ///             }
    ///         }
    ///         Ok(())
    ///     }
    /// }
    ///
    /// const SQUARE_KERNEL: opforge_plugin::KernelDef = KernelDefBuilder::new("MySquare")
    ///     .output_like_forwarding(0, 0)
    ///     .build::<Square>();
    /// assert!(SQUARE_KERNEL.def.output_likes()[0].forward);
    /// ```
    pub const fn output_like_forwarding(self, output: usize, input: usize) -> KernelDefBuilder {
        self.push_output_like(output, input, true)
    }

    const fn push_output_like(
        mut self,
        output: usize,
        input: usize,
        forward: bool,
    ) -> KernelDefBuilder {
        let mut i = 0;
        while i < self.num_output_like {
            if self.output_like[i].output == output {
                panic!("an output is declared twice with output_like");
            }
            i += 1;
        }
        if self.num_output_like == MAX_OUTPUT_LIKE {
            panic!("too many output_like declarations");
        }
        self.output_like[self.num_output_like] = OutputLike {
            output,
            input,
            forward,
        };
        self.num_output_like += 1;
        self
    }

    /// The kernel definition implemented by `K`: both compute entries (the
    /// 1.0 `compute` and the 1.1 `compute_views`, which a 1.1 host calls),
    /// so the library keeps loading into 1.0 hosts.
    pub const fn build<K: CreateKernel>(self) -> KernelDef {
        KernelDef {
            def: self,
            create: Some(kernel::create_trampoline::<K>),
            compute: Some(kernel::compute_trampoline::<K>),
            compute_views: Some(kernel::compute_views_trampoline::<K>),
            destroy: Some(kernel::destroy_trampoline::<K>),
        }
    }

    /// The op.
    pub const fn op(&self) -> &'static str {
        self.op
    }
    /// The device type.
    pub const fn device_type(&self) -> &'static str {
        self.device
    }
    /// The type constraints.
    pub const fn constraints(&self) -> &[TypeConstraint] {
        self.constraints.split_at(self.num_constraints).0
    }
    /// The host-memory arguments.
    pub const fn host_memory_args(&self) -> &[&'static str] {
        self.host_memory.as_slice()
    }
    /// The label.
    pub const fn get_label(&self) -> &'static str {
        self.label
    }
    /// The priority.
    pub const fn get_priority(&self) -> i32 {
        self.priority
    }
    /// The `OPFORGE_KERNEL_*` flags.
    pub const fn flags(&self) -> u32 {
        self.flags
    }
    /// The output declarations ([`output_like`](Self::output_like)).
    pub const fn output_likes(&self) -> &[OutputLike] {
        self.output_like.split_at(self.num_output_like).0
    }
}

/// A kernel definition bound to its implementation
/// ([`KernelDefBuilder::build`]).
#[derive(Clone, Copy, Debug)]
pub struct KernelDef {
    /// The definition.
    pub def: KernelDefBuilder,
    create: OpforgeKernelCreateFn,
    compute: OpforgeKernelComputeFn,
    compute_views: OpforgeKernelComputeViewsFn,
    destroy: OpforgeKernelDestroyFn,
}

/// How an op's gradient is given.
#[derive(Clone, Copy, Debug)]
pub enum GradientForm {
    /// A function over the host's graph builder ([`GradientContext`]).
    Fn(GradFn),
    /// A list of nodes over registered ops, made at init by the function
    /// (evaluated by the host with no plugin code at autodiff time).
    Nodes(fn() -> crate::grad_nodes::GradientFunction),
    /// No gradient flows through the op.
    NotDifferentiable,
}

/// An op's gradient (TensorFlow's `RegisterGradient` /
/// `NotDifferentiable`).
#[derive(Clone, Copy, Debug)]
pub struct GradientDef {
    /// The forward op.
    pub op: &'static str,
    /// The gradient.
    pub form: GradientForm,
}

impl GradientDef {
    /// The gradient of `op` is built by `f`.
    pub const fn new(op: &'static str, f: GradFn) -> GradientDef {
        GradientDef {
            op,
            form: GradientForm::Fn(f),
        }
    }

    /// The gradient of `op` is the node list `f` makes (a declarative
    /// gradient).
    pub const fn nodes(
        op: &'static str,
        f: fn() -> crate::grad_nodes::GradientFunction,
    ) -> GradientDef {
        GradientDef {
            op,
            form: GradientForm::Nodes(f),
        }
    }

    /// `op` is not differentiable.
    pub const fn not_differentiable(op: &'static str) -> GradientDef {
        GradientDef {
            op,
            form: GradientForm::NotDifferentiable,
        }
    }
}

/// Everything a library declares; made by [`export!`](crate::export).
#[derive(Clone, Copy, Debug)]
pub struct Library {
    /// The library's name.
    pub name: &'static str,
    /// Its version.
    pub version: &'static str,
    /// The lowest host ABI minor it needs (the manifest's
    /// `abi.min_host_minor`).
    pub min_host_minor: u32,
    /// Whether it was built with `panic = "abort"` (refused at init).
    pub panic_abort: bool,
    /// Its ops.
    pub ops: &'static [OpDefBuilder],
    /// Its kernels.
    pub kernels: &'static [KernelDef],
    /// Its gradients.
    pub gradients: &'static [GradientDef],
}

fn strs(items: &[&'static str]) -> Vec<OpforgeStr> {
    items.iter().map(|s| OpforgeStr::from_text(s)).collect()
}

fn register_op(
    host: &Host,
    registrar: *mut OpforgeRegistrar,
    status: *mut OpforgeStatus,
    op: &'static OpDefBuilder,
) -> Result<()> {
    let register = slot!(host, registration.op)?;
    let (attrs, inputs, outputs, control) = (
        strs(op.attrs()),
        strs(op.inputs()),
        strs(op.outputs()),
        strs(op.control_outputs()),
    );
    let mut def = OpforgeOpDef::new();
    def.name = OpforgeStr::from_text(op.name);
    def.attrs = attrs.as_ptr();
    def.num_attrs = attrs.len();
    def.inputs = inputs.as_ptr();
    def.num_inputs = inputs.len();
    def.outputs = outputs.as_ptr();
    def.num_outputs = outputs.len();
    def.control_outputs = control.as_ptr();
    def.num_control_outputs = control.len();
    def.flags = op.flags;
    if let Some((version, explanation)) = op.deprecation {
        def.deprecation_version = version;
        def.deprecation_explanation = OpforgeStr::from_text(explanation);
    }
    def.doc = OpforgeStr::from_text(op.doc);
    if op.shape_fn.is_some() {
        def.shape_fn = Some(shape::shape_trampoline);
        def.shape_fn_user = op as *const OpDefBuilder as *mut c_void;
    }
    // SAFETY: `def` and the arrays it points to live across the call (the
    // host copies them, R5); `registrar` and `status` are init's (R7); the
    // shape function's user pointer is a `'static` OpDefBuilder.
    let code = unsafe { register(registrar, &def, status) };
    host.check(code, status)
}

fn register_kernel(
    host: &Host,
    registrar: *mut OpforgeRegistrar,
    status: *mut OpforgeStatus,
    kernel: &'static KernelDef,
) -> Result<()> {
    let register = slot!(host, registration.kernel)?;
    let k = &kernel.def;
    let constraints: Vec<OpforgeTypeConstraint> = k
        .constraints()
        .iter()
        .map(|c| {
            let mut t = OpforgeTypeConstraint::new();
            t.attr = OpforgeStr::from_text(c.attr);
            // DataType is a transparent i32, OpforgeDType's type.
            t.types = c.types().as_ptr().cast();
            t.num_types = c.len;
            t
        })
        .collect();
    let host_memory = strs(k.host_memory_args());
    let output_like: Vec<OpforgeOutputLike> = k
        .output_likes()
        .iter()
        .map(|l| OpforgeOutputLike {
            output: l.output,
            input: l.input,
            flags: if l.forward { OPFORGE_OUTPUT_FORWARD } else { 0 },
            ..OpforgeOutputLike::new()
        })
        .collect();
    let mut def = OpforgeKernelDef::new();
    def.op = OpforgeStr::from_text(k.op);
    def.device_type = OpforgeStr::from_text(k.device);
    def.constraints = constraints.as_ptr();
    def.num_constraints = constraints.len();
    def.host_memory_args = host_memory.as_ptr();
    def.num_host_memory_args = host_memory.len();
    def.label = OpforgeStr::from_text(k.label);
    def.priority = k.priority;
    def.flags = k.flags;
    def.create = kernel.create;
    def.compute = kernel.compute;
    def.compute_views = kernel.compute_views;
    def.output_like = output_like.as_ptr();
    def.num_output_like = output_like.len();
    def.destroy = kernel.destroy;
    def.user = kernel as *const KernelDef as *mut c_void;
    // SAFETY: as in `register_op`; `user` is a `'static` KernelDef, valid
    // until fini as R7 asks.
    let code = unsafe { register(registrar, &def, status) };
    host.check(code, status)
}

fn register_gradient(
    host: &Host,
    registrar: *mut OpforgeRegistrar,
    status: *mut OpforgeStatus,
    gradient: &'static GradientDef,
) -> Result<()> {
    let op = OpforgeStr::from_text(gradient.op);
    let code = match gradient.form {
        GradientForm::Fn(_) => {
            let register = slot!(host, registration.gradient_fn)?;
            // SAFETY: as in `register_op`; `user` is a `'static`
            // GradientDef.
            unsafe {
                register(
                    registrar,
                    op,
                    Some(crate::grad::grad_trampoline),
                    gradient as *const GradientDef as *mut c_void,
                    status,
                )
            }
        }
        GradientForm::Nodes(f) => {
            let register = slot!(host, registration.gradient_function)?;
            let g = f();
            crate::grad_nodes::with_abi(gradient.op, &g, |def| {
                // SAFETY: as in `register_op`; `def` and every array it
                // points to live across the call (the host copies them).
                unsafe { register(registrar, def, status) }
            })
        }
        GradientForm::NotDifferentiable => {
            let register = slot!(host, registration.not_differentiable)?;
            // SAFETY: as in `register_op`.
            unsafe { register(registrar, op, status) }
        }
    };
    host.check(code, status)
}

/// The body of `opforge_plugin_init_v1` ([`export!`](crate::export)).
///
/// # Safety
///
/// The arguments must be those the host passed to init (rule R7).
pub unsafe fn init(
    library: &'static Library,
    raw: *const OpforgeHostApi,
    registrar: *mut OpforgeRegistrar,
    status: *mut OpforgeStatus,
) -> OpforgeCode {
    let outcome = crate::panic::catch(|| {
        // SAFETY: `raw` is init's host table (caller).
        unsafe { host::install(raw, library) }
    });
    match outcome {
        Ok(Ok(())) => {}
        Ok(Err(e)) => {
            // No usable table: report through it only if it can be read.
            return report_without_install(raw, status, &e);
        }
        Err(_) => return OPFORGE_INTERNAL,
    }
    let code = host::guard(
        status,
        || format!("init of library {}", library.name),
        |host| {
            if host.api.abi_minor < library.min_host_minor {
                return Err(Status::failed_precondition(format!(
                    "library {} {} needs opforge C ABI {}.{}+; this host provides {}.{}",
                    library.name,
                    library.version,
                    opforge_abi::OPFORGE_ABI_MAJOR,
                    library.min_host_minor,
                    host.api.abi_major,
                    host.api.abi_minor
                )));
            }
            if library.panic_abort {
                return Err(Status::failed_precondition(format!(
                    "library {} {} was built with panic = \"abort\": a panic in any of its \
                     code would abort the host; rebuild it with panic = \"unwind\"",
                    library.name, library.version
                )));
            }
            for op in library.ops {
                register_op(host, registrar, status, op).map_err(|e| {
                    Status::new(e.code, format!("registering op {}: {}", op.name, e.message))
                })?;
            }
            for k in library.kernels {
                register_kernel(host, registrar, status, k).map_err(|e| {
                    Status::new(
                        e.code,
                        format!("registering a kernel of {}: {}", k.def.op, e.message),
                    )
                })?;
            }
            for g in library.gradients {
                register_gradient(host, registrar, status, g).map_err(|e| {
                    Status::new(
                        e.code,
                        format!("registering the gradient of {}: {}", g.op, e.message),
                    )
                })?;
            }
            Ok(())
        },
    );
    if code != OPFORGE_OK {
        host::uninstall();
    }
    code
}

fn report_without_install(
    raw: *const OpforgeHostApi,
    status: *mut OpforgeStatus,
    e: &Status,
) -> OpforgeCode {
    if !raw.is_null() && !status.is_null() {
        // SAFETY: a non-null `raw` is init's host table (R7).
        if let Ok(api) = unsafe { <OpforgeHostApi as opforge_abi::Versioned>::read_from(raw) } {
            if let Some(set) = api.set_status {
                // SAFETY: init's status; the message is copied (R5).
                unsafe { set(status, e.code.0, OpforgeStr::from_text(&e.message)) };
            }
        }
    }
    e.code.0
}

/// The body of `opforge_plugin_fini_v1`: forgets the host's tables, so that
/// a later init starts afresh.
pub fn fini() {
    host::uninstall();
}
