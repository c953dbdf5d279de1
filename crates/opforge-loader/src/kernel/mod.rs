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

use crate::host::*;
use crate::library::LibInner;
use opforge_abi::*;
use opforge_core::kernel::{OpKernel, OpKernelConstruction, OpKernelContext};
use opforge_core::tensor::{Buffer, Location};
use opforge_core::{DataType, Result, Status, Tensor, TensorShape};
use std::cell::{Cell, RefCell, UnsafeCell};
use std::ffi::c_void;
use std::mem::MaybeUninit;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, RwLock};

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
        let init = KernelInit {
            c: (c as *const OpKernelConstruction<'_>).cast(),
            arena: &arena,
        };
        let mut state: *mut c_void = self.user.0;
        if let Some(create) = self.create {
            let mut status = HostStatus::default();
            // SAFETY: `create` is the plugin's callback with the header's
            // signature; `init` and `status` live across the call; `state`
            // is a valid out-pointer.
            let code = unsafe {
                create(
                    (&init as *const KernelInit).cast(),
                    self.user.0,
                    &mut state,
                    status.as_ptr(),
                )
            };
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

/// The plugin's 1.1 compute entry.
type ComputeViewsFn = unsafe extern "C" fn(
    *mut c_void,
    *mut OpforgeKernelCtx,
    *const OpforgeKernelViews,
    *mut OpforgeStatus,
) -> OpforgeCode;

impl PluginKernel {
    /// The 1.1 entry: makes every input's view and sets every declared
    /// output (see the module's documentation), then calls `f`. An error
    /// here (an allocation) is the host's own, before any plugin code runs.
    ///
    /// The arrays live on the stack when the node has at most
    /// [`INLINE_ARGS`] inputs and outputs (the common case, kept free of
    /// any heap bookkeeping); larger nodes take [`run_views_large`](Self::run_views_large).
    #[inline]
    fn run_views(
        &self,
        f: ComputeViewsFn,
        state: SendPtr,
        k: &KernelCtx<'_>,
        status: &mut HostStatus,
    ) -> Result<OpforgeCode> {
        let (ni, no) = (k.ctx().num_inputs(), k.ctx().num_outputs());
        if ni > INLINE_ARGS || no > INLINE_ARGS {
            return self.run_views_large(f, state, k, status);
        }
        // Written before they are read; only the first `ni`/`no` elements
        // are used.
        let mut ins = [const { MaybeUninit::<OpforgeTensor>::uninit() }; INLINE_ARGS];
        let mut outs = [const { MaybeUninit::<OpforgeTensor>::uninit() }; INLINE_ARGS];
        let mut from = [OPFORGE_NOT_FORWARDED; INLINE_ARGS];
        self.fill_views(k, &mut ins[..ni], &mut outs[..no], &mut from[..no])?;
        // SAFETY: the first `ni`/`no` elements of the arrays were written
        // by `fill_views`; see `call_views`.
        Ok(unsafe { self.call_views(f, state, k, status, &ins[..ni], &outs[..no], &from[..no]) })
    }

    /// [`run_views`](Self::run_views) for a node with more than
    /// [`INLINE_ARGS`] inputs or outputs: the arrays on the heap.
    #[cold]
    #[inline(never)]
    fn run_views_large(
        &self,
        f: ComputeViewsFn,
        state: SendPtr,
        k: &KernelCtx<'_>,
        status: &mut HostStatus,
    ) -> Result<OpforgeCode> {
        let (ni, no) = (k.ctx().num_inputs(), k.ctx().num_outputs());
        let mut ins = vec![MaybeUninit::<OpforgeTensor>::uninit(); ni];
        let mut outs = vec![MaybeUninit::<OpforgeTensor>::uninit(); no];
        let mut from = vec![OPFORGE_NOT_FORWARDED; no];
        self.fill_views(k, &mut ins, &mut outs, &mut from)?;
        // SAFETY: every element of the arrays was written by `fill_views`;
        // see `call_views`.
        Ok(unsafe { self.call_views(f, state, k, status, &ins, &outs, &from) })
    }

    /// Writes every input's view into `ins`, sets every declared output and
    /// writes every output's view into `outs` (the unset view for an
    /// undeclared one), and the input each output took over into `from`
    /// (which starts all `OPFORGE_NOT_FORWARDED`).
    #[inline(always)]
    fn fill_views(
        &self,
        k: &KernelCtx<'_>,
        ins: &mut [MaybeUninit<OpforgeTensor>],
        outs: &mut [MaybeUninit<OpforgeTensor>],
        from: &mut [i64],
    ) -> Result<()> {
        for (i, v) in ins.iter_mut().enumerate() {
            k.write_input_view(i, v);
        }
        let no = outs.len();
        // The outputs not declared get the unset view (declared ones are
        // written below; their indices are below 64 unless `no` is large).
        // Skipped when every output is declared (the elementwise case).
        if no > 64 || self.def.declared_mask != low_bits(no) {
            let declared = if no <= 64 { self.def.declared_mask } else { 0 };
            for (o, v) in outs.iter_mut().enumerate() {
                if o >= 64 || declared & (1 << o) == 0 {
                    v.write(OpforgeTensor {
                        dtype: k.ctx().output_type(o).base() as i32,
                        ..OpforgeTensor::new()
                    });
                }
            }
        }
        for l in self.def.output_like.iter() {
            // In range and allocatable: checked for this node's signature
            // when the instance was made.
            let (o, j) = (l.output, l.input);
            // SAFETY: every element of `ins` was written above.
            let like = unsafe { ins[j].assume_init_ref() };
            let forwarded = if k.moved(j) {
                // Forwarded to an earlier declared output: its dims are in
                // its view.
                // SAFETY: `like` is a view this host made during this
                // compute (its dims live in the context's slots or arena).
                let dims = unsafe { dims_of_view(like) };
                k.ctx().allocate_output(o, TensorShape::new(dims)?)?;
                None
            } else if l.forward {
                k.ctx().forward_input_or_allocate_output_like(&[j], o, j)?
            } else {
                let shape = k.ctx().input(j).shape().clone();
                k.ctx().allocate_output(o, shape)?;
                None
            };
            if let Some(j) = forwarded {
                k.set_moved(j);
                from[o] = j as i64;
            }
            k.write_declared_output_view(o, like, &mut outs[o])?;
        }
        Ok(())
    }

    /// Calls the plugin's compute_views with the arrays.
    ///
    /// # Safety
    /// Every element of `ins`, `outs` and `from` is initialised (written by
    /// [`fill_views`](Self::fill_views) for this compute), and `state` is
    /// the state the caller runs the kernel with.
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    unsafe fn call_views(
        &self,
        f: ComputeViewsFn,
        state: SendPtr,
        k: &KernelCtx<'_>,
        status: &mut HostStatus,
        ins: &[MaybeUninit<OpforgeTensor>],
        outs: &[MaybeUninit<OpforgeTensor>],
        from: &[i64],
    ) -> OpforgeCode {
        let views = OpforgeKernelViews {
            inputs: ins.as_ptr().cast(),
            num_inputs: ins.len(),
            outputs: outs.as_ptr().cast(),
            num_outputs: outs.len(),
            forwarded_from: from.as_ptr(),
            ..OpforgeKernelViews::new()
        };
        // SAFETY: `f` is the plugin's compute_views; the state is the one
        // its create made, kept from destroy until the instance is dropped
        // (its first state) or by the caller's read lock (a later one);
        // `k`, `status`, `views` and the arrays it points to (every element
        // written, the caller says) live across the call.
        unsafe {
            f(
                state.0,
                (k as *const KernelCtx).cast_mut().cast(),
                &views,
                status.as_ptr(),
            )
        }
    }
}

/// The mask of the outputs `0..n` (all 64 bits from 64 on).
#[inline(always)]
fn low_bits(n: usize) -> u64 {
    if n >= 64 {
        u64::MAX
    } else {
        (1u64 << n) - 1
    }
}

/// The dims of a view the host made (`rank` of them, or none).
///
/// # Safety
/// `v` is a view made by this host during the running compute: its dims
/// live in the context's slots or arena.
unsafe fn dims_of_view(v: &OpforgeTensor) -> &[i64] {
    if v.rank == 0 || v.dims.is_null() {
        return &[];
    }
    // SAFETY: the host wrote `rank` dims there (caller).
    unsafe { std::slice::from_raw_parts(v.dims, v.rank as usize) }
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
        let k = KernelCtx::new((ctx as *mut OpKernelContext<'_>).cast(), &self.def, &slots);
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
            (Some(f), _) => self.run_views(f, state, &k, &mut status)?,
            // SAFETY: `compute` is the plugin's callback; the state is the
            // one its create made, kept from destroy until the instance is
            // dropped (`first`) or by the read lock; `k` and `status` live
            // across the call.
            (None, Some(f)) => unsafe {
                f(
                    state.0,
                    (&k as *const KernelCtx).cast_mut().cast(),
                    status.as_ptr(),
                )
            },
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

/// What `OpforgeKernelInit*` points to.
struct KernelInit {
    c: *const OpKernelConstruction<'static>,
    arena: *const Arena,
}

/// What `OpforgeKernelCtx*` points to: made on the stack of each compute.
/// It belongs to the compute's thread (R9: parallel_for workers never call
/// context functions), so its state is in `Cell`s, not behind locks, and the
/// common case allocates nothing: the dims and strides of the views of the
/// first [`INLINE_ARGS`] inputs and outputs of rank up to [`INLINE_RANK`]
/// are written once per compute into inline slots that stay put (the
/// context does not move during the call); the arena takes the rest. A view
/// itself is rebuilt from its tensor when asked for (a few loads): caching
/// it would cost more in copies than building it.
struct KernelCtx<'a> {
    ctx: *mut OpKernelContext<'static>,
    def: &'a PluginKernelDef,
    /// What most computes never need, made on first use (see [`Extra`]).
    extra: std::cell::OnceCell<Box<Extra>>,
    /// Bit `i`: input `i` (< 64) was forwarded to an output (its view is dead).
    moved: Cell<u64>,
    inputs: ShapeSlots<'a>,
    outputs: ShapeSlots<'a>,
}

/// The parts of a [`KernelCtx`] that a compute needs only off the common
/// path, boxed on first use: making and dropping the context then costs a
/// few stores and one check.
#[derive(Default)]
struct Extra {
    /// What has no slot: string tables, attr values, temporaries' and
    /// other views' dims and strides.
    arena: Arena,
    /// Temporaries and retired outputs: freed when compute returns.
    temps: RefCell<Vec<Tensor>>,
    /// Forwarded inputs from index 64 on.
    moved_hi: RefCell<Vec<usize>>,
}

/// Arguments per direction whose dims and strides live in inline slots.
const INLINE_ARGS: usize = 4;
/// The largest rank whose dims and strides fit in a slot.
const INLINE_RANK: usize = 6;

/// The dims and strides of a view built in this compute.
#[derive(Clone, Copy)]
struct SlotData {
    dims: [i64; INLINE_RANK],
    strides: [i64; INLINE_RANK],
}

/// Nothing stored yet.
const SLOT_EMPTY: u8 = 0;
/// Holds the dims and strides of the argument's current tensor.
const SLOT_CURRENT: u8 = 1;
/// Holds those of an earlier tensor of the (output) argument, lent in a
/// view: they must stay valid until compute returns (R7), so the slot is
/// never written again.
const SLOT_SPENT: u8 = 2;

/// The inline dims and strides of the first [`INLINE_ARGS`] arguments of
/// one direction (see [`KernelCtx`]). The storage is left uninitialised
/// until a slot is filled, so making a context costs a few byte stores.
struct ShapeSlots<'a> {
    state: [Cell<u8>; INLINE_ARGS],
    data: &'a SlotStorage,
}

/// The storage of [`ShapeSlots`]: a separate local of the compute, so that
/// making the context does not zero it (an uninitialised field inside a
/// larger value is memset).
type SlotStorage = UnsafeCell<MaybeUninit<[SlotData; INLINE_ARGS]>>;

impl<'a> ShapeSlots<'a> {
    fn new(data: &'a SlotStorage) -> ShapeSlots<'a> {
        ShapeSlots {
            state: [const { Cell::new(SLOT_EMPTY) }; INLINE_ARGS],
            data,
        }
    }

    /// The dims and row-major strides of argument `i`'s current tensor,
    /// whose dims are `dims`, in slot `i` (written on first use), or
    /// `None` if no slot can take them (`i` too large, the slot spent, or a
    /// rank above [`INLINE_RANK`]). NULL pointers for a scalar.
    #[inline]
    fn shape(&self, i: usize, dims: &[i64]) -> Option<(*const i64, *const i64)> {
        let state = self.state.get(i)?;
        if dims.is_empty() {
            return Some((std::ptr::null(), std::ptr::null()));
        }
        // In bounds: `i < INLINE_ARGS` (its state exists).
        let slot = self.data.get().cast::<SlotData>().wrapping_add(i);
        // SAFETY: `slot` is in bounds; taking field addresses reads nothing.
        let (d, st) = unsafe {
            (
                (&raw mut (*slot).dims).cast::<i64>(),
                (&raw mut (*slot).strides).cast::<i64>(),
            )
        };
        match state.get() {
            SLOT_CURRENT => {}
            SLOT_EMPTY if dims.len() <= INLINE_RANK => {
                // SAFETY: an EMPTY slot was never lent, so no pointer into
                // it is in use; its (uninitialised) arrays are written
                // through raw pointers within bounds (`dims.len() <=
                // INLINE_RANK`) before anything reads them; one thread uses
                // the context (R9).
                unsafe {
                    let mut stride = 1i64;
                    for j in (0..dims.len()).rev() {
                        d.add(j).write(dims[j]);
                        st.add(j).write(stride);
                        stride = stride.saturating_mul(dims[j].max(1));
                    }
                }
                state.set(SLOT_CURRENT);
            }
            _ => return None,
        }
        Some((d, st))
    }

    /// Argument `i`'s tensor is replaced: the dims lent stay where they are.
    fn retire(&self, i: usize) {
        if let Some(state) = self.state.get(i) {
            if state.get() == SLOT_CURRENT {
                state.set(SLOT_SPENT);
            }
        }
    }
}

/// # Safety
/// `p` is the `OpforgeKernelInit*` the host passed to create (R7).
unsafe fn init<'a>(
    p: *const OpforgeKernelInit,
) -> Result<(&'a OpKernelConstruction<'a>, &'a Arena)> {
    if p.is_null() {
        return Err(Status::invalid_argument("a NULL OpforgeKernelInit"));
    }
    // SAFETY: a non-null init is the KernelInit the host made for this
    // create call, alive during it (R7).
    let i = unsafe { &*p.cast::<KernelInit>() };
    // SAFETY: both point to values that live across the create call.
    Ok(unsafe { (&*i.c.cast(), &*i.arena) })
}

/// # Safety
/// `p` is the `OpforgeKernelCtx*` the host passed to compute (R7).
#[inline]
unsafe fn kctx<'a>(p: *const OpforgeKernelCtx) -> Result<&'a KernelCtx<'a>> {
    if p.is_null() {
        return Err(Status::invalid_argument("a NULL OpforgeKernelCtx"));
    }
    // SAFETY: a non-null ctx is the KernelCtx the host made for this compute.
    Ok(unsafe { &*p.cast::<KernelCtx>() })
}

impl<'a> KernelCtx<'a> {
    #[allow(clippy::mut_from_ref)]
    fn ctx(&self) -> &mut OpKernelContext<'static> {
        // SAFETY: the OpKernelContext outlives the compute call this
        // KernelCtx exists for, and the plugin calls context functions only
        // from the compute's thread (R9), one at a time, so no two
        // references are used at once.
        unsafe { &mut *self.ctx }
    }

    /// The context's [`Extra`], made on first use.
    fn extra(&self) -> &Extra {
        self.extra.get_or_init(Box::default)
    }

    fn new(
        ctx: *mut OpKernelContext<'static>,
        def: &'a PluginKernelDef,
        slots: &'a [SlotStorage; 2],
    ) -> KernelCtx<'a> {
        KernelCtx {
            ctx,
            def,
            extra: std::cell::OnceCell::new(),
            moved: Cell::new(0),
            inputs: ShapeSlots::new(&slots[0]),
            outputs: ShapeSlots::new(&slots[1]),
        }
    }

    #[inline]
    fn check_input(&self, i: usize) -> Result<()> {
        let n = self.ctx().num_inputs();
        if i >= n {
            return Err(Status::invalid_argument(format!(
                "{}: input index {i} is out of range (the node has {n} inputs)",
                self.def.op
            )));
        }
        Ok(())
    }

    #[inline]
    fn check_output(&self, i: usize) -> Result<()> {
        let n = self.ctx().num_outputs();
        if i >= n {
            return Err(Status::invalid_argument(format!(
                "{}: output index {i} is out of range (the node has {n} outputs)",
                self.def.op
            )));
        }
        Ok(())
    }

    /// Keeps output `i`'s current tensor (if any) alive until compute
    /// returns, before the output is set again: views of it stay valid (R7).
    fn retire_output(&self, i: usize) {
        self.outputs.retire(i);
        if let Some(old) = self.ctx().output(i).cloned() {
            self.extra().temps.borrow_mut().push(old);
        }
    }

    #[inline]
    fn moved(&self, i: usize) -> bool {
        if i < 64 {
            self.moved.get() & (1u64 << i) != 0
        } else {
            self.extra().moved_hi.borrow().contains(&i)
        }
    }

    fn set_moved(&self, i: usize) {
        if i < 64 {
            self.moved.set(self.moved.get() | (1u64 << i));
        } else {
            self.extra().moved_hi.borrow_mut().push(i);
        }
    }

    /// Writes the view of input `i` into `dst`, for the views entry: what
    /// [`input_view`](Self::input_view) gives, built in place; an input the
    /// host cannot lend (a resource or variant tensor) gets a bare view
    /// (dtype and dims, NULL data, flags 0), and `input` says why when
    /// asked.
    #[inline(always)]
    fn write_input_view(&self, i: usize, dst: &mut MaybeUninit<OpforgeTensor>) {
        let t = &self.ctx().inputs()[i];
        match dense_bytes(t) {
            Some(data) => {
                let (dims, strides) = self.input_shape(i, t);
                dst.write(dense_view(t, data, dims, strides));
            }
            None => {
                dst.write(
                    self.input_view(i)
                        .unwrap_or_else(|_| self.bare_input_view(i)),
                );
            }
        }
    }

    #[cold]
    fn bare_input_view(&self, i: usize) -> OpforgeTensor {
        let t = &self.ctx().inputs()[i];
        let mut v = OpforgeTensor::new();
        v.dtype = t.dtype() as i32;
        v.rank = u32::try_from(t.rank()).unwrap_or(u32::MAX);
        v.num_elements = t.num_elements() as i64;
        with_arena_shape(v, t.dims(), &self.extra().arena)
    }

    /// Input `i`'s dims and strides, lent until compute returns.
    #[inline(always)]
    fn input_shape(&self, i: usize, t: &Tensor) -> (*const i64, *const i64) {
        self.inputs
            .shape(i, t.dims())
            .unwrap_or_else(|| arena_shape(t.dims(), &self.extra().arena))
    }

    /// Output `i`'s dims and strides, lent until compute returns.
    #[inline(always)]
    fn output_shape(&self, i: usize, dims: &[i64]) -> (*const i64, *const i64) {
        self.outputs
            .shape(i, dims)
            .unwrap_or_else(|| arena_shape(dims, &self.extra().arena))
    }

    /// The read-only view of input `i` (checked, not moved).
    #[inline]
    fn input_view(&self, i: usize) -> Result<OpforgeTensor> {
        let t = &self.ctx().inputs()[i];
        match dense_bytes(t) {
            Some(data) => {
                let (dims, strides) = self.input_shape(i, t);
                Ok(dense_view(t, data, dims, strides))
            }
            None => {
                let v = view_body(t, &self.extra().arena)?;
                let (dims, strides) = self.input_shape(i, t);
                Ok(OpforgeTensor { dims, strides, ..v })
            }
        }
    }

    /// The view of output `i`'s current tensor (checked, set): writable
    /// unless it is shared.
    #[inline]
    fn output_view(&self, i: usize) -> Result<OpforgeTensor> {
        let t = self.ctx().output_mut(i)?;
        let (dims, strides) = self.output_shape(i, t.dims());
        if !special_dtype(t.dtype()) {
            let (dtype, rank, n) = (t.dtype(), t.rank(), t.num_elements());
            if let Some((data, len)) = t.host_data_mut() {
                return Ok(view_of_parts(
                    dtype, rank, n, data, len, true, dims, strides,
                ));
            }
            // Shared: read-only (below).
        }
        let v = view_body(t, &self.extra().arena)?;
        Ok(OpforgeTensor { dims, strides, ..v })
    }

    /// The view of declared output `o`, just set with the dims of the
    /// input whose view (made in this compute) is `like`, written into
    /// `dst` (the views entry's array). The output lends `like`'s dims and
    /// strides, which live until compute returns and are never rewritten
    /// (an input's slot is written once per compute), so they are not
    /// computed twice; anything but a dense host tensor the host may write
    /// takes [`output_view`](Self::output_view).
    #[inline(always)]
    fn write_declared_output_view(
        &self,
        o: usize,
        like: &OpforgeTensor,
        dst: &mut MaybeUninit<OpforgeTensor>,
    ) -> Result<()> {
        let t = self.ctx().output_mut(o)?;
        debug_assert_eq!(
            // SAFETY: `like` is a view this host made in this compute.
            unsafe { dims_of_view(like) },
            t.dims(),
            "a declared output has its input's dims"
        );
        let dtype = t.dtype();
        if !special_dtype(dtype) {
            if let Some((data, len)) = t.host_data_mut() {
                dst.write(OpforgeTensor {
                    struct_size: size_of::<OpforgeTensor>(),
                    dtype: dtype as i32,
                    rank: like.rank,
                    dims: like.dims,
                    strides: like.strides,
                    data: data.cast(),
                    byte_len: len as u64,
                    num_elements: like.num_elements,
                    flags: OPFORGE_TENSOR_CONTIGUOUS
                        | OPFORGE_TENSOR_HOST_MEMORY
                        | OPFORGE_TENSOR_WRITABLE,
                });
                return Ok(());
            }
        }
        self.write_output_view_slow(o, dst)
    }

    /// [`output_view`](Self::output_view) written into `dst`.
    #[cold]
    #[inline(never)]
    fn write_output_view_slow(&self, o: usize, dst: &mut MaybeUninit<OpforgeTensor>) -> Result<()> {
        dst.write(self.output_view(o)?);
        Ok(())
    }
}

