//! Kernels: the [`OpKernel`] and [`CreateKernel`] traits, what `create`
//! reads ([`OpKernelConstruction`]), what `compute` works with
//! ([`OpKernelContext`]), tensor views ([`Tensor`],
//! [`TensorMut`]), and the trampolines the host calls.
//!
//! The names are opforge-core's `OpKernelConstruction` and
//! `OpKernelContext` ones, so an in-tree kernel ports mechanically. Every
//! call goes through the host's kernel table; a slot the host lacks answers
//! `Unimplemented` (calls that return a value and no `Result` record the
//! missing slot, and the compute then fails with `Unimplemented`).
//!
//! Two entries run a kernel's [`OpKernel::compute`], and it cannot tell them
//! apart. A 1.1 host calls `compute_views` with every input's view made and
//! every declared output
//! ([`KernelDefBuilder::output_like`](crate::KernelDefBuilder::output_like))
//! set: `input`, `output_mut`, `inputs_and_output` and a repeated
//! `forward_input_or_allocate_output` of a declared output read those
//! views, with no call into the host. A 1.0 host calls `compute`: the SDK
//! allocates the declared outputs first (never forwarding) and asks the
//! host for each view, as in 1.0.

use core::cell::{Cell, RefCell, UnsafeCell};
use core::ffi::c_void;
use core::marker::PhantomData;
use core::mem::MaybeUninit;
use core::ops::Range;
use core::ptr::NonNull;
use std::sync::atomic::{AtomicBool, Ordering};

use opforge_abi::{
    OpforgeAttrValue, OpforgeCode, OpforgeForeignTensor, OpforgeKernelCtx, OpforgeKernelInit,
    OpforgeKernelViews, OpforgeStatus, OpforgeStr, OpforgeTensor, Versioned, OPFORGE_INTERNAL,
    OPFORGE_NOT_FORWARDED, OPFORGE_REQ_ADD, OPFORGE_REQ_INPLACE, OPFORGE_REQ_NULL,
    OPFORGE_REQ_WRITE, OPFORGE_TENSOR_CONTIGUOUS, OPFORGE_TENSOR_WRITABLE,
};

use crate::attr::{self, FromAttrValue};
use crate::dtype::{DataType, Element};
use crate::host::{self, slot, Host};
use crate::registry::KernelDef;
use crate::status::{Result, Status};

/// A kernel: the computation of an op on one device (opforge-core's and
/// TensorFlow's `OpKernel`). Made once per node (or eager call signature)
/// through [`CreateKernel::create`], then run on each call, possibly
/// concurrently (`Sync`) unless the definition says
/// [`not_thread_safe`](crate::KernelDefBuilder::not_thread_safe).
pub trait OpKernel: Send + Sync + 'static {
    /// Runs the kernel once: reads the inputs from `ctx` and sets every
    /// output.
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()>;
}

/// A kernel type that builds itself from the node's attrs (opforge-core's
/// `CreateKernel`, TensorFlow's kernel constructor);
/// [`KernelDefBuilder::build`](crate::KernelDefBuilder::build) binds it.
pub trait CreateKernel: OpKernel + Sized {
    /// Reads and validates attrs and dtypes (a failure fails the node's
    /// construction, as TensorFlow's constructor errors do).
    fn create(ctx: &OpKernelConstruction<'_>) -> Result<Self>;
}

/// Where a sticky "missing slot" is recorded by calls without a `Result`.
type Missing = Cell<Option<Status>>;

fn note_missing(missing: &Missing, host: &Host, name: &str) {
    host::note_missing(missing, host, "kernel", name);
}

/// Reads an attr through a host slot.
fn read_attr<T: FromAttrValue>(
    host: &Host,
    name: &str,
    status: *mut OpforgeStatus,
    f: impl FnOnce(OpforgeStr, *mut OpforgeAttrValue) -> OpforgeCode,
) -> Result<T> {
    let mut value = OpforgeAttrValue::new();
    let code = f(OpforgeStr::from_text(name), &mut value);
    host.check(code, status)?;
    // SAFETY: the host filled `value`; what it points to lives at least as
    // long as this call (R7), and `convert` copies it out.
    unsafe { attr::convert(name, &value) }
}

/// What a kernel's `create` reads: the node's attrs, dtypes and names
/// (opforge-core's `OpKernelConstruction`).
pub struct OpKernelConstruction<'a> {
    raw: *const OpforgeKernelInit,
    status: *mut OpforgeStatus,
    host: &'a Host,
    missing: Missing,
}

impl<'a> OpKernelConstruction<'a> {
    fn str_of(
        &self,
        s: Option<unsafe extern "C" fn(*const OpforgeKernelInit) -> OpforgeStr>,
        name: &str,
    ) -> String {
        match s {
            // SAFETY: `raw` is the create's init (R7); the string lives as
            // it and is copied at once.
            Some(f) => String::from_utf8_lossy(unsafe { f(self.raw).as_bytes() }).into_owned(),
            None => {
                note_missing(&self.missing, self.host, name);
                String::new()
            }
        }
    }

