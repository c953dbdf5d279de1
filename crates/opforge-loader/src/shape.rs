//! The shape-function bridge: the header's shape API (`OpforgeShapeApi`)
//! over core's `InferenceContext`, each function written through
//! [`host_fn!`] (the context checked against the thread's current one
//! before anything is read: `crate::ctx`). Handles cross as
//! `epoch << 32 | (index + 1)` (0 is OPFORGE_NO_HANDLE; `crate::ctx::Epoch`):
//! a handle of another call, or one that is not an index of the context's
//! arena, is INVALID_ARGUMENT (core's checked lookups), never a crash.

use crate::ctx::{claim, host_fn, lend, CtxKind, Epoch};
use crate::host::*;
use crate::kernel::write_arg_range;
use crate::library::LibInner;
use opforge_abi::*;
use opforge_core::shape_inference::{DimensionHandle, InferenceContext, ShapeHandle};
use opforge_core::{Result, Status, TensorShape};
use std::ffi::c_void;
use std::sync::Arc;

/// Runs a plugin shape function on `ic` (the registered `ShapeFn` value).
pub(crate) fn run_shape_fn(
    lib: &Arc<LibInner>,
    op: &str,
    f: unsafe extern "C" fn(*mut OpforgeShapeCtx, *mut c_void, *mut OpforgeStatus) -> OpforgeCode,
    user: SendPtr,
    ic: &mut InferenceContext,
) -> Result<()> {
    let s = ShapeCtx {
        ic: (ic as *mut InferenceContext),
        arena: Arena::default(),
        epoch: Epoch::next(),
    };
    let mut status = HostStatus::default();
    let lent = lend(&s, CtxKind::Shape);
    // SAFETY: the plugin's shape function with its registered user pointer;
    // `s` (lent until the call returns) and `status` live across the call.
    let code = unsafe { f(lent.ptr(), user.0, status.as_ptr()) };
    drop(lent);
    if code != OPFORGE_OK {
        return Err(callback_error(
            &lib.label(),
            &format!(
                "the shape function of op '{op}' (node '{}')",
                ic.node_name()
            ),
            code,
            &status,
        ));
    }
    Ok(())
}

/// What `OpforgeShapeCtx*` points to: made on the stack of each shape
/// function call. The `InferenceContext` is reached through a raw pointer
/// (from the caller's `&mut`, unused by it while the plugin runs), one
/// host function at a time ([`with_sctx`]).
struct ShapeCtx {
    ic: *mut InferenceContext,
    arena: Arena,
    /// The generation of this call's handles (R7).
    epoch: Epoch,
}

impl ShapeCtx {
    fn shape(&self, ic: &InferenceContext, h: OpforgeShape) -> Result<ShapeHandle> {
        let i = self.epoch.index(h, "shape")?;
        ic.checked_shape(ShapeHandle::from_index(i))
    }

    fn dim(&self, ic: &InferenceContext, h: OpforgeDim) -> Result<DimensionHandle> {
        let i = self.epoch.index(h, "dimension")?;
        ic.checked_dim(DimensionHandle::from_index(i))
    }

    /// The handle of shape `s`.
    fn sh(&self, s: ShapeHandle) -> Result<OpforgeShape> {
        self.epoch.handle(s.index())
    }

    /// The handle of dim `d`.
    fn dh(&self, d: DimensionHandle) -> Result<OpforgeDim> {
        self.epoch.handle(d.index())
    }
}

/// Runs `f` on the shape context `p` and its `InferenceContext`, if `p` is
/// the context lent to the shape function running on this thread
/// (`crate::ctx::claim`); else the refusal.
fn with_sctx<R>(
    p: *const OpforgeShapeCtx,
    f: impl FnOnce(&ShapeCtx, &mut InferenceContext) -> Result<R>,
) -> Result<R> {
    let _claim = claim(p, CtxKind::Shape)?;
    // SAFETY: the claim found `p` to be the address of the ShapeCtx lent to
    // the shape function running on this thread (`run_shape_fn`); the loan
    // ends before that frame, which owns it, returns.
    let s = unsafe { &*p.cast::<ShapeCtx>() };
    // SAFETY: `ic` comes from `run_shape_fn`'s `&mut InferenceContext`,
    // which outlives the loan and which that frame does not use until the
    // plugin returns. The reference is exclusive: the claim holds the
    // thread's context until `f` returns, so no other host function (the
    // only other code that makes one) can claim it meanwhile.
    let ic = unsafe { &mut *s.ic };
    f(s, ic)
}

fn rank_arg(rank: i32) -> Result<usize> {
    usize::try_from(rank).map_err(|_| Status::invalid_argument(format!("rank {rank} is negative")))
}

