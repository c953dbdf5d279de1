//! The mock host's registration table: records what a plugin's init
//! registers, and runs init.

use std::ffi::c_void;

use opforge_abi::*;

use super::*;

#[derive(Debug)]
pub struct OpRec {
    pub name: String,
    pub attrs: Vec<String>,
    pub inputs: Vec<String>,
    pub outputs: Vec<String>,
    pub doc: String,
    pub shape_fn: OpforgeShapeFn,
    pub shape_fn_user: *mut c_void,
}

#[derive(Debug)]
pub struct KernelRec {
    pub op: String,
    pub device: String,
    pub constraints: Vec<(String, Vec<OpforgeDType>)>,
    pub flags: u32,
    pub create: OpforgeKernelCreateFn,
    pub compute: OpforgeKernelComputeFn,
    pub destroy: OpforgeKernelDestroyFn,
    pub user: *mut c_void,
    /// 1.1: the views entry and the output declarations (output, input,
    /// flags).
    pub compute_views: OpforgeKernelComputeViewsFn,
    pub output_like: Vec<(usize, usize, u32)>,
}

// SAFETY: a kernel record holds the plugin's function pointers and its
// `user` pointer (an immutable `'static` kernel definition), which R9 lets
// any thread use.
unsafe impl Sync for KernelRec {}

