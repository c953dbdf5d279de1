//! The mock host's gradient table: a recording graph builder.

use opforge_abi::*;

use super::*;

/// One recorded `call`: the op, its arguments' syms, its int attrs.
pub type GradCall = (String, Vec<Vec<OpforgeSym>>, Vec<(String, i64)>);

/// A gradient call's context: the forward op's values are syms 1..; each
/// `call` records the op and makes one new sym.
pub struct MockGradCtx {
    pub op: String,
    pub attrs: Vec<(String, MockAttr)>,
    pub inputs: Vec<OpforgeSym>,
    pub outputs: Vec<OpforgeSym>,
    pub output_grads: Vec<Option<OpforgeSym>>,
    /// (name, is_output, start, stop)
    pub ranges: Vec<ArgRange>,
    /// (op, args, int attrs) per call.
    pub calls: Vec<GradCall>,
    pub next: OpforgeSym,
    pub input_grads: Vec<Option<OpforgeSym>>,
}

impl MockGradCtx {
    pub fn new(op: &str, num_inputs: usize, num_outputs: usize) -> MockGradCtx {
        let inputs: Vec<u64> = (1..=num_inputs as u64).collect();
        let outputs: Vec<u64> = (0..num_outputs as u64).map(|i| 100 + i).collect();
        MockGradCtx {
            op: op.to_string(),
            attrs: Vec::new(),
            output_grads: outputs.iter().map(|o| Some(o + 100)).collect(),
            inputs,
            outputs,
            ranges: Vec::new(),
            calls: Vec::new(),
            next: 1000,
            input_grads: vec![None; num_inputs],
        }
    }
}

pub(crate) fn gctx<'a>(c: *const OpforgeGradCtx) -> &'a mut MockGradCtx {
    // SAFETY: the ctx this host passes to gradient functions.
    unsafe { &mut *(c as *mut MockGradCtx) }
}

pub(crate) unsafe extern "C" fn g_op_name(c: *const OpforgeGradCtx) -> OpforgeStr {
    OpforgeStr::from_text(&gctx(c).op)
}
pub(crate) unsafe extern "C" fn g_attr(
    c: *const OpforgeGradCtx,
    name: OpforgeStr,
    value: *mut OpforgeAttrValue,
    status: *mut OpforgeStatus,
) -> OpforgeCode {
    fill_attr(&gctx(c).attrs, name, value, status)
}
pub(crate) unsafe extern "C" fn g_num_inputs(c: *const OpforgeGradCtx) -> usize {
    gctx(c).inputs.len()
}
pub(crate) unsafe extern "C" fn g_input(c: *const OpforgeGradCtx, i: usize) -> OpforgeSym {
    gctx(c).inputs.get(i).copied().unwrap_or(OPFORGE_NO_HANDLE)
}
pub(crate) unsafe extern "C" fn g_num_outputs(c: *const OpforgeGradCtx) -> usize {
    gctx(c).outputs.len()
}
pub(crate) unsafe extern "C" fn g_output(c: *const OpforgeGradCtx, i: usize) -> OpforgeSym {
    gctx(c).outputs.get(i).copied().unwrap_or(OPFORGE_NO_HANDLE)
}
pub(crate) unsafe extern "C" fn g_arg_range(
    c: *const OpforgeGradCtx,
    name: OpforgeStr,
    is_output: u8,
    start: *mut usize,
    stop: *mut usize,
    status: *mut OpforgeStatus,
) -> OpforgeCode {
    arg_range(&gctx(c).ranges, name, is_output, start, stop, status)
}
pub(crate) unsafe extern "C" fn g_output_grad(
    c: *const OpforgeGradCtx,
    i: usize,
    grad: *mut OpforgeSym,
) -> u8 {
    match gctx(c).output_grads.get(i) {
        Some(Some(g)) => {
            // SAFETY: the plugin's out-pointer.
            unsafe { *grad = *g };
            1
        }
        _ => 0,
    }
}
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe extern "C" fn g_call(
    c: *mut OpforgeGradCtx,
    op: OpforgeStr,
    args: *const OpforgeSymArg,
    num_args: usize,
    attrs: *const OpforgeNamedAttr,
    num_attrs: usize,
    outs: *mut OpforgeSym,
    cap: usize,
    num_outs: *mut usize,
    _status: *mut OpforgeStatus,
) -> OpforgeCode {
    let ctx = gctx(c);
    let mut arg_syms = Vec::new();
    for i in 0..num_args {
        // SAFETY: the plugin's arrays, valid for the call.
        let a = unsafe { &*args.add(i) };
        // SAFETY: the argument's `num_syms` handles, valid for the call (R5).
        arg_syms.push(unsafe { std::slice::from_raw_parts(a.syms, a.num_syms) }.to_vec());
    }
    let mut int_attrs = Vec::new();
    for i in 0..num_attrs {
        // SAFETY: as above.
        let a = unsafe { &*attrs.add(i) };
        // SAFETY: the attr's value, valid for the call (R7).
        let v = unsafe { &*a.value };
        assert_eq!(v.kind, OPFORGE_ATTR_INT);
        int_attrs.push((text(a.name), v.i));
    }
    ctx.calls.push((text(op), arg_syms, int_attrs));
    ctx.next += 1;
    if cap > 0 {
        // SAFETY: room for `cap` outputs.
        unsafe { *outs = ctx.next };
    }
    if !num_outs.is_null() {
        // SAFETY: the plugin's out-pointer.
        unsafe { *num_outs = 1 };
    }
    OPFORGE_OK
}
pub(crate) unsafe extern "C" fn g_set_input_grad(
    c: *mut OpforgeGradCtx,
    i: usize,
    grad: OpforgeSym,
    status: *mut OpforgeStatus,
) -> OpforgeCode {
    match gctx(c).input_grads.get_mut(i) {
        Some(g) => {
            *g = Some(grad);
            OPFORGE_OK
        }
        None => fail(status, OPFORGE_INVALID_ARGUMENT, &format!("no input {i}")),
    }
}

/// Runs the gradient function registered for `op`.
pub fn gradient(r: &MockRegistrar, c: &mut MockGradCtx) -> Result<(), MockStatus> {
    let g = r
        .grad_fns
        .iter()
        .find(|g| g.0 == c.op)
        .expect("a gradient function");
    let mut s = MockStatus::default();
    // SAFETY: the plugin's gradient function with this host's objects.
    let code = unsafe { (g.1.unwrap())((c as *mut MockGradCtx).cast(), g.2, s.ptr()) };
    if code == OPFORGE_OK {
        Ok(())
    } else {
        s.code = code;
        Err(s)
    }
}
