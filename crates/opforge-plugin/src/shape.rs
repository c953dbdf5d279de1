//! Shape functions: [`InferenceContext`], TensorFlow's and opforge-core's
//! `InferenceContext` over the host's shape API, and common shape
//! functions.
//!
//! The methods have core's names and argument types (`rank` is an
//! `Option<usize>`, `value` an `Option<i64>`, dims are given as
//! [`DimOrConst`]), so a core shape function ports by changing its
//! imports and adding `?` where the SDK returns a `Result`: everything
//! that asks the host to make or check a shape or dim can fail with the
//! host's error (core's in-process versions of `scalar`, `make_shape`,
//! `dim`, ... cannot).
//!
//! Handles ([`ShapeHandle`], [`DimensionHandle`]) are values of one call; the host
//! rejects a stale or forged one with `InvalidArgument`. Queries that
//! return a value and no `Result` record a missing slot, and the shape
//! function then fails with `Unimplemented`.

use core::cell::Cell;
use core::ffi::c_void;
use core::marker::PhantomData;

use opforge_abi::{
    OpforgeCode, OpforgeDim, OpforgeShape, OpforgeShapeCtx, OpforgeStatus, OpforgeTensor,
    OPFORGE_DIM_ADD, OPFORGE_DIM_DIV, OPFORGE_DIM_DIV_EXACT, OPFORGE_DIM_MAX, OPFORGE_DIM_MIN,
    OPFORGE_DIM_MUL, OPFORGE_DIM_SUB, OPFORGE_NO_HANDLE, OPFORGE_TO_END, OPFORGE_UNKNOWN_DIM,
    OPFORGE_UNKNOWN_RANK,
};

use crate::attr::{self, FromAttrValue};
use crate::host::{self, arg_ranges, missing_slot, slot, Host};
use crate::kernel::Tensor;
use crate::registry::OpDefBuilder;
use crate::status::{Result, Status};

/// A shape in a shape-function call (TensorFlow's `ShapeHandle`): compare
/// with `==` for identity.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ShapeHandle(pub OpforgeShape);

/// A dimension in a shape-function call (TensorFlow's `DimensionHandle`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct DimensionHandle(pub OpforgeDim);

/// A dimension given either as an existing handle or as a constant size
/// (`-1`, or any negative size, for unknown), as opforge-core's
/// `DimOrConst` (TensorFlow's `DimensionOrConstant`): what `make_shape`,
/// `vector`, `matrix` and the dim arithmetic take.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DimOrConst {
    /// An existing dimension.
    Dim(DimensionHandle),
    /// A constant size (negative: unknown).
    Const(i64),
}

impl From<DimensionHandle> for DimOrConst {
    fn from(d: DimensionHandle) -> Self {
        DimOrConst::Dim(d)
    }
}

impl From<i64> for DimOrConst {
    fn from(v: i64) -> Self {
        DimOrConst::Const(v)
    }
}

/// TensorFlow's `InferenceContext::kUnknownRank`.
pub const UNKNOWN_RANK: i32 = OPFORGE_UNKNOWN_RANK;
/// TensorFlow's `InferenceContext::kUnknownDim`.
pub const UNKNOWN_DIM: i64 = OPFORGE_UNKNOWN_DIM;

/// One shape-function call (TensorFlow's `InferenceContext`).
pub struct InferenceContext<'a> {
    raw: *mut OpforgeShapeCtx,
    status: *mut OpforgeStatus,
    host: &'a Host,
    missing: Cell<Option<Status>>,
    /// The views of constant inputs lent by [`input_tensor`](Self::input_tensor),
    /// boxed (each box stays put), freed with the context.
    // The boxes are what keeps each view's address when the Vec grows.
    #[allow(clippy::vec_box)]
    tensors: core::cell::RefCell<Vec<Box<OpforgeTensor>>>,
    _call: PhantomData<&'a mut ()>,
}

use crate::host::query;

impl<'a> InferenceContext<'a> {
    fn note(&self, name: &str) {
        crate::host::note_missing(&self.missing, self.host, "shape", name);
    }

