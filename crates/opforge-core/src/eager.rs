//! Eager execution: run an op now on tensors. Kernels are cached per
//! (op, input dtypes, attrs), so a repeated call costs a lookup and the
//! kernel's own work. Inputs that are not in the memory the kernel reads
//! (the device's, or the host for host-memory arguments) are copied there
//! through the device. A panicking kernel becomes an `Internal` error and
//! the context stays usable. A cached kernel whose op or kernel was
//! unloaded from the registry is never run again. A call repeated many
//! times can be prepared once ([`EagerContext::prepare`], see
//! [`PreparedOp`]): no name lookup, attr map or kernel selection per call.

use crate::attrs::{resolve_call, ArgTypes, AttrMap, IntoAttrValue};
use crate::device::{CpuDevice, Device, InputMemory};
use crate::kernel::{call_kernel, KernelRegistration, KernelSignature, OpKernel};
use crate::registry::{OpRegistrationData, Registry};
use crate::resource::ResourceMgr;
use crate::tensor::Location;
use crate::{DataType, Result, Status, Tensor};
use smallvec::SmallVec;
use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, PoisonError, RwLock};

mod prepared;
pub use prepared::{PreparedOp, PreparedOutputs, PREPARED_KERNELS};

/// One input argument of a call: a tensor, or a list of tensors (for
/// `N * T` and `list(type)` arguments).
#[derive(Clone, Debug)]
pub enum Arg {
    /// A single tensor.
    One(Tensor),
    /// A list of tensors.
    List(Vec<Tensor>),
}

impl From<Tensor> for Arg {
    fn from(t: Tensor) -> Arg {
        Arg::One(t)
    }
}

impl From<Vec<Tensor>> for Arg {
    fn from(l: Vec<Tensor>) -> Arg {
        Arg::List(l)
    }
}

/// The list length of each argument of a grouped call (`None` for a
/// single-tensor argument).
type Grouping = SmallVec<[Option<usize>; 4]>;

/// The kernel cache: op name -> the kernels built for its calls.
type KernelCache = HashMap<String, Vec<Arc<CachedKernel>>, foldhash::fast::RandomState>;

/// How many kernels each thread keeps at hand (most recent first).
const RECENT_KERNELS: usize = 8;

/// Gives each context a distinct id for the per-thread kernel list.
static NEXT_CONTEXT_ID: AtomicU64 = AtomicU64::new(1);

thread_local! {
    /// Each thread's most recently used kernels with their context's id:
    /// a repeated call finds its kernel here without taking the shared
    /// cache's lock or touching reference counts. (A dropped context's
    /// kernels stay here until newer ones push them out.)
    static RECENT: RefCell<Vec<(u64, Arc<CachedKernel>)>> = const { RefCell::new(Vec::new()) };
}

struct CachedKernel {
    dtypes: Vec<DataType>,
    /// The list lengths of a grouped call, `None` for a flat call.
    grouping: Option<Grouping>,
    given: AttrMap,
    sig: KernelSignature,
    kernel: Box<dyn OpKernel>,
    /// Where each flat input must be when the kernel runs.
    input_memory: InputMemory,
    /// The registrations the kernel was built from.
    op: Arc<OpRegistrationData>,
    registration: Arc<KernelRegistration>,
    /// The registry generation at which both were last seen registered.
    generation: AtomicU64,
}

impl CachedKernel {
    fn matches(&self, inputs: &[Tensor], grouping: &Option<Grouping>, given: &AttrMap) -> bool {
        self.matches_types(inputs, grouping)
            // (Comparing two empty maps through their iterators is not free.)
            && ((self.given.is_empty() && given.is_empty()) || self.given == *given)
    }

    /// Whether the kernel was built for inputs of these dtypes and grouping.
    #[inline]
    fn matches_types(&self, inputs: &[Tensor], grouping: &Option<Grouping>) -> bool {
        self.dtypes.len() == inputs.len()
            && self.dtypes.iter().zip(inputs).all(|(d, t)| *d == t.dtype())
            && self.grouping == *grouping
    }