/// String, resource and variant tensors: no raw bytes to lend.
#[inline(always)]
fn special_dtype(d: DataType) -> bool {
    matches!(d, DataType::String | DataType::Resource | DataType::Variant)
}

/// Where the bytes of a dense host tensor are (address and length),
/// `None` for anything else (strings, resources, variants, device memory,
/// a taken input: the slow path says what to do).
#[inline(always)]
fn dense_bytes(t: &Tensor) -> Option<(*const u8, usize)> {
    if special_dtype(t.dtype()) {
        return None;
    }
    t.host_data()
}

/// The read-only view of a dense host tensor `t` whose bytes are `data`
/// ([`dense_bytes`]).
#[inline(always)]
fn dense_view(
    t: &Tensor,
    (data, len): (*const u8, usize),
    dims: *const i64,
    strides: *const i64,
) -> OpforgeTensor {
    view_of_parts(
        t.dtype(),
        t.rank(),
        t.num_elements(),
        data.cast_mut(),
        len,
        false,
        dims,
        strides,
    )
}

/// The view of a dense host tensor (read-only unless `writable`), built in
/// one piece: no field-by-field stores that the copy to its destination
/// would then stall on. `data` holds `len` bytes.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn view_of_parts(
    dtype: DataType,
    rank: usize,
    num_elements: usize,
    data: *mut u8,
    len: usize,
    writable: bool,
    dims: *const i64,
    strides: *const i64,
) -> OpforgeTensor {
    OpforgeTensor {
        struct_size: size_of::<OpforgeTensor>(),
        dtype: dtype as i32,
        rank: u32::try_from(rank).unwrap_or(u32::MAX),
        dims,
        strides,
        data: data.cast(),
        byte_len: len as u64,
        num_elements: num_elements as i64,
        flags: OPFORGE_TENSOR_CONTIGUOUS
            | OPFORGE_TENSOR_HOST_MEMORY
            | if writable { OPFORGE_TENSOR_WRITABLE } else { 0 },
    }
}

