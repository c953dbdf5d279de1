//! What a kernel sees: [`OpKernelConstruction`] once per node, and
//! [`OpKernelContext`] on every run.

use crate::attrs::{get_attr, AttrMap, FromAttrValue};
use crate::device::{Device, ThreadPool};
use crate::kernel::request::{add_into, can_take_over, OutputBinding, OutputRequest};
use crate::kernel::OpKernel;
use crate::param::Parameter;
use crate::proto::{AttrValue, OpDef};
use crate::resource::ResourceMgr;
use crate::tensor::{Tensor, TensorShape};
use crate::{DataType, Result, Status};
use smallvec::SmallVec;
use std::ops::Range;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

/// What a kernel's constructor may read: the node's attrs, its dtypes and
/// the device. Validation that fails here fails the node's construction.
pub struct OpKernelConstruction<'a> {
    pub(crate) op_def: &'a OpDef,
    pub(crate) node_name: &'a str,
    pub(crate) attrs: &'a AttrMap,
    pub(crate) device: &'a dyn Device,
    pub(crate) input_types: &'a [DataType],
    pub(crate) output_types: &'a [DataType],
}

impl<'a> OpKernelConstruction<'a> {
    /// A construction context (for runtimes and tests that build kernels themselves).
    pub fn new(
        op_def: &'a OpDef,
        node_name: &'a str,
        attrs: &'a AttrMap,
        device: &'a dyn Device,
        input_types: &'a [DataType],
        output_types: &'a [DataType],
    ) -> Self {
        OpKernelConstruction {
            op_def,
            node_name,
            attrs,
            device,
            input_types,
            output_types,
        }
    }

    /// Attr `name` as a `T` (`InvalidArgument` if missing or of another type).
    pub fn get_attr<T: FromAttrValue>(&self, name: &str) -> Result<T> {
        get_attr(&self.op_def.name, self.attrs, name)
    }

    /// The node's attrs as parameter struct `P` (defaults filling gaps,
    /// every value checked), with errors naming the op.
    pub fn params<P: Parameter>(&self) -> Result<P> {
        P::from_op_attrs(&self.op_def.name, self.attrs)
    }

    /// Attr `name` as it is stored.
    pub fn attr(&self, name: &str) -> Option<&AttrValue> {
        self.attrs.get(name)
    }

    /// Every attr of the node.
    pub fn attrs(&self) -> &AttrMap {
        self.attrs
    }

    /// The op's definition.
    pub fn op_def(&self) -> &OpDef {
        self.op_def
    }

    /// The node's name (the op's name in eager mode).
    pub fn node_name(&self) -> &str {
        self.node_name
    }

    /// The device type the kernel is built for.
    pub fn device_type(&self) -> &'static str {
        self.device.device_type()
    }

    /// The dtype of each flat input.
    pub fn input_types(&self) -> &[DataType] {
        self.input_types
    }

    /// The dtype of each flat output.
    pub fn output_types(&self) -> &[DataType] {
        self.output_types
    }
}

/// Per-node data a runtime computes once and every run of the kernel shares.
#[derive(Clone, Debug)]
pub struct KernelSignature {
    /// The op's definition (shared with the op's registration).
    pub op_def: Arc<OpDef>,
    /// The node's name.
    pub node_name: String,
    /// The node's attrs.
    pub attrs: AttrMap,
    /// Flat input dtypes.
    ///
    /// This and the next three lists are shared (`Arc`) by every signature
    /// with the same list: a session keeps one signature per node of its
    /// graph, and most nodes of a large graph have the same few lists.
    pub input_types: Arc<[DataType]>,
    /// Flat output dtypes.
    pub output_types: Arc<[DataType]>,
    /// The flat input indices of each input argument.
    pub input_ranges: Arc<[Range<usize>]>,
    /// The flat output indices of each output argument.
    pub output_ranges: Arc<[Range<usize>]>,
}

impl KernelSignature {
    /// The flat indices of the input (or output) argument named `name`.
    pub fn arg_range(&self, name: &str, output: bool) -> Result<Range<usize>> {
        let (args, ranges, kind) = if output {
            (&self.op_def.output_arg, &self.output_ranges, "output")
        } else {
            (&self.op_def.input_arg, &self.input_ranges, "input")
        };
        let idx = args.iter().position(|a| a.name == name).ok_or_else(|| {
            Status::invalid_argument(format!("{} has no {kind} named '{name}'", self.op_def.name))
        })?;
        Ok(ranges[idx].clone())
    }
}

