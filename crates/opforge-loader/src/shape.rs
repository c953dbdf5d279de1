//! The shape-function bridge: the header's shape API (`OpforgeShapeApi`)
//! over core's `InferenceContext`. Handles cross as `index + 1` (0 is
//! OPFORGE_NO_HANDLE); a handle that is not one of the context's is
//! INVALID_ARGUMENT (core's checked lookups), never a crash.

use crate::host::*;
use crate::library::LibInner;
use opforge_abi::*;
use opforge_core::shape_inference::{DimensionHandle, InferenceContext, ShapeHandle};
use opforge_core::{Result, Status};
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
    };
    let mut status = HostStatus::default();
    // SAFETY: the plugin's shape function with its registered user pointer;
    // `s` and `status` live across the call.
    let code = unsafe {
        f(
            (&s as *const ShapeCtx).cast_mut().cast(),
            user.0,
            status.as_ptr(),
        )
    };
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

/// What `OpforgeShapeCtx*` points to.
struct ShapeCtx {
    ic: *mut InferenceContext,
    arena: Arena,
}

impl ShapeCtx {
    #[allow(clippy::mut_from_ref)]
    fn ic(&self) -> &mut InferenceContext {
        // SAFETY: the InferenceContext outlives the shape-function call this
        // ShapeCtx exists for, and the plugin uses the context only from
        // that call's thread, one function at a time (R9).
        unsafe { &mut *self.ic }
    }

    fn shape(&self, h: OpforgeShape) -> Result<ShapeHandle> {
        if h == OPFORGE_NO_HANDLE {
            return Err(Status::invalid_argument(
                "OPFORGE_NO_HANDLE where a shape is required",
            ));
        }
        let i = usize::try_from(h - 1)
            .map_err(|_| Status::invalid_argument(format!("shape handle {h} is forged")))?;
        self.ic().checked_shape(ShapeHandle::from_index(i))
    }

    fn dim(&self, h: OpforgeDim) -> Result<DimensionHandle> {
        if h == OPFORGE_NO_HANDLE {
            return Err(Status::invalid_argument(
                "OPFORGE_NO_HANDLE where a dimension is required",
            ));
        }
        let i = usize::try_from(h - 1)
            .map_err(|_| Status::invalid_argument(format!("dim handle {h} is forged")))?;
        self.ic().checked_dim(DimensionHandle::from_index(i))
    }
}

fn sh(s: ShapeHandle) -> OpforgeShape {
    s.index() as u64 + 1
}

fn dh(d: DimensionHandle) -> OpforgeDim {
    d.index() as u64 + 1
}

/// # Safety
/// `p` is the ctx the host passed to the shape function (R7).
unsafe fn sctx<'a>(p: *const OpforgeShapeCtx) -> Result<&'a ShapeCtx> {
    if p.is_null() {
        return Err(Status::invalid_argument("a NULL OpforgeShapeCtx"));
    }
    // SAFETY: a non-null ctx is the ShapeCtx the host made for this call.
    Ok(unsafe { &*p.cast::<ShapeCtx>() })
}

fn rank_arg(rank: i32) -> Result<usize> {
    usize::try_from(rank).map_err(|_| Status::invalid_argument(format!("rank {rank} is negative")))
}

unsafe extern "C" fn num_inputs(p: *const OpforgeShapeCtx) -> usize {
    // SAFETY: the plugin passes its ctx.
    guard(0, || unsafe { sctx(p) }.map_or(0, |s| s.ic().num_inputs()))
}

unsafe extern "C" fn num_outputs(p: *const OpforgeShapeCtx) -> usize {
    // SAFETY: the plugin passes the context pointer the host gave this shape function (R7); NULL is rejected.
    guard(0, || unsafe { sctx(p) }.map_or(0, |s| s.ic().num_outputs()))
}

