//! The mock host's shape table: just enough for shape functions such as
//! "output = input shape" and a transpose, and `infer`, which runs one.

use opforge_abi::*;

use super::*;

pub struct MockShapeCtx {
    /// Known shapes (`None`: unknown rank); handle h is shapes[h - 1].
    pub shapes: Vec<Option<Vec<i64>>>,
    /// Known dims (-1: unknown); handle d is dims[d - 1].
    pub dims: Vec<i64>,
    pub num_inputs: usize,
    pub outputs: Vec<OpforgeShape>,
}

impl MockShapeCtx {
    fn shape(&self, h: OpforgeShape) -> Option<&Option<Vec<i64>>> {
        self.shapes.get((h as usize).wrapping_sub(1))
    }
    fn add_shape(&mut self, s: Option<Vec<i64>>) -> OpforgeShape {
        self.shapes.push(s);
        self.shapes.len() as u64
    }
    fn add_dim(&mut self, v: i64) -> OpforgeDim {
        self.dims.push(v);
        self.dims.len() as u64
    }
    pub fn text(&self, h: OpforgeShape) -> String {
        match self.shape(h) {
            Some(Some(d)) => format!(
                "[{}]",
                d.iter()
                    .map(|&x| if x < 0 {
                        "?".to_string()
                    } else {
                        x.to_string()
                    })
                    .collect::<Vec<_>>()
                    .join(",")
            ),
            _ => "?".to_string(),
        }
    }
}

pub(crate) fn sctx<'a>(c: *const OpforgeShapeCtx) -> &'a mut MockShapeCtx {
    // SAFETY: the ctx this host passes to shape functions.
    unsafe { &mut *(c as *mut MockShapeCtx) }
}