    /// Whether the op and kernel are still registered, checked only when
    /// the registry's generation moved since the last check.
    #[inline]
    fn is_current(&self, generation: u64) -> bool {
        if self.generation.load(Ordering::Relaxed) == generation {
            return true;
        }
        let live = self.op.is_live() && self.registration.is_live();
        if live {
            self.generation.store(generation, Ordering::Relaxed);
        }
        live
    }
}

/// Runs ops eagerly on a device.
///
/// ```
/// use opforge_core::eager::EagerContext;
/// # use opforge_core::{register_op, register_kernel, OpDefBuilder, Tensor, Result};
/// # use opforge_core::kernel::{KernelDefBuilder, OpKernel, OpKernelContext, CreateKernel, OpKernelConstruction};
/// # register_op!(OpDefBuilder::new("DocNegate").input("x: float").output("y: float"));
/// # struct Neg;
/// # impl OpKernel for Neg { fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
/// #     let v: Vec<f32> = ctx.input(0).flat::<f32>()?.iter().map(|x| -x).collect();
/// #     let t = Tensor::from_vec(ctx.input(0).dims(), v)?; ctx.set_output(0, t) } }
/// # impl CreateKernel for Neg { fn create(_: &OpKernelConstruction<'_>) -> Result<Self> { Ok(Neg) } }
/// # register_kernel!(KernelDefBuilder::new("DocNegate"), Neg);
/// let ctx = EagerContext::new(1).unwrap();
/// let x = Tensor::from_vec(&[2], vec![1.0f32, -2.0]).unwrap();
/// let y = ctx.op("DocNegate").input(x).run1().unwrap();
/// assert_eq!(y.flat::<f32>().unwrap(), &[-1.0, 2.0]);
/// ```
pub struct EagerContext {
    device: Arc<dyn Device>,
    resource_mgr: Arc<ResourceMgr>,
    registry: Arc<Registry>,
    cache: RwLock<KernelCache>,
    /// This context's id in the per-thread kernel lists.
    id: u64,
}

impl Drop for EagerContext {
    /// Forgets this context's kernels in the dropping thread's recent list,
    /// so that a context dropped on the thread that used it holds no kernel
    /// (and no op library) afterwards. Other threads' lists still hold theirs
    /// until newer kernels push them out or the thread exits.
    fn drop(&mut self) {
        let id = self.id;
        let removed = RECENT.try_with(|r| match r.try_borrow_mut() {
            Ok(mut r) => {
                let (mine, others): (Vec<_>, Vec<_>) = r.drain(..).partition(|(i, _)| *i == id);
                *r = others;
                mine
            }
            Err(_) => Vec::new(),
        });
        // The kernels are dropped after the borrow ends.
        drop(removed);
    }
}

impl EagerContext {
    /// A context on a new CPU device with `intra_op_threads` threads (0 =
    /// one per core), using the global registry.
    pub fn new(intra_op_threads: usize) -> Result<EagerContext> {
        Ok(EagerContext::with_device(Arc::new(CpuDevice::new(
            intra_op_threads,
        )?)))
    }

    /// A context on the process-wide default CPU device.
    pub fn default_cpu() -> EagerContext {
        EagerContext::with_device(CpuDevice::shared())
    }

    /// A context on `device`, using the global registry.
    pub fn with_device(device: Arc<dyn Device>) -> EagerContext {
        EagerContext::with_registry(device, Registry::global().clone())
    }

    /// A context on `device` resolving ops, kernels and gradients in
    /// `registry` (a sandbox, or the global one), with a resource manager
    /// of its own.
    pub fn with_registry(device: Arc<dyn Device>, registry: Arc<Registry>) -> EagerContext {
        EagerContext::with_parts(device, registry, Arc::new(ResourceMgr::new()))
    }