/// `dims` and their row-major strides copied into `arena`.
fn arena_shape(dims: &[i64], arena: &Arena) -> (*const i64, *const i64) {
    (arena.i64s(dims), arena.i64s(&row_major_strides(dims)))
}

/// A view of `t` lent to the plugin, its dims and strides in `arena`.
fn view(t: &mut Tensor, writable: bool, arena: &Arena) -> Result<OpforgeTensor> {
    let v = view_body_mut(t, writable, arena)?;
    Ok(with_arena_shape(v, t.dims(), arena))
}

/// `v` with `dims` and their row-major strides copied into `arena`.
fn with_arena_shape(mut v: OpforgeTensor, dims: &[i64], arena: &Arena) -> OpforgeTensor {
    v.dims = arena.i64s(dims);
    v.strides = arena.i64s(&row_major_strides(dims));
    v
}

/// A view of `t` without dims and strides; writable when `writable` and
/// `t` is not shared.
#[inline(always)]
fn view_body_mut(t: &mut Tensor, writable: bool, arena: &Arena) -> Result<OpforgeTensor> {
    if writable
        && !matches!(
            t.dtype(),
            DataType::String | DataType::Resource | DataType::Variant
        )
    {
        // A shared output gets a read-only view (below).
        let (num_elements, rank) = (t.num_elements() as i64, t.rank());
        let dtype = t.dtype() as i32;
        if let Ok(b) = t.bytes_mut() {
            let mut v = OpforgeTensor::new();
            v.dtype = dtype;
            v.rank = u32::try_from(rank).unwrap_or(u32::MAX);
            v.num_elements = num_elements;
            v.flags =
                OPFORGE_TENSOR_CONTIGUOUS | OPFORGE_TENSOR_HOST_MEMORY | OPFORGE_TENSOR_WRITABLE;
            v.byte_len = b.len() as u64;
            v.data = b.as_mut_ptr().cast();
            return Ok(v);
        }
    }
    view_body(t, arena)
}

