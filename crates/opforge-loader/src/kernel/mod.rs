//! The kernel bridge: a core [`OpKernel`] that runs a plugin kernel, and the
//! header's kernel API (`OpforgeKernelApi`) over core's
//! `OpKernelConstruction` / `OpKernelContext`.
//!
//! A kernel runs through one of two entries. The 1.0 `compute` gets only
//! the context and asks for every view through the kernel table (each a
//! call across the boundary: its guard, its checks, a view copied out).
//! The 1.1 `compute_views` ([`PluginKernel::run_views`]) gets the views
//! made: every input's, built once into the context's slots exactly as
//! `input` would build them, and every output the kernel declared
//! (`output_like`) set here, forwarded or allocated as core's own kernels
//! do (`forward_input_or_allocate_output_like`), its view what `output`
//! would give (lending the dims and strides of the input it was set like,
//! which are its own). What the views path saves is the crossings, not the
//! work: an elementwise kernel computes with no call back into the host, so
//! a plugin kernel costs about what the same kernel compiled in costs
//! (issue 14: within 10% on eager dispatch). The context is the same in
//! both paths, so every context function behaves alike: an input's view
//! handed out in the array and one returned later by `input` are the same
//! slot, and a later `output` describes the same tensor as the array.
//!
//! The bytes are lent through core's `Tensor::host_data`/`host_data_mut`,
//! inlined here: the latter reads a buffer's reference counts where
//! `bytes_mut` takes `Arc::get_mut`'s locked compare-exchange, which alone
//! cost a plugin call about 5 ns.

//!
//! The files: this one holds the registered kernel and its instances
//! (create, compute, destroy); `context` the contexts lent to create and
//! compute and the views made through them; `views` the 1.1 entry; `api`
//! the kernel table's functions.

use crate::host::*;
use crate::library::LibInner;
use context::{KernelCtx, KernelInit, SlotStorage};
use opforge_abi::*;
use opforge_core::kernel::{OpKernel, OpKernelConstruction, OpKernelContext, RequestSupport};
use opforge_core::{DataType, Result, Status, Tensor};
use std::cell::UnsafeCell;
use std::ffi::c_void;
use std::mem::MaybeUninit;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, RwLock};

mod api;
mod context;
mod views;

/// A registered plugin kernel: its callbacks and the library that holds them.
pub(crate) struct PluginKernelDef {
    pub(crate) lib: Arc<LibInner>,
    pub(crate) op: String,
    pub(crate) create: OpforgeKernelCreateFn,
    /// The 1.0 entry (`None` only when `compute_views` is set).
    pub(crate) compute: OpforgeKernelComputeFn,
    /// The 1.1 entry: called instead of `compute` when set.
    pub(crate) compute_views: OpforgeKernelComputeViewsFn,
    /// The outputs set before `compute_views` runs (1.1).
    pub(crate) output_like: Box<[OutputLike]>,
    /// Bit `o`: output `o` (< 64) is declared in `output_like`.
    pub(crate) declared_mask: u64,
    pub(crate) destroy: OpforgeKernelDestroyFn,
    pub(crate) user: SendPtr,
    pub(crate) flags: u32,
}

/// A kernel's declaration "output `output` has the dims of input `input`"
/// (1.1, `OpforgeOutputLike`): the host sets the output before each
/// `compute_views` call.
#[derive(Clone, Copy, Debug)]
pub(crate) struct OutputLike {
    pub(crate) output: usize,
    pub(crate) input: usize,
    /// `OPFORGE_OUTPUT_FORWARD`: the input's buffer may become the output.
    pub(crate) forward: bool,
}

impl PluginKernelDef {
    /// Runs the plugin's create for `c`: the state and the arena its attr
    /// values live in (until destroy).
    fn create_state(&self, c: &OpKernelConstruction<'_>) -> Result<(SendPtr, Arena)> {
        let arena = Arena::default();
        let init = KernelInit { c, arena: &arena };
        let mut state: *mut c_void = self.user.0;
        if let Some(create) = self.create {
            let mut status = HostStatus::default();
            let lent = init.lend();
            // SAFETY: `create` is the plugin's callback with the header's
            // signature; `init` (lent until the call returns) and `status`
            // live across the call; `state` is a valid out-pointer.
            let code = unsafe { create(lent.ptr(), self.user.0, &mut state, status.as_ptr()) };
            drop(lent);
            if code != OPFORGE_OK {
                return Err(callback_error(
                    &self.lib.label(),
                    &format!(
                        "the kernel creation of op '{}' (node '{}')",
                        self.op,
                        c.node_name()
                    ),
                    code,
                    &status,
                ));
            }
        }
        Ok((SendPtr(state), arena))
    }