    /// A context on `device`, with `registry`, keeping op state in
    /// `resource_mgr` (shared with a session, for instance).
    pub fn with_parts(
        device: Arc<dyn Device>,
        registry: Arc<Registry>,
        resource_mgr: Arc<ResourceMgr>,
    ) -> EagerContext {
        EagerContext {
            id: NEXT_CONTEXT_ID.fetch_add(1, Ordering::Relaxed),
            device,
            resource_mgr,
            registry,
            cache: RwLock::new(KernelCache::default()),
        }
    }

    /// The device.
    pub fn device(&self) -> &Arc<dyn Device> {
        &self.device
    }

    /// The registry this context resolves ops in.
    pub fn registry(&self) -> &Arc<Registry> {
        &self.registry
    }

    /// The resource manager holding this context's op state (variables, ...).
    pub fn resource_mgr(&self) -> &Arc<ResourceMgr> {
        &self.resource_mgr
    }

    /// Starts a call of op `name`, to be given inputs and attrs.
    pub fn op<'c>(&'c self, name: &'c str) -> EagerOp<'c> {
        EagerOp {
            ctx: self,
            name,
            inputs: Vec::new(),
            grouping: Grouping::new(),
            attrs: AttrMap::new(),
        }
    }

    /// Runs `op` on flat `inputs`. Each list argument takes as many tensors
    /// as its length attr (given in `attrs`) says, or, when the op has one
    /// list argument of unknown length, all the tensors the other arguments
    /// do not take. Use [`execute_args`](Self::execute_args) when that is ambiguous.
    pub fn execute(&self, op: &str, inputs: Vec<Tensor>, attrs: &AttrMap) -> Result<Vec<Tensor>> {
        self.run(op, inputs, None, attrs)
    }

    /// Runs `op` on grouped arguments, one [`Arg`] per input argument.
    pub fn execute_args(&self, op: &str, args: Vec<Arg>, attrs: &AttrMap) -> Result<Vec<Tensor>> {
        let (flat, grouping) = flatten_args(args);
        self.run(op, flat, Some(grouping), attrs)
    }

    /// The shared cache's kernel for this call, dropping kernels whose
    /// registrations were unloaded.
    fn cached(
        &self,
        op: &str,
        inputs: &[Tensor],
        grouping: &Option<Grouping>,
        attrs: &AttrMap,
    ) -> Option<Arc<CachedKernel>> {
        let generation = self.registry.generation();
        let cache = self.cache.read().unwrap_or_else(PoisonError::into_inner);
        let list = cache.get(op)?;
        if list.iter().all(|c| c.is_current(generation)) {
            return list
                .iter()
                .find(|c| c.matches(inputs, grouping, attrs))
                .cloned();
        }
        drop(cache);
        self.cache
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .retain(|_, list| {
                list.retain(|c| c.is_current(generation));
                !list.is_empty()
            });
        let _ = RECENT.try_with(|r| {
            if let Ok(mut r) = r.try_borrow_mut() {
                r.retain(|(_, c)| c.is_current(generation));
            }
        });
        None
    }

    fn run(
        &self,
        op: &str,
        inputs: Vec<Tensor>,
        grouping: Option<Grouping>,
        attrs: &AttrMap,
    ) -> Result<Vec<Tensor>> {
        // Fast path: this thread used the kernel recently. The kernel runs
        // under a shared borrow of the thread's list, so a kernel that runs
        // ops itself still finds kernels there.
        let mut inputs = Some(inputs);
        let generation = self.registry.generation();
        let recent = RECENT.try_with(|r| {
            let r = r.try_borrow().ok()?;
            let c = r.iter().find(|(id, c)| {
                *id == self.id
                    && c.sig.op_def.name == op
                    && inputs
                        .as_deref()
                        .is_some_and(|ins| c.matches(ins, &grouping, attrs))
            })?;
            if !c.1.is_current(generation) {
                return None;
            }
            Some(self.call(op, &c.1, inputs.take()?))
        });
        if let Ok(Some(result)) = recent {
            return result;
        }
        let inputs = inputs.ok_or_else(|| Status::internal("eager: inputs lost"))?;
        let cached = match self.cached(op, &inputs, &grouping, attrs) {
            Some(c) => c,
            None => self
                .build(op, &inputs, grouping, attrs)
                .map_err(|e| e.append(format!(" [Op:{op}]")))?,
        };
        let _ = RECENT.try_with(|r| {
            if let Ok(mut r) = r.try_borrow_mut() {
                if r.len() == RECENT_KERNELS {
                    r.pop();
                }
                r.insert(0, (self.id, cached.clone()));
            }
        });
        self.call(op, &cached, inputs)
    }