    /// The op's name.
    pub fn op_name(&self) -> String {
        self.str_of(self.host.kernel.init_op_name, "init_op_name")
    }
    /// The node's name (the op's name for eager calls).
    pub fn node_name(&self) -> String {
        self.str_of(self.host.kernel.init_node_name, "init_node_name")
    }
    /// The device type the kernel is built for.
    pub fn device_type(&self) -> String {
        self.str_of(self.host.kernel.init_device_type, "init_device_type")
    }
    /// The number of flat inputs.
    pub fn num_inputs(&self) -> usize {
        match self.host.kernel.init_num_inputs {
            // SAFETY: the create's init (R7).
            Some(f) => unsafe { f(self.raw) },
            None => {
                note_missing(&self.missing, self.host, "init_num_inputs");
                0
            }
        }
    }
    /// The number of flat outputs.
    pub fn num_outputs(&self) -> usize {
        match self.host.kernel.init_num_outputs {
            // SAFETY: the create's init (R7).
            Some(f) => unsafe { f(self.raw) },
            None => {
                note_missing(&self.missing, self.host, "init_num_outputs");
                0
            }
        }
    }
    /// The dtype of input `i` ([`DataType::Invalid`] out of range).
    pub fn input_type(&self, i: usize) -> DataType {
        match self.host.kernel.init_input_dtype {
            // SAFETY: the create's init (R7); a bad index is answered by
            // the host, not undefined.
            Some(f) => DataType(unsafe { f(self.raw, i) }),
            None => {
                note_missing(&self.missing, self.host, "init_input_dtype");
                DataType::Invalid
            }
        }
    }
    /// The dtype of output `i`.
    pub fn output_type(&self, i: usize) -> DataType {
        match self.host.kernel.init_output_dtype {
            // SAFETY: as `input_type`.
            Some(f) => DataType(unsafe { f(self.raw, i) }),
            None => {
                note_missing(&self.missing, self.host, "init_output_dtype");
                DataType::Invalid
            }
        }
    }
    /// The dtype of each flat input (opforge-core's `input_types`).
    pub fn input_types(&self) -> Vec<DataType> {
        (0..self.num_inputs()).map(|i| self.input_type(i)).collect()
    }
    /// The dtype of each flat output.
    pub fn output_types(&self) -> Vec<DataType> {
        (0..self.num_outputs())
            .map(|i| self.output_type(i))
            .collect()
    }
    /// Attr `name` of the node as `T` (opforge-core's `get_attr`).
    pub fn get_attr<T: FromAttrValue>(&self, name: &str) -> Result<T> {
        let f = slot!(self.host, kernel.init_attr)?;
        read_attr(self.host, name, self.status, |n, v| {
            // SAFETY: the create's init and status (R7); `v` is a zeroed
            // out-struct with its struct_size set.
            unsafe { f(self.raw, n, v, self.status) }
        })
    }
    /// The flat range of the input (`is_output` false) or output argument
    /// `name`.
    pub fn arg_range(&self, name: &str, is_output: bool) -> Result<Range<usize>> {
        let f = slot!(self.host, kernel.init_arg_range)?;
        let (mut start, mut stop) = (0, 0);
        // SAFETY: the create's init and status (R7); out-pointers to locals.
        let code = unsafe {
            f(
                self.raw,
                OpforgeStr::from_text(name),
                u8::from(is_output),
                &mut start,
                &mut stop,
                self.status,
            )
        };
        self.host.check(code, self.status)?;
        Ok(start..stop)
    }
}

/// A read-only view of a tensor (an input), valid during the compute.
///
/// It refers to the host's view where that lives (the views a 1.1 host
/// makes before compute), or to a copy the context keeps: the view itself
/// is never copied around (copying a 64-byte struct just written in pieces
/// stalls the CPU, which made it the largest cost of a call).
#[derive(Clone, Copy)]
pub struct Tensor<'a> {
    view: NonNull<OpforgeTensor>,
    _borrow: PhantomData<&'a OpforgeTensor>,
}

/// A writable view of a tensor (an output or a temporary), held as
/// [`Tensor`] holds its view.
pub struct TensorMut<'a> {
    view: NonNull<OpforgeTensor>,
    _borrow: PhantomData<&'a mut ()>,
}

/// Where the views a context lends live: the host's arrays (1.1 entry),
/// the context's inline slots, or its spill boxes; each outlives the
/// `Tensor`/`TensorMut` made from it (a slot is rewritten only after the
/// argument changed, which takes `&mut OpKernelContext` and so ends every borrow
/// of the old view).
#[inline(always)]
fn view_ref<'v>(view: NonNull<OpforgeTensor>) -> &'v OpforgeTensor {
    // SAFETY: see above: `view` points to a live, initialised view for as
    // long as the Tensor/TensorMut holding it may be used.
    unsafe { view.as_ref() }
}

#[inline]
fn dims_of(view: &OpforgeTensor) -> &[i64] {
    if view.rank == 0 || view.dims.is_null() {
        return &[];
    }
    // SAFETY: the host's view has `rank` dims, living as the view (R7),
    // which outlives the borrow of `view`.
    unsafe { core::slice::from_raw_parts(view.dims, view.rank as usize) }
}

/// The number of `T` elements of a view, checked for flat access: the
/// dtype, contiguity, data alignment and byte length. Inlined into each
/// accessor (it runs on every element access of a kernel), its errors made
/// out of line.
#[inline(always)]
fn check_flat<T: Element>(view: &OpforgeTensor) -> Result<usize> {
    let dtype = DataType(view.dtype);
    let n = usize::try_from(view.num_elements).unwrap_or(usize::MAX);
    let fits = n
        .checked_mul(core::mem::size_of::<T>())
        .is_some_and(|bytes| (view.byte_len as u128) >= bytes as u128);
    let aligned =
        n == 0 || (!view.data.is_null() && (view.data as usize) % core::mem::align_of::<T>() == 0);
    if dtype == T::DTYPE && view.flags & OPFORGE_TENSOR_CONTIGUOUS != 0 && fits && aligned {
        return Ok(n);
    }
    Err(flat_error(
        view,
        T::DTYPE,
        core::mem::size_of::<T>(),
        core::mem::align_of::<T>(),
    ))
}

/// Why [`check_flat`] refused a view (its checks in order, each with its
/// message).
#[cold]
#[inline(never)]
fn flat_error(view: &OpforgeTensor, want: DataType, size: usize, align: usize) -> Status {
    let dtype = DataType(view.dtype);
    if dtype != want {
        return Status::invalid_argument(format!("tensor of dtype {dtype} read as {want}"));
    }
    if view.flags & OPFORGE_TENSOR_CONTIGUOUS == 0 {
        return Status::unimplemented("flat access to a non-contiguous tensor");
    }
    let Ok(n) = usize::try_from(view.num_elements) else {
        return Status::internal("a tensor view with a negative element count");
    };
    if n > 0 && (view.data.is_null() || (view.data as usize) % align != 0) {
        return Status::internal("a tensor view with NULL or misaligned data");
    }
    if n.checked_mul(size).is_none() {
        return Status::internal("a tensor view larger than memory");
    }
    Status::internal("a tensor view whose byte_len is below its elements")
}