    fn destroy_state(&self, state: SendPtr) {
        if let Some(destroy) = self.destroy {
            // SAFETY: the plugin's destroy, called once per state, after the
            // state's last compute (the caller holds it exclusively).
            unsafe { destroy(state.0, self.user.0) };
        }
    }

    /// The output declarations checked against a node's signature: every
    /// index in range, and no output the host cannot allocate.
    fn check_output_like(&self, c: &OpKernelConstruction<'_>) -> Result<()> {
        let (ins, outs) = (c.input_types(), c.output_types());
        for l in self.output_like.iter() {
            let problem = if l.output >= outs.len() || l.input >= ins.len() {
                format!(
                    "declares output {} like input {}, but the node has {} outputs and {} inputs",
                    l.output,
                    l.input,
                    outs.len(),
                    ins.len()
                )
            } else {
                match outs[l.output].base() {
                    dt @ (DataType::String | DataType::Resource | DataType::Variant) => format!(
                        "declares output {} like input {}, but the output is {dt}: the host \
                         allocates only numeric and bool outputs (set it in the kernel)",
                        l.output, l.input
                    ),
                    _ => continue,
                }
            };
            return Err(Status::invalid_argument(format!(
                "the kernel of op '{}' (node '{}') {problem} [library {}]",
                self.op,
                c.node_name(),
                self.lib.label()
            )));
        }
        Ok(())
    }

    /// Builds an instance for one node (the kernel factory).
    pub(crate) fn instantiate(
        self: &Arc<Self>,
        c: &OpKernelConstruction<'_>,
    ) -> Result<Box<dyn OpKernel>> {
        self.check_output_like(c)?;
        let (state, arena) = self.create_state(c)?;
        self.lib.instance_created();
        Ok(Box::new(PluginKernel {
            def: self.clone(),
            first: state,
            _first_attrs: arena,
            evicted: AtomicBool::new(false),
            state: RwLock::new(Instance {
                state: SendPtr(std::ptr::null_mut()),
                _attrs: Arena::default(),
                broken: None,
            }),
            rebuild: Rebuild {
                op_def: c.op_def().clone(),
                node_name: c.node_name().to_string(),
                attrs: c.attrs().clone(),
                input_types: c.input_types().to_vec(),
                output_types: c.output_types().to_vec(),
            },
            lock: (self.flags & OPFORGE_KERNEL_NOT_THREAD_SAFE != 0).then(|| Mutex::new(())),
        }))
    }
}

/// A plugin state made after a panic evicted the instance's first one.
struct Instance {
    state: SendPtr,
    /// The attr values create read: they live until destroy (R7).
    _attrs: Arena,
    /// Why the state could not be rebuilt after a panic (the instance then
    /// fails every compute).
    broken: Option<Status>,
}

/// What create needs again to rebuild the state after a panic.
struct Rebuild {
    op_def: opforge_core::proto::OpDef,
    node_name: String,
    attrs: opforge_core::attrs::AttrMap,
    input_types: Vec<DataType>,
    output_types: Vec<DataType>,
}

/// One kernel instance (a node's, or an eager call signature's).
///
/// A compute uses the state create made, `first`, with no lock: a healthy
/// instance costs no atomic read-modify-write per call (two of them, a read
/// lock taken and released, were a tenth of an eager dispatch). A panic
/// (OPFORGE_STATUS_PANICKED: the state may be inconsistent) evicts the
/// state: no compute starts on it again, and a new state serves the next
/// ones. Computes that read `first` before the eviction may still run on
/// it, and nothing counts them, so `first` is destroyed with the instance.
/// From the first eviction on (`evicted`), computes read-lock `state`, and
/// each later eviction destroys the state it replaces at once, under the
/// write lock (the pre-1.1 scheme). An instance so keeps at most one
/// retired state alive.
struct PluginKernel {
    def: Arc<PluginKernelDef>,
    /// The state create made when the instance was built (never replaced).
    first: SendPtr,
    /// The attr values that create read: they live until destroy (R7).
    _first_attrs: Arena,
    /// Set (under `state`'s write lock) when a panic evicted `first`.
    evicted: AtomicBool,
    /// The state after the first eviction: read-locked by computes once
    /// `evicted` is set; write-locked to replace a state a later panic
    /// left inconsistent.
    state: RwLock<Instance>,
    rebuild: Rebuild,
    /// Serialises computes of a kernel registered NOT_THREAD_SAFE.
    lock: Option<Mutex<()>>,
}