pub(crate) unsafe extern "C" fn s_num_inputs(c: *const OpforgeShapeCtx) -> usize {
    sctx(c).num_inputs
}
pub(crate) unsafe extern "C" fn s_num_outputs(c: *const OpforgeShapeCtx) -> usize {
    sctx(c).outputs.len()
}
pub(crate) unsafe extern "C" fn s_input(c: *const OpforgeShapeCtx, i: usize) -> OpforgeShape {
    if i < sctx(c).num_inputs {
        i as u64 + 1
    } else {
        OPFORGE_NO_HANDLE
    }
}
pub(crate) unsafe extern "C" fn s_set_output(
    c: *mut OpforgeShapeCtx,
    i: usize,
    shape: OpforgeShape,
    status: *mut OpforgeStatus,
) -> OpforgeCode {
    let ctx = sctx(c);
    if ctx.shape(shape).is_none() {
        return fail(status, OPFORGE_INVALID_ARGUMENT, "invalid shape handle");
    }
    match ctx.outputs.get_mut(i) {
        Some(o) => {
            *o = shape;
            OPFORGE_OK
        }
        None => fail(status, OPFORGE_INVALID_ARGUMENT, &format!("no output {i}")),
    }
}
pub(crate) unsafe extern "C" fn s_rank(c: *const OpforgeShapeCtx, shape: OpforgeShape) -> i32 {
    match sctx(c).shape(shape) {
        Some(Some(s)) => s.len() as i32,
        _ => OPFORGE_UNKNOWN_RANK,
    }
}
pub(crate) unsafe extern "C" fn s_dim(
    c: *mut OpforgeShapeCtx,
    shape: OpforgeShape,
    index: i64,
    out: *mut OpforgeDim,
    status: *mut OpforgeStatus,
) -> OpforgeCode {
    let ctx = sctx(c);
    let v = match ctx.shape(shape) {
        None => return fail(status, OPFORGE_INVALID_ARGUMENT, "invalid shape handle"),
        Some(None) => -1,
        Some(Some(d)) => {
            let i = if index < 0 {
                index + d.len() as i64
            } else {
                index
            };
            match d.get(i as usize) {
                Some(&v) if i >= 0 => v,
                _ => return fail(status, OPFORGE_INVALID_ARGUMENT, "dim index out of range"),
            }
        }
    };
    let h = ctx.add_dim(v);
    // SAFETY: the plugin's out-pointer.
    unsafe { *out = h };
    OPFORGE_OK
}
pub(crate) unsafe extern "C" fn s_value(c: *const OpforgeShapeCtx, dim: OpforgeDim) -> i64 {
    sctx(c)
        .dims
        .get((dim as usize).wrapping_sub(1))
        .copied()
        .unwrap_or(-1)
}
pub(crate) unsafe extern "C" fn s_make_shape(
    c: *mut OpforgeShapeCtx,
    dims: *const OpforgeDim,
    rank: usize,
    out: *mut OpforgeShape,
    status: *mut OpforgeStatus,
) -> OpforgeCode {
    let ctx = sctx(c);
    // SAFETY: `rank` handles from the plugin.
    let hs = if rank == 0 {
        &[][..]
    } else {
        // SAFETY: the plugin's `rank` dims, valid for the call (R5).
        unsafe { std::slice::from_raw_parts(dims, rank) }
    };
    let mut v = Vec::new();
    for &h in hs {
        match ctx.dims.get((h as usize).wrapping_sub(1)) {
            Some(&x) => v.push(x),
            None => return fail(status, OPFORGE_INVALID_ARGUMENT, "invalid dim handle"),
        }
    }
    let h = ctx.add_shape(Some(v));
    // SAFETY: the plugin's out-pointer.
    unsafe { *out = h };
    OPFORGE_OK
}
pub(crate) unsafe extern "C" fn s_with_rank(
    c: *mut OpforgeShapeCtx,
    shape: OpforgeShape,
    rank: i32,
    out: *mut OpforgeShape,
    status: *mut OpforgeStatus,
) -> OpforgeCode {
    let ctx = sctx(c);
    let h = match ctx.shape(shape).cloned() {
        None => return fail(status, OPFORGE_INVALID_ARGUMENT, "invalid shape handle"),
        Some(None) => ctx.add_shape(Some(vec![-1; rank as usize])),
        Some(Some(d)) if d.len() == rank as usize => shape,
        Some(Some(d)) => {
            let msg = format!("Shape must be rank {rank} but is rank {}", d.len());
            return fail(status, OPFORGE_INVALID_ARGUMENT, &msg);
        }
    };
    // SAFETY: the plugin's out-pointer.
    unsafe { *out = h };
    OPFORGE_OK
}
pub(crate) unsafe extern "C" fn s_shape_string(
    c: *const OpforgeShapeCtx,
    shape: OpforgeShape,
) -> OpforgeStr {
    // Leaked: lives as long as any context (a test host).
    let text: &'static str = Box::leak(sctx(c).text(shape).into_boxed_str());
    OpforgeStr::from_text(text)
}

/// Runs `op`'s shape function on inputs of `shapes` (`None`: unknown
/// rank): the output shapes as text.
pub fn infer(
    op: &OpRec,
    shapes: &[Option<Vec<i64>>],
    num_outputs: usize,
) -> Result<Vec<String>, MockStatus> {
    let mut c = MockShapeCtx {
        shapes: shapes.to_vec(),
        dims: Vec::new(),
        num_inputs: shapes.len(),
        outputs: vec![OPFORGE_NO_HANDLE; num_outputs],
    };
    let mut s = MockStatus::default();
    // SAFETY: the plugin's shape function with this host's objects.
    let code = unsafe {
        (op.shape_fn.unwrap())(
            (&mut c as *mut MockShapeCtx).cast(),
            op.shape_fn_user,
            s.ptr(),
        )
    };
    if code != OPFORGE_OK {
        s.code = code;
        return Err(s);
    }
    Ok(c.outputs.iter().map(|&h| c.text(h)).collect())
}