impl<'a> Tensor<'a> {
    /// A tensor over the view at `view`, which lives (unchanged) for `'a`.
    #[inline(always)]
    pub(crate) fn from_ptr(view: NonNull<OpforgeTensor>) -> Tensor<'a> {
        Tensor {
            view,
            _borrow: PhantomData,
        }
    }

    #[inline(always)]
    fn v(&self) -> &'a OpforgeTensor {
        view_ref(self.view)
    }

    /// The dtype.
    #[inline]
    pub fn dtype(&self) -> DataType {
        DataType(self.v().dtype)
    }
    /// The dims.
    #[inline]
    pub fn dims(&self) -> &'a [i64] {
        // SAFETY of the lifetime: the dims live as the view, for 'a.
        let d = dims_of(self.v());
        // SAFETY: `d` points into host memory valid for 'a (R7), not into
        // `self`.
        unsafe { core::slice::from_raw_parts(d.as_ptr(), d.len()) }
    }
    /// The number of elements.
    #[inline]
    pub fn num_elements(&self) -> usize {
        usize::try_from(self.v().num_elements).unwrap_or(0)
    }
    /// The elements of a `DT_STRING` tensor, row-major, as bytes.
    pub fn strings(&self) -> Result<Vec<&'a [u8]>> {
        if self.dtype() != DataType::String {
            return Err(Status::invalid_argument(format!(
                "tensor of dtype {} read as strings",
                self.dtype()
            )));
        }
        let n = self.num_elements();
        if n == 0 {
            return Ok(Vec::new());
        }
        if self.v().data.is_null()
            || (self.v().data as usize) % core::mem::align_of::<OpforgeStr>() != 0
            || (self.v().byte_len as u128)
                < (n as u128) * core::mem::size_of::<OpforgeStr>() as u128
        {
            return Err(Status::internal("a string tensor view with bad data"));
        }
        // SAFETY: a DT_STRING view points at `num_elements` OpforgeStr
        // (header), checked for alignment and length above, living for 'a.
        let strs = unsafe { core::slice::from_raw_parts(self.v().data.cast::<OpforgeStr>(), n) };
        // SAFETY: each element's bytes live as the view, for 'a (header).
        Ok(strs.iter().map(|s| unsafe { s.as_bytes() }).collect())
    }

    /// The elements, row-major, as `T` (which must be the dtype's type).
    #[inline(always)]
    pub fn flat<T: Element>(&self) -> Result<&'a [T]> {
        let n = check_flat::<T>(self.v())?;
        if n == 0 {
            return Ok(&[]);
        }
        // SAFETY: `check_flat` verified the dtype (so `T`'s layout, by
        // Element's contract), contiguity, alignment and that `n` elements
        // fit in `byte_len` bytes of host memory that live for 'a and are
        // not written while an input view exists (the host writes inputs
        // never; forwarding ends the view, R7).
        Ok(unsafe { core::slice::from_raw_parts(self.v().data.cast::<T>(), n) })
    }
}

impl<'a> TensorMut<'a> {
    /// A writable tensor over the view at `view`, which lives (unchanged)
    /// for `'a`.
    #[inline(always)]
    fn from_ptr(view: NonNull<OpforgeTensor>) -> TensorMut<'a> {
        TensorMut {
            view,
            _borrow: PhantomData,
        }
    }

    #[inline(always)]
    fn v(&self) -> &OpforgeTensor {
        view_ref(self.view)
    }

    /// The dtype.
    #[inline]
    pub fn dtype(&self) -> DataType {
        DataType(self.v().dtype)
    }
    /// The dims.
    #[inline]
    pub fn dims(&self) -> &[i64] {
        dims_of(self.v())
    }
    /// The number of elements.
    #[inline]
    pub fn num_elements(&self) -> usize {
        usize::try_from(self.v().num_elements).unwrap_or(0)
    }
    /// The elements, row-major, as `T`, writable.
    #[inline(always)]
    pub fn flat_mut<T: Element>(&mut self) -> Result<&mut [T]> {
        let n = check_flat::<T>(self.v())?;
        if self.v().flags & OPFORGE_TENSOR_WRITABLE == 0 {
            return Err(not_writable());
        }
        if n == 0 {
            return Ok(&mut []);
        }
        // SAFETY: as `Tensor::flat`, plus: the view is writable, and this
        // `TensorMut` is the only view of that memory the SDK hands out
        // (outputs are reached through `&mut OpKernelContext`, temporaries are
        // fresh), borrowed mutably for the slice's lifetime.
        Ok(unsafe { core::slice::from_raw_parts_mut(self.v().data.cast::<T>(), n) })
    }
    /// The elements as `T`, read-only.
    #[inline]
    pub fn flat<T: Element>(&self) -> Result<&[T]> {
        let n = check_flat::<T>(self.v())?;
        if n == 0 {
            return Ok(&[]);
        }
        // SAFETY: as `flat_mut`, shared.
        Ok(unsafe { core::slice::from_raw_parts(self.v().data.cast::<T>(), n) })
    }
}

#[cold]
#[inline(never)]
fn not_writable() -> Status {
    Status::failed_precondition("the tensor view is not writable")
}

/// One run of a kernel (opforge-core's `OpKernelContext`): inputs, outputs,
/// temporaries, attrs and the host's thread pool.
pub struct OpKernelContext<'a> {
    raw: *mut OpforgeKernelCtx,
    status: *mut OpforgeStatus,
    host: &'a Host,
    def: &'a KernelDef,
    missing: Missing,
    /// The views the host made (1.1 entry), or none (1.0 entry).
    premade: Premade<'a>,
    /// Bit `i`: the premade view of input `i` is dead (the input was
    /// forwarded or moved to an output that has been used since).
    in_dead: Cell<u64>,
    /// Bit `o`: output `o` was set before compute started (a declared
    /// output: by the host, or by the SDK on a 1.0 host).
    preset: Cell<u64>,
    /// Bit `o`: the kernel set output `o` again since (its premade view
    /// and forwarding are gone).
    out_reset: Cell<u64>,
    /// Bit `o`: a `forward_input_or_allocate_output` of the preset output
    /// `o` was answered with it (a second one asks the host).
    out_claimed: Cell<u64>,
    /// The views of the first inputs and outputs this compute asked the
    /// host for, kept (dropped when the argument changes: an output set
    /// again, an input forwarded or moved).
    in_views: ViewStore<'a>,
    out_views: ViewStore<'a>,
    /// The views of later arguments and of temporaries, boxed (each box
    /// stays put), freed with the context.
    // The boxes are what keeps each view's address when the Vec grows.
    #[allow(clippy::vec_box)]
    spill: RefCell<Vec<Box<OpforgeTensor>>>,
    /// `num_inputs`, once asked (`usize::MAX`: not yet).
    n_inputs: Cell<usize>,
    /// Where `inputs_and_output` puts the input views it returns.
    input_buf: &'a InputBuf,
}

/// Arguments per direction whose views a [`OpKernelContext`] keeps inline.
const CACHED_VIEWS: usize = 4;

/// The views a context keeps for the first [`CACHED_VIEWS`] arguments of
/// one direction: written once per argument tensor, lent by reference.
pub(crate) struct ViewStore<'a> {
    slots: &'a ViewSlots,
    /// Bit `i`: slot `i` holds the view of argument `i`'s current tensor.
    valid: Cell<u8>,
}