    /// Runs a cached kernel on `inputs`.
    fn call(&self, op: &str, cached: &CachedKernel, inputs: Vec<Tensor>) -> Result<Vec<Tensor>> {
        let mut inputs = inputs;
        cached.input_memory.place(&mut inputs, |i, t, want| {
            self.transfer(t, want)
                .map_err(|e| e.append(format!(" (input {i}) [Op:{op}]")))
        })?;
        // The outputs go into the inputs' vector: no allocation of its own.
        let result = call_kernel(
            cached.kernel.as_ref(),
            &cached.sig,
            &mut inputs,
            self.device.as_ref(),
            &self.resource_mgr,
            |v, i, t| {
                if i == 0 {
                    v.clear();
                }
                v.push(t);
            },
        );
        match result {
            Ok(()) => {
                if cached.sig.output_types.is_empty() {
                    inputs.clear();
                }
                Ok(inputs)
            }
            Err(e) => Err(e.append(format!(" [Op:{op}]"))),
        }
    }

    /// `t` copied to `want` (the host, or this context's device) through the device.
    #[cold]
    fn transfer(&self, t: &Tensor, want: Location) -> Result<Tensor> {
        let here = self.device.location();
        match (t.location(), want) {
            (Location::Host, w) if w == here => self.device.copy_from_host(t),
            (from, Location::Host) if from == here => self.device.copy_to_host(t),
            (from, _) => Err(Status::invalid_argument(format!(
                "a tensor on {from:?} was given to an op running on {}; copy it to the host first",
                self.device.name()
            ))),
        }
    }

    fn build(
        &self,
        op: &str,
        inputs: &[Tensor],
        grouping: Option<Grouping>,
        attrs: &AttrMap,
    ) -> Result<Arc<CachedKernel>> {
        let data = self.registry.lookup(op)?;
        let op_def = &data.op_def;
        let dtypes: Vec<DataType> = inputs.iter().map(Tensor::dtype).collect();
        let lens = match &grouping {
            Some(g) => g.to_vec(),
            None => flat_grouping(op_def, inputs.len(), attrs)?,
        };
        if lens.len() != op_def.input_arg.len() {
            return Err(Status::invalid_argument(format!(
                "{op} takes {} input arguments, but {} were given",
                op_def.input_arg.len(),
                lens.len()
            )));
        }
        let mut arg_types = Vec::with_capacity(lens.len());
        let mut at = 0;
        for len in &lens {
            match len {
                None => {
                    let dt = *dtypes
                        .get(at)
                        .ok_or_else(|| too_few(op, op_def, inputs.len()))?;
                    arg_types.push(ArgTypes::Single(dt));
                    at += 1;
                }
                Some(n) => {
                    let slice = dtypes
                        .get(at..at + n)
                        .ok_or_else(|| too_few(op, op_def, inputs.len()))?;
                    arg_types.push(ArgTypes::List(slice.to_vec()));
                    at += n;
                }
            }
        }
        if at != inputs.len() {
            return Err(too_few(op, op_def, inputs.len()));
        }
        let mut call = resolve_call(op_def, &arg_types, attrs)?;
        // Shared: gradient tapes recording the call clone the attrs.
        call.attrs.share();
        let built = self
            .registry
            .build_kernel(op_def, op, call.attrs, self.device.as_ref())?;
        let input_memory = built.input_memory(self.device.as_ref());
        let entry = Arc::new(CachedKernel {
            dtypes,
            grouping,
            given: attrs.clone(),
            sig: built.sig,
            kernel: built.kernel,
            input_memory,
            op: data,
            registration: built.registration,
            generation: AtomicU64::new(self.registry.generation()),
        });
        self.cache
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .entry(op.to_string())
            .or_default()
            .push(entry.clone());
        Ok(entry)
    }

