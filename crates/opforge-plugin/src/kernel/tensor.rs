//! Tensor views: [`Tensor`] (an input, read-only) and [`TensorMut`] (an
//! output or a temporary), over the host's `OpforgeTensor` views, with
//! checked typed access (`flat`, `flat_mut`).

use super::*;

/// A read-only view of a tensor (an input), valid during the compute.
///
/// It refers to the host's view where that lives (the views a 1.1 host
/// makes before compute), or to a copy the context keeps: the view itself
/// is never copied around (copying a 64-byte struct just written in pieces
/// stalls the CPU, which made it the largest cost of a call).
#[derive(Clone, Copy)]
pub struct Tensor<'a> {
    pub(super) view: NonNull<OpforgeTensor>,
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
pub(super) fn view_ref<'v>(view: NonNull<OpforgeTensor>) -> &'v OpforgeTensor {
    // SAFETY: see above: `view` points to a live, initialised view for as
    // long as the Tensor/TensorMut holding it may be used.
    unsafe { view.as_ref() }
}

#[inline]
pub(super) fn dims_of(view: &OpforgeTensor) -> &[i64] {
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
pub(super) fn check_flat<T: Element>(view: &OpforgeTensor) -> Result<usize> {
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
pub(super) fn flat_error(
    view: &OpforgeTensor,
    want: DataType,
    size: usize,
    align: usize,
) -> Status {
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
    pub(super) fn v(&self) -> &'a OpforgeTensor {
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
    pub(super) fn from_ptr(view: NonNull<OpforgeTensor>) -> TensorMut<'a> {
        TensorMut {
            view,
            _borrow: PhantomData,
        }
    }

    #[inline(always)]
    pub(super) fn v(&self) -> &OpforgeTensor {
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
pub(super) fn not_writable() -> Status {
    Status::failed_precondition("the tensor view is not writable")
}
