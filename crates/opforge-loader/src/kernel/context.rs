//! The contexts a plugin kernel is lent: `OpforgeKernelInit*` (create)
//! and `OpforgeKernelCtx*` (compute), found again from the pointers the
//! plugin passes back ([`with_init`], [`with_kctx`]: checked against the
//! thread's current context before anything is read, see `crate::ctx`),
//! and the views of tensors lent through them.

use super::PluginKernelDef;
use crate::ctx::{claim, lend, CtxKind, Lent};
use crate::host::*;
use opforge_abi::*;
use opforge_core::kernel::{OpKernelConstruction, OpKernelContext};
use opforge_core::{DataType, Result, Status, Tensor, TensorShape};
use std::cell::{Cell, RefCell, UnsafeCell};
use std::mem::MaybeUninit;

/// What `OpforgeKernelInit*` points to: made on the stack of each create.
pub(super) struct KernelInit<'a> {
    pub(super) c: &'a OpKernelConstruction<'a>,
    pub(super) arena: &'a Arena,
}

impl KernelInit<'_> {
    /// Lends this init to the create about to run on this thread.
    pub(super) fn lend(&self) -> Lent {
        lend(self, CtxKind::KernelInit)
    }
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
///
/// The `OpKernelContext` is reached through a raw pointer set when the
/// context is lent ([`lend`](KernelCtx::lend)): the compute's frame does not
/// touch it while the plugin runs, and the host functions take it one at
/// a time ([`with_kctx`]).
pub(super) struct KernelCtx<'a> {
    ctx: Cell<*mut OpKernelContext<'static>>,
    pub(super) def: &'a PluginKernelDef,
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
pub(super) struct Extra {
    /// What has no slot: string tables, attr values, temporaries' and
    /// other views' dims and strides.
    pub(super) arena: Arena,
    /// Temporaries and retired outputs: freed when compute returns.
    pub(super) temps: RefCell<Vec<Tensor>>,
    /// Forwarded inputs from index 64 on.
    moved_hi: RefCell<Vec<usize>>,
}

/// Arguments per direction whose dims and strides live in inline slots.
pub(super) const INLINE_ARGS: usize = 4;
/// The largest rank whose dims and strides fit in a slot.
const INLINE_RANK: usize = 6;