unsafe extern "C" fn input(p: *const OpforgeShapeCtx, i: usize) -> OpforgeShape {
    guard(OPFORGE_NO_HANDLE, || {
        // SAFETY: the plugin passes the context pointer the host gave this shape function (R7); NULL is rejected.
        match unsafe { sctx(p) } {
            Ok(s) if i < s.ic().num_inputs() => sh(s.ic().input(i)),
            _ => OPFORGE_NO_HANDLE,
        }
    })
}

unsafe extern "C" fn arg_range(
    p: *const OpforgeShapeCtx,
    name: OpforgeStr,
    is_output: u8,
    start: *mut usize,
    stop: *mut usize,
    status: *mut OpforgeStatus,
) -> OpforgeCode {
    // SAFETY: plugin pointers (R7).
    unsafe {
        guard_status(status, || {
            let s = sctx(p)?;
            let name = text(name, "argument name")?;
            let ic = s.ic();
            let (a, b) =
                crate::kernel::arg_range_pub(ic.op_def(), ic.attrs(), name, is_output != 0)?;
            write_out(start, a, "start")?;
            write_out(stop, b, "stop")
        })
    }
}

unsafe extern "C" fn set_output(
    p: *mut OpforgeShapeCtx,
    i: usize,
    shape: OpforgeShape,
    status: *mut OpforgeStatus,
) -> OpforgeCode {
    // SAFETY: plugin pointers (R7).
    unsafe {
        guard_status(status, || {
            let s = sctx(p)?;
            let h = s.shape(shape)?;
            let n = s.ic().num_outputs();
            if i >= n {
                return Err(Status::invalid_argument(format!(
                    "output index {i} is out of range (the node has {n} outputs)"
                )));
            }
            s.ic().set_output(i, h);
            Ok(())
        })
    }
}

unsafe extern "C" fn output(p: *const OpforgeShapeCtx, i: usize) -> OpforgeShape {
    guard(OPFORGE_NO_HANDLE, || {
        // SAFETY: the plugin passes the context pointer the host gave this shape function (R7); NULL is rejected.
        match unsafe { sctx(p) } {
            Ok(s) if i < s.ic().num_outputs() => s.ic().output(i).map_or(OPFORGE_NO_HANDLE, sh),
            _ => OPFORGE_NO_HANDLE,
        }
    })
}

unsafe extern "C" fn rank(p: *const OpforgeShapeCtx, shape: OpforgeShape) -> i32 {
    guard(OPFORGE_UNKNOWN_RANK, || {
        // SAFETY: the plugin passes the context pointer the host gave this shape function (R7); NULL is rejected.
        let Ok(s) = (unsafe { sctx(p) }) else {
            return OPFORGE_UNKNOWN_RANK;
        };
        match s.shape(shape) {
            Ok(h) => s.ic().rank(h).map_or(OPFORGE_UNKNOWN_RANK, |r| {
                i32::try_from(r).unwrap_or(i32::MAX)
            }),
            Err(_) => OPFORGE_UNKNOWN_RANK,
        }
    })
}

unsafe extern "C" fn dim(
    p: *mut OpforgeShapeCtx,
    shape: OpforgeShape,
    index: i64,
    out: *mut OpforgeDim,
    status: *mut OpforgeStatus,
) -> OpforgeCode {
    // SAFETY: plugin pointers (R7).
    unsafe {
        guard_status(status, || {
            let s = sctx(p)?;
            let h = s.shape(shape)?;
            let ic = s.ic();
            if let Some(r) = ic.rank(h) {
                let r = r as i64;
                if index >= r || index < -r {
                    return Err(Status::invalid_argument(format!(
                        "dim index {index} is out of range for shape {} of rank {r}",
                        ic.debug_string(h)
                    )));
                }
            }
            let d = ic.dim(h, index);
            write_out(out, dh(d), "out")
        })
    }
}

