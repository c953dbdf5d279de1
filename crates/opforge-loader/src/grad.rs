//! The gradient-callback bridge: a plugin's `OpforgeGradFn` as a core
//! gradient (`GradientFn::Fn`), and the header's gradient API
//! (`OpforgeGradApi`) over autodiff's `Ops` interface, so the gradient is
//! built from registered ops (the tape eagerly, `GraphOps` in graphs) and
//! higher-order gradients work when those ops are differentiable.
//!
//! Handles (`OpforgeSym`) are `index + 1` into the context's table of
//! values; a handle not in the table is INVALID_ARGUMENT.

use crate::host::*;
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
    };
    let mut status = HostStatus::default();
    // SAFETY: the plugin's callback with its registered user pointer; `ctx`
    // and `status` live across the call.
    let code = unsafe {
        f(
            (&ctx as *const GradCtx<'_>).cast_mut().cast(),
            user.get(),
            status.as_ptr(),
        )
    };
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

/// What `OpforgeGradCtx*` points to.
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
}

impl GradCtx<'_> {
    #[allow(clippy::mut_from_ref)]
    fn ops(&self) -> &mut (dyn Ops + '_) {
        // SAFETY: `ops` is the `&mut dyn Ops` run_grad_fn was given,
        // borrowed for the whole callback; the plugin calls the context
        // from the callback's thread only, one function at a time (R9).
        unsafe { &mut *self.ops }
    }

    fn push(&self, s: Sym) -> OpforgeSym {
        let mut st = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        st.syms.push(s);
        st.syms.len() as u64
    }

    fn sym(&self, h: OpforgeSym) -> Result<Sym> {
        let st = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        h.checked_sub(1)
            .and_then(|i| usize::try_from(i).ok())
            .and_then(|i| st.syms.get(i).copied())
            .ok_or_else(|| {
                Status::invalid_argument(format!(
                    "value handle {h} is not a value of this gradient context"
                ))
            })
    }
}