/// A read-only view of `t` without dims and strides.
#[inline(always)]
fn view_body(t: &Tensor, arena: &Arena) -> Result<OpforgeTensor> {
    let dtype = t.dtype();
    if matches!(
        dtype,
        DataType::String | DataType::Resource | DataType::Variant
    ) {
        return view_body_special(t, arena);
    }
    let mut v = OpforgeTensor::new();
    v.dtype = dtype as i32;
    v.rank = u32::try_from(t.rank()).unwrap_or(u32::MAX);
    v.num_elements = t.num_elements() as i64;
    v.flags = OPFORGE_TENSOR_CONTIGUOUS | OPFORGE_TENSOR_HOST_MEMORY;
    let b = t.bytes()?;
    v.byte_len = b.len() as u64;
    v.data = b.as_ptr().cast_mut().cast();
    Ok(v)
}

/// [`view_body`] of a string tensor (a string table in `arena`), or the
/// error for resource and variant tensors.
#[cold]
fn view_body_special(t: &Tensor, arena: &Arena) -> Result<OpforgeTensor> {
    if t.dtype() != DataType::String {
        return Err(Status::unimplemented(format!(
            "{} tensors are not readable through the 1.0 ABI",
            t.dtype()
        )));
    }
    let mut v = OpforgeTensor::new();
    v.dtype = t.dtype() as i32;
    v.rank = u32::try_from(t.rank()).unwrap_or(u32::MAX);
    v.num_elements = t.num_elements() as i64;
    v.flags = OPFORGE_TENSOR_CONTIGUOUS | OPFORGE_TENSOR_HOST_MEMORY;
    let strs: Vec<OpforgeStr> = t.strings()?.iter().map(|s| arena.str(s)).collect();
    v.byte_len = (strs.len() * size_of::<OpforgeStr>()) as u64;
    v.data = arena.strs(strs).cast_mut().cast();
    Ok(v)
}

/// A host string lent as is (EMPTY when empty, as the arena lends it).
fn lend_str(s: &str) -> OpforgeStr {
    if s.is_empty() {
        OpforgeStr::EMPTY
    } else {
        OpforgeStr::from_text(s)
    }
}

fn shape_of(dims: *const i64, rank: u32) -> Result<TensorShape> {
    // SAFETY: the plugin passes `rank` dims (header).
    let dims = unsafe { slice(dims, rank as usize, "dims")? };
    TensorShape::new(dims)
}

fn dtype_of(d: OpforgeDType) -> Result<DataType> {
    DataType::from_i32(d)
        .filter(|d| !d.is_ref())
        .ok_or_else(|| {
            Status::invalid_argument(format!("{d} is not a dtype number this host knows"))
        })
}

mod api;
use api::*;

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

/// [`arg_range_of`] for the shape bridge.
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