unsafe extern "C" fn value(p: *const OpforgeShapeCtx, d: OpforgeDim) -> i64 {
    guard(OPFORGE_UNKNOWN_DIM, || {
        // SAFETY: the plugin passes the context pointer the host gave this shape function (R7); NULL is rejected.
        let Ok(s) = (unsafe { sctx(p) }) else {
            return OPFORGE_UNKNOWN_DIM;
        };
        s.dim(d)
            .map_or(OPFORGE_UNKNOWN_DIM, |d| s.ic().raw_value(d))
    })
}

unsafe extern "C" fn num_elements(p: *const OpforgeShapeCtx, shape: OpforgeShape) -> i64 {
    guard(-1, || {
        // SAFETY: the plugin passes the context pointer the host gave this shape function (R7); NULL is rejected.
        let Ok(s) = (unsafe { sctx(p) }) else {
            return -1;
        };
        s.shape(shape)
            .ok()
            .and_then(|h| s.ic().num_elements(h))
            .unwrap_or(-1)
    })
}

unsafe extern "C" fn make_dim(p: *mut OpforgeShapeCtx, v: i64) -> OpforgeDim {
    guard(OPFORGE_NO_HANDLE, || {
        // SAFETY: the plugin passes the context pointer the host gave this shape function (R7); NULL is rejected.
        let Ok(s) = (unsafe { sctx(p) }) else {
            return OPFORGE_NO_HANDLE;
        };
        if v < OPFORGE_UNKNOWN_DIM {
            return OPFORGE_NO_HANDLE;
        }
        dh(s.ic().make_dim(v))
    })
}

unsafe extern "C" fn make_shape(
    p: *mut OpforgeShapeCtx,
    dims: *const OpforgeDim,
    rank: usize,
    out: *mut OpforgeShape,
    status: *mut OpforgeStatus,
) -> OpforgeCode {
    // SAFETY: plugin pointers (R7).
    unsafe {
        guard_status(status, || {
            let s = sctx(p)?;
            let dims = slice(dims, rank, "dims")?;
            let hs = dims.iter().map(|&d| s.dim(d)).collect::<Result<Vec<_>>>()?;
            write_out(out, sh(s.ic().make_shape_from_dims(hs)), "out")
        })
    }
}

unsafe extern "C" fn make_shape_from_values(
    p: *mut OpforgeShapeCtx,
    dims: *const i64,
    rank: usize,
    out: *mut OpforgeShape,
    status: *mut OpforgeStatus,
) -> OpforgeCode {
    // SAFETY: plugin pointers (R7).
    unsafe {
        guard_status(status, || {
            let s = sctx(p)?;
            let dims = slice(dims, rank, "dims")?;
            if let Some(d) = dims.iter().find(|&&d| d < OPFORGE_UNKNOWN_DIM) {
                return Err(Status::invalid_argument(format!(
                    "dim {d} is negative (use -1 for an unknown dim)"
                )));
            }
            write_out(out, sh(s.ic().make_partial_shape(Some(dims))), "out")
        })
    }
}

unsafe extern "C" fn unknown_shape(p: *mut OpforgeShapeCtx, rank: i32) -> OpforgeShape {
    guard(OPFORGE_NO_HANDLE, || {
        // SAFETY: the plugin passes the context pointer the host gave this shape function (R7); NULL is rejected.
        let Ok(s) = (unsafe { sctx(p) }) else {
            return OPFORGE_NO_HANDLE;
        };
        match rank {
            OPFORGE_UNKNOWN_RANK => sh(s.ic().unknown_shape()),
            r if r >= 0 => sh(s.ic().unknown_shape_of_rank(r as usize)),
            _ => OPFORGE_NO_HANDLE,
        }
    })
}

macro_rules! shape_rank_op {
    ($name:ident, $method:ident) => {
        unsafe extern "C" fn $name(
            p: *mut OpforgeShapeCtx,
            shape: OpforgeShape,
            rank: i32,
            out: *mut OpforgeShape,
            status: *mut OpforgeStatus,
        ) -> OpforgeCode {
            // SAFETY: plugin pointers (R7).
            unsafe {
                guard_status(status, || {
                    let s = sctx(p)?;
                    let h = s.shape(shape)?;
                    let r = s.ic().$method(h, rank_arg(rank)?)?;
                    write_out(out, sh(r), "out")
                })
            }
        }
    };
}

