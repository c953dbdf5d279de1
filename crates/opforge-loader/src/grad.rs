//! The gradient-callback bridge: a plugin's `OpforgeGradFn` as a core
//! gradient (`GradientFn::Fn`), and the header's gradient API
//! (`OpforgeGradApi`) over autodiff's `Ops` interface, so the gradient is
//! built from registered ops (the tape eagerly, `GraphOps` in graphs) and
//! higher-order gradients work when those ops are differentiable.
//!
//! Handles (`OpforgeSym`) are `epoch << 32 | (index + 1)` into the
//! context's table of values (`crate::ctx::Epoch`); a handle of another
//! call, or not in the table, is INVALID_ARGUMENT. Each function of the
//! table is written through [`host_fn!`] (the context checked against the
//! thread's current one before anything is read: `crate::ctx`).

use crate::ctx::{claim, host_fn, lend, CtxKind, Epoch};
use crate::host::*;
use crate::kernel::write_arg_range;
use crate::library::LibInner;
use opforge_abi::*;
use opforge_core::attrs::AttrMap;
use opforge_core::autodiff::{GradientContext, Ops, Sym, SymArg};
use opforge_core::proto::attr_value::{ListValue, Value as AV};
use opforge_core::proto::{tensor_shape_proto, AttrValue, OpDef, TensorShapeProto};
use opforge_core::{DataType, Result, Status, Tensor, TensorShape};
use std::ffi::c_void;
use std::sync::{Arc, Mutex, PoisonError};

/// The plugin's gradient callback type.
pub(crate) type GradCallback =
    unsafe extern "C" fn(*mut OpforgeGradCtx, *mut c_void, *mut OpforgeStatus) -> OpforgeCode;

/// Runs a plugin gradient callback (the registered `GradientFn`) for the
/// call `gctx`: the callback sees the forward op through the header's
/// gradient API, and the input gradients it sets go to `gctx`.
pub(crate) fn run_grad_fn(
    lib: &Arc<LibInner>,
    f: GradCallback,
    user: SendPtr,
    gctx: &mut GradientContext<'_>,
) -> Result<()> {
    let (op_name, attrs) = (gctx.op_name(), gctx.attrs());
    let (inputs, outputs) = (gctx.inputs(), gctx.outputs());
    let out_grads: Vec<Option<Sym>> = (0..outputs.len()).map(|i| gctx.output_grad(i)).collect();
    let op_def = gctx.registry().op_def(op_name)?;
    let mut syms: Vec<Sym> = Vec::new();
    syms.extend_from_slice(inputs);
    syms.extend_from_slice(outputs);
    let state = Mutex::new(State {
        syms,
        input_grads: vec![None; inputs.len()],
    });
    // SAFETY (of the lifetime erasure below): `ctx` lives on this frame
    // across the callback only; the references it holds outlive it.
    let ops_ptr: *mut (dyn Ops + '_) = &mut *gctx;
    let ctx = GradCtx {
        ops: ops_ptr,
        op_name,
        attrs,
        op_def: &op_def,
        n_in: inputs.len(),
        n_out: outputs.len(),
        out_grads: &out_grads,
        state,
        arena: Arena::default(),
        epoch: Epoch::next(),
    };
    let mut status = HostStatus::default();
    let lent = lend(&ctx, CtxKind::Grad);
    // SAFETY: the plugin's callback with its registered user pointer; `ctx`
    // (lent until the call returns) and `status` live across the call.
    let code = unsafe { f(lent.ptr(), user.get(), status.as_ptr()) };
    drop(lent);
    if code != OPFORGE_OK {
        return Err(callback_error(
            &lib.label(),
            &format!("the gradient function of op '{op_name}'"),
            code,
            &status,
        ));
    }
    let st = ctx
        .state
        .into_inner()
        .unwrap_or_else(PoisonError::into_inner);
    for (i, g) in st.input_grads.into_iter().enumerate() {
        if let Some(g) = g {
            gctx.set_input_grad(i, g)?;
        }
    }
    Ok(())
}

struct State {
    syms: Vec<Sym>,
    input_grads: Vec<Option<Sym>>,
}

/// What `OpforgeGradCtx*` points to. The `Ops` are reached through a raw
/// pointer (from `run_grad_fn`'s `&mut`, unused by it while the plugin
/// runs), one host function at a time ([`with_gctx`]).
struct GradCtx<'a> {
    ops: *mut (dyn Ops + 'a),
    op_name: &'a str,
    attrs: &'a AttrMap,
    op_def: &'a OpDef,
    n_in: usize,
    n_out: usize,
    out_grads: &'a [Option<Sym>],
    state: Mutex<State>,
    arena: Arena,
    /// The generation of this call's handles (R7).
    epoch: Epoch,
}

impl GradCtx<'_> {
    fn push(&self, s: Sym) -> Result<OpforgeSym> {
        let mut st = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        let h = self.epoch.handle(st.syms.len())?;
        st.syms.push(s);
        Ok(h)
    }

    fn sym(&self, h: OpforgeSym) -> Result<Sym> {
        let i = self.epoch.index(h, "value")?;
        let st = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        st.syms.get(i).copied().ok_or_else(|| {
            Status::invalid_argument(format!(
                "value handle {h:#x} is not a value of this gradient context (it holds {})",
                st.syms.len()
            ))
        })
    }
}