host_fn! {
    fn num_inputs(p: *const OpforgeShapeCtx) -> usize [0],
    with_sctx, |_s, ic| { Ok(ic.num_inputs()) }
}

host_fn! {
    fn num_outputs(p: *const OpforgeShapeCtx) -> usize [0],
    with_sctx, |_s, ic| { Ok(ic.num_outputs()) }
}

host_fn! {
    fn input(p: *const OpforgeShapeCtx, i: usize) -> OpforgeShape [OPFORGE_NO_HANDLE],
    with_sctx, |s, ic| {
        if i >= ic.num_inputs() {
            return Ok(OPFORGE_NO_HANDLE);
        }
        s.sh(ic.input(i))
    }
}

host_fn! {
    fn arg_range(
        p: *const OpforgeShapeCtx,
        name: OpforgeStr,
        is_output: u8,
        start: *mut usize,
        stop: *mut usize,
    ) -> status,
    with_sctx, |_s, ic| {
        // SAFETY: the plugin's string and out-pointers.
        unsafe { write_arg_range(ic.op_def(), ic.attrs(), name, is_output, start, stop) }
    }
}

host_fn! {
    fn set_output(p: *mut OpforgeShapeCtx, i: usize, shape: OpforgeShape) -> status,
    with_sctx, |s, ic| {
        let h = s.shape(ic, shape)?;
        let n = ic.num_outputs();
        if i >= n {
            return Err(Status::invalid_argument(format!(
                "output index {i} is out of range (the node has {n} outputs)"
            )));
        }
        ic.set_output(i, h);
        Ok(())
    }
}

host_fn! {
    fn output(p: *const OpforgeShapeCtx, i: usize) -> OpforgeShape [OPFORGE_NO_HANDLE],
    with_sctx, |s, ic| {
        match ic.output(i) {
            Some(h) => s.sh(h),
            None => Ok(OPFORGE_NO_HANDLE),
        }
    }
}

host_fn! {
    fn rank(p: *const OpforgeShapeCtx, shape: OpforgeShape) -> i32 [OPFORGE_UNKNOWN_RANK],
    with_sctx, |s, ic| {
        let h = s.shape(ic, shape)?;
        Ok(ic.rank(h).map_or(OPFORGE_UNKNOWN_RANK, |r| i32::try_from(r).unwrap_or(i32::MAX)))
    }
}

host_fn! {
    fn dim(p: *mut OpforgeShapeCtx, shape: OpforgeShape, index: i64)
        -> status, out out: OpforgeDim,
    with_sctx, |s, ic| {
        let h = s.shape(ic, shape)?;
        if let Some(r) = ic.rank(h) {
            let r = r as i64;
            if index >= r || index < -r {
                return Err(Status::invalid_argument(format!(
                    "dim index {index} is out of range for shape {} of rank {r}",
                    ic.debug_string(h)
                )));
            }
        }
        s.dh(ic.dim(h, index))
    }
}

host_fn! {
    fn value(p: *const OpforgeShapeCtx, d: OpforgeDim) -> i64 [OPFORGE_UNKNOWN_DIM],
    with_sctx, |s, ic| { Ok(ic.raw_value(s.dim(ic, d)?)) }
}

host_fn! {
    fn num_elements(p: *const OpforgeShapeCtx, shape: OpforgeShape) -> i64 [-1],
    with_sctx, |s, ic| { Ok(ic.num_elements(s.shape(ic, shape)?).unwrap_or(-1)) }
}

host_fn! {
    fn make_dim(p: *mut OpforgeShapeCtx, v: i64) -> OpforgeDim [OPFORGE_NO_HANDLE],
    with_sctx, |s, ic| {
        if v < OPFORGE_UNKNOWN_DIM {
            return Ok(OPFORGE_NO_HANDLE);
        }
        s.dh(ic.make_dim(v))
    }
}

host_fn! {
    fn make_shape(p: *mut OpforgeShapeCtx, dims: *const OpforgeDim, rank: usize)
        -> status, out out: OpforgeShape,
    with_sctx, |s, ic| {
        TensorShape::check_rank(rank as u64).map_err(|e| e.prepend("make_shape: "))?;
        // SAFETY: the plugin passes `rank` dim handles (at most 254).
        let dims = unsafe { slice(dims, rank, "dims")? };
        let hs = dims.iter().map(|&d| s.dim(ic, d)).collect::<Result<Vec<_>>>()?;
        s.sh(ic.make_shape_from_dims(hs))
    }
}