impl PluginKernel {
    /// Replaces the state `old` a panic left inconsistent with a new one,
    /// unless another thread did already. `first`: `old` is the first
    /// state (read without the lock), which stays alive until the instance
    /// is dropped; a later state is destroyed here.
    fn evict(&self, old: *mut c_void, first: bool, device: &dyn opforge_core::device::Device) {
        let mut inst = self
            .state
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let current = !self.evicted.load(Ordering::Relaxed);
        if first != current || (!first && (inst.state.0 != old || inst.broken.is_some())) {
            return;
        }
        let r = &self.rebuild;
        let c = OpKernelConstruction::new(
            &r.op_def,
            &r.node_name,
            &r.attrs,
            device,
            &r.input_types,
            &r.output_types,
        );
        if !first {
            self.def.destroy_state(inst.state);
        }
        match self.def.create_state(&c) {
            Ok((state, arena)) => {
                inst.state = state;
                inst._attrs = arena;
            }
            Err(e) => {
                inst.state = SendPtr(std::ptr::null_mut());
                inst.broken = Some(e);
            }
        }
        // Before the lock is released: a compute that sees the flag waits
        // for the lock, then finds the new state.
        self.evicted.store(true, Ordering::Release);
    }
}

impl OpKernel for PluginKernel {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let _serial = self
            .lock
            .as_ref()
            .map(|l| l.lock().unwrap_or_else(std::sync::PoisonError::into_inner));
        let slots: [SlotStorage; 2] = [
            UnsafeCell::new(MaybeUninit::uninit()),
            UnsafeCell::new(MaybeUninit::uninit()),
        ];
        let k = KernelCtx::new(&self.def, &slots);
        let mut status = HostStatus::default();
        // Acquire: a compute that sees the flag sees the lock held or the
        // new state (see `evict`).
        let first = !self.evicted.load(Ordering::Acquire);
        let inst = if first {
            None
        } else {
            Some(
                self.state
                    .read()
                    .unwrap_or_else(std::sync::PoisonError::into_inner),
            )
        };
        let state = match &inst {
            None => self.first,
            Some(inst) => {
                if let Some(e) = &inst.broken {
                    return Err(Status::failed_precondition(format!(
                        "the kernel instance of op '{}' (node '{}') could not be rebuilt after \
                         a panic ({}); rebuild the session or eager context",
                        self.def.op,
                        ctx.node_name(),
                        e.message()
                    )));
                }
                inst.state
            }
        };
        let code = match (self.def.compute_views, self.def.compute) {
            (Some(f), _) => self.run_views(f, state, &k, ctx, &mut status)?,
            (None, Some(f)) => {
                if self.def.handles_requests() {
                    bind_inplace(&k, ctx, |_, _| {})?;
                }
                let lent = k.lend(ctx);
                // SAFETY: `compute` is the plugin's callback; the state is
                // the one its create made, kept from destroy until the
                // instance is dropped (`first`) or by the read lock; `k`
                // (lent until the call returns) and `status` live across
                // the call.
                unsafe { f(state.0, lent.ptr(), status.as_ptr()) }
            }
            (None, None) => {
                return Err(Status::internal(format!(
                    "the kernel of op '{}' has no compute entry (registration lets none through)",
                    self.def.op
                )));
            }
        };
        drop(inst);
        if code != OPFORGE_OK {
            let e = callback_error(
                &self.def.lib.label(),
                &format!(
                    "the kernel of op '{}' (node '{}')",
                    self.def.op,
                    ctx.node_name()
                ),
                code,
                &status,
            );
            if status.flags & OPFORGE_STATUS_PANICKED != 0 {
                drop(k);
                self.evict(state.0, first, ctx.device());
                return Err(e.append("; the kernel instance was rebuilt"));
            }
            return Err(e);
        }
        Ok(())
    }

    fn supported_requests(&self) -> RequestSupport {
        match self.def.handles_requests() {
            true => RequestSupport::ALL,
            false => RequestSupport::WRITE_ONLY,
        }
    }

    fn inplace_pairs(&self) -> Vec<(usize, usize)> {
        self.def
            .output_like
            .iter()
            .filter(|l| l.forward)
            .map(|l| (l.input, l.output))
            .collect()
    }
}