/// Runs `f` on the gradient context `p` and its `Ops`, if `p` is the
/// context lent to the gradient callback running on this thread
/// (`crate::ctx::claim`); else the refusal.
fn with_gctx<R>(
    p: *const OpforgeGradCtx,
    f: impl FnOnce(&GradCtx<'_>, &mut dyn Ops) -> Result<R>,
) -> Result<R> {
    let _claim = claim(p, CtxKind::Grad)?;
    // SAFETY: the claim found `p` to be the address of the GradCtx lent to
    // the gradient callback running on this thread (`run_grad_fn`); the
    // loan ends before that frame, which owns it, returns.
    let g = unsafe { &*p.cast::<GradCtx<'_>>() };
    // SAFETY: `ops` comes from `run_grad_fn`'s `&mut dyn Ops`, which
    // outlives the loan and which that frame does not use until the plugin
    // returns. The reference is exclusive: the claim holds the thread's
    // context until `f` returns, so no other host function (the only other
    // code that makes one) can claim it meanwhile, not even one a nested
    // callback (an op `call` runs) makes: that one lends its own context.
    let ops = unsafe { &mut *g.ops };
    f(g, ops)
}

host_fn! {
    fn op_name(p: *const OpforgeGradCtx) -> OpforgeStr [OpforgeStr::EMPTY],
    with_gctx, |g, _ops| { Ok(g.arena.str(g.op_name.as_bytes())) }
}

host_fn! {
    fn attr(p: *const OpforgeGradCtx, name: OpforgeStr, value: *mut OpforgeAttrValue) -> status,
    with_gctx, |g, _ops| {
        // SAFETY: the plugin's string and out-struct; the values are lent
        // from the context's arena, which lives until the callback returns.
        unsafe { read_attr(g.op_def, g.attrs, &g.arena, name, value) }
    }
}

host_fn! {
    fn num_inputs(p: *const OpforgeGradCtx) -> usize [0],
    with_gctx, |g, _ops| { Ok(g.n_in) }
}

host_fn! {
    fn num_outputs(p: *const OpforgeGradCtx) -> usize [0],
    with_gctx, |g, _ops| { Ok(g.n_out) }
}

host_fn! {
    fn input(p: *const OpforgeGradCtx, i: usize) -> OpforgeSym [OPFORGE_NO_HANDLE],
    with_gctx, |g, _ops| {
        if i >= g.n_in {
            return Ok(OPFORGE_NO_HANDLE);
        }
        g.epoch.handle(i)
    }
}

host_fn! {
    fn output(p: *const OpforgeGradCtx, i: usize) -> OpforgeSym [OPFORGE_NO_HANDLE],
    with_gctx, |g, _ops| {
        if i >= g.n_out {
            return Ok(OPFORGE_NO_HANDLE);
        }
        g.epoch.handle(g.n_in + i)
    }
}

host_fn! {
    fn arg_range(
        p: *const OpforgeGradCtx,
        name: OpforgeStr,
        is_output: u8,
        start: *mut usize,
        stop: *mut usize,
    ) -> status,
    with_gctx, |g, _ops| {
        // SAFETY: the plugin's string and out-pointers.
        unsafe { write_arg_range(g.op_def, g.attrs, name, is_output, start, stop) }
    }
}

host_fn! {
    fn output_grad(p: *const OpforgeGradCtx, i: usize, out: *mut OpforgeSym) -> u8 [0],
    with_gctx, |g, _ops| {
        let Some(s) = g.out_grads.get(i).copied().flatten() else {
            return Ok(0);
        };
        let h = g.push(s)?;
        // SAFETY: the plugin's out-pointer (NULL and misalignment are refused).
        unsafe { write_out(out, h, "grad")? };
        Ok(1)
    }
}

host_fn! {
    fn dtype(p: *const OpforgeGradCtx, s: OpforgeSym) -> OpforgeDType [OPFORGE_DT_INVALID],
    with_gctx, |g, ops| { Ok(ops.dtype(g.sym(s)?).base() as i32) }
}

host_fn! {
    fn shape(p: *const OpforgeGradCtx, s: OpforgeSym, dims: *mut i64, cap: usize) -> i32
        [OPFORGE_UNKNOWN_RANK],
    with_gctx, |g, ops| {
        let Some(d) = ops.shape(g.sym(s)?) else {
            return Ok(OPFORGE_UNKNOWN_RANK);
        };
        if !dims.is_null() {
            for (i, v) in d.iter().take(cap).enumerate() {
                // SAFETY: the plugin gave `cap` writable dims.
                unsafe { dims.add(i).write(*v) };
            }
        }
        Ok(i32::try_from(d.len()).unwrap_or(i32::MAX))
    }
}

/// A plugin attr value as a proto AttrValue.
///
/// # Safety
/// `v` is a plugin OpforgeAttrValue whose pointers are valid (R5, R7).
pub(crate) unsafe fn attr_from_c(v: &OpforgeAttrValue) -> Result<AttrValue> {
    let kind = v.kind & OPFORGE_ATTR_KIND_MASK;
    let shape_of = |s: &OpforgeShapeValue| -> Result<TensorShapeProto> {
        if s.rank < 0 {
            return Ok(TensorShapeProto {
                unknown_rank: true,
                ..Default::default()
            });
        }
        // SAFETY: `rank` dims (header); `rank` is not negative here.
        let dims = unsafe { plugin_dims(s.dims, s.rank as u64, "a shape attr value")? };
        Ok(TensorShapeProto {
            dim: dims
                .iter()
                .map(|&size| tensor_shape_proto::Dim {
                    size,
                    ..Default::default()
                })
                .collect(),
            unknown_rank: false,
        })
    };
    let value = if v.kind & OPFORGE_ATTR_LIST != 0 {
        let n = v.list_len;
        let mut l = ListValue::default();
        // SAFETY: `list` points at `list_len` elements of the element kind
        // (header, OPFORGE_ATTR_LIST; strings and shapes as R5/R7 say);
        // `slice`/`read_array` refuse NULL and misaligned pointers.
        unsafe {
            match kind {
                OPFORGE_ATTR_INT => l.i = slice(v.list.cast::<i64>(), n, "list")?.to_vec(),
                OPFORGE_ATTR_FLOAT => l.f = slice(v.list.cast::<f32>(), n, "list")?.to_vec(),
                OPFORGE_ATTR_BOOL => {
                    l.b = slice(v.list.cast::<u8>(), n, "list")?
                        .iter()
                        .map(|&b| b != 0)
                        .collect()
                }
                OPFORGE_ATTR_TYPE => l.r#type = slice(v.list.cast::<i32>(), n, "list")?.to_vec(),
                OPFORGE_ATTR_STRING => {
                    for s in slice(v.list.cast::<OpforgeStr>(), n, "list")? {
                        l.s.push(bytes(*s, "list element")?.to_vec());
                    }
                }
                OPFORGE_ATTR_SHAPE => {
                    for s in read_array(v.list.cast::<OpforgeShapeValue>(), n)? {
                        l.shape.push(shape_of(&s)?);
                    }
                }
                OPFORGE_ATTR_TENSOR => {
                    for t in read_array(v.list.cast::<OpforgeTensor>(), n)? {
                        l.tensor.push(tensor_from_c(&t)?.to_proto()?);
                    }
                }
                OPFORGE_ATTR_FUNC => {
                    for f in read_array(v.list.cast::<OpforgeFuncValue>(), n)? {
                        l.func.push(func_from_c(&f)?);
                    }
                }
                other => {
                    return Err(Status::unimplemented(format!(
                        "attr values of kind list({other}) are not accepted by this host yet"
                    )));
                }
            }
        }
        AV::List(Box::new(l))
    } else {
        match kind {
            OPFORGE_ATTR_INT => AV::I(v.i),
            OPFORGE_ATTR_FLOAT => AV::F(v.f),
            OPFORGE_ATTR_BOOL => AV::B(v.b != 0),
            OPFORGE_ATTR_TYPE => AV::Type(v.r#type),
            // SAFETY: plugin string (R5).
            OPFORGE_ATTR_STRING => AV::S(unsafe { bytes(v.s, "attr string")? }.to_vec()),
            OPFORGE_ATTR_SHAPE => {
                // SAFETY: the plugin's shape value (R7).
                let s = unsafe { read_struct(v.shape)? };
                AV::Shape(shape_of(&s)?)
            }
            OPFORGE_ATTR_TENSOR => {
                // SAFETY: the plugin's tensor view (R7).
                let t = unsafe { read_struct(v.tensor)? };
                // SAFETY: as above.
                AV::Tensor(Box::new(unsafe { tensor_from_c(&t) }?.to_proto()?))
            }
            OPFORGE_ATTR_FUNC => {
                // SAFETY: the plugin's func value (R7).
                let f = unsafe { read_struct(v.func)? };
                // SAFETY: as above.
                AV::Func(unsafe { func_from_c(&f) }?)
            }
            other => {
                return Err(Status::unimplemented(format!(
                    "attr values of kind {other} are not accepted here (placeholders are only \
                     for the nodes of declarative gradients)"
                )));
            }
        }
    };
    Ok(AttrValue { value: Some(value) })
}

/// A func attr (NameAttrList) copied from a plugin's OpforgeFuncValue.
///
/// # Safety
/// `f`'s pointers are the plugin's, valid for the call (R5, R7).
unsafe fn func_from_c(f: &OpforgeFuncValue) -> Result<opforge_core::proto::NameAttrList> {
    // SAFETY: the caller's contract; the helpers check NULL, alignment and
    // struct_size.
    unsafe {
        let mut out = opforge_core::proto::NameAttrList {
            name: text(f.name, "func name")?.to_string(),
            ..Default::default()
        };
        for a in read_array(f.attrs, f.num_attrs)? {
            let name = text(a.name, "func attr name")?.to_string();
            let value = attr_from_c(&read_struct(a.value)?)?;
            out.attr.insert(name, value);
        }
        Ok(out)
    }
}

/// A host tensor copied from a plugin-made view (row-major: NULL strides
/// or the row-major ones; DT_STRING data is `num_elements` OpforgeStr).
///
/// # Safety
/// `v`'s pointers are the plugin's, valid for the call (R5, R7).
pub(crate) unsafe fn tensor_from_c(v: &OpforgeTensor) -> Result<Tensor> {
    // SAFETY: the caller's contract; `slice` refuses NULL and misaligned
    // pointers, and the lengths are the header's.
    unsafe {
        let dtype = DataType::from_i32(v.dtype)
            .filter(|d| !d.is_ref())
            .ok_or_else(|| Status::invalid_argument(format!("dtype {} is unknown", v.dtype)))?;
        let dims = plugin_dims(v.dims, v.rank, "a tensor value")?;
        let shape = TensorShape::new(dims)?;
        if !v.strides.is_null() {
            let strides = slice(v.strides, v.rank as usize, "strides")?;
            if strides != row_major_strides(dims).as_slice() {
                return Err(Status::unimplemented(
                    "a tensor value: only row-major values are accepted (pass NULL strides)",
                ));
            }
        }
        let t = if dtype == DataType::String {
            let elems = slice(
                v.data.cast::<OpforgeStr>().cast_const(),
                shape.num_elements(),
                "elements",
            )?;
            let mut out = Vec::with_capacity(elems.len());
            for e in elems {
                out.push(bytes(*e, "string element")?.to_vec());
            }
            Tensor::from_strings(dims, out)?
        } else {
            let need = shape.num_elements() * dtype.size();
            if (v.byte_len as usize) < need {
                return Err(Status::invalid_argument(format!(
                    "a tensor value: {} bytes for a {dtype} value of shape {shape} ({need} bytes)",
                    v.byte_len
                )));
            }
            let data = slice(v.data.cast::<u8>().cast_const(), need, "data")?;
            Tensor::from_bytes(dtype, shape, data)?
        };
        Ok(t)
    }
}

host_fn! {
    #[allow(clippy::too_many_arguments)]
    fn call(
        p: *mut OpforgeGradCtx,
        op: OpforgeStr,
        args: *const OpforgeSymArg,
        num_args: usize,
        attrs: *const OpforgeNamedAttr,
        num_attrs: usize,
        outs: *mut OpforgeSym,
        cap: usize,
        num_outs: *mut usize,
    ) -> status,
    with_gctx, |g, ops| {
        // SAFETY: a plugin string (R5).
        let op = unsafe { text(op, "op")? };
        let mut inputs = Vec::new();
        // SAFETY: the plugin's array of `num_args` in-structs (R1).
        for a in unsafe { read_array(args, num_args)? } {
            // SAFETY: each argument's `num_syms` handles (header).
            let syms = unsafe { slice(a.syms, a.num_syms, "syms")? }
                .iter()
                .map(|&h| g.sym(h))
                .collect::<Result<Vec<_>>>()?;
            if a.is_list != 0 {
                inputs.push(SymArg::List(syms));
            } else if syms.len() == 1 {
                inputs.push(SymArg::One(syms[0]));
            } else {
                return Err(Status::invalid_argument(format!(
                    "call of '{op}': a single-value argument has {} values",
                    syms.len()
                )));
            }
        }
        let mut map = AttrMap::new();
        // SAFETY: the plugin's array of `num_attrs` in-structs (R1), each
        // with a name (R5) and an attr value whose pointers are valid.
        unsafe {
            for a in read_array(attrs, num_attrs)? {
                let name = text(a.name, "attr name")?;
                let v = read_struct(a.value)?;
                map.insert(name.to_string(), attr_from_c(&v)?);
            }
        }
        let result = ops.call(op, &inputs, &map)?;
        for (i, s) in result.iter().enumerate() {
            let h = g.push(*s)?;
            if i < cap {
                // SAFETY: the plugin gave `cap` writable handles at `outs`.
                unsafe { write_out(outs.add(i), h, "outs")? };
            }
        }
        if !num_outs.is_null() {
            // SAFETY: the plugin's out-pointer (not NULL).
            unsafe { write_out(num_outs, result.len(), "num_outs")? };
        }
        Ok(())
    }
}

host_fn! {
    fn constant(p: *mut OpforgeGradCtx, value: *const OpforgeTensor)
        -> status, out out: OpforgeSym,
    with_gctx, |g, ops| {
        // SAFETY: the plugin's tensor view, valid for the call (R1, R7).
        let t = unsafe { tensor_from_c(&read_struct(value)?)? };
        g.push(ops.constant(t)?)
    }
}

host_fn! {
    fn set_input_grad(p: *mut OpforgeGradCtx, i: usize, grad: OpforgeSym) -> status,
    with_gctx, |g, _ops| {
        let s = g.sym(grad)?;
        let mut st = g.state.lock().unwrap_or_else(PoisonError::into_inner);
        let n = st.input_grads.len();
        let slot = st.input_grads.get_mut(i).ok_or_else(|| {
            Status::invalid_argument(format!(
                "input index {i} is out of range (the op has {n} inputs)"
            ))
        })?;
        *slot = Some(s);
        Ok(())
    }
}

/// The gradient table every library shares.
pub(crate) static GRAD_API: OpforgeGradApi = {
    let mut t = OpforgeGradApi::new();
    t.op_name = Some(op_name);
    t.attr = Some(attr);
    t.num_inputs = Some(num_inputs);
    t.input = Some(input);
    t.num_outputs = Some(num_outputs);
    t.output = Some(output);
    t.arg_range = Some(arg_range);
    t.output_grad = Some(output_grad);
    t.dtype = Some(dtype);
    t.shape = Some(shape);
    t.call = Some(call);
    t.constant = Some(constant);
    t.set_input_grad = Some(set_input_grad);
    t
};