    fn check(&self, code: OpforgeCode) -> Result<()> {
        self.host.check(code, self.status)
    }

    /// The number of flat inputs.
    pub fn num_inputs(&self) -> usize {
        // SAFETY: the call's context (R7).
        query!(self, shape.num_inputs, 0, |f| unsafe { f(self.raw) })
    }
    /// The number of flat outputs.
    pub fn num_outputs(&self) -> usize {
        // SAFETY: the call's context (R7).
        query!(self, shape.num_outputs, 0, |f| unsafe { f(self.raw) })
    }
    /// The shape of input `i` (an invalid handle out of range).
    pub fn input(&self, i: usize) -> ShapeHandle {
        // SAFETY: the call's context (R7).
        ShapeHandle(query!(self, shape.input, OPFORGE_NO_HANDLE, |f| unsafe {
            f(self.raw, i)
        }))
    }
    arg_ranges!(shape, "the ");
    /// Sets output `i`'s shape.
    pub fn set_output(&mut self, i: usize, shape: ShapeHandle) -> Result<()> {
        let f = slot!(self.host, shape.set_output)?;
        // SAFETY: the call's context and status (R7).
        let code = unsafe { f(self.raw, i, shape.0, self.status) };
        self.check(code)
    }
    /// The shape output `i` was set to, if it was.
    pub fn output(&self, i: usize) -> Option<ShapeHandle> {
        // SAFETY: the call's context (R7).
        let h = query!(self, shape.output, OPFORGE_NO_HANDLE, |f| unsafe {
            f(self.raw, i)
        });
        (h != OPFORGE_NO_HANDLE).then_some(ShapeHandle(h))
    }
    /// The rank, if known.
    pub fn rank(&self, s: ShapeHandle) -> Option<usize> {
        // SAFETY: the call's context (R7); bad handles read as unknown.
        let rank = query!(self, shape.rank, UNKNOWN_RANK, |f| unsafe {
            f(self.raw, s.0)
        });
        usize::try_from(rank).ok()
    }
    /// Whether the rank is known.
    pub fn rank_known(&self, s: ShapeHandle) -> bool {
        self.rank(s).is_some()
    }
    /// Dim `index` of `s` (negative counts from the end).
    pub fn dim(&mut self, s: ShapeHandle, index: i64) -> Result<DimensionHandle> {
        let f = slot!(self.host, shape.dim)?;
        let mut out = OPFORGE_NO_HANDLE;
        // SAFETY: the call's context and status (R7); out-pointer to a local.
        let code = unsafe { f(self.raw, s.0, index, &mut out, self.status) };
        self.check(code)?;
        Ok(DimensionHandle(out))
    }
    /// The size of `d`, if known.
    pub fn value(&self, d: DimensionHandle) -> Option<i64> {
        let v = self.raw_value(d);
        (v >= 0).then_some(v)
    }
    /// The size of `d`, [`UNKNOWN_DIM`] if unknown (TensorFlow's `Value`).
    pub fn raw_value(&self, d: DimensionHandle) -> i64 {
        // SAFETY: the call's context (R7).
        query!(self, shape.value, UNKNOWN_DIM, |f| unsafe {
            f(self.raw, d.0)
        })
    }
    /// The number of elements of a fully defined shape.
    pub fn num_elements(&self, s: ShapeHandle) -> Option<i64> {
        // SAFETY: the call's context (R7).
        let n = query!(self, shape.num_elements, -1, |f| unsafe {
            f(self.raw, s.0)
        });
        (n >= 0).then_some(n)
    }
    /// Whether every dim of `s` is known (and the rank is).
    pub fn fully_defined(&self, s: ShapeHandle) -> bool {
        self.num_elements(s).is_some()
    }
    /// The dim `d` is (a handle: itself; a constant: a new dim of that
    /// size, unknown if negative).
    pub fn make_dim(&mut self, d: impl Into<DimOrConst>) -> DimensionHandle {
        let value = match d.into() {
            DimOrConst::Dim(h) => return h,
            DimOrConst::Const(v) => v.max(UNKNOWN_DIM),
        };
        DimensionHandle(query!(
            self,
            shape.make_dim,
            OPFORGE_NO_HANDLE,
            // SAFETY: the call's context (R7).
            |f| unsafe { f(self.raw, value) }
        ))
    }
    /// A new unknown dim.
    pub fn unknown_dim(&mut self) -> DimensionHandle {
        self.make_dim(UNKNOWN_DIM)
    }
    /// A new shape of these dims (handles keep their identity).
    pub fn make_shape(&mut self, dims: &[DimOrConst]) -> Result<ShapeHandle> {
        let dims: Vec<DimensionHandle> = dims.iter().map(|&d| self.make_dim(d)).collect();
        self.make_shape_from_dims(dims)
    }
    /// A new shape of existing dims.
    pub fn make_shape_from_dims(
        &mut self,
        dims: impl AsRef<[DimensionHandle]>,
    ) -> Result<ShapeHandle> {
        let f = slot!(self.host, shape.make_shape)?;
        let dims: Vec<OpforgeDim> = dims.as_ref().iter().map(|d| d.0).collect();
        let mut out = OPFORGE_NO_HANDLE;
        // SAFETY: the call's context and status (R7); `dims` is read during
        // the call; out-pointer to a local.
        let code = unsafe { f(self.raw, dims.as_ptr(), dims.len(), &mut out, self.status) };
        self.check(code)?;
        Ok(ShapeHandle(out))
    }
    /// A new shape from sizes (`None`: unknown rank; `-1`: unknown dim).
    pub fn make_partial_shape(&mut self, dims: Option<&[i64]>) -> Result<ShapeHandle> {
        let Some(dims) = dims else {
            return Ok(self.unknown_shape());
        };
        let f = slot!(self.host, shape.make_shape_from_values)?;
        let mut out = OPFORGE_NO_HANDLE;
        // SAFETY: as `make_shape_from_dims`.
        let code = unsafe { f(self.raw, dims.as_ptr(), dims.len(), &mut out, self.status) };
        self.check(code)?;
        Ok(ShapeHandle(out))
    }
    /// A scalar shape.
    pub fn scalar(&mut self) -> Result<ShapeHandle> {
        self.make_partial_shape(Some(&[]))
    }
    /// A vector of `d` elements.
    pub fn vector(&mut self, d: impl Into<DimOrConst>) -> Result<ShapeHandle> {
        self.make_shape(&[d.into()])
    }
    /// A matrix of `rows` by `cols`.
    pub fn matrix(
        &mut self,
        rows: impl Into<DimOrConst>,
        cols: impl Into<DimOrConst>,
    ) -> Result<ShapeHandle> {
        self.make_shape(&[rows.into(), cols.into()])
    }
    /// A shape of unknown rank.
    pub fn unknown_shape(&mut self) -> ShapeHandle {
        self.unknown_shape_with(UNKNOWN_RANK)
    }
    /// A shape of `rank` unknown dims.
    pub fn unknown_shape_of_rank(&mut self, rank: usize) -> ShapeHandle {
        // A rank beyond i32 is refused by the host as any too-large rank.
        self.unknown_shape_with(i32::try_from(rank).unwrap_or(i32::MAX))
    }
    fn unknown_shape_with(&mut self, rank: i32) -> ShapeHandle {
        ShapeHandle(query!(
            self,
            shape.unknown_shape,
            OPFORGE_NO_HANDLE,
            // SAFETY: the call's context (R7).
            |f| unsafe { f(self.raw, rank) }
        ))
    }