host_fn! {
    fn make_shape_from_values(p: *mut OpforgeShapeCtx, dims: *const i64, rank: usize)
        -> status, out out: OpforgeShape,
    with_sctx, |s, ic| {
        // SAFETY: the plugin passes `rank` dims.
        let dims = unsafe { plugin_dims(dims, rank as u64, "make_shape_from_values")? };
        if let Some(d) = dims.iter().find(|&&d| d < OPFORGE_UNKNOWN_DIM) {
            return Err(Status::invalid_argument(format!(
                "dim {d} is negative (use -1 for an unknown dim)"
            )));
        }
        s.sh(ic.make_partial_shape(Some(dims)))
    }
}

host_fn! {
    fn unknown_shape(p: *mut OpforgeShapeCtx, rank: i32) -> OpforgeShape [OPFORGE_NO_HANDLE],
    with_sctx, |s, ic| {
        match rank {
            OPFORGE_UNKNOWN_RANK => s.sh(ic.unknown_shape()),
            r if r >= 0 && TensorShape::check_rank(r as u64).is_ok() => {
                s.sh(ic.unknown_shape_of_rank(r as usize))
            }
            // Another negative rank, or one above 254.
            _ => Ok(OPFORGE_NO_HANDLE),
        }
    }
}

host_fn! {
    fn with_rank(p: *mut OpforgeShapeCtx, shape: OpforgeShape, rank: i32)
        -> status, out out: OpforgeShape,
    with_sctx, |s, ic| {
        let h = s.shape(ic, shape)?;
        let rank = rank_arg(rank)?;
        TensorShape::check_rank(rank as u64).map_err(|e| e.prepend("with_rank: "))?;
        s.sh(ic.with_rank(h, rank)?)
    }
}

host_fn! {
    fn with_rank_at_least(p: *mut OpforgeShapeCtx, shape: OpforgeShape, rank: i32)
        -> status, out out: OpforgeShape,
    with_sctx, |s, ic| { s.sh(ic.with_rank_at_least(s.shape(ic, shape)?, rank_arg(rank)?)?) }
}

host_fn! {
    fn with_rank_at_most(p: *mut OpforgeShapeCtx, shape: OpforgeShape, rank: i32)
        -> status, out out: OpforgeShape,
    with_sctx, |s, ic| { s.sh(ic.with_rank_at_most(s.shape(ic, shape)?, rank_arg(rank)?)?) }
}

host_fn! {
    fn with_value(p: *mut OpforgeShapeCtx, d: OpforgeDim, v: i64) -> status, out out: OpforgeDim,
    with_sctx, |s, ic| { s.dh(ic.with_value(s.dim(ic, d)?, v)?) }
}

host_fn! {
    fn merge(p: *mut OpforgeShapeCtx, a: OpforgeShape, b: OpforgeShape)
        -> status, out out: OpforgeShape,
    with_sctx, |s, ic| { s.sh(ic.merge(s.shape(ic, a)?, s.shape(ic, b)?)?) }
}

host_fn! {
    fn merge_dim(p: *mut OpforgeShapeCtx, a: OpforgeDim, b: OpforgeDim)
        -> status, out out: OpforgeDim,
    with_sctx, |s, ic| { s.dh(ic.merge_dim(s.dim(ic, a)?, s.dim(ic, b)?)?) }
}

host_fn! {
    fn merge_prefix(
        p: *mut OpforgeShapeCtx,
        shape: OpforgeShape,
        prefix: OpforgeShape,
        shape_out: *mut OpforgeShape,
        prefix_out: *mut OpforgeShape,
    ) -> status,
    with_sctx, |s, ic| {
        let (x, y) = ic.merge_prefix(s.shape(ic, shape)?, s.shape(ic, prefix)?)?;
        // SAFETY: the plugin's out-pointers.
        unsafe {
            write_out(shape_out, s.sh(x)?, "shape_out")?;
            write_out(prefix_out, s.sh(y)?, "prefix_out")
        }
    }
}

host_fn! {
    fn subshape(p: *mut OpforgeShapeCtx, shape: OpforgeShape, start: i64, end: i64, stride: i64)
        -> status, out out: OpforgeShape,
    with_sctx, |s, ic| {
        let h = s.shape(ic, shape)?;
        if stride == 0 {
            return Err(Status::invalid_argument("subshape: stride must not be 0"));
        }
        s.sh(ic.subshape_strided(h, start, end, stride)?)
    }
}

host_fn! {
    fn concatenate(p: *mut OpforgeShapeCtx, a: OpforgeShape, b: OpforgeShape)
        -> status, out out: OpforgeShape,
    with_sctx, |s, ic| {
        let (a, b) = (s.shape(ic, a)?, s.shape(ic, b)?);
        if let (Some(x), Some(y)) = (ic.rank(a), ic.rank(b)) {
            TensorShape::check_rank((x + y) as u64).map_err(|e| e.prepend("concatenate: "))?;
        }
        s.sh(ic.concatenate(a, b)?)
    }
}