#[derive(Default, Debug)]
pub struct MockRegistrar {
    pub ops: Vec<OpRec>,
    pub kernels: Vec<KernelRec>,
    pub gradients: Vec<(String, &'static str)>,
    /// (op, decoded nodes) of declarative gradients.
    pub grad_nodes: Vec<(String, Vec<String>)>,
    /// (op, fn, user) of gradient functions.
    pub grad_fns: Vec<(String, OpforgeGradFn, *mut c_void)>,
}

impl MockRegistrar {
    pub fn ptr(&mut self) -> *mut OpforgeRegistrar {
        (self as *mut MockRegistrar).cast()
    }
    pub fn op(&self, name: &str) -> &OpRec {
        self.ops.iter().find(|o| o.name == name).unwrap()
    }
    pub fn kernel(&self, op: &str) -> &KernelRec {
        self.kernels.iter().find(|k| k.op == op).unwrap()
    }
}

pub(crate) fn reg<'a>(r: *mut OpforgeRegistrar) -> &'a mut MockRegistrar {
    // SAFETY: the registrar this host passes to init is a MockRegistrar.
    unsafe { &mut *r.cast::<MockRegistrar>() }
}

pub(crate) fn strs(p: *const OpforgeStr, n: usize) -> Vec<String> {
    if n == 0 {
        return Vec::new();
    }
    // SAFETY: `n` strings from the plugin, valid for the call.
    unsafe { std::slice::from_raw_parts(p, n) }
        .iter()
        .map(|s| text(*s))
        .collect()
}

pub(crate) unsafe extern "C" fn reg_op(
    r: *mut OpforgeRegistrar,
    def: *const OpforgeOpDef,
    _status: *mut OpforgeStatus,
) -> OpforgeCode {
    // SAFETY: the plugin's def, prefix-read (R1).
    let d = unsafe { OpforgeOpDef::read_from(def) }.unwrap();
    reg(r).ops.push(OpRec {
        name: text(d.name),
        attrs: strs(d.attrs, d.num_attrs),
        inputs: strs(d.inputs, d.num_inputs),
        outputs: strs(d.outputs, d.num_outputs),
        doc: text(d.doc),
        shape_fn: d.shape_fn,
        shape_fn_user: d.shape_fn_user,
    });
    OPFORGE_OK
}

pub(crate) unsafe extern "C" fn reg_kernel(
    r: *mut OpforgeRegistrar,
    def: *const OpforgeKernelDef,
    status: *mut OpforgeStatus,
) -> OpforgeCode {
    // SAFETY: the plugin's def, prefix-read (R1).
    let d = unsafe { OpforgeKernelDef::read_from(def) }.unwrap();
    let op = text(d.op);
    if !reg(r).ops.iter().any(|o| o.name == op) {
        return fail(
            status,
            OPFORGE_NOT_FOUND,
            &format!("Op type not registered '{op}'"),
        );
    }
    let mut constraints = Vec::new();
    for i in 0..d.num_constraints {
        // SAFETY: the plugin's array, stepped by struct_size (R1).
        let c = unsafe { &*OpforgeTypeConstraintAt(d.constraints, i) };
        // SAFETY: `num_types` dtypes.
        let types = unsafe { std::slice::from_raw_parts(c.types, c.num_types) }.to_vec();
        constraints.push((text(c.attr), types));
    }
    let mut output_like = Vec::new();
    for i in 0..d.num_output_like {
        // SAFETY: the plugin's array, stepped by the first element's
        // struct_size (R1).
        let l = unsafe {
            let stride = (*d.output_like).struct_size;
            OpforgeOutputLike::read_from(d.output_like.cast::<u8>().add(i * stride).cast())
        }
        .unwrap();
        output_like.push((l.output, l.input, l.flags));
    }
    reg(r).kernels.push(KernelRec {
        op,
        device: text(d.device_type),
        constraints,
        flags: d.flags,
        create: d.create,
        compute: d.compute,
        destroy: d.destroy,
        user: d.user,
        compute_views: d.compute_views,
        output_like,
    });
    OPFORGE_OK
}

#[allow(non_snake_case)]
pub(crate) fn OpforgeTypeConstraintAt(
    base: *const OpforgeTypeConstraint,
    i: usize,
) -> *const OpforgeTypeConstraint {
    // SAFETY: the array's first element carries the stride (R1).
    let stride = unsafe { (*base).struct_size };
    base.cast::<u8>().wrapping_add(i * stride).cast()
}

pub(crate) unsafe extern "C" fn reg_gradient_fn(
    r: *mut OpforgeRegistrar,
    op: OpforgeStr,
    f: OpforgeGradFn,
    user: *mut c_void,
    _status: *mut OpforgeStatus,
) -> OpforgeCode {
    assert!(f.is_some());
    reg(r).gradients.push((text(op), "fn"));
    reg(r).grad_fns.push((text(op), f, user));
    OPFORGE_OK
}

pub(crate) fn source_text(s: &OpforgeGradSource) -> String {
    let kind = match s.kind {
        OPFORGE_GRAD_SRC_NONE => return "none".to_string(),
        OPFORGE_GRAD_SRC_INPUT => "input".to_string(),
        OPFORGE_GRAD_SRC_OUTPUT => "output".to_string(),
        OPFORGE_GRAD_SRC_OUTPUT_GRAD => "output_grad".to_string(),
        OPFORGE_GRAD_SRC_NODE => format!("node{}", s.node),
        k => format!("kind{k}"),
    };
    format!("{kind}:{}:{}", text(s.arg), s.index)
}

pub(crate) fn grad_arg_text(a: &OpforgeGradArg) -> String {
    let sources: Vec<String> = (0..a.num_sources)
        // SAFETY: `num_sources` sources of one struct_size (R1).
        .map(|i| source_text(unsafe { &*a.sources.add(i) }))
        .collect();
    if a.is_list != 0 {
        format!("[{}]", sources.join(", "))
    } else {
        sources.join(", ")
    }
}

pub(crate) unsafe extern "C" fn reg_gradient_function(
    r: *mut OpforgeRegistrar,
    def: *const OpforgeGradientFunction,
    _status: *mut OpforgeStatus,
) -> OpforgeCode {
    // SAFETY: the plugin's def, prefix-read (R1); its arrays live for the call.
    let d = unsafe { OpforgeGradientFunction::read_from(def) }.unwrap();
    let mut lines = Vec::new();
    for i in 0..d.num_nodes {
        // SAFETY: as above.
        let n = unsafe { &*d.nodes.add(i) };
        let args: Vec<String> = (0..n.num_inputs)
            // SAFETY: as above.
            .map(|j| grad_arg_text(unsafe { &*n.inputs.add(j) }))
            .collect();
        let attrs: Vec<String> = (0..n.num_attrs)
            .map(|j| {
                // SAFETY: as above.
                let a = unsafe { &*n.attrs.add(j) };
                // SAFETY: as above.
                let v = unsafe { &*a.value };
                match v.kind {
                    OPFORGE_ATTR_PLACEHOLDER => format!("{}=${}", text(a.name), text(v.s)),
                    OPFORGE_ATTR_INT => format!("{}={}", text(a.name), v.i),
                    k => format!("{}=kind{k}", text(a.name)),
                }
            })
            .collect();
        lines.push(format!(
            "{}({}) {{{}}}",
            text(n.op),
            args.join("; "),
            attrs.join(", ")
        ));
    }
    for i in 0..d.num_input_grads {
        lines.push(format!(
            "grad {i} = {}",
            // SAFETY: element `i` of the plugin's input_grads, valid for the call.
            grad_arg_text(unsafe { &*d.input_grads.add(i) })
        ));
    }
    reg(r).gradients.push((text(d.op), "nodes"));
    reg(r).grad_nodes.push((text(d.op), lines));
    OPFORGE_OK
}

pub(crate) unsafe extern "C" fn reg_not_differentiable(
    r: *mut OpforgeRegistrar,
    op: OpforgeStr,
    _status: *mut OpforgeStatus,
) -> OpforgeCode {
    reg(r).gradients.push((text(op), "not_differentiable"));
    OPFORGE_OK
}

pub type InitFn = unsafe extern "C" fn(
    *const OpforgeHostApi,
    *mut OpforgeRegistrar,
    *mut OpforgeStatus,
) -> OpforgeCode;

/// Runs a plugin's init against `host`; returns the registrations.
pub fn init(f: InitFn, host: &'static OpforgeHostApi) -> Result<MockRegistrar, MockStatus> {
    let mut r = MockRegistrar::default();
    let mut s = MockStatus::default();
    // SAFETY: a plugin init with this host's objects.
    let code = unsafe { f(host, r.ptr(), s.ptr()) };
    if code == OPFORGE_OK {
        Ok(r)
    } else {
        s.code = code;
        Err(s)
    }
}