    fn shape_op(
        &mut self,
        f: Option<
            unsafe extern "C" fn(
                *mut OpforgeShapeCtx,
                OpforgeShape,
                i32,
                *mut OpforgeShape,
                *mut OpforgeStatus,
            ) -> OpforgeCode,
        >,
        name: &str,
        s: ShapeHandle,
        rank: usize,
    ) -> Result<ShapeHandle> {
        let f = f.ok_or_else(|| missing_slot(self.host, "shape", name))?;
        let rank = i32::try_from(rank).map_err(|_| {
            Status::invalid_argument(format!("{name}: rank {rank} is larger than any shape's"))
        })?;
        let mut out = OPFORGE_NO_HANDLE;
        // SAFETY: the call's context and status (R7); out-pointer to a local.
        let code = unsafe { f(self.raw, s.0, rank, &mut out, self.status) };
        self.check(code)?;
        Ok(ShapeHandle(out))
    }
    /// `s` with rank `rank`, or `InvalidArgument` (TensorFlow's `WithRank`).
    pub fn with_rank(&mut self, s: ShapeHandle, rank: usize) -> Result<ShapeHandle> {
        self.shape_op(self.host.shape.with_rank, "with_rank", s, rank)
    }
    /// `s` with rank at least `rank` (`WithRankAtLeast`).
    pub fn with_rank_at_least(&mut self, s: ShapeHandle, rank: usize) -> Result<ShapeHandle> {
        self.shape_op(
            self.host.shape.with_rank_at_least,
            "with_rank_at_least",
            s,
            rank,
        )
    }
    /// `s` with rank at most `rank` (`WithRankAtMost`).
    pub fn with_rank_at_most(&mut self, s: ShapeHandle, rank: usize) -> Result<ShapeHandle> {
        self.shape_op(
            self.host.shape.with_rank_at_most,
            "with_rank_at_most",
            s,
            rank,
        )
    }
    /// `d` with value `value` (`WithValue`).
    pub fn with_value(&mut self, d: DimensionHandle, value: i64) -> Result<DimensionHandle> {
        let f = slot!(self.host, shape.with_value)?;
        let mut out = OPFORGE_NO_HANDLE;
        // SAFETY: the call's context and status (R7); out-pointer to a local.
        let code = unsafe { f(self.raw, d.0, value, &mut out, self.status) };
        self.check(code)?;
        Ok(DimensionHandle(out))
    }
    /// The merge of two shapes (`Merge`).
    pub fn merge(&mut self, a: ShapeHandle, b: ShapeHandle) -> Result<ShapeHandle> {
        let f = slot!(self.host, shape.merge)?;
        let mut out = OPFORGE_NO_HANDLE;
        // SAFETY: the call's context and status (R7); out-pointer to a local.
        let code = unsafe { f(self.raw, a.0, b.0, &mut out, self.status) };
        self.check(code)?;
        Ok(ShapeHandle(out))
    }
    /// The merge of two dims (`Merge` of dims).
    pub fn merge_dim(&mut self, a: DimensionHandle, b: DimensionHandle) -> Result<DimensionHandle> {
        let f = slot!(self.host, shape.merge_dim)?;
        let mut out = OPFORGE_NO_HANDLE;
        // SAFETY: as `merge`.
        let code = unsafe { f(self.raw, a.0, b.0, &mut out, self.status) };
        self.check(code)?;
        Ok(DimensionHandle(out))
    }
    /// Merges `prefix` into the leading dims of `s` (`MergePrefix`):
    /// returns (shape, prefix).
    pub fn merge_prefix(
        &mut self,
        s: ShapeHandle,
        prefix: ShapeHandle,
    ) -> Result<(ShapeHandle, ShapeHandle)> {
        let f = slot!(self.host, shape.merge_prefix)?;
        let (mut out, mut prefix_out) = (OPFORGE_NO_HANDLE, OPFORGE_NO_HANDLE);
        // SAFETY: as `merge`, two out-pointers to locals.
        let code = unsafe {
            f(
                self.raw,
                s.0,
                prefix.0,
                &mut out,
                &mut prefix_out,
                self.status,
            )
        };
        self.check(code)?;
        Ok((ShapeHandle(out), ShapeHandle(prefix_out)))
    }
    /// Dims `[start, end)` by `stride` (`Subshape`; negative indices count
    /// from the end).
    pub fn subshape_strided(
        &mut self,
        s: ShapeHandle,
        start: i64,
        end: i64,
        stride: i64,
    ) -> Result<ShapeHandle> {
        let f = slot!(self.host, shape.subshape)?;
        let mut out = OPFORGE_NO_HANDLE;
        // SAFETY: the call's context and status (R7); out-pointer to a local.
        let code = unsafe { f(self.raw, s.0, start, end, stride, &mut out, self.status) };
        self.check(code)?;
        Ok(ShapeHandle(out))
    }
    /// Dims `[start, end)` of `s` (`Subshape`; negative indices count
    /// from the end; `end` `None`: to the end).
    pub fn subshape(
        &mut self,
        s: ShapeHandle,
        start: i64,
        end: Option<i64>,
    ) -> Result<ShapeHandle> {
        self.subshape_strided(s, start, end.unwrap_or(OPFORGE_TO_END), 1)
    }
    /// `a` followed by `b` (`Concatenate`).
    pub fn concatenate(&mut self, a: ShapeHandle, b: ShapeHandle) -> Result<ShapeHandle> {
        let f = slot!(self.host, shape.concatenate)?;
        let mut out = OPFORGE_NO_HANDLE;
        // SAFETY: as `merge`.
        let code = unsafe { f(self.raw, a.0, b.0, &mut out, self.status) };
        self.check(code)?;
        Ok(ShapeHandle(out))
    }
    /// `s` with dim `index` replaced by `d` (`ReplaceDim`).
    pub fn replace_dim(
        &mut self,
        s: ShapeHandle,
        index: i64,
        d: DimensionHandle,
    ) -> Result<ShapeHandle> {
        let f = slot!(self.host, shape.replace_dim)?;
        let mut out = OPFORGE_NO_HANDLE;
        // SAFETY: as `merge`.
        let code = unsafe { f(self.raw, s.0, index, d.0, &mut out, self.status) };
        self.check(code)?;
        Ok(ShapeHandle(out))
    }
    /// A dim arithmetic op of the host on `a` and `b` (a constant `b`
    /// made a dim first).
    fn dim_op(
        &mut self,
        op: u32,
        a: DimensionHandle,
        b: impl Into<DimOrConst>,
    ) -> Result<DimensionHandle> {
        let f = slot!(self.host, shape.dim_op)?;
        let b = self.make_dim(b);
        let mut out = OPFORGE_NO_HANDLE;
        // SAFETY: as `merge`.
        let code = unsafe { f(self.raw, op, a.0, b.0, &mut out, self.status) };
        self.check(code)?;
        Ok(DimensionHandle(out))
    }
    /// `a + b` (`Add`).
    pub fn add(&mut self, a: DimensionHandle, b: impl Into<DimOrConst>) -> Result<DimensionHandle> {
        self.dim_op(OPFORGE_DIM_ADD, a, b)
    }
    /// `a - b` (`Subtract`).
    pub fn subtract(
        &mut self,
        a: DimensionHandle,
        b: impl Into<DimOrConst>,
    ) -> Result<DimensionHandle> {
        self.dim_op(OPFORGE_DIM_SUB, a, b)
    }
    /// `a * b` (`Multiply`).
    pub fn multiply(
        &mut self,
        a: DimensionHandle,
        b: impl Into<DimOrConst>,
    ) -> Result<DimensionHandle> {
        self.dim_op(OPFORGE_DIM_MUL, a, b)
    }
    /// `a / b` (`Divide`; `evenly_divisible` demands no remainder).
    pub fn divide(
        &mut self,
        a: DimensionHandle,
        b: impl Into<DimOrConst>,
        evenly_divisible: bool,
    ) -> Result<DimensionHandle> {
        let op = if evenly_divisible {
            OPFORGE_DIM_DIV_EXACT
        } else {
            OPFORGE_DIM_DIV
        };
        self.dim_op(op, a, b)
    }
    /// `min(a, b)` (`Min`).
    pub fn min(&mut self, a: DimensionHandle, b: impl Into<DimOrConst>) -> Result<DimensionHandle> {
        self.dim_op(OPFORGE_DIM_MIN, a, b)
    }
    /// `max(a, b)` (`Max`).
    pub fn max(&mut self, a: DimensionHandle, b: impl Into<DimOrConst>) -> Result<DimensionHandle> {
        self.dim_op(OPFORGE_DIM_MAX, a, b)
    }
    /// The value of input `i` if it is a constant known now
    /// (`input_tensor`).
    pub fn input_tensor(&self, i: usize) -> Option<Tensor<'_>> {
        let mut view = OpforgeTensor::new();
        // SAFETY: the call's context (R7); `view` is an out-struct.
        let known = query!(self, shape.input_tensor, 0, |f| unsafe {
            f(self.raw, i, &mut view)
        });
        if known == 0 {
            return None;
        }
        let b = Box::new(view);
        let p = core::ptr::NonNull::from(&*b);
        // The box's contents stay put when the Vec grows, until the
        // context (and with it every borrow of it) is gone.
        self.tensors.borrow_mut().push(b);
        Some(Tensor::from_ptr(p))
    }
    /// Input `i` (a 1-D shape tensor) as a shape, as far as known
    /// (`MakeShapeFromShapeTensor`).
    pub fn make_shape_from_shape_tensor(&mut self, i: usize) -> Result<ShapeHandle> {
        let f = slot!(self.host, shape.input_as_shape)?;
        let mut out = OPFORGE_NO_HANDLE;
        // SAFETY: the call's context and status (R7); out-pointer to a local.
        let code = unsafe { f(self.raw, i, &mut out, self.status) };
        self.check(code)?;
        Ok(ShapeHandle(out))
    }
    /// Attr `name` of the node as `T` (`GetAttr`).
    pub fn get_attr<T: FromAttrValue>(&self, name: &str) -> Result<T> {
        let f = slot!(self.host, shape.attr)?;
        attr::read_attr(self.host, name, self.status, |n, v| {
            // SAFETY: the call's context and status (R7); `v` an out-struct.
            unsafe { f(self.raw, n, v, self.status) }
        })
    }
    /// `s` as text, `"[2,?,3]"` or `"?"` (`DebugString`).
    pub fn debug_string(&self, s: ShapeHandle) -> String {
        query!(self, shape.shape_string, String::new(), |f| {
            // SAFETY: the call's context (R7); copied at once.
            String::from_utf8_lossy(unsafe { f(self.raw, s.0).as_bytes() }).into_owned()
        })
    }
}