/// A short list of tensors kept inline (no heap allocation) up to four:
/// the inputs and outputs of a kernel call.
pub type TensorVec = SmallVec<[Tensor; 4]>;

/// What a kernel sees on one run: its inputs, its output slots, the device
/// (allocator and thread pool) and the resource manager. The runtime owns
/// the input and output storage; the context borrows it, so making one
/// costs nothing (see [`call_kernel`]).
pub struct OpKernelContext<'a> {
    sig: &'a KernelSignature,
    inputs: &'a mut [Tensor],
    outputs: &'a mut [Option<Tensor>],
    device: &'a dyn Device,
    resource_mgr: &'a ResourceMgr,
    /// One request per flat output, or empty: all `Write`.
    requests: &'a [OutputRequest],
    /// Per flat output: the input an `InPlace` request offers (or empty).
    inplace_inputs: &'a [Option<usize>],
}

/// Runs `kernel` once on `inputs` (flat, in the signature's order; a kernel
/// may move them out, to reuse their buffers), then hands each output, in
/// order, to `output(inputs, index, tensor)` (which may reuse the input
/// storage for the outputs: it is done with by then). A kernel error is
/// returned as it is; a kernel that panics gives an `Internal` error naming
/// the op (the panic does not unwind into the caller, so the runtime stays
/// usable), as does one that leaves an output unset.
#[inline(always)]
pub fn call_kernel<I: AsMut<[Tensor]>>(
    kernel: &dyn OpKernel,
    sig: &KernelSignature,
    inputs: &mut I,
    device: &dyn Device,
    resource_mgr: &ResourceMgr,
    mut output: impl FnMut(&mut I, usize, Tensor),
) -> Result<()> {
    // Only the `n` slots in use are written (an initialized array of four
    // would be cleared whole on every call).
    let n = sig.output_types.len();
    let mut slots: SmallVec<[Option<Tensor>; 4]> = SmallVec::new();
    for _ in 0..n {
        slots.push(None);
    }
    let slots = slots.as_mut_slice();
    let mut ctx = OpKernelContext::new(sig, inputs.as_mut(), slots, device, resource_mgr)?;
    compute_guarded(kernel, &mut ctx, sig)?;
    if let Some(i) = slots.iter().position(Option::is_none) {
        return Err(unset_output(sig, i));
    }
    for (i, t) in slots.iter_mut().enumerate() {
        if let Some(t) = t.take() {
            output(inputs, i, t);
        }
    }
    Ok(())
}

/// Runs the kernel, a panic becoming an `Internal` error naming the op.
#[inline(always)]
fn compute_guarded(
    kernel: &dyn OpKernel,
    ctx: &mut OpKernelContext<'_>,
    sig: &KernelSignature,
) -> Result<()> {
    match catch_unwind(AssertUnwindSafe(|| kernel.compute(ctx))) {
        Ok(r) => r,
        Err(panic) => Err(Status::internal(format!(
            "the kernel of op '{}' panicked: {}. This is a bug in the kernel; \
             the runtime caught the panic and stays usable",
            sig.op_def.name,
            panic_message(&*panic)
        ))),
    }
}