impl PluginKernelDef {
    /// Whether the library registered the kernel with
    /// `OPFORGE_KERNEL_OUTPUT_REQUESTS` (it handles every request).
    #[inline]
    pub(crate) fn handles_requests(&self) -> bool {
        self.flags & OPFORGE_KERNEL_OUTPUT_REQUESTS != 0
    }
}

/// Binds each output core asks for `InPlace` to the input it offers (the
/// header's "already bound to an input's memory"): the input moves to the
/// output (core guarantees nothing else shares it) and its views die;
/// `bound(output, input)` is told each pair.
#[inline(never)]
fn bind_inplace(
    k: &KernelCtx<'_>,
    c: &mut OpKernelContext<'_>,
    mut bound: impl FnMut(usize, usize),
) -> Result<()> {
    for o in 0..c.num_outputs() {
        let Some(j) = c.inplace_input(o) else {
            continue;
        };
        if k.moved(j) || c.output(o).is_some() {
            continue;
        }
        let shape = c.input(j).shape().clone();
        if let Some(j) = c.forward_input_or_allocate_output(&[j], o, &shape)? {
            k.set_moved(j);
            bound(o, j);
        }
    }
    Ok(())
}

impl Drop for PluginKernel {
    fn drop(&mut self) {
        // No compute runs any more: every state made is destroyed once.
        self.def.destroy_state(self.first);
        let inst = self
            .state
            .get_mut()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if *self.evicted.get_mut() && inst.broken.is_none() {
            self.def.destroy_state(inst.state);
        }
        self.def.lib.instance_destroyed();
    }
}

pub(crate) use api::write_arg_range;
use api::*;
use context::view;

/// The kernel table every library shares.
pub(crate) static KERNEL_API: OpforgeKernelApi = {
    let mut t = OpforgeKernelApi::new();
    t.init_op_name = Some(init_op_name);
    t.init_node_name = Some(init_node_name);
    t.init_device_type = Some(init_device_type);
    t.init_num_inputs = Some(init_num_inputs);
    t.init_input_dtype = Some(init_input_dtype);
    t.init_num_outputs = Some(init_num_outputs);
    t.init_output_dtype = Some(init_output_dtype);
    t.init_arg_range = Some(init_arg_range);
    t.init_attr = Some(init_attr);
    t.op_name = Some(op_name);
    t.node_name = Some(node_name);
    t.num_inputs = Some(num_inputs);
    t.num_outputs = Some(num_outputs);
    t.input_dtype = Some(input_dtype);
    t.output_dtype = Some(output_dtype);
    t.arg_range = Some(arg_range);
    t.input = Some(input);
    t.output = Some(output);
    t.output_request = Some(output_request);
    t.allocate_output = Some(allocate_output);
    t.forward_input_or_allocate_output = Some(forward_input_or_allocate_output);
    t.set_output_from_input = Some(set_output_from_input);
    t.set_output_foreign = Some(set_output_foreign);
    t.set_output_strings = Some(set_output_strings);
    t.allocate_temp = Some(allocate_temp);
    t.attr = Some(attr);
    t.num_threads = Some(num_threads);
    t.parallel_for = Some(parallel_for);
    t
};

/// [`arg_range_of`] for the other bridges.
pub(crate) fn arg_range_pub(
    op_def: &opforge_core::proto::OpDef,
    attrs: &opforge_core::attrs::AttrMap,
    name: &str,
    output: bool,
) -> Result<(usize, usize)> {
    arg_range_of(op_def, attrs, name, output)
}

/// A read-only view (constant inputs of shape functions).
pub(crate) fn view_pub(t: &mut Tensor, arena: &Arena) -> Result<OpforgeTensor> {
    view(t, false, arena)
}