/// TensorFlow's `shape_inference::UnchangedShape`: output 0 has input 0's
/// shape.
pub fn unchanged_shape(c: &mut InferenceContext<'_>) -> Result<()> {
    let s = c.input(0);
    c.set_output(0, s)
}

/// Every output has an unknown shape (`UnknownShape`).
pub fn unknown_shape(c: &mut InferenceContext<'_>) -> Result<()> {
    for i in 0..c.num_outputs() {
        let s = c.unknown_shape();
        c.set_output(i, s)?;
    }
    Ok(())
}

/// The op has no outputs (`NoOutputs`).
pub fn no_outputs(_: &mut InferenceContext<'_>) -> Result<()> {
    Ok(())
}

/// The callback registered as every SDK op's shape function.
pub(crate) unsafe extern "C" fn shape_trampoline(
    ctx: *mut OpforgeShapeCtx,
    user: *mut c_void,
    status: *mut OpforgeStatus,
) -> OpforgeCode {
    // SAFETY: `user` is the `'static` OpDefBuilder given at registration.
    let op = unsafe { &*(user as *const OpDefBuilder) };
    host::guard(
        status,
        || format!("the shape function of {}", op.name()),
        |host| {
            let Some(f) = op.shape_fn() else {
                return Err(Status::internal("no shape function"));
            };
            let mut c = InferenceContext {
                raw: ctx,
                status,
                host,
                missing: Cell::new(None),
                tensors: Default::default(),
                _call: PhantomData,
            };
            let result = f(&mut c);
            match c.missing.take() {
                Some(missing) if result.is_ok() => Err(missing),
                _ => result,
            }
        },
    )
}