/// [`call_kernel`] with an output request per flat output (`bindings`, one
/// per output; see [`OutputRequest`]). What the kernel declares it handles
/// ([`OpKernel::supported_requests`]) it is asked for; anything else it
/// is asked to `Write`, and the runtime does the rest here:
///
/// - `Null`: the output is not handed to `output` (a kernel handling
///   `Null` may leave it unset);
/// - `InPlace { input }`: asked only when that input may become the output
///   (its dtype, on the device, no other tensor sharing its buffer);
///   otherwise `Write`;
/// - `Add(acc)`: a kernel handling `Add` finds `acc` set as the output and
///   adds into it (a shared `acc` is copied first); for any other kernel
///   the fresh output is added into `acc` ([`add_into`]). Either way the
///   sum is handed to `output`.
///
/// The bindings are consumed (each left `Write`).
pub fn call_kernel_with<I: AsMut<[Tensor]>>(
    kernel: &dyn OpKernel,
    sig: &KernelSignature,
    inputs: &mut I,
    device: &dyn Device,
    resource_mgr: &ResourceMgr,
    bindings: &mut [OutputBinding],
    mut output: impl FnMut(&mut I, usize, Tensor),
) -> Result<()> {
    let n = sig.output_types.len();
    if bindings.len() != n {
        return Err(Status::internal(format!(
            "{}: {} output requests for {n} outputs",
            sig.op_def.name,
            bindings.len()
        )));
    }
    let support = kernel.supported_requests();
    let mut slots: SmallVec<[Option<Tensor>; 4]> = SmallVec::new();
    let mut requests: SmallVec<[OutputRequest; 4]> = SmallVec::new();
    let mut offered: SmallVec<[Option<usize>; 4]> = SmallVec::new();
    {
        let ins = inputs.as_mut();
        for (o, b) in bindings.iter_mut().enumerate() {
            let (mut req, mut slot, mut offer) = (OutputRequest::Write, None, None);
            match b {
                OutputBinding::Write => {}
                // Not handled: written, then dropped (the binding stays Null).
                OutputBinding::Null if support.handles(OutputRequest::Null) => {
                    req = OutputRequest::Null
                }
                OutputBinding::Null => {}
                OutputBinding::InPlace { input } => {
                    if support.handles(OutputRequest::InPlace)
                        && ins.get(*input).is_some_and(|t| {
                            can_take_over(t, sig.output_types[o], device.location())
                        })
                    {
                        req = OutputRequest::InPlace;
                        offer = Some(*input);
                    }
                }
                // Not handled: the accumulator stays in the binding, and the
                // fresh output is added into it below.
                OutputBinding::Add(_) if support.handles(OutputRequest::Add) => {
                    if let OutputBinding::Add(a) = std::mem::take(b) {
                        req = OutputRequest::Add;
                        slot = Some(if a.is_uniquely_owned() {
                            a
                        } else {
                            a.deep_copy()?
                        });
                    }
                }
                OutputBinding::Add(_) => {}
            }
            requests.push(req);
            slots.push(slot);
            offered.push(offer);
        }
    }
    let slots = slots.as_mut_slice();
    let mut ctx = OpKernelContext::new(sig, inputs.as_mut(), slots, device, resource_mgr)?;
    ctx.requests = &requests;
    ctx.inplace_inputs = &offered;
    compute_guarded(kernel, &mut ctx, sig)?;
    for (o, t) in slots.iter_mut().enumerate() {
        let b = std::mem::take(&mut bindings[o]);
        if matches!(b, OutputBinding::Null) {
            *t = None;
            continue;
        }
        let Some(t) = t.take() else {
            return Err(unset_output(sig, o));
        };
        let t = match b {
            OutputBinding::Add(mut acc) => {
                if !acc.is_uniquely_owned() {
                    acc = acc.deep_copy()?;
                }
                add_into(&mut acc, &t).map_err(|e| {
                    e.prepend(format!(
                        "{}: output {o} (requested with Add): ",
                        sig.op_def.name
                    ))
                })?;
                acc
            }
            _ => t,
        };
        output(inputs, o, t);
    }
    Ok(())
}

fn unset_output(sig: &KernelSignature, i: usize) -> Status {
    Status::internal(format!(
        "{}: the kernel did not set output {i}",
        sig.op_def.name
    ))
}

fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = panic.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = panic.downcast_ref::<String>() {
        s.clone()
    } else {
        "(no message)".to_string()
    }
}

impl<'a> OpKernelContext<'a> {
    /// A context over `inputs` (flat, in the signature's order) and
    /// `outputs`, one empty slot per flat output of the signature.
    /// Runtimes normally use [`call_kernel`] instead.
    pub fn new(
        sig: &'a KernelSignature,
        inputs: &'a mut [Tensor],
        outputs: &'a mut [Option<Tensor>],
        device: &'a dyn Device,
        resource_mgr: &'a ResourceMgr,
    ) -> Result<Self> {
        if inputs.len() != sig.input_types.len() || outputs.len() != sig.output_types.len() {
            return Err(Status::internal(format!(
                "{}: a kernel context needs {} inputs and {} output slots, but got {} and {}",
                sig.op_def.name,
                sig.input_types.len(),
                sig.output_types.len(),
                inputs.len(),
                outputs.len()
            )));
        }
        Ok(OpKernelContext {
            sig,
            inputs,
            outputs,
            device,
            resource_mgr,
            requests: &[],
            inplace_inputs: &[],
        })
    }