shape_rank_op!(with_rank, with_rank);
shape_rank_op!(with_rank_at_least, with_rank_at_least);
shape_rank_op!(with_rank_at_most, with_rank_at_most);

unsafe extern "C" fn with_value(
    p: *mut OpforgeShapeCtx,
    d: OpforgeDim,
    v: i64,
    out: *mut OpforgeDim,
    status: *mut OpforgeStatus,
) -> OpforgeCode {
    // SAFETY: plugin pointers (R7).
    unsafe {
        guard_status(status, || {
            let s = sctx(p)?;
            let d = s.dim(d)?;
            write_out(out, dh(s.ic().with_value(d, v)?), "out")
        })
    }
}

unsafe extern "C" fn merge(
    p: *mut OpforgeShapeCtx,
    a: OpforgeShape,
    b: OpforgeShape,
    out: *mut OpforgeShape,
    status: *mut OpforgeStatus,
) -> OpforgeCode {
    // SAFETY: plugin pointers (R7).
    unsafe {
        guard_status(status, || {
            let s = sctx(p)?;
            let (a, b) = (s.shape(a)?, s.shape(b)?);
            write_out(out, sh(s.ic().merge(a, b)?), "out")
        })
    }
}

unsafe extern "C" fn merge_dim(
    p: *mut OpforgeShapeCtx,
    a: OpforgeDim,
    b: OpforgeDim,
    out: *mut OpforgeDim,
    status: *mut OpforgeStatus,
) -> OpforgeCode {
    // SAFETY: plugin pointers (R7).
    unsafe {
        guard_status(status, || {
            let s = sctx(p)?;
            let (a, b) = (s.dim(a)?, s.dim(b)?);
            write_out(out, dh(s.ic().merge_dim(a, b)?), "out")
        })
    }
}

unsafe extern "C" fn merge_prefix(
    p: *mut OpforgeShapeCtx,
    shape: OpforgeShape,
    prefix: OpforgeShape,
    shape_out: *mut OpforgeShape,
    prefix_out: *mut OpforgeShape,
    status: *mut OpforgeStatus,
) -> OpforgeCode {
    // SAFETY: plugin pointers (R7).
    unsafe {
        guard_status(status, || {
            let s = sctx(p)?;
            let (a, b) = (s.shape(shape)?, s.shape(prefix)?);
            let (x, y) = s.ic().merge_prefix(a, b)?;
            write_out(shape_out, sh(x), "shape_out")?;
            write_out(prefix_out, sh(y), "prefix_out")
        })
    }
}

unsafe extern "C" fn subshape(
    p: *mut OpforgeShapeCtx,
    shape: OpforgeShape,
    start: i64,
    end: i64,
    stride: i64,
    out: *mut OpforgeShape,
    status: *mut OpforgeStatus,
) -> OpforgeCode {
    // SAFETY: plugin pointers (R7).
    unsafe {
        guard_status(status, || {
            let s = sctx(p)?;
            let h = s.shape(shape)?;
            if stride == 0 {
                return Err(Status::invalid_argument("subshape: stride must not be 0"));
            }
            write_out(
                out,
                sh(s.ic().subshape_strided(h, start, end, stride)?),
                "out",
            )
        })
    }
}

unsafe extern "C" fn concatenate(
    p: *mut OpforgeShapeCtx,
    a: OpforgeShape,
    b: OpforgeShape,
    out: *mut OpforgeShape,
    status: *mut OpforgeStatus,
) -> OpforgeCode {
    // SAFETY: plugin pointers (R7).
    unsafe {
        guard_status(status, || {
            let s = sctx(p)?;
            let (a, b) = (s.shape(a)?, s.shape(b)?);
            write_out(out, sh(s.ic().concatenate(a, b)?), "out")
        })
    }
}