    /// How many kernels the cache holds.
    pub fn cached_kernels(&self) -> usize {
        self.cache
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .values()
            .map(Vec::len)
            .sum()
    }

    /// Drops the kernels this context cached for the ops in `ops` (its
    /// shared cache, and the calling thread's recent kernels of this
    /// context), so that it holds nothing of them: what an op library's
    /// unload does first, to find what else still holds the library.
    /// Other threads' recent kernels stay until their next call (or their
    /// exit); the next call of an op builds its kernel again. Returns how
    /// many kernels the shared cache dropped.
    pub fn release_kernels(&self, ops: &[String]) -> usize {
        let gone: Vec<Vec<Arc<CachedKernel>>> = {
            let mut cache = self.cache.write().unwrap_or_else(PoisonError::into_inner);
            ops.iter()
                .filter_map(|op| cache.remove(op.as_str()))
                .collect()
        };
        let recent = RECENT
            .try_with(|r| match r.try_borrow_mut() {
                Ok(mut r) => {
                    let (mine, others): (Vec<_>, Vec<_>) = r.drain(..).partition(|(id, c)| {
                        *id == self.id && ops.iter().any(|op| *op == c.sig.op_def.name)
                    });
                    *r = others;
                    mine
                }
                Err(_) => Vec::new(),
            })
            .unwrap_or_default();
        // Dropped here, without a lock or borrow held.
        drop(recent);
        gone.iter().map(Vec::len).sum()
    }
}

/// Grouped arguments as flat inputs and their grouping (`None` for a single
/// tensor, `Some(len)` for a list).
fn flatten_args(args: Vec<Arg>) -> (Vec<Tensor>, Grouping) {
    let mut grouping = Grouping::with_capacity(args.len());
    let mut flat = Vec::with_capacity(args.len());
    for a in args {
        match a {
            Arg::One(t) => {
                grouping.push(None);
                flat.push(t);
            }
            Arg::List(l) => {
                grouping.push(Some(l.len()));
                flat.extend(l);
            }
        }
    }
    (flat, grouping)
}

fn too_few(op: &str, op_def: &crate::proto::OpDef, given: usize) -> Status {
    let names: Vec<&str> = op_def.input_arg.iter().map(|a| a.name.as_str()).collect();
    Status::invalid_argument(format!(
        "{op} takes inputs ({}), which {given} tensors do not fill",
        names.join(", ")
    ))
}