    /// This context with output requests (one per flat output; see
    /// [`OutputRequest`]) and, per output, the input an `InPlace` request
    /// offers. For runtimes and tests that make contexts themselves
    /// ([`call_kernel_with`] does this for you); the caller sets the
    /// outputs an `Add` request binds and keeps the promises the requests
    /// make.
    pub fn with_requests(
        mut self,
        requests: &'a [OutputRequest],
        inplace_inputs: &'a [Option<usize>],
    ) -> Self {
        self.requests = requests;
        self.inplace_inputs = inplace_inputs;
        self
    }

    /// What the runtime asks of output `i` (MXNet's `req[i]`): always
    /// [`OutputRequest::Write`] unless the kernel declares more
    /// ([`OpKernel::supported_requests`]).
    #[inline]
    pub fn output_request(&self, i: usize) -> OutputRequest {
        self.requests.get(i).copied().unwrap_or_default()
    }

    /// The input an `InPlace` request on output `o` offers (its buffer is
    /// not shared: forwarding it to output `o` succeeds when the shape
    /// fits), or `None`.
    #[inline]
    pub fn inplace_input(&self, o: usize) -> Option<usize> {
        match self.output_request(o) {
            OutputRequest::InPlace => self.inplace_inputs.get(o).copied().flatten(),
            _ => None,
        }
    }

    /// The op's definition.
    pub fn op_def(&self) -> &OpDef {
        &self.sig.op_def
    }

    /// The node's name.
    pub fn node_name(&self) -> &str {
        &self.sig.node_name
    }