unsafe extern "C" fn replace_dim(
    p: *mut OpforgeShapeCtx,
    shape: OpforgeShape,
    index: i64,
    d: OpforgeDim,
    out: *mut OpforgeShape,
    status: *mut OpforgeStatus,
) -> OpforgeCode {
    // SAFETY: plugin pointers (R7).
    unsafe {
        guard_status(status, || {
            let s = sctx(p)?;
            let (h, d) = (s.shape(shape)?, s.dim(d)?);
            write_out(out, sh(s.ic().replace_dim(h, index, d)?), "out")
        })
    }
}

unsafe extern "C" fn dim_op(
    p: *mut OpforgeShapeCtx,
    op: u32,
    a: OpforgeDim,
    b: OpforgeDim,
    out: *mut OpforgeDim,
    status: *mut OpforgeStatus,
) -> OpforgeCode {
    // SAFETY: plugin pointers (R7).
    unsafe {
        guard_status(status, || {
            let s = sctx(p)?;
            let (a, b) = (s.dim(a)?, s.dim(b)?);
            let ic = s.ic();
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
            write_out(out, dh(r), "out")
        })
    }
}

unsafe extern "C" fn input_tensor(
    p: *const OpforgeShapeCtx,
    i: usize,
    out: *mut OpforgeTensor,
) -> u8 {
    guard(0, || {
        // SAFETY: the plugin passes the context pointer the host gave this shape function (R7); NULL is rejected.
        let Ok(s) = (unsafe { sctx(p) }) else {
            return 0;
        };
        if i >= s.ic().num_inputs() {
            return 0;
        }
        let Some(t) = s.ic().input_tensor(i).cloned() else {
            return 0;
        };
        let mut t = t;
        match crate::kernel::view_pub(&mut t, &s.arena) {
            // SAFETY: the plugin's out-struct; the view's data is the
            // context's constant tensor, alive until the call returns.
            Ok(v) => u8::from(unsafe { write_struct(&v, out) }.is_ok()),
            Err(_) => 0,
        }
    })
}

unsafe extern "C" fn input_as_shape(
    p: *mut OpforgeShapeCtx,
    i: usize,
    out: *mut OpforgeShape,
    status: *mut OpforgeStatus,
) -> OpforgeCode {
    // SAFETY: plugin pointers (R7).
    unsafe {
        guard_status(status, || {
            let s = sctx(p)?;
            let n = s.ic().num_inputs();
            if i >= n {
                return Err(Status::invalid_argument(format!(
                    "input index {i} is out of range (the node has {n} inputs)"
                )));
            }
            write_out(out, sh(s.ic().make_shape_from_shape_tensor(i)?), "out")
        })
    }
}

unsafe extern "C" fn attr(
    p: *const OpforgeShapeCtx,
    name: OpforgeStr,
    value: *mut OpforgeAttrValue,
    status: *mut OpforgeStatus,
) -> OpforgeCode {
    // SAFETY: plugin pointers (R7).
    unsafe {
        guard_status(status, || {
            let s = sctx(p)?;
            let ic = s.ic();
            read_attr(ic.op_def(), ic.attrs(), &s.arena, name, value)
        })
    }
}

unsafe extern "C" fn shape_string(p: *const OpforgeShapeCtx, shape: OpforgeShape) -> OpforgeStr {
    guard(OpforgeStr::EMPTY, || {
        // SAFETY: the plugin passes the context pointer the host gave this shape function (R7); NULL is rejected.
        let Ok(s) = (unsafe { sctx(p) }) else {
            return OpforgeStr::EMPTY;
        };
        match s.shape(shape) {
            Ok(h) => s.arena.str(s.ic().debug_string(h).as_bytes()),
            Err(_) => s.arena.str(b"<invalid shape handle>"),
        }
    })
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