host_fn! {
    fn replace_dim(p: *mut OpforgeShapeCtx, shape: OpforgeShape, index: i64, d: OpforgeDim)
        -> status, out out: OpforgeShape,
    with_sctx, |s, ic| { s.sh(ic.replace_dim(s.shape(ic, shape)?, index, s.dim(ic, d)?)?) }
}

host_fn! {
    fn dim_op(p: *mut OpforgeShapeCtx, op: u32, a: OpforgeDim, b: OpforgeDim)
        -> status, out out: OpforgeDim,
    with_sctx, |s, ic| {
        let (a, b) = (s.dim(ic, a)?, s.dim(ic, b)?);
        let r = match op {
            OPFORGE_DIM_ADD => ic.add(a, b)?,
            OPFORGE_DIM_SUB => ic.subtract(a, b)?,
            OPFORGE_DIM_MUL => ic.multiply(a, b)?,
            OPFORGE_DIM_DIV => ic.divide(a, b, false)?,
            OPFORGE_DIM_DIV_EXACT => ic.divide(a, b, true)?,
            OPFORGE_DIM_MIN => ic.min(a, b)?,
            OPFORGE_DIM_MAX => ic.max(a, b)?,
            other => {
                return Err(Status::invalid_argument(format!(
                    "dim_op: {other} is not an OPFORGE_DIM_* value this host knows"
                )));
            }
        };
        s.dh(r)
    }
}

host_fn! {
    fn input_tensor(p: *const OpforgeShapeCtx, i: usize, out: *mut OpforgeTensor) -> u8 [0],
    with_sctx, |s, ic| {
        let Some(t) = ic.input_tensor(i).cloned() else {
            return Ok(0);
        };
        let mut t = t;
        let v = crate::kernel::view_pub(&mut t, &s.arena)?;
        // SAFETY: the plugin's out-struct; the view's data is the
        // context's constant tensor, alive until the call returns.
        unsafe { write_struct(&v, out)? };
        Ok(1)
    }
}

host_fn! {
    fn input_as_shape(p: *mut OpforgeShapeCtx, i: usize) -> status, out out: OpforgeShape,
    with_sctx, |s, ic| {
        let n = ic.num_inputs();
        if i >= n {
            return Err(Status::invalid_argument(format!(
                "input index {i} is out of range (the node has {n} inputs)"
            )));
        }
        s.sh(ic.make_shape_from_shape_tensor(i)?)
    }
}

host_fn! {
    fn attr(p: *const OpforgeShapeCtx, name: OpforgeStr, value: *mut OpforgeAttrValue) -> status,
    with_sctx, |s, ic| {
        // SAFETY: the plugin's string and out-struct; the values are lent
        // from the context's arena, which lives until the call returns.
        unsafe { read_attr(ic.op_def(), ic.attrs(), &s.arena, name, value) }
    }
}

host_fn! {
    fn shape_string(p: *const OpforgeShapeCtx, shape: OpforgeShape) -> OpforgeStr [OpforgeStr::EMPTY],
    with_sctx, |s, ic| {
        Ok(match s.shape(ic, shape) {
            Ok(h) => s.arena.str(ic.debug_string(h).as_bytes()),
            Err(_) => s.arena.str(b"<invalid shape handle>"),
        })
    }
}

/// The shape table every library shares.
pub(crate) static SHAPE_API: OpforgeShapeApi = {
    let mut t = OpforgeShapeApi::new();
    t.num_inputs = Some(num_inputs);
    t.num_outputs = Some(num_outputs);
    t.input = Some(input);
    t.arg_range = Some(arg_range);
    t.set_output = Some(set_output);
    t.output = Some(output);
    t.rank = Some(rank);
    t.dim = Some(dim);
    t.value = Some(value);
    t.num_elements = Some(num_elements);
    t.make_dim = Some(make_dim);
    t.make_shape = Some(make_shape);
    t.make_shape_from_values = Some(make_shape_from_values);
    t.unknown_shape = Some(unknown_shape);
    t.with_rank = Some(with_rank);
    t.with_rank_at_least = Some(with_rank_at_least);
    t.with_rank_at_most = Some(with_rank_at_most);
    t.with_value = Some(with_value);
    t.merge = Some(merge);
    t.merge_dim = Some(merge_dim);
    t.merge_prefix = Some(merge_prefix);
    t.subshape = Some(subshape);
    t.concatenate = Some(concatenate);
    t.replace_dim = Some(replace_dim);
    t.dim_op = Some(dim_op);
    t.input_tensor = Some(input_tensor);
    t.input_as_shape = Some(input_as_shape);
    t.attr = Some(attr);
    t.shape_string = Some(shape_string);
    t
};