    /// The node's signature (dtypes and argument ranges), borrowed for the
    /// whole run.
    pub fn signature(&self) -> &'a KernelSignature {
        self.sig
    }

    /// The number of flat inputs.
    #[inline]
    pub fn num_inputs(&self) -> usize {
        self.inputs.len()
    }

    /// Flat input `i`. Panics if `i` is out of range (a kernel bug: the
    /// number of inputs is fixed by the op's signature), or reads an empty
    /// tensor if the input was forwarded to an output.
    #[inline]
    pub fn input(&self, i: usize) -> &Tensor {
        &self.inputs[i]
    }

    /// All flat inputs.
    #[inline]
    pub fn inputs(&self) -> &[Tensor] {
        self.inputs
    }

    /// The tensors of the input argument named `name`.
    pub fn input_list(&self, name: &str) -> Result<&[Tensor]> {
        let range = self.sig.arg_range(name, false)?;
        Ok(&self.inputs[range])
    }

    /// The dtype of flat input `i`.
    #[inline]
    pub fn input_dtype(&self, i: usize) -> DataType {
        self.sig.input_types[i]
    }

    /// Moves flat input `i` out of the context (leaving an empty tensor), for
    /// kernels that pass an input through or update it in place.
    #[inline]
    pub fn take_input(&mut self, i: usize) -> Tensor {
        std::mem::replace(&mut self.inputs[i], Tensor::taken())
    }

    /// The number of flat outputs.
    #[inline]
    pub fn num_outputs(&self) -> usize {
        self.outputs.len()
    }

    /// The dtype output `i` must have.
    #[inline]
    pub fn output_type(&self, i: usize) -> DataType {
        self.sig.output_types[i]
    }

    /// The flat output indices of the output argument named `name`.
    pub fn output_range(&self, name: &str) -> Result<Range<usize>> {
        self.sig.arg_range(name, true)
    }

    /// Allocates output `i` with `shape` (its dtype is the signature's) and
    /// returns it for writing. Its contents are unspecified.
    #[inline]
    pub fn allocate_output(&mut self, i: usize, shape: TensorShape) -> Result<&mut Tensor> {
        let t = self.device.allocate(self.sig.output_types[i], shape)?;
        Ok(self.outputs[i].insert(t))
    }

    /// Reuses one of the `candidates` inputs' buffer for output `i` when it
    /// has the output's dtype and `shape` and no other tensor shares it (the
    /// input is then moved to the output, and the kernel must compute in
    /// place); otherwise allocates output `i`. Returns the input forwarded,
    /// if any.
    #[inline]
    pub fn forward_input_or_allocate_output(
        &mut self,
        candidates: &[usize],
        i: usize,
        shape: &TensorShape,
    ) -> Result<Option<usize>> {
        if let Some(c) = self.forwardable_input(candidates, i, shape) {
            return Ok(Some(self.forward(c, i)));
        }
        self.allocate_output(i, shape.clone())?;
        Ok(None)
    }

    /// [`forward_input_or_allocate_output`](Self::forward_input_or_allocate_output)
    /// with the shape of input `like` (the elementwise case), without
    /// copying the shape when an input is forwarded.
    #[inline]
    pub fn forward_input_or_allocate_output_like(
        &mut self,
        candidates: &[usize],
        i: usize,
        like: usize,
    ) -> Result<Option<usize>> {
        if let Some(c) = self.forwardable_input(candidates, i, self.inputs[like].shape()) {
            return Ok(Some(self.forward(c, i)));
        }
        let shape = self.inputs[like].shape().clone();
        self.allocate_output(i, shape)?;
        Ok(None)
    }

    /// The first of the `candidates` inputs that may become output `i` of
    /// `shape` in place: same dtype and shape, on the device, not shared.
    #[inline]
    fn forwardable_input(
        &self,
        candidates: &[usize],
        i: usize,
        shape: &TensorShape,
    ) -> Option<usize> {
        let dtype = self.sig.output_types[i];
        candidates.iter().copied().find(|&c| {
            let input = &self.inputs[c];
            input.dtype() == dtype
                && input.shape() == shape
                && input.is_uniquely_owned()
                && input.location() == self.device.location()
        })
    }

    /// Moves input `c` to output `i`; returns `c`.
    #[inline]
    fn forward(&mut self, c: usize, i: usize) -> usize {
        let t = self.take_input(c);
        self.outputs[i] = Some(t);
        c
    }

    /// The inputs and output `i` at once (output `i` must have been
    /// allocated), for kernels that read inputs while writing the output.
    #[inline]
    pub fn inputs_and_output(&mut self, i: usize) -> Result<(&[Tensor], &mut Tensor)> {
        let name = &self.sig.op_def.name;
        let out = self.outputs[i].as_mut().ok_or_else(|| {
            Status::internal(format!("{name}: output {i} used before it was allocated"))
        })?;
        Ok((self.inputs, out))
    }

    /// Output `i`, if set.
    pub fn output(&self, i: usize) -> Option<&Tensor> {
        self.outputs[i].as_ref()
    }

    /// Output `i` for writing (must have been allocated or set).
    #[inline]
    pub fn output_mut(&mut self, i: usize) -> Result<&mut Tensor> {
        let name = &self.sig.op_def.name;
        self.outputs[i].as_mut().ok_or_else(|| {
            Status::internal(format!("{name}: output {i} used before it was allocated"))
        })
    }

    /// Sets output `i` to an existing tensor (which must have the output's dtype).
    #[inline]
    pub fn set_output(&mut self, i: usize, t: Tensor) -> Result<()> {
        let want = self.sig.output_types[i].base();
        if t.dtype() != want {
            return Err(Status::internal(format!(
                "{}: output {i} must be {want}, but the kernel produced {}",
                self.sig.op_def.name,
                t.dtype()
            )));
        }
        self.outputs[i] = Some(t);
        Ok(())
    }

    /// A scratch tensor.
    pub fn allocate_temp(&self, dtype: DataType, shape: TensorShape) -> Result<Tensor> {
        self.device.allocate(dtype, shape)
    }

    /// The device the kernel runs on (borrowed for the whole run, not just
    /// this call, so it can be held while outputs are written).
    #[inline]
    pub fn device(&self) -> &'a dyn Device {
        self.device
    }

    /// The device's thread pool (borrowed for the whole run); on a device
    /// without one, a pool that runs shards on the calling thread.
    #[inline]
    pub fn thread_pool(&self) -> &'a ThreadPool {
        match self.device.thread_pool() {
            Some(pool) => pool,
            None => ThreadPool::inline(),
        }
    }

    /// The resource manager for op state (borrowed for the whole run).
    #[inline]
    pub fn resource_mgr(&self) -> &'a ResourceMgr {
        self.resource_mgr
    }

    /// The node's attrs.
    pub fn attrs(&self) -> &AttrMap {
        &self.sig.attrs
    }
}