/// The storage of a [`ViewStore`]: a separate local of the compute, left
/// uninitialised until a slot is written (inside the context it would be
/// zeroed, as an uninitialised field of a larger value is).
pub(crate) type ViewSlots = UnsafeCell<MaybeUninit<[OpforgeTensor; CACHED_VIEWS]>>;

/// Where `inputs_and_output` puts the input views it returns (a separate
/// local of the compute, as [`ViewSlots`]).
pub(crate) type InputBuf = UnsafeCell<MaybeUninit<[Tensor<'static>; CACHED_VIEWS]>>;

impl<'a> ViewStore<'a> {
    /// Nothing kept, in `slots`.
    #[inline(always)]
    pub(crate) fn new(slots: &'a ViewSlots) -> ViewStore<'a> {
        ViewStore {
            slots,
            valid: Cell::new(0),
        }
    }

    /// Slot `i`'s address (`i < CACHED_VIEWS`).
    #[inline(always)]
    fn slot(&self, i: usize) -> *mut OpforgeTensor {
        self.slots.get().cast::<OpforgeTensor>().wrapping_add(i)
    }

    /// The kept view of argument `i`.
    #[inline]
    fn get(&self, i: usize) -> Option<NonNull<OpforgeTensor>> {
        if i >= CACHED_VIEWS || self.valid.get() & (1 << i) == 0 {
            return None;
        }
        NonNull::new(self.slot(i))
    }

    /// Keeps `view` for argument `i` (if it has a slot) and returns where
    /// it is. Only called when the slot holds nothing (first use, or after
    /// [`forget`](Self::forget)), so no borrow of the slot is alive.
    #[inline]
    fn put(&self, i: usize, view: &OpforgeTensor) -> Option<NonNull<OpforgeTensor>> {
        if i >= CACHED_VIEWS {
            return None;
        }
        debug_assert!(self.valid.get() & (1 << i) == 0);
        // SAFETY: slot `i` is in bounds; an invalid slot is lent to no
        // Tensor/TensorMut (forget runs only where the context is borrowed
        // mutably, or before the first put), and one thread uses the
        // context (R9).
        unsafe { self.slot(i).write(*view) };
        self.valid.set(self.valid.get() | (1 << i));
        NonNull::new(self.slot(i))
    }

    /// Argument `i` changed: its view is no longer kept.
    #[inline]
    fn forget(&self, i: usize) {
        if i < CACHED_VIEWS {
            self.valid.set(self.valid.get() & !(1 << i));
        }
    }
}

/// The views of the 1.1 entry (`OpforgeKernelViews`), borrowed for the
/// compute; empty on the 1.0 entry. Arguments from index 64 on are always
/// asked of the host (the context tracks premade views in `u64` masks).
#[derive(Clone, Copy)]
pub(crate) struct Premade<'a> {
    inputs: *const u8,
    in_stride: usize,
    num_inputs: usize,
    outputs: *const u8,
    out_stride: usize,
    num_outputs: usize,
    forwarded_from: *const i64,
    _borrow: PhantomData<&'a OpforgeKernelViews>,
}

/// The element size of an array of `n` views the host made: its first
/// element's struct_size, checked to hold this version's view.
#[inline(always)]
fn tensor_stride(p: *const OpforgeTensor, n: usize) -> Result<usize> {
    if n == 0 {
        return Ok(0);
    }
    if p.is_null() || !p.is_aligned() {
        return Err(bad_views("a NULL or misaligned array"));
    }
    // SAFETY: the host's array of `n` (> 0) views, each starting with its
    // struct_size (R1).
    let size = unsafe { p.cast::<usize>().read() };
    if size < core::mem::size_of::<OpforgeTensor>()
        || size % core::mem::align_of::<OpforgeTensor>() != 0
    {
        return Err(bad_views("tensor views of a struct_size below 1.0's"));
    }
    Ok(size)
}

#[cold]
#[inline(never)]
fn bad_views(what: &str) -> Status {
    Status::internal(format!("the host's compute_views arguments: {what}"))
}

/// The bit of argument `i` in a context's masks (none from 64 on).
#[inline]
fn bit(i: usize) -> u64 {
    if i < 64 {
        1u64 << i
    } else {
        0
    }
}

impl<'a> Premade<'a> {
    /// No views (the 1.0 entry).
    pub(crate) const NONE: Premade<'static> = Premade {
        inputs: core::ptr::null(),
        in_stride: 0,
        num_inputs: 0,
        outputs: core::ptr::null(),
        out_stride: 0,
        num_outputs: 0,
        forwarded_from: core::ptr::null(),
        _borrow: PhantomData,
    };

    /// The views the host passed to compute_views, checked: the struct and
    /// its arrays' elements at least as large as their first versions.
    ///
    /// # Safety
    /// `views` is the pointer the host passed to this compute_views call
    /// (valid until it returns, R7).
    #[inline(always)]
    pub(crate) unsafe fn read(views: *const OpforgeKernelViews) -> Result<Premade<'a>> {
        if views.is_null() || !views.is_aligned() {
            return Err(bad_views("a NULL or misaligned views pointer"));
        }
        // SAFETY: the host's struct, readable for its struct_size (caller),
        // which is checked to cover every 1.1 field before they are read.
        let v = unsafe { &*views };
        if v.struct_size < OpforgeKernelViews::MIN_SIZE {
            return Err(bad_views("a struct_size below 1.1's"));
        }
        let in_stride = tensor_stride(v.inputs, v.num_inputs)?;
        let out_stride = tensor_stride(v.outputs, v.num_outputs)?;
        if v.num_outputs > 0 && (v.forwarded_from.is_null() || !v.forwarded_from.is_aligned()) {
            return Err(bad_views("no forwarded_from array"));
        }
        Ok(Premade {
            inputs: v.inputs.cast(),
            in_stride,
            num_inputs: v.num_inputs,
            outputs: v.outputs.cast(),
            out_stride,
            num_outputs: v.num_outputs,
            forwarded_from: v.forwarded_from,
            _borrow: PhantomData,
        })
    }

    fn is_some(&self) -> bool {
        !self.inputs.is_null() || !self.outputs.is_null()
    }

    /// The premade view of input `i`, if any and lendable (flags 0: the
    /// host could not lend it; `input` asks, and the host says why).
    #[inline]
    fn input(&self, i: usize) -> Option<NonNull<OpforgeTensor>> {
        if i >= self.num_inputs {
            return None;
        }
        // In bounds: element `i` of the host's array of `num_inputs` views
        // of `in_stride` bytes (checked at least an OpforgeTensor, aligned),
        // valid during the compute ('a); a longer element's prefix is this
        // version's view (R1).
        let p = self
            .inputs
            .wrapping_add(i * self.in_stride)
            .cast::<OpforgeTensor>()
            .cast_mut();
        // SAFETY: see above; only the flags are read.
        let lendable = unsafe { (*p).flags } != 0;
        lendable.then(|| NonNull::new(p)).flatten()
    }

    /// The premade view of output `o`, if any and set (flags 0: not set).
    #[inline]
    fn output(&self, o: usize) -> Option<NonNull<OpforgeTensor>> {
        if o >= self.num_outputs {
            return None;
        }
        // As `input`, for the outputs' array.
        let p = self
            .outputs
            .wrapping_add(o * self.out_stride)
            .cast::<OpforgeTensor>()
            .cast_mut();
        // SAFETY: as in `input`.
        let set = unsafe { (*p).flags } != 0;
        set.then(|| NonNull::new(p)).flatten()
    }

    /// The input output `o` took over before compute, if any.
    #[inline]
    fn forwarded_from(&self, o: usize) -> Option<usize> {
        if o >= self.num_outputs {
            return None;
        }
        // SAFETY: `num_outputs` entries (checked non-null when there are
        // outputs), valid during the compute.
        let from = unsafe { self.forwarded_from.add(o).read() };
        usize::try_from(from).ok()
    }
}