/// # Safety
/// `p` is the ctx the host passed to the gradient callback (R7).
unsafe fn gctx<'a>(p: *const OpforgeGradCtx) -> Result<&'a GradCtx<'a>> {
    if p.is_null() {
        return Err(Status::invalid_argument(
            "a NULL OpforgeGradCtx (gradient contexts exist only during a gradient callback)",
        ));
    }
    // SAFETY: a non-null ctx is the GradCtx the host made for this call.
    Ok(unsafe { &*p.cast::<GradCtx<'a>>() })
}

unsafe extern "C" fn op_name(p: *const OpforgeGradCtx) -> OpforgeStr {
    guard(OpforgeStr::EMPTY, || {
        // SAFETY: the plugin passes the context pointer the host gave this
        // callback (R7); NULL is rejected.
        match unsafe { gctx(p) } {
            Ok(g) => g.arena.str(g.op_name.as_bytes()),
            Err(_) => OpforgeStr::EMPTY,
        }
    })
}

unsafe extern "C" fn attr(
    p: *const OpforgeGradCtx,
    name: OpforgeStr,
    value: *mut OpforgeAttrValue,
    status: *mut OpforgeStatus,
) -> OpforgeCode {
    // SAFETY: plugin pointers (R7); the arena lives until the callback returns.
    unsafe {
        guard_status(status, || {
            let g = gctx(p)?;
            read_attr(g.op_def, g.attrs, &g.arena, name, value)
        })
    }
}

unsafe extern "C" fn num_inputs(p: *const OpforgeGradCtx) -> usize {
    // SAFETY: the plugin passes the context pointer the host gave this
    // callback (R7); NULL is rejected.
    guard(0, || unsafe { gctx(p) }.map_or(0, |g| g.n_in))
}

unsafe extern "C" fn num_outputs(p: *const OpforgeGradCtx) -> usize {
    // SAFETY: as num_inputs: the context pointer of this callback, NULL rejected.
    guard(0, || unsafe { gctx(p) }.map_or(0, |g| g.n_out))
}

unsafe extern "C" fn input(p: *const OpforgeGradCtx, i: usize) -> OpforgeSym {
    guard(OPFORGE_NO_HANDLE, || {
        // SAFETY: the context pointer of this callback, NULL rejected.
        match unsafe { gctx(p) } {
            Ok(g) if i < g.n_in => i as u64 + 1,
            _ => OPFORGE_NO_HANDLE,
        }
    })
}

unsafe extern "C" fn output(p: *const OpforgeGradCtx, i: usize) -> OpforgeSym {
    guard(OPFORGE_NO_HANDLE, || {
        // SAFETY: the context pointer of this callback, NULL rejected.
        match unsafe { gctx(p) } {
            Ok(g) if i < g.n_out => (g.n_in + i) as u64 + 1,
            _ => OPFORGE_NO_HANDLE,
        }
    })
}

unsafe extern "C" fn arg_range(
    p: *const OpforgeGradCtx,
    name: OpforgeStr,
    is_output: u8,
    start: *mut usize,
    stop: *mut usize,
    status: *mut OpforgeStatus,
) -> OpforgeCode {
    // SAFETY: plugin pointers (R7).
    unsafe {
        guard_status(status, || {
            let g = gctx(p)?;
            let name = text(name, "argument name")?;
            let (a, b) = crate::kernel::arg_range_pub(g.op_def, g.attrs, name, is_output != 0)?;
            write_out(start, a, "start")?;
            write_out(stop, b, "stop")
        })
    }
}

unsafe extern "C" fn output_grad(p: *const OpforgeGradCtx, i: usize, out: *mut OpforgeSym) -> u8 {
    guard(0, || {
        // SAFETY: the context pointer of this callback, NULL rejected.
        let Ok(g) = (unsafe { gctx(p) }) else {
            return 0;
        };
        match g.out_grads.get(i).copied().flatten() {
            Some(s) => {
                let h = g.push(s);
                // SAFETY: the plugin's out-pointer (NULL and misalignment are refused).
                u8::from(unsafe { write_out(out, h, "grad") }.is_ok())
            }
            None => 0,
        }
    })
}

unsafe extern "C" fn dtype(p: *const OpforgeGradCtx, s: OpforgeSym) -> OpforgeDType {
    guard(OPFORGE_DT_INVALID, || {
        // SAFETY: the context pointer of this callback, NULL rejected.
        let Ok(g) = (unsafe { gctx(p) }) else {
            return OPFORGE_DT_INVALID;
        };
        g.sym(s)
            .map_or(OPFORGE_DT_INVALID, |s| g.ops().dtype(s).base() as i32)
    })
}

unsafe extern "C" fn shape(
    p: *const OpforgeGradCtx,
    s: OpforgeSym,
    dims: *mut i64,
    cap: usize,
) -> i32 {
    guard(OPFORGE_UNKNOWN_RANK, || {
        // SAFETY: the context pointer of this callback, NULL rejected.
        let Ok(g) = (unsafe { gctx(p) }) else {
            return OPFORGE_UNKNOWN_RANK;
        };
        let Ok(s) = g.sym(s) else {
            return OPFORGE_UNKNOWN_RANK;
        };
        match g.ops().shape(s) {
            None => OPFORGE_UNKNOWN_RANK,
            Some(d) => {
                if !dims.is_null() {
                    for (i, v) in d.iter().take(cap).enumerate() {
                        // SAFETY: the plugin gave `cap` writable dims.
                        unsafe { dims.add(i).write(*v) };
                    }
                }
                i32::try_from(d.len()).unwrap_or(i32::MAX)
            }
        }
    })
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
        // SAFETY: `rank` dims (header).
        let dims = unsafe { slice(s.dims, s.rank as usize, "shape dims")? };
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
        let dims = slice(v.dims, v.rank as usize, "dims")?;
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

#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn call(
    p: *mut OpforgeGradCtx,
    op: OpforgeStr,
    args: *const OpforgeSymArg,
    num_args: usize,
    attrs: *const OpforgeNamedAttr,
    num_attrs: usize,
    outs: *mut OpforgeSym,
    cap: usize,
    num_outs: *mut usize,
    status: *mut OpforgeStatus,
) -> OpforgeCode {
    // SAFETY: plugin pointers (R7).
    unsafe {
        guard_status(status, || {
            let g = gctx(p)?;
            let op = text(op, "op")?;
            let mut inputs = Vec::new();
            for a in read_array(args, num_args)? {
                let syms = slice(a.syms, a.num_syms, "syms")?
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
            for a in read_array(attrs, num_attrs)? {
                let name = text(a.name, "attr name")?;
                let v = read_struct(a.value)?;
                map.insert(name.to_string(), attr_from_c(&v)?);
            }
            let result = g.ops().call(op, &inputs, &map)?;
            for (i, s) in result.iter().enumerate() {
                let h = g.push(*s);
                if i < cap {
                    write_out(outs.add(i), h, "outs")?;
                }
            }
            if !num_outs.is_null() {
                write_out(num_outs, result.len(), "num_outs")?;
            }
            Ok(())
        })
    }
}

unsafe extern "C" fn constant(
    p: *mut OpforgeGradCtx,
    value: *const OpforgeTensor,
    out: *mut OpforgeSym,
    status: *mut OpforgeStatus,
) -> OpforgeCode {
    // SAFETY: plugin pointers (R7).
    unsafe {
        guard_status(status, || {
            let g = gctx(p)?;
            let t = tensor_from_c(&read_struct(value)?)?;
            let s = g.ops().constant(t)?;
            write_out(out, g.push(s), "out")
        })
    }
}

unsafe extern "C" fn set_input_grad(
    p: *mut OpforgeGradCtx,
    i: usize,
    grad: OpforgeSym,
    status: *mut OpforgeStatus,
) -> OpforgeCode {
    // SAFETY: plugin pointers (R7).
    unsafe {
        guard_status(status, || {
            let g = gctx(p)?;
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
        })
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