/// The list length of each input argument of a flat call.
fn flat_grouping(
    op: &crate::proto::OpDef,
    n: usize,
    attrs: &AttrMap,
) -> Result<Vec<Option<usize>>> {
    use crate::proto::attr_value::Value;
    let mut lens: Vec<Option<Option<usize>>> = Vec::new(); // outer None = unknown list length
    for arg in &op.input_arg {
        let known = if !arg.number_attr.is_empty() {
            match attrs.get(&arg.number_attr).and_then(|v| v.value.as_ref()) {
                Some(Value::I(i)) if *i >= 0 => Some(Some(*i as usize)),
                _ => None,
            }
        } else if !arg.type_list_attr.is_empty() {
            match attrs
                .get(&arg.type_list_attr)
                .and_then(|v| v.value.as_ref())
            {
                Some(Value::List(l)) => Some(Some(l.r#type.len())),
                _ => None,
            }
        } else {
            Some(None)
        };
        lens.push(known);
    }
    let unknown: Vec<usize> = lens
        .iter()
        .enumerate()
        .filter(|(_, l)| l.is_none())
        .map(|(i, _)| i)
        .collect();
    // Saturating: a hostile count attr (N = 2^63 - 1 on two arguments) must
    // give "too few inputs", not an overflow.
    let fixed: usize = lens
        .iter()
        .map(|l| l.flatten().unwrap_or(1) * usize::from(l.is_some()))
        .fold(0, usize::saturating_add);
    match unknown.as_slice() {
        [] if fixed > n => return Err(too_few(&op.name, op, n)),
        [] => {}
        [one] => {
            let rest = n.checked_sub(fixed).ok_or_else(|| too_few(&op.name, op, n))?;
            lens[*one] = Some(Some(rest));
        }
        _ => {
            return Err(Status::invalid_argument(format!(
                "{} has several list inputs; give their lengths as attrs or group the inputs with execute_args",
                op.name
            )))
        }
    }
    Ok(lens.into_iter().map(|l| l.flatten()).collect())
}

/// A call being built: `ctx.op("MatMul").input(a).input(b).attr("transpose_b", true).run1()`.
pub struct EagerOp<'c> {
    ctx: &'c EagerContext,
    name: &'c str,
    /// The flat inputs.
    inputs: Vec<Tensor>,
    grouping: Grouping,
    attrs: AttrMap,
}

impl EagerOp<'_> {
    /// Adds a single-tensor input argument.
    pub fn input(mut self, t: Tensor) -> Self {
        self.inputs.push(t);
        self.grouping.push(None);
        self
    }

    /// Adds a list input argument.
    pub fn input_list(mut self, l: Vec<Tensor>) -> Self {
        self.grouping.push(Some(l.len()));
        self.inputs.extend(l);
        self
    }

    /// Sets an attr.
    pub fn attr(mut self, name: &str, value: impl IntoAttrValue) -> Self {
        self.attrs.insert(name.to_string(), value.into_attr_value());
        self
    }

    /// Runs the op; all outputs.
    pub fn run(self) -> Result<Vec<Tensor>> {
        self.ctx
            .run(self.name, self.inputs, Some(self.grouping), &self.attrs)
    }

    /// Runs the op; its only output (`InvalidArgument` if it has another number).
    pub fn run1(self) -> Result<Tensor> {
        let name = self.name;
        let mut outs = self.run()?;
        match outs.len() {
            1 => Ok(outs.pop().expect("one output")),
            n => Err(Status::invalid_argument(format!(
                "{name} has {n} outputs; use run() instead of run1()"
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::{
        CreateKernel, KernelDefBuilder, KernelRegistration, OpKernelConstruction, OpKernelContext,
    };
    use crate::OpDefBuilder;

    struct Scale(f32);
    impl OpKernel for Scale {
        fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
            let shape = ctx.input(0).shape().clone();
            if ctx
                .forward_input_or_allocate_output(&[0], 0, &shape)?
                .is_some()
            {
                for v in ctx.output_mut(0)?.flat_mut::<f32>()? {
                    *v *= self.0;
                }
            } else {
                let (ins, out) = ctx.inputs_and_output(0)?;
                let x = ins[0].flat::<f32>()?;
                for (o, v) in out.flat_mut::<f32>()?.iter_mut().zip(x) {
                    *o = v * self.0;
                }
            }
            Ok(())
        }
    }
    impl CreateKernel for Scale {
        fn create(ctx: &OpKernelConstruction<'_>) -> Result<Self> {
            let f: f32 = ctx.get_attr("factor")?;
            crate::ensure!(
                f.is_finite(),
                InvalidArgument,
                "factor must be finite, got {f}"
            );
            Ok(Scale(f))
        }
    }

    #[test]
    fn huge_count_attrs_on_several_list_arguments_are_too_few_inputs() {
        // Found by scripts/hostile-cli: QuantizedConcat-like ops with
        // N = 2^63 - 1 on two list arguments overflowed the input count.
        let op = OpDefBuilder::new("TwoLists")
            .input("a: N * int32")
            .input("b: N * float")
            .input("c: int32")
            .attr("N: int >= 1")
            .finalize()
            .unwrap();
        let mut attrs = AttrMap::new();
        attrs.insert(
            "N".into(),
            crate::attrs::IntoAttrValue::into_attr_value(i64::MAX),
        );
        let e = flat_grouping(&op, 3, &attrs).unwrap_err();
        assert_eq!(e.code(), crate::Code::InvalidArgument, "{e}");
    }

    #[test]
    fn releasing_or_dropping_a_context_drops_its_kernels_on_this_thread() {
        use std::sync::atomic::AtomicUsize;
        static ALIVE: AtomicUsize = AtomicUsize::new(0);
        struct Counted;
        impl OpKernel for Counted {
            fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
                let t = ctx.take_input(0);
                ctx.set_output(0, t)
            }
        }
        impl Drop for Counted {
            fn drop(&mut self) {
                ALIVE.fetch_sub(1, Ordering::SeqCst);
            }
        }
        let r = Registry::new();
        r.register_op(
            OpDefBuilder::new("TCounted")
                .input("x: float")
                .output("y: float"),
        )
        .unwrap();
        r.register_kernel(KernelRegistration::with_factory(
            KernelDefBuilder::new("TCounted"),
            |_| {
                ALIVE.fetch_add(1, Ordering::SeqCst);
                Ok(Box::new(Counted) as Box<dyn OpKernel>)
            },
        ))
        .unwrap();
        let ctx = EagerContext::with_registry(
            Arc::new(crate::device::CpuDevice::new(1).unwrap()),
            Arc::new(r),
        );
        ctx.op("TCounted")
            .input(Tensor::scalar(1f32))
            .run1()
            .unwrap();
        assert_eq!(ALIVE.load(Ordering::SeqCst), 1);
        // Released: the shared cache and this thread's recent list let go.
        assert_eq!(ctx.release_kernels(&["Other".into()]), 0);
        assert_eq!(ALIVE.load(Ordering::SeqCst), 1);
        assert_eq!(ctx.release_kernels(&["TCounted".into()]), 1);
        assert_eq!((ALIVE.load(Ordering::SeqCst), ctx.cached_kernels()), (0, 0));
        // Built again by the next call.
        ctx.op("TCounted")
            .input(Tensor::scalar(1f32))
            .run1()
            .unwrap();
        assert_eq!(ALIVE.load(Ordering::SeqCst), 1);
        drop(ctx);
        assert_eq!(ALIVE.load(Ordering::SeqCst), 0);
    }

    struct Boom;
    impl OpKernel for Boom {
        fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
            if ctx.input(0).flat::<f32>()?[0] < 0.0 {
                panic!("negative input");
            }
            let t = ctx.take_input(0);
            ctx.set_output(0, t)
        }
    }
    impl CreateKernel for Boom {
        fn create(_: &OpKernelConstruction<'_>) -> Result<Self> {
            Ok(Boom)
        }
    }

    fn ctx() -> EagerContext {
        let ops = Arc::new(Registry::new());
        ops.register_op(
            OpDefBuilder::new("Scale")
                .attr("factor: float = 2.0")
                .input("x: float")
                .output("y: float"),
        )
        .unwrap();
        ops.register_op(
            OpDefBuilder::new("Boom")
                .input("x: float")
                .output("y: float"),
        )
        .unwrap();
        ops.register_op(
            OpDefBuilder::new("NoKernel")
                .attr("T: type")
                .input("x: T")
                .output("y: T"),
        )
        .unwrap();
        ops.register_kernel(KernelRegistration::of::<Scale>(KernelDefBuilder::new(
            "Scale",
        )))
        .unwrap();
        ops.register_kernel(KernelRegistration::of::<Boom>(KernelDefBuilder::new(
            "Boom",
        )))
        .unwrap();
        EagerContext::with_registry(Arc::new(CpuDevice::new(1).unwrap()), ops)
    }

    #[test]
    fn runs_caches_and_forwards() {
        let c = ctx();
        let x = Tensor::from_vec(&[3], vec![1.0f32, 2.0, 3.0]).unwrap();
        let y = c.op("Scale").input(x.clone()).run1().unwrap();
        assert_eq!(y.flat::<f32>().unwrap(), &[2.0, 4.0, 6.0]);
        assert!(!y.shares_storage_with(&x)); // x was shared: no forwarding
        let y2 = c
            .op("Scale")
            .input(y.clone())
            .attr("factor", 0.5f32)
            .run1()
            .unwrap();
        assert_eq!(y2.flat::<f32>().unwrap(), &[1.0, 2.0, 3.0]);
        assert_eq!(c.cached_kernels(), 2);
        c.op("Scale").input(x).run1().unwrap();
        assert_eq!(c.cached_kernels(), 2);
        // A uniquely owned input is reused for the output.
        let z = Tensor::from_vec(&[2], vec![1.0f32, 1.0]).unwrap();
        let addr = z.bytes().unwrap().as_ptr();
        let out = c.execute("Scale", vec![z], &AttrMap::new()).unwrap();
        assert_eq!(out[0].bytes().unwrap().as_ptr(), addr);
        assert_eq!(out[0].flat::<f32>().unwrap(), &[2.0, 2.0]);
    }

    #[test]
    fn errors_name_the_op() {
        let c = ctx();
        let e = c
            .op("Scale")
            .input(Tensor::scalar(1i32))
            .run1()
            .unwrap_err();
        assert!(
            e.message()
                .contains("input 'x' must be float, but a int32 tensor was given [Op:Scale]"),
            "{e}"
        );
        let e = c
            .op("Scale")
            .input(Tensor::scalar(1f32))
            .attr("factor", f32::NAN)
            .run1()
            .unwrap_err();
        assert_eq!(e.message(), "factor must be finite, got NaN [Op:Scale]");
        let e = c.op("Nope").run().unwrap_err();
        assert_eq!(e.code(), crate::Code::NotFound);
        let e = c
            .op("NoKernel")
            .input(Tensor::scalar(1f32))
            .run1()
            .unwrap_err();
        assert!(
            e.message()
                .starts_with("No OpKernel was registered to support Op 'NoKernel'"),
            "{e}"
        );
        assert!(e.message().contains("<no registered kernels>"), "{e}");
    }

    #[test]
    fn a_panicking_kernel_is_an_internal_error_and_the_context_survives() {
        let c = ctx();
        let e = c
            .op("Boom")
            .input(Tensor::scalar(-1f32))
            .run1()
            .unwrap_err();
        assert_eq!(e.code(), crate::Code::Internal);
        assert!(e.message().contains("negative input"), "{e}");
        let ok = c.op("Boom").input(Tensor::scalar(5f32)).run1().unwrap();
        assert_eq!(ok.scalar_value::<f32>().unwrap(), 5.0);
    }

    #[test]
    fn concurrent_calls_from_eight_threads() {
        let c = Arc::new(ctx());
        let threads: Vec<_> = (0..8)
            .map(|t| {
                let c = c.clone();
                std::thread::spawn(move || {
                    for i in 0..200 {
                        let v = (t * 1000 + i) as f32;
                        let y = c
                            .op("Scale")
                            .input(Tensor::scalar(v))
                            .attr("factor", 3.0f32)
                            .run1()
                            .unwrap();
                        assert_eq!(y.scalar_value::<f32>().unwrap(), v * 3.0);
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
    }
}