/// The views of a compute's inputs ([`OpKernelContext::inputs_and_output`]): a
/// slice of [`Tensor`]s, kept in the context up to four (no allocation).
pub struct InputViews<'a>(Views<'a>);

enum Views<'a> {
    Inline(&'a [Tensor<'a>]),
    Heap(Vec<Tensor<'a>>),
}

impl<'a> core::ops::Deref for InputViews<'a> {
    type Target = [Tensor<'a>];
    fn deref(&self) -> &[Tensor<'a>] {
        match &self.0 {
            Views::Inline(v) => v,
            Views::Heap(v) => v,
        }
    }
}

impl<'b, 'a> IntoIterator for &'b InputViews<'a> {
    type Item = &'b Tensor<'a>;
    type IntoIter = core::slice::Iter<'b, Tensor<'a>>;
    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

impl<'a> IntoIterator for InputViews<'a> {
    type Item = Tensor<'a>;
    type IntoIter = InputViewsIter<'a>;
    fn into_iter(self) -> InputViewsIter<'a> {
        InputViewsIter {
            views: self,
            next: 0,
        }
    }
}

/// The by-value iterator of [`InputViews`].
pub struct InputViewsIter<'a> {
    views: InputViews<'a>,
    next: usize,
}

impl<'a> Iterator for InputViewsIter<'a> {
    type Item = Tensor<'a>;
    fn next(&mut self) -> Option<Tensor<'a>> {
        let t = self.views.get(self.next).copied();
        self.next += usize::from(t.is_some());
        t
    }
}

impl core::fmt::Debug for InputViews<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "InputViews({} views)", self.len())
    }
}

fn new_view() -> OpforgeTensor {
    OpforgeTensor::new()
}

impl OpKernelContext<'_> {
    /// Keeps a view the host returned for argument `i` (`store`'s slot, or
    /// a spill box) and returns where it is.
    fn keep(
        &self,
        store: &ViewStore<'_>,
        i: usize,
        view: &OpforgeTensor,
    ) -> NonNull<OpforgeTensor> {
        store.put(i, view).unwrap_or_else(|| self.spill(view))
    }

    /// A boxed copy of `view`, freed with the context.
    fn spill(&self, view: &OpforgeTensor) -> NonNull<OpforgeTensor> {
        let b = Box::new(*view);
        let p = NonNull::from(&*b);
        // The box's contents stay put when the Vec grows.
        self.spill.borrow_mut().push(b);
        p
    }
}

impl<'a> OpKernelContext<'a> {
    fn str_of(
        &self,
        s: Option<unsafe extern "C" fn(*const OpforgeKernelCtx) -> OpforgeStr>,
        name: &str,
    ) -> String {
        match s {
            // SAFETY: the compute's ctx (R7); copied at once.
            Some(f) => String::from_utf8_lossy(unsafe { f(self.raw).as_bytes() }).into_owned(),
            None => {
                note_missing(&self.missing, self.host, name);
                String::new()
            }
        }
    }

    fn count(
        &self,
        s: Option<unsafe extern "C" fn(*const OpforgeKernelCtx) -> usize>,
        name: &str,
    ) -> usize {
        match s {
            // SAFETY: the compute's ctx (R7).
            Some(f) => unsafe { f(self.raw) },
            None => {
                note_missing(&self.missing, self.host, name);
                0
            }
        }
    }

    /// The op's name.
    pub fn op_name(&self) -> String {
        self.str_of(self.host.kernel.op_name, "op_name")
    }
    /// The node's name.
    pub fn node_name(&self) -> String {
        self.str_of(self.host.kernel.node_name, "node_name")
    }
    /// The number of flat inputs.
    #[inline]
    pub fn num_inputs(&self) -> usize {
        let n = self.n_inputs.get();
        if n != usize::MAX {
            return n;
        }
        let n = self.count(self.host.kernel.num_inputs, "num_inputs");
        if self.host.kernel.num_inputs.is_some() && n != usize::MAX {
            self.n_inputs.set(n);
        }
        n
    }
    /// The number of flat outputs.
    pub fn num_outputs(&self) -> usize {
        if self.premade.is_some() {
            return self.premade.num_outputs;
        }
        self.count(self.host.kernel.num_outputs, "num_outputs")
    }
    /// The dtype of input `i`.
    pub fn input_dtype(&self, i: usize) -> DataType {
        match self.host.kernel.input_dtype {
            // SAFETY: the compute's ctx (R7); bad indices answered by the host.
            Some(f) => DataType(unsafe { f(self.raw, i) }),
            None => {
                note_missing(&self.missing, self.host, "input_dtype");
                DataType::Invalid
            }
        }
    }
    /// The dtype output `i` must have.
    pub fn output_type(&self, i: usize) -> DataType {
        match self.host.kernel.output_dtype {
            // SAFETY: as `input_dtype`.
            Some(f) => DataType(unsafe { f(self.raw, i) }),
            None => {
                note_missing(&self.missing, self.host, "output_dtype");
                DataType::Invalid
            }
        }
    }
    fn arg_range(&self, name: &str, is_output: bool) -> Result<Range<usize>> {
        let f = slot!(self.host, kernel.arg_range)?;
        let (mut start, mut stop) = (0, 0);
        // SAFETY: the compute's ctx and status (R7); out-pointers to locals.
        let code = unsafe {
            f(
                self.raw,
                OpforgeStr::from_text(name),
                u8::from(is_output),
                &mut start,
                &mut stop,
                self.status,
            )
        };
        self.host.check(code, self.status)?;
        Ok(start..stop)
    }
    /// The flat range of the input argument `name` (`input_list`'s range).
    pub fn input_range(&self, name: &str) -> Result<Range<usize>> {
        self.arg_range(name, false)
    }
    /// The flat range of the output argument `name`.
    pub fn output_range(&self, name: &str) -> Result<Range<usize>> {
        self.arg_range(name, true)
    }

