//! Where a compute's views live: the context's inline slots
//! ([`ViewStore`]), the host's premade views of the 1.1 entry
//! ([`Premade`]), and the input views `inputs_and_output` lends
//! ([`InputViews`]).

use super::*;

/// Arguments per direction whose views a [`OpKernelContext`] keeps inline.
pub(super) const CACHED_VIEWS: usize = 4;

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
    pub(super) fn slot(&self, i: usize) -> *mut OpforgeTensor {
        self.slots.get().cast::<OpforgeTensor>().wrapping_add(i)
    }

    /// The kept view of argument `i`.
    #[inline]
    pub(super) fn get(&self, i: usize) -> Option<NonNull<OpforgeTensor>> {
        if i >= CACHED_VIEWS || self.valid.get() & (1 << i) == 0 {
            return None;
        }
        NonNull::new(self.slot(i))
    }

    /// Keeps `view` for argument `i` (if it has a slot) and returns where
    /// it is. Only called when the slot holds nothing (first use, or after
    /// [`forget`](Self::forget)), so no borrow of the slot is alive.
    #[inline]
    pub(super) fn put(&self, i: usize, view: &OpforgeTensor) -> Option<NonNull<OpforgeTensor>> {
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
    pub(super) fn forget(&self, i: usize) {
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
    pub(super) inputs: *const u8,
    pub(super) in_stride: usize,
    pub(super) num_inputs: usize,
    pub(super) outputs: *const u8,
    pub(super) out_stride: usize,
    pub(super) num_outputs: usize,
    pub(super) forwarded_from: *const i64,
    pub(super) _borrow: PhantomData<&'a OpforgeKernelViews>,
}

/// The element size of an array of `n` views the host made: its first
/// element's struct_size, checked to hold this version's view.
#[inline(always)]
pub(super) fn tensor_stride(p: *const OpforgeTensor, n: usize) -> Result<usize> {
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
pub(super) fn bad_views(what: &str) -> Status {
    Status::internal(format!("the host's compute_views arguments: {what}"))
}

/// The bit of argument `i` in a context's masks (none from 64 on).
#[inline]
pub(super) fn bit(i: usize) -> u64 {
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

    pub(super) fn is_some(&self) -> bool {
        !self.inputs.is_null() || !self.outputs.is_null()
    }

    /// The premade view of input `i`, if any and lendable (flags 0: the
    /// host could not lend it; `input` asks, and the host says why).
    #[inline]
    pub(super) fn input(&self, i: usize) -> Option<NonNull<OpforgeTensor>> {
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
    pub(super) fn output(&self, o: usize) -> Option<NonNull<OpforgeTensor>> {
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
    pub(super) fn forwarded_from(&self, o: usize) -> Option<usize> {
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
pub struct InputViews<'a>(pub(super) Views<'a>);

pub(super) enum Views<'a> {
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

pub(super) fn new_view() -> OpforgeTensor {
    OpforgeTensor::new()
}
