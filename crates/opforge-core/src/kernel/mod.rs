//! Kernels: the [`OpKernel`] trait, kernel registration (for an op, a device
//! type, type constraints, host-memory args, a label and a priority) and
//! selection of the kernel that matches a node.

mod context;
mod request;

pub use context::{
    call_kernel, call_kernel_with, KernelSignature, OpKernelConstruction, OpKernelContext,
    TensorVec,
};
pub(crate) use request::can_take_over;
pub use request::{
    add_into, FInplaceIdentity, FInplaceOption, OutputBinding, OutputRequest, RequestSupport,
};

use crate::attrs::AttrMap;
use crate::origin::EntryState;
use crate::proto::attr_value::Value;
use crate::{DataType, Element, Result};
use std::sync::Arc;

/// A kernel: the computation of an op on one device. Built once per node
/// (or per eager call signature) and then run many times, possibly from
/// several threads at once.
pub trait OpKernel: Send + Sync {
    /// Reads the inputs from `ctx` and sets every output.
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()>;

    /// The output requests beyond `Write` this kernel handles (see
    /// [`OutputRequest`]); by default none, so the kernel is asked only to
    /// write and the runtime does the rest. Asked once per call by
    /// [`call_kernel_with`] and once per node when a session plans.
    fn supported_requests(&self) -> RequestSupport {
        RequestSupport::WRITE_ONLY
    }

    /// (flat input, flat output) pairs this kernel itself declares may
    /// share a buffer (a plugin's `output_like` forwarding declarations),
    /// in addition to the op's [`FInplaceOption`]. By default none.
    fn inplace_pairs(&self) -> Vec<(usize, usize)> {
        Vec::new()
    }
}

/// A kernel type that builds itself from a construction context (used by
/// [`register_kernel!`](crate::register_kernel) with a type).
pub trait CreateKernel: OpKernel + Sized + 'static {
    /// Validates the attrs and builds the kernel.
    fn create(ctx: &OpKernelConstruction<'_>) -> Result<Self>;
}

/// Builds a kernel for a node.
pub type KernelFactory =
    Arc<dyn Fn(&OpKernelConstruction<'_>) -> Result<Box<dyn OpKernel>> + Send + Sync>;

/// What a kernel registration matches.
#[derive(Clone, Debug, PartialEq)]
pub struct KernelDef {
    /// The op.
    pub op: String,
    /// The device type (`CPU`, ...).
    pub device_type: String,
    /// `(attr, allowed dtypes)`: the node's type attr (or every element of
    /// its `list(type)` attr) must be one of them.
    pub constraints: Vec<(String, Vec<DataType>)>,
    /// Args whose tensors stay in host memory on an accelerator.
    pub host_memory_args: Vec<String>,
    /// Matches only nodes whose `_kernel` attr is this label ("" = no label).
    pub label: String,
    /// Among several matches, the highest priority wins.
    pub priority: i32,
}

impl KernelDef {
    /// For each flat input of a node with signature `sig`, whether the
    /// kernel reads it from host memory (TensorFlow's `HostMemory`).
    pub fn host_memory_inputs(&self, sig: &KernelSignature) -> Vec<bool> {
        self.host_memory_flags(
            &sig.op_def.input_arg,
            &sig.input_ranges,
            sig.input_types.len(),
        )
    }

    /// For each flat output of a node with signature `sig`, whether the
    /// kernel writes it to host memory.
    pub fn host_memory_outputs(&self, sig: &KernelSignature) -> Vec<bool> {
        self.host_memory_flags(
            &sig.op_def.output_arg,
            &sig.output_ranges,
            sig.output_types.len(),
        )
    }

    fn host_memory_flags(
        &self,
        args: &[crate::proto::op_def::ArgDef],
        ranges: &[std::ops::Range<usize>],
        n: usize,
    ) -> Vec<bool> {
        let mut flags = vec![false; n];
        for (arg, range) in args.iter().zip(ranges) {
            if self.host_memory_args.contains(&arg.name) {
                for i in range.clone() {
                    if let Some(f) = flags.get_mut(i) {
                        *f = true;
                    }
                }
            }
        }
        flags
    }
}

/// Builds a [`KernelDef`].
///
/// ```
/// use opforge_core::kernel::KernelDefBuilder;
/// use opforge_core::DataType;
/// let def = KernelDefBuilder::new("ZeroOut").type_constraint::<f32>("T").priority(1).build();
/// assert_eq!(def.device_type, "CPU");
/// assert_eq!(def.constraints, vec![("T".to_string(), vec![DataType::Float])]);
/// ```
#[derive(Clone, Debug)]
pub struct KernelDefBuilder {
    def: KernelDef,
}

impl KernelDefBuilder {
    /// A CPU kernel of `op` with no constraints.
    pub fn new(op: &str) -> KernelDefBuilder {
        KernelDefBuilder {
            def: KernelDef {
                op: op.to_string(),
                device_type: crate::device::DEVICE_CPU.to_string(),
                constraints: Vec::new(),
                host_memory_args: Vec::new(),
                label: String::new(),
                priority: 0,
            },
        }
    }

    /// Sets the device type.
    pub fn device(mut self, device_type: &str) -> Self {
        self.def.device_type = device_type.to_string();
        self
    }

    /// Constrains type attr `attr` to `T`'s dtype (TensorFlow's `TypeConstraint<T>`).
    pub fn type_constraint<T: Element>(self, attr: &str) -> Self {
        self.type_constraint_list(attr, &[T::DTYPE])
    }

    /// Constrains type (or `list(type)`) attr `attr` to `types`.
    pub fn type_constraint_list(mut self, attr: &str, types: &[DataType]) -> Self {
        match self.def.constraints.iter_mut().find(|(a, _)| a == attr) {
            Some((_, existing)) => existing.extend_from_slice(types),
            None => self
                .def
                .constraints
                .push((attr.to_string(), types.to_vec())),
        }
        self
    }

    /// Keeps `arg` in host memory (TensorFlow's `HostMemory`).
    pub fn host_memory(mut self, arg: &str) -> Self {
        self.def.host_memory_args.push(arg.to_string());
        self
    }

    /// Sets the label.
    pub fn label(mut self, label: &str) -> Self {
        self.def.label = label.to_string();
        self
    }

    /// Sets the priority.
    pub fn priority(mut self, priority: i32) -> Self {
        self.def.priority = priority;
        self
    }

    /// The definition.
    pub fn build(self) -> KernelDef {
        self.def
    }
}

/// A kernel definition and its factory, and (once registered) who
/// registered it.
pub struct KernelRegistration {
    /// What it matches.
    pub def: KernelDef,
    /// How to build the kernel.
    pub factory: KernelFactory,
    pub(crate) state: EntryState,
}

impl std::fmt::Debug for KernelRegistration {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "KernelRegistration({}: {})",
            self.def.op,
            self.describe()
        )
    }
}