    /// A read-only view of input `i`.
    #[inline]
    pub fn input(&self, i: usize) -> Result<Tensor<'_>> {
        match self.premade_input(i).or_else(|| self.in_views.get(i)) {
            Some(view) => Ok(Tensor::from_ptr(view)),
            None => self.input_asked(i),
        }
    }

    /// [`input`](Self::input) asked of the host (the 1.0 entry, or an
    /// input without a premade view).
    #[inline(never)]
    fn input_asked(&self, i: usize) -> Result<Tensor<'_>> {
        let f = slot!(self.host, kernel.input)?;
        let mut view = new_view();
        // SAFETY: the compute's ctx and status (R7); `view` is an
        // out-struct with its struct_size set.
        let code = unsafe { f(self.raw, i, &mut view, self.status) };
        self.host.check(code, self.status)?;
        Ok(Tensor::from_ptr(self.keep(&self.in_views, i, &view)))
    }

    /// The premade view of input `i` (1.1 entry), unless dead or one the
    /// host could not lend.
    #[inline]
    fn premade_input(&self, i: usize) -> Option<NonNull<OpforgeTensor>> {
        if self.in_dead.get() & bit(i) != 0 || i >= 64 {
            return None;
        }
        self.premade.input(i)
    }

    /// The premade view of output `o` (1.1 entry), unless the kernel set
    /// the output again, or the host did not set it.
    #[inline]
    fn premade_output(&self, o: usize) -> Option<NonNull<OpforgeTensor>> {
        if self.out_reset.get() & bit(o) != 0 || o >= 64 {
            return None;
        }
        self.premade.output(o)
    }

    /// Forgets the view kept of input `i` (forwarded or moved: R7).
    fn drop_input_view(&self, i: usize) {
        self.in_views.forget(i);
        self.in_dead.set(self.in_dead.get() | bit(i));
    }

    /// The input whose buffer the declared output `o` took over before
    /// compute started ([`output_like_forwarding`]), while output `o` is
    /// still that tensor (the kernel did not set it again). Always `None`
    /// on a 1.0 host, which the SDK never asks to forward.
    ///
    /// [`output_like_forwarding`]: crate::KernelDefBuilder::output_like_forwarding
    #[inline]
    pub fn forwarded_from(&self, o: usize) -> Option<usize> {
        if self.out_reset.get() & bit(o) != 0 || o >= 64 {
            return None;
        }
        self.premade.forwarded_from(o)
    }

    /// Output `o` is about to be used: the input it took over, if any, is
    /// its memory now (its view dies, R7).
    #[inline]
    fn touch_output(&self, o: usize) {
        if let Some(j) = self.forwarded_from(o) {
            if self.in_dead.get() & bit(j) == 0 {
                self.drop_input_view(j);
            }
        }
    }

    /// Output `o` is about to be set again: its input (if forwarded) is
    /// dead, and its premade and kept views are gone.
    fn reset_output(&self, o: usize) {
        self.touch_output(o);
        self.out_reset.set(self.out_reset.get() | bit(o));
        self.out_views.forget(o);
    }

    /// A repeated `forward_input_or_allocate_output` of a preset output
    /// `o` of `dims`, answered with the output as set, once (the first
    /// call of a kernel written before `output_like`, or of one that calls
    /// it anyway). `None`: ask the host.
    fn claim_preset(&self, candidates: &[usize], o: usize, dims: &[i64]) -> Option<Option<usize>> {
        let b = bit(o);
        if b == 0 || (self.preset.get() & !self.out_reset.get() & !self.out_claimed.get()) & b == 0
        {
            return None;
        }
        let view = self.premade_output(o).or_else(|| self.out_views.get(o))?;
        if dims_of(view_ref(view)) != dims {
            return None;
        }
        let from = self.forwarded_from(o);
        if from.is_some_and(|j| !candidates.contains(&j)) {
            return None;
        }
        self.out_claimed.set(self.out_claimed.get() | b);
        if let Some(j) = from {
            self.drop_input_view(j);
        }
        Some(from)
    }

    /// The 1.0 entry's stand-in for what a 1.1 host does before
    /// compute_views: allocates every declared output (never forwarding,
    /// so every input stays readable) and keeps its view.
    pub(crate) fn preset_declared_outputs(&mut self) -> Result<()> {
        for l in self.def.def.output_likes() {
            let dims = self.input(l.input)?.dims();
            let view = self.allocate_output_raw(l.output, dims)?;
            self.out_views.forget(l.output);
            self.keep(&self.out_views, l.output, &view);
            self.preset.set(self.preset.get() | bit(l.output));
        }
        Ok(())
    }

    /// The views of the inputs of argument `name` (a list input).
    pub fn input_list(&self, name: &str) -> Result<Vec<Tensor<'_>>> {
        self.input_range(name)?.map(|i| self.input(i)).collect()
    }

    /// Allocates output `i` with `dims` (contents unspecified) and returns
    /// its writable view.
    pub fn allocate_output(&mut self, i: usize, dims: &[i64]) -> Result<TensorMut<'_>> {
        self.reset_output(i);
        let view = self.allocate_output_raw(i, dims)?;
        Ok(TensorMut::from_ptr(self.keep(&self.out_views, i, &view)))
    }

    /// The host's allocate_output.
    fn allocate_output_raw(&self, i: usize, dims: &[i64]) -> Result<OpforgeTensor> {
        let f = slot!(self.host, kernel.allocate_output)?;
        let rank = rank_of(dims)?;
        let mut view = new_view();
        // SAFETY: the compute's ctx and status (R7); `dims` is read during
        // the call; `view` is an out-struct.
        let code = unsafe { f(self.raw, i, dims.as_ptr(), rank, &mut view, self.status) };
        self.host.check(code, self.status)?;
        Ok(view)
    }

    /// Reuses the buffer of the first of the `candidates` inputs that can
    /// become output `i` of `dims` (compute in place then), else allocates;
    /// returns the forwarded input's index. Read the output through
    /// [`output_mut`](Self::output_mut) afterwards; a forwarded input's view
    /// is gone.
    ///
    /// An output declared with
    /// [`output_like`](crate::KernelDefBuilder::output_like) is set when
    /// compute starts: the first such call for it with the same dims (and,
    /// if it took over an input, that input among the candidates) answers
    /// with the output as set, without a host call.
    pub fn forward_input_or_allocate_output(
        &mut self,
        candidates: &[usize],
        i: usize,
        dims: &[i64],
    ) -> Result<Option<usize>> {
        if let Some(from) = self.claim_preset(candidates, i, dims) {
            return Ok(from);
        }
        let f = slot!(self.host, kernel.forward_input_or_allocate_output)?;
        let rank = rank_of(dims)?;
        let mut view = new_view();
        let mut from: i64 = OPFORGE_NOT_FORWARDED;
        self.reset_output(i);
        // SAFETY: the compute's ctx and status (R7); the arrays are read
        // during the call; the out-pointers are locals.
        let code = unsafe {
            f(
                self.raw,
                candidates.as_ptr(),
                candidates.len(),
                i,
                dims.as_ptr(),
                rank,
                &mut from,
                &mut view,
                self.status,
            )
        };
        self.host.check(code, self.status)?;
        let from = usize::try_from(from).ok();
        if let Some(c) = from {
            self.drop_input_view(c);
        }
        self.keep(&self.out_views, i, &view);
        Ok(from)
    }

    /// [`forward_input_or_allocate_output`](Self::forward_input_or_allocate_output)
    /// with the dims of input `like` (the elementwise case, as
    /// opforge-core's `forward_input_or_allocate_output_like`), without
    /// the caller copying them.
    pub fn forward_input_or_allocate_output_like(
        &mut self,
        candidates: &[usize],
        i: usize,
        like: usize,
    ) -> Result<Option<usize>> {
        let view = self.input(like)?.view;
        // The host reads the dims before it forwards anything (the view's
        // dims are host memory valid until then).
        self.forward_input_or_allocate_output(candidates, i, dims_of(view_ref(view)))
    }

    /// The writable view of output `i`, once it is set.
    #[inline]
    pub fn output_mut(&mut self, i: usize) -> Result<TensorMut<'_>> {
        Ok(TensorMut::from_ptr(self.output_view(i)?))
    }

    /// Where output `i`'s view is: premade, kept or asked of the host.
    #[inline]
    fn output_view(&self, i: usize) -> Result<NonNull<OpforgeTensor>> {
        self.touch_output(i);
        match self.premade_output(i).or_else(|| self.out_views.get(i)) {
            Some(view) => Ok(view),
            None => self.output_asked(i),
        }
    }

    /// [`output_view`](Self::output_view) asked of the host.
    #[inline(never)]
    fn output_asked(&self, i: usize) -> Result<NonNull<OpforgeTensor>> {
        let f = slot!(self.host, kernel.output)?;
        let mut view = new_view();
        // SAFETY: the compute's ctx and status (R7); `view` is an out-struct.
        let code = unsafe { f(self.raw, i, &mut view, self.status) };
        self.host.check(code, self.status)?;
        Ok(self.keep(&self.out_views, i, &view))
    }

    /// The views of every input together with output `i`'s (which must be
    /// set, and not be a forwarded input): read the inputs while writing
    /// the output.
    #[inline(always)]
    pub fn inputs_and_output(&mut self, i: usize) -> Result<(InputViews<'_>, TensorMut<'_>)> {
        let out = self.output_view(i)?;
        let out_data = view_ref(out).data;
        let n = self.num_inputs();
        let check = |j: usize, t: &Tensor<'_>| {
            let v = t.v();
            if !v.data.is_null() && v.data == out_data && v.byte_len > 0 {
                return Err(shares_memory(j, i));
            }
            Ok(())
        };
        let ins = if n > CACHED_VIEWS {
            let mut v = Vec::with_capacity(n);
            for j in 0..n {
                let t = self.input(j)?;
                check(j, &t)?;
                v.push(Tensor::from_ptr(t.view));
            }
            InputViews(Views::Heap(v))
        } else {
            // A Tensor of any lifetime has the same layout; the slice made
            // below has the lifetime of this `&mut self` borrow.
            let buf = self.input_buf.get().cast::<Tensor<'_>>();
            for j in 0..n {
                let t = self.input(j)?;
                check(j, &t)?;
                // SAFETY: `j < n <= CACHED_VIEWS`: within the buffer, which
                // only this method writes, under `&mut self`, while no slice
                // of an earlier call is alive (it borrowed `self`).
                unsafe { buf.add(j).write(Tensor::from_ptr(t.view)) };
            }
            // SAFETY: the first `n` (<= CACHED_VIEWS) elements were just
            // written; the slice borrows `self` for the lifetime of the
            // result.
            let views = unsafe { core::slice::from_raw_parts(buf.cast_const(), n) };
            InputViews(Views::Inline(views))
        };
        Ok((ins, TensorMut::from_ptr(out)))
    }

    /// Output `output` is input `input`, shared (no copy).
    pub fn set_output_from_input(&mut self, output: usize, input: usize) -> Result<()> {
        let f = slot!(self.host, kernel.set_output_from_input)?;
        self.reset_output(output);
        self.drop_input_view(input);
        // SAFETY: the compute's ctx and status (R7).
        let code = unsafe { f(self.raw, output, input, self.status) };
        self.host.check(code, self.status)
    }

    /// A scratch tensor, freed when the compute returns.
    pub fn allocate_temp(&self, dtype: DataType, dims: &[i64]) -> Result<TensorMut<'a>> {
        let f = slot!(self.host, kernel.allocate_temp)?;
        let rank = rank_of(dims)?;
        let mut view = new_view();
        // SAFETY: the compute's ctx and status (R7); `view` is an
        // out-struct. The temporary is fresh memory no other view reaches,
        // living until the compute returns (the `'a` of this context).
        let code = unsafe {
            f(
                self.raw,
                dtype.0,
                dims.as_ptr(),
                rank,
                &mut view,
                self.status,
            )
        };
        self.host.check(code, self.status)?;
        // The view is boxed in the context, which the SDK drops only after
        // the kernel's compute returned: as long as the temporary itself
        // (a `TensorMut<'a>` cannot leave the compute).
        Ok(TensorMut::from_ptr(self.spill(&view)))
    }

    /// Attr `name` of the node (prefer reading attrs once, in `create`).
    pub fn get_attr<T: FromAttrValue>(&self, name: &str) -> Result<T> {
        let f = slot!(self.host, kernel.attr)?;
        read_attr(self.host, name, self.status, |n, v| {
            // SAFETY: the compute's ctx and status (R7); `v` an out-struct.
            unsafe { f(self.raw, n, v, self.status) }
        })
    }

    /// The threads `parallel_for` runs on (1: no parallelism).
    pub fn num_threads(&self) -> usize {
        match self.host.kernel.num_threads {
            // SAFETY: the compute's ctx (R7).
            Some(f) => unsafe { f(self.raw) as usize },
            None => {
                note_missing(&self.missing, self.host, "num_threads");
                1
            }
        }
    }

    /// The host's thread pool for this compute: take it before borrowing
    /// an output, to write the output from shards
    /// ([`ThreadPool::parallel_chunks_mut`]).
    pub fn thread_pool(&self) -> ThreadPool<'a> {
        ThreadPool {
            raw: self.raw,
            status: self.status,
            host: self.host,
            def: self.def,
        }
    }

    /// TensorFlow's `Shard` ([`ThreadPool::parallel_for`]).
    pub fn parallel_for<F>(&self, total: usize, cost_per_unit: u64, work: F) -> Result<()>
    where
        F: Fn(usize, usize) + Sync,
    {
        self.thread_pool().parallel_for(total, cost_per_unit, work)
    }

    /// What the host asks of output `i` (always [`OutputRequest::Write`]
    /// unless the kernel is registered with
    /// [`output_requests`](crate::KernelDefBuilder::output_requests)).
    pub fn output_request(&self, i: usize) -> OutputRequest {
        match self.host.kernel.output_request {
            // SAFETY: the compute's ctx (R7).
            Some(f) => match unsafe { f(self.raw, i) } {
                OPFORGE_REQ_NULL => OutputRequest::Null,
                OPFORGE_REQ_WRITE => OutputRequest::Write,
                OPFORGE_REQ_INPLACE => OutputRequest::InPlace,
                OPFORGE_REQ_ADD => OutputRequest::Add,
                other => OutputRequest::Other(other),
            },
            None => {
                note_missing(&self.missing, self.host, "output_request");
                OutputRequest::Write
            }
        }
    }

    /// Output `i` of `dims` wraps `data`, the plugin's own memory (no
    /// copy); the host drops the `Vec` (through the SDK) when the last
    /// tensor using it is gone.
    pub fn set_output_from_vec<T: Element>(
        &mut self,
        i: usize,
        dims: &[i64],
        data: Vec<T>,
    ) -> Result<()> {
        let f = slot!(self.host, kernel.set_output_foreign)?;
        self.reset_output(i);
        let n: i64 = dims.iter().product();
        if dims.iter().any(|&d| d < 0) || n != data.len() as i64 {
            return Err(Status::invalid_argument(format!(
                "set_output_from_vec: {} values for dims {:?}",
                data.len(),
                dims
            )));
        }
        let rank = rank_of(dims)?;
        let bytes = core::mem::size_of_val(data.as_slice()) as u64;
        let boxed = Box::new(data);
        let ptr = boxed.as_ptr() as *mut c_void;
        let user = Box::into_raw(boxed);
        let mut t = OpforgeForeignTensor::new();
        t.dtype = T::DTYPE.0;
        t.rank = rank;
        t.dims = dims.as_ptr();
        t.data = ptr;
        t.byte_len = bytes;
        t.release = Some(release_vec::<T>);
        t.release_user = user.cast();
        // SAFETY: the compute's ctx and status (R7); `t` describes the
        // Vec's elements, which stay put (the Vec is boxed and not touched)
        // until the release callback frees them.
        let code = unsafe { f(self.raw, i, &t, self.status) };
        if code != opforge_abi::OPFORGE_OK {
            // On failure the plugin still owns the memory (header).
            // SAFETY: `user` came from `Box::into_raw` above and the host
            // did not take it.
            drop(unsafe { Box::from_raw(user) });
        }
        self.host.check(code, self.status)
    }

    /// Sets the `DT_STRING` output `i` of `dims` to `elements` (copied).
    pub fn set_output_strings(&mut self, i: usize, dims: &[i64], elements: &[&[u8]]) -> Result<()> {
        let f = slot!(self.host, kernel.set_output_strings)?;
        self.reset_output(i);
        let rank = rank_of(dims)?;
        let strs: Vec<OpforgeStr> = elements.iter().map(|e| OpforgeStr::from_bytes(e)).collect();
        // SAFETY: the compute's ctx and status (R7); the arrays are read
        // (copied) during the call.
        let code = unsafe { f(self.raw, i, dims.as_ptr(), rank, strs.as_ptr(), self.status) };
        self.host.check(code, self.status)
    }
}