/// The dims and strides of a view built in this compute.
#[derive(Clone, Copy)]
pub(super) struct SlotData {
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
pub(super) type SlotStorage = UnsafeCell<MaybeUninit<[SlotData; INLINE_ARGS]>>;

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

/// Runs `f` on the create context `p`, if it is the one lent to the
/// create running on this thread (`crate::ctx::claim`); else the refusal.
pub(super) fn with_init<R>(
    p: *const OpforgeKernelInit,
    f: impl FnOnce(&OpKernelConstruction<'_>, &Arena) -> Result<R>,
) -> Result<R> {
    let _claim = claim(p, CtxKind::KernelInit)?;
    // SAFETY: the claim found `p` to be the address of the KernelInit lent
    // (`KernelInit::lend`) to the create running on this thread; the loan
    // ends before the create's frame, which owns the KernelInit, returns.
    let init = unsafe { &*p.cast::<KernelInit<'_>>() };
    f(init.c, init.arena)
}

/// Runs `f` on the compute context `p` and its `OpKernelContext`, if `p`
/// is the context lent to the compute running on this thread
/// (`crate::ctx::claim`); else the refusal.
#[inline]
pub(super) fn with_kctx<R>(
    p: *const OpforgeKernelCtx,
    f: impl FnOnce(&KernelCtx<'_>, &mut OpKernelContext<'_>) -> Result<R>,
) -> Result<R> {
    let _claim = claim(p, CtxKind::Kernel)?;
    // SAFETY: the claim found `p` to be the address of the KernelCtx lent
    // (`KernelCtx::lend`) to the compute running on this thread; the loan
    // ends before the compute's frame, which owns it, returns.
    let k = unsafe { &*p.cast::<KernelCtx<'_>>() };
    // SAFETY: `lend` set the pointer from the compute's `&mut
    // OpKernelContext`, which outlives the loan, and that frame does not
    // use it until the plugin returns. The reference is exclusive: the
    // claim holds the thread's context until `f` returns, so no other host
    // function (the only other code that makes one) can claim it meanwhile.
    let c = unsafe { &mut *k.ctx.get() };
    f(k, c)
}

impl<'a> KernelCtx<'a> {
    /// The context's [`Extra`], made on first use.
    pub(super) fn extra(&self) -> &Extra {
        self.extra.get_or_init(Box::default)
    }

    pub(super) fn new(def: &'a PluginKernelDef, slots: &'a [SlotStorage; 2]) -> KernelCtx<'a> {
        KernelCtx {
            ctx: Cell::new(std::ptr::null_mut()),
            def,
            extra: std::cell::OnceCell::new(),
            moved: Cell::new(0),
            inputs: ShapeSlots::new(&slots[0]),
            outputs: ShapeSlots::new(&slots[1]),
        }
    }

    /// Lends this context, and `ctx` through it, to the compute about to
    /// run on this thread: keep the guard until it returns, and do not use
    /// `ctx` meanwhile.
    pub(super) fn lend(&self, ctx: &mut OpKernelContext<'_>) -> Lent {
        self.ctx
            .set((ctx as *mut OpKernelContext<'_>).cast::<OpKernelContext<'static>>());
        lend(self, CtxKind::Kernel)
    }

    #[inline]
    pub(super) fn check_input(&self, c: &OpKernelContext<'_>, i: usize) -> Result<()> {
        self.check_index(i, c.num_inputs(), "input")
    }

    #[inline]
    pub(super) fn check_output(&self, c: &OpKernelContext<'_>, i: usize) -> Result<()> {
        self.check_index(i, c.num_outputs(), "output")
    }

    /// INVALID_ARGUMENT unless `i` is one of the node's `n` `what`s.
    #[inline]
    fn check_index(&self, i: usize, n: usize, what: &str) -> Result<()> {
        if i >= n {
            return Err(Status::invalid_argument(format!(
                "{}: {what} index {i} is out of range (the node has {n} {what}s)",
                self.def.op
            )));
        }
        Ok(())
    }

    /// Keeps output `i`'s current tensor (if any) alive until compute
    /// returns, before the output is set again: views of it stay valid (R7).
    pub(super) fn retire_output(&self, c: &OpKernelContext<'_>, i: usize) {
        self.outputs.retire(i);
        if let Some(old) = c.output(i).cloned() {
            self.extra().temps.borrow_mut().push(old);
        }
    }

    #[inline]
    pub(super) fn moved(&self, i: usize) -> bool {
        if i < 64 {
            self.moved.get() & (1u64 << i) != 0
        } else {
            self.extra().moved_hi.borrow().contains(&i)
        }
    }

    pub(super) fn set_moved(&self, i: usize) {
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
    pub(super) fn write_input_view(
        &self,
        c: &OpKernelContext<'_>,
        i: usize,
        dst: &mut MaybeUninit<OpforgeTensor>,
    ) {
        let t = &c.inputs()[i];
        match dense_bytes(t) {
            Some(data) => {
                let (dims, strides) = self.input_shape(i, t);
                dst.write(dense_view(t, data, dims, strides));
            }
            None => {
                dst.write(
                    self.input_view(c, i)
                        .unwrap_or_else(|_| self.bare_input_view(c, i)),
                );
            }
        }
    }

    #[cold]
    fn bare_input_view(&self, c: &OpKernelContext<'_>, i: usize) -> OpforgeTensor {
        let t = &c.inputs()[i];
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
    pub(super) fn input_view(&self, c: &OpKernelContext<'_>, i: usize) -> Result<OpforgeTensor> {
        let t = &c.inputs()[i];
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
    pub(super) fn output_view(
        &self,
        c: &mut OpKernelContext<'_>,
        i: usize,
    ) -> Result<OpforgeTensor> {
        let t = c.output_mut(i)?;
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
    pub(super) fn write_declared_output_view(
        &self,
        c: &mut OpKernelContext<'_>,
        o: usize,
        like: &OpforgeTensor,
        dst: &mut MaybeUninit<OpforgeTensor>,
    ) -> Result<()> {
        let t = c.output_mut(o)?;
        debug_assert_eq!(
            // SAFETY: `like` is a view this host made in this compute.
            unsafe { super::views::dims_of_view(like) },
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
        self.write_output_view_slow(c, o, dst)
    }

    /// [`output_view`](Self::output_view) written into `dst`.
    #[cold]
    #[inline(never)]
    fn write_output_view_slow(
        &self,
        c: &mut OpKernelContext<'_>,
        o: usize,
        dst: &mut MaybeUninit<OpforgeTensor>,
    ) -> Result<()> {
        dst.write(self.output_view(c, o)?);
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
pub(super) fn view(t: &mut Tensor, writable: bool, arena: &Arena) -> Result<OpforgeTensor> {
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
pub(super) fn lend_str(s: &str) -> OpforgeStr {
    if s.is_empty() {
        OpforgeStr::EMPTY
    } else {
        OpforgeStr::from_text(s)
    }
}

/// The shape of the `rank` dims a plugin passes at `dims` (`what` names
/// them in errors); a rank above 254 is refused before any dim is read.
///
/// # Safety
/// As [`plugin_dims`]: `dims` is NULL or points to `rank` readable dims.
pub(super) unsafe fn shape_of(dims: *const i64, rank: u32, what: &str) -> Result<TensorShape> {
    // SAFETY: forwarded.
    TensorShape::new(unsafe { plugin_dims(dims, rank, what)? })
}

/// The dtype of a plugin's dtype number (not a reference type).
pub(super) fn dtype_of(d: OpforgeDType) -> Result<DataType> {
    DataType::from_i32(d)
        .filter(|d| !d.is_ref())
        .ok_or_else(|| {
            Status::invalid_argument(format!("{d} is not a dtype number this host knows"))
        })
}