impl KernelRegistration {
    /// A registration of a kernel type.
    pub fn of<K: CreateKernel>(def: KernelDefBuilder) -> KernelRegistration {
        KernelRegistration {
            def: def.build(),
            factory: Arc::new(|ctx| Ok(Box::new(K::create(ctx)?) as Box<dyn OpKernel>)),
            state: EntryState::default(),
        }
    }

    /// A registration with a factory function.
    pub fn with_factory(
        def: KernelDefBuilder,
        factory: impl Fn(&OpKernelConstruction<'_>) -> Result<Box<dyn OpKernel>> + Send + Sync + 'static,
    ) -> KernelRegistration {
        KernelRegistration {
            def: def.build(),
            factory: Arc::new(factory),
            state: EntryState::default(),
        }
    }

    /// Who registered the kernel, and whether it still is registered.
    pub fn state(&self) -> &EntryState {
        &self.state
    }

    /// Whether the kernel is still registered.
    #[inline]
    pub fn is_live(&self) -> bool {
        self.state.is_live()
    }

    pub(crate) fn matches(&self, attrs: &AttrMap, device_type: &str) -> bool {
        if self.def.device_type != device_type {
            return false;
        }
        let label = match attrs.get("_kernel").and_then(|v| v.value.as_ref()) {
            Some(Value::S(s)) => s.as_slice(),
            _ => b"",
        };
        if self.def.label.as_bytes() != label {
            return false;
        }
        self.def.constraints.iter().all(|(attr, allowed)| {
            let ok = |code: &i32| DataType::from_i32(*code).is_some_and(|d| allowed.contains(&d));
            match attrs.get(attr).and_then(|v| v.value.as_ref()) {
                Some(Value::Type(t)) => ok(t),
                Some(Value::List(l)) => l.r#type.iter().all(ok),
                _ => false,
            }
        })
    }

    /// For each flat input of a node with signature `sig`, whether this
    /// kernel reads it from host memory (TensorFlow's `HostMemory`).
    pub fn host_memory_inputs(&self, sig: &KernelSignature) -> Vec<bool> {
        self.def.host_memory_inputs(sig)
    }

    /// `device='CPU'; T in [DT_FLOAT, DT_DOUBLE]`, as TensorFlow lists kernels.
    pub fn describe(&self) -> String {
        let mut s = format!("device='{}'", self.def.device_type);
        for (attr, types) in &self.def.constraints {
            let names: Vec<&str> = types.iter().map(|d| d.proto_name()).collect();
            s.push_str(&format!("; {attr} in [{}]", names.join(", ")));
        }
        if !self.def.label.is_empty() {
            s.push_str(&format!("; label='{}'", self.def.label));
        }
        if self.def.priority != 0 {
            s.push_str(&format!("; priority={}", self.def.priority));
        }
        s
    }
}