#[cold]
#[inline(never)]
fn shares_memory(input: usize, output: usize) -> Status {
    Status::failed_precondition(format!(
        "input {input} shares its memory with output {output}: use output_mut"
    ))
}

/// What the host asks of an output (MXNet's `OpReqType`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OutputRequest {
    /// Not needed: leave it unset.
    Null,
    /// Set and write it (the only request of 1.0 hosts).
    Write,
    /// Already bound to an input's memory: write the result there.
    InPlace,
    /// Already bound and holding values: add the result into it.
    Add,
    /// A request of a newer ABI minor (its integer).
    Other(u32),
}

unsafe extern "C" fn release_vec<T: Element>(_data: *mut c_void, user: *mut c_void) {
    // SAFETY: `user` is the `Box<Vec<T>>` of `set_output_from_vec`, released
    // exactly once by the host (header), so we own it again.
    let boxed = unsafe { Box::from_raw(user.cast::<Vec<T>>()) };
    // Dropping a Vec of `Element`s cannot panic, but nothing may unwind
    // into the host.
    let _ = crate::panic::catch(move || drop(boxed));
}

mod entry;
mod pool;
use entry::*;
pub(crate) use entry::{
    compute_trampoline, compute_views_trampoline, create_trampoline, destroy_trampoline,
};
pub use pool::ThreadPool;
use pool::*;
