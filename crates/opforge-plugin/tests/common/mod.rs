//! A mock host: a minimal `OpforgeHostApi` implemented in Rust that
//! records registrations and runs kernels over plain `Vec` buffers, so the
//! SDK's callbacks can be driven without opforge's loader.
#![allow(dead_code)]

use std::cell::RefCell;
use std::ffi::c_void;
use std::mem::size_of;

use opforge_abi::*;

// ---------------------------------------------------------------------------
// Statuses
// ---------------------------------------------------------------------------

/// What an `OpforgeStatus*` points at in this host.
#[derive(Default, Debug)]
pub struct MockStatus {
    pub code: OpforgeCode,
    pub message: String,
    pub flags: u32,
}

impl MockStatus {
    pub fn ptr(&mut self) -> *mut OpforgeStatus {
        (self as *mut MockStatus).cast()
    }
}

fn st<'a>(s: *mut OpforgeStatus) -> &'a mut MockStatus {
    // SAFETY: every status this host hands out is a live MockStatus.
    unsafe { &mut *s.cast::<MockStatus>() }
}

fn text(s: OpforgeStr) -> String {
    // SAFETY: strings the plugin passes are valid for the call (R5).
    String::from_utf8(unsafe { s.as_bytes() }.to_vec()).unwrap()
}

fn fail(status: *mut OpforgeStatus, code: OpforgeCode, message: &str) -> OpforgeCode {
    let s = st(status);
    s.code = code;
    s.message = message.to_string();
    code
}

unsafe extern "C" fn set_status(status: *mut OpforgeStatus, code: OpforgeCode, m: OpforgeStr) {
    let s = st(status);
    s.code = code;
    s.message = text(m);
}
unsafe extern "C" fn status_code(status: *const OpforgeStatus) -> OpforgeCode {
    st(status as *mut _).code
}
unsafe extern "C" fn status_message(status: *const OpforgeStatus) -> OpforgeStr {
    let s = st(status as *mut _);
    OpforgeStr::from_text(&s.message)
}
unsafe extern "C" fn set_status_flags(status: *mut OpforgeStatus, flags: u32) {
    st(status).flags |= flags;
}
unsafe extern "C" fn status_flags(status: *const OpforgeStatus) -> u32 {
    st(status as *mut _).flags
}

thread_local! {
    pub static LOG: RefCell<Vec<String>> = const { RefCell::new(Vec::new()) };
    /// Calls of the kernel table's view-making slots (input, output,
    /// allocate_output, forward_input_or_allocate_output) on this thread.
    pub static VIEW_CALLS: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

fn count_view_call() {
    VIEW_CALLS.with(|c| c.set(c.get() + 1));
}

/// The view-making host calls made on this thread so far.
pub fn view_calls() -> u64 {
    VIEW_CALLS.with(|c| c.get())
}

unsafe extern "C" fn log(_: *const OpforgeHostApi, _level: u32, m: OpforgeStr) {
    LOG.with(|l| l.borrow_mut().push(text(m)));
}

// ---------------------------------------------------------------------------
// Registration
// ---------------------------------------------------------------------------

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

fn reg<'a>(r: *mut OpforgeRegistrar) -> &'a mut MockRegistrar {
    // SAFETY: the registrar this host passes to init is a MockRegistrar.
    unsafe { &mut *r.cast::<MockRegistrar>() }
}

fn strs(p: *const OpforgeStr, n: usize) -> Vec<String> {
    if n == 0 {
        return Vec::new();
    }
    // SAFETY: `n` strings from the plugin, valid for the call.
    unsafe { std::slice::from_raw_parts(p, n) }
        .iter()
        .map(|s| text(*s))
        .collect()
}

unsafe extern "C" fn reg_op(
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

unsafe extern "C" fn reg_kernel(
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
fn OpforgeTypeConstraintAt(
    base: *const OpforgeTypeConstraint,
    i: usize,
) -> *const OpforgeTypeConstraint {
    // SAFETY: the array's first element carries the stride (R1).
    let stride = unsafe { (*base).struct_size };
    base.cast::<u8>().wrapping_add(i * stride).cast()
}

unsafe extern "C" fn reg_gradient_fn(
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

fn source_text(s: &OpforgeGradSource) -> String {
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

fn grad_arg_text(a: &OpforgeGradArg) -> String {
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

unsafe extern "C" fn reg_gradient_function(
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
        // SAFETY: as above.
        lines.push(format!(
            "grad {i} = {}",
            grad_arg_text(unsafe { &*d.input_grads.add(i) })
        ));
    }
    reg(r).gradients.push((text(d.op), "nodes"));
    reg(r).grad_nodes.push((text(d.op), lines));
    OPFORGE_OK
}

unsafe extern "C" fn reg_not_differentiable(
    r: *mut OpforgeRegistrar,
    op: OpforgeStr,
    _status: *mut OpforgeStatus,
) -> OpforgeCode {
    reg(r).gradients.push((text(op), "not_differentiable"));
    OPFORGE_OK
}

// ---------------------------------------------------------------------------
// Kernels: construction
// ---------------------------------------------------------------------------

/// An attr value of this host (only what the tests use).
#[derive(Clone, Debug)]
pub enum MockAttr {
    Int(i64),
    Bool(bool),
    Type(OpforgeDType),
}

pub struct MockInit {
    pub op: String,
    pub attrs: Vec<(String, MockAttr)>,
    pub inputs: Vec<OpforgeDType>,
    pub outputs: Vec<OpforgeDType>,
}

fn init_of<'a>(i: *const OpforgeKernelInit) -> &'a MockInit {
    // SAFETY: the init this host passes to create is a MockInit.
    unsafe { &*i.cast::<MockInit>() }
}

unsafe extern "C" fn init_op_name(i: *const OpforgeKernelInit) -> OpforgeStr {
    OpforgeStr::from_text(&init_of(i).op)
}
unsafe extern "C" fn init_num_inputs(i: *const OpforgeKernelInit) -> usize {
    init_of(i).inputs.len()
}
unsafe extern "C" fn init_input_dtype(i: *const OpforgeKernelInit, n: usize) -> OpforgeDType {
    init_of(i)
        .inputs
        .get(n)
        .copied()
        .unwrap_or(OPFORGE_DT_INVALID)
}
unsafe extern "C" fn init_num_outputs(i: *const OpforgeKernelInit) -> usize {
    init_of(i).outputs.len()
}

fn fill_attr(
    attrs: &[(String, MockAttr)],
    name: OpforgeStr,
    value: *mut OpforgeAttrValue,
    status: *mut OpforgeStatus,
) -> OpforgeCode {
    let name = text(name);
    let Some((_, a)) = attrs.iter().find(|(n, _)| *n == name) else {
        return fail(
            status,
            OPFORGE_NOT_FOUND,
            &format!("No attr named '{name}' in NodeDef"),
        );
    };
    let mut v = OpforgeAttrValue::new();
    match a {
        MockAttr::Int(i) => {
            v.kind = OPFORGE_ATTR_INT;
            v.i = *i;
        }
        MockAttr::Bool(b) => {
            v.kind = OPFORGE_ATTR_BOOL;
            v.b = u8::from(*b);
        }
        MockAttr::Type(t) => {
            v.kind = OPFORGE_ATTR_TYPE;
            v.r#type = *t;
        }
    }
    // SAFETY: the plugin's out-struct, with its struct_size set (R1).
    unsafe { v.write_to(value) }.unwrap();
    OPFORGE_OK
}

unsafe extern "C" fn init_attr(
    i: *const OpforgeKernelInit,
    name: OpforgeStr,
    value: *mut OpforgeAttrValue,
    status: *mut OpforgeStatus,
) -> OpforgeCode {
    fill_attr(&init_of(i).attrs, name, value, status)
}

// ---------------------------------------------------------------------------
// Kernels: compute
// ---------------------------------------------------------------------------

/// A dense host tensor over 8-aligned storage.
#[derive(Clone, Debug)]
pub struct MockTensor {
    pub dtype: OpforgeDType,
    pub dims: Vec<i64>,
    pub storage: Vec<u64>,
    pub num_elements: i64,
    pub elem_size: usize,
}

pub fn elem_size(dtype: OpforgeDType) -> usize {
    match dtype {
        OPFORGE_DT_FLOAT | OPFORGE_DT_INT32 | OPFORGE_DT_UINT32 => 4,
        OPFORGE_DT_DOUBLE | OPFORGE_DT_INT64 | OPFORGE_DT_UINT64 => 8,
        OPFORGE_DT_INT16 | OPFORGE_DT_UINT16 | OPFORGE_DT_HALF | OPFORGE_DT_BFLOAT16 => 2,
        _ => 1,
    }
}

impl MockTensor {
    pub fn zeros(dtype: OpforgeDType, dims: &[i64]) -> MockTensor {
        let n: i64 = dims.iter().product();
        let size = elem_size(dtype);
        let bytes = n as usize * size;
        MockTensor {
            dtype,
            dims: dims.to_vec(),
            storage: vec![0; bytes.div_ceil(8)],
            num_elements: n,
            elem_size: size,
        }
    }
    pub fn from<T: Copy>(dtype: OpforgeDType, dims: &[i64], values: &[T]) -> MockTensor {
        let mut t = MockTensor::zeros(dtype, dims);
        assert_eq!(size_of::<T>(), t.elem_size);
        assert_eq!(values.len() as i64, t.num_elements);
        // SAFETY: storage holds at least num_elements * size bytes, aligned 8.
        unsafe {
            std::ptr::copy_nonoverlapping(
                values.as_ptr().cast::<u8>(),
                t.storage.as_mut_ptr().cast::<u8>(),
                std::mem::size_of_val(values),
            )
        };
        t
    }
    pub fn values<T: Copy>(&self) -> Vec<T> {
        assert_eq!(size_of::<T>(), self.elem_size);
        // SAFETY: as in `from`.
        unsafe {
            std::slice::from_raw_parts(
                self.storage.as_ptr().cast::<T>(),
                self.num_elements as usize,
            )
        }
        .to_vec()
    }
    fn view(&mut self, writable: bool, view: *mut OpforgeTensor) {
        let mut v = OpforgeTensor::new();
        v.dtype = self.dtype;
        v.rank = self.dims.len() as u32;
        v.dims = self.dims.as_ptr();
        v.strides = std::ptr::null();
        v.data = self.storage.as_mut_ptr().cast();
        v.byte_len = (self.num_elements as usize * self.elem_size) as u64;
        v.num_elements = self.num_elements;
        v.flags = OPFORGE_TENSOR_CONTIGUOUS
            | OPFORGE_TENSOR_HOST_MEMORY
            | if writable { OPFORGE_TENSOR_WRITABLE } else { 0 };
        // SAFETY: the plugin's out-struct (R1).
        unsafe { v.write_to(view) }.unwrap();
    }
}

pub struct MockCtx {
    pub op: String,
    pub inputs: Vec<Option<MockTensor>>,
    pub outputs: Vec<Option<MockTensor>>,
    pub output_dtypes: Vec<OpforgeDType>,
    /// (name, is_output, start, stop)
    pub ranges: Vec<(String, bool, usize, usize)>,
    pub attrs: Vec<(String, MockAttr)>,
    pub allow_forward: bool,
    pub shards: u64,
    /// Outputs set from plugin memory: (output, dims, data, byte_len,
    /// release, release_user).
    pub foreign: Vec<Foreign>,
}

/// An output wrapping plugin memory (set_output_foreign).
#[derive(Debug)]
pub struct Foreign {
    pub output: usize,
    pub dims: Vec<i64>,
    pub data: *mut c_void,
    pub byte_len: u64,
    pub release: OpforgeReleaseFn,
    pub release_user: *mut c_void,
}

impl Foreign {
    pub fn values<T: Copy>(&self) -> Vec<T> {
        // SAFETY: the plugin's memory, alive until released.
        unsafe {
            std::slice::from_raw_parts(
                self.data.cast::<T>(),
                self.byte_len as usize / size_of::<T>(),
            )
        }
        .to_vec()
    }
}

impl Drop for Foreign {
    fn drop(&mut self) {
        if let Some(r) = self.release {
            // SAFETY: released exactly once, as the header says.
            unsafe { r(self.data, self.release_user) };
        }
    }
}

impl MockCtx {
    pub fn new(op: &str, inputs: Vec<MockTensor>, output_dtypes: Vec<OpforgeDType>) -> MockCtx {
        MockCtx {
            op: op.to_string(),
            outputs: vec![None; output_dtypes.len()],
            inputs: inputs.into_iter().map(Some).collect(),
            output_dtypes,
            ranges: Vec::new(),
            attrs: Vec::new(),
            allow_forward: false,
            shards: 2,
            foreign: Vec::new(),
        }
    }
    pub fn ptr(&mut self) -> *mut OpforgeKernelCtx {
        (self as *mut MockCtx).cast()
    }
}

fn ctx_of<'a>(c: *const OpforgeKernelCtx) -> &'a mut MockCtx {
    // SAFETY: the ctx this host passes to compute is a MockCtx, used by
    // one thread.
    unsafe { &mut *(c as *mut MockCtx) }
}

unsafe extern "C" fn k_op_name(c: *const OpforgeKernelCtx) -> OpforgeStr {
    OpforgeStr::from_text(&ctx_of(c).op)
}
unsafe extern "C" fn k_num_inputs(c: *const OpforgeKernelCtx) -> usize {
    ctx_of(c).inputs.len()
}
unsafe extern "C" fn k_num_outputs(c: *const OpforgeKernelCtx) -> usize {
    ctx_of(c).outputs.len()
}
unsafe extern "C" fn k_input_dtype(c: *const OpforgeKernelCtx, i: usize) -> OpforgeDType {
    match ctx_of(c).inputs.get(i) {
        Some(Some(t)) => t.dtype,
        _ => OPFORGE_DT_INVALID,
    }
}
unsafe extern "C" fn k_output_dtype(c: *const OpforgeKernelCtx, i: usize) -> OpforgeDType {
    ctx_of(c)
        .output_dtypes
        .get(i)
        .copied()
        .unwrap_or(OPFORGE_DT_INVALID)
}
unsafe extern "C" fn k_arg_range(
    c: *const OpforgeKernelCtx,
    name: OpforgeStr,
    is_output: u8,
    start: *mut usize,
    stop: *mut usize,
    status: *mut OpforgeStatus,
) -> OpforgeCode {
    let name = text(name);
    match ctx_of(c)
        .ranges
        .iter()
        .find(|r| r.0 == name && r.1 == (is_output != 0))
    {
        Some(r) => {
            // SAFETY: the plugin's out-pointers.
            unsafe {
                *start = r.2;
                *stop = r.3;
            }
            OPFORGE_OK
        }
        None => fail(
            status,
            OPFORGE_INVALID_ARGUMENT,
            &format!("no argument {name}"),
        ),
    }
}
unsafe extern "C" fn k_input(
    c: *const OpforgeKernelCtx,
    i: usize,
    view: *mut OpforgeTensor,
    status: *mut OpforgeStatus,
) -> OpforgeCode {
    count_view_call();
    match ctx_of(c).inputs.get_mut(i) {
        Some(Some(t)) => {
            t.view(false, view);
            OPFORGE_OK
        }
        Some(None) => fail(
            status,
            OPFORGE_FAILED_PRECONDITION,
            &format!("input {i} was forwarded"),
        ),
        None => fail(status, OPFORGE_INVALID_ARGUMENT, &format!("no input {i}")),
    }
}
unsafe extern "C" fn k_output(
    c: *const OpforgeKernelCtx,
    i: usize,
    view: *mut OpforgeTensor,
    status: *mut OpforgeStatus,
) -> OpforgeCode {
    count_view_call();
    match ctx_of(c).outputs.get_mut(i) {
        Some(Some(t)) => {
            t.view(true, view);
            OPFORGE_OK
        }
        Some(None) => fail(
            status,
            OPFORGE_FAILED_PRECONDITION,
            &format!("output {i} is not set"),
        ),
        None => fail(status, OPFORGE_INVALID_ARGUMENT, &format!("no output {i}")),
    }
}
fn dims_arg(dims: *const i64, rank: u32) -> Vec<i64> {
    if rank == 0 {
        return Vec::new();
    }
    // SAFETY: `rank` dims from the plugin.
    unsafe { std::slice::from_raw_parts(dims, rank as usize) }.to_vec()
}
unsafe extern "C" fn k_allocate_output(
    c: *mut OpforgeKernelCtx,
    i: usize,
    dims: *const i64,
    rank: u32,
    view: *mut OpforgeTensor,
    status: *mut OpforgeStatus,
) -> OpforgeCode {
    count_view_call();
    let ctx = ctx_of(c);
    let Some(&dtype) = ctx.output_dtypes.get(i) else {
        return fail(status, OPFORGE_INVALID_ARGUMENT, &format!("no output {i}"));
    };
    let mut t = MockTensor::zeros(dtype, &dims_arg(dims, rank));
    // Garbage, so that a kernel relying on zeroed memory is caught.
    t.storage.fill(0x5a5a_5a5a_5a5a_5a5a);
    ctx.outputs[i] = Some(t);
    ctx.outputs[i].as_mut().unwrap().view(true, view);
    OPFORGE_OK
}
#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn k_forward(
    c: *mut OpforgeKernelCtx,
    candidates: *const usize,
    n: usize,
    i: usize,
    dims: *const i64,
    rank: u32,
    from: *mut i64,
    view: *mut OpforgeTensor,
    status: *mut OpforgeStatus,
) -> OpforgeCode {
    count_view_call();
    let ctx = ctx_of(c);
    let dims_v = dims_arg(dims, rank);
    if ctx.allow_forward {
        // SAFETY: `n` candidates from the plugin.
        let cands = if n == 0 {
            &[][..]
        } else {
            unsafe { std::slice::from_raw_parts(candidates, n) }
        };
        for &j in cands {
            let ok = matches!(ctx.inputs.get(j), Some(Some(t)) if t.dtype == ctx.output_dtypes[i] && t.dims == dims_v);
            if ok {
                ctx.outputs[i] = ctx.inputs[j].take();
                if !from.is_null() {
                    // SAFETY: the plugin's out-pointer.
                    unsafe { *from = j as i64 };
                }
                ctx.outputs[i].as_mut().unwrap().view(true, view);
                return OPFORGE_OK;
            }
        }
    }
    if !from.is_null() {
        // SAFETY: the plugin's out-pointer.
        unsafe { *from = OPFORGE_NOT_FORWARDED };
    }
    // SAFETY: forwarding to allocate_output's contract.
    unsafe { k_allocate_output(c, i, dims, rank, view, status) }
}
unsafe extern "C" fn k_set_output_foreign(
    c: *mut OpforgeKernelCtx,
    i: usize,
    t: *const OpforgeForeignTensor,
    status: *mut OpforgeStatus,
) -> OpforgeCode {
    let ctx = ctx_of(c);
    // SAFETY: the plugin's struct, prefix-read (R1).
    let t = unsafe { OpforgeForeignTensor::read_from(t) }.unwrap();
    if ctx.output_dtypes.get(i) != Some(&t.dtype) {
        return fail(status, OPFORGE_INVALID_ARGUMENT, "dtype mismatch");
    }
    ctx.foreign.push(Foreign {
        output: i,
        dims: dims_arg(t.dims, t.rank),
        data: t.data,
        byte_len: t.byte_len,
        release: t.release,
        release_user: t.release_user,
    });
    OPFORGE_OK
}
unsafe extern "C" fn k_attr(
    c: *const OpforgeKernelCtx,
    name: OpforgeStr,
    value: *mut OpforgeAttrValue,
    status: *mut OpforgeStatus,
) -> OpforgeCode {
    fill_attr(&ctx_of(c).attrs, name, value, status)
}
unsafe extern "C" fn k_num_threads(_: *const OpforgeKernelCtx) -> u32 {
    1
}
unsafe extern "C" fn k_parallel_for(
    c: *mut OpforgeKernelCtx,
    total: u64,
    _cost: u64,
    work: OpforgeWorkFn,
    user: *mut c_void,
    status: *mut OpforgeStatus,
) -> OpforgeCode {
    let shards = ctx_of(c).shards.max(1);
    let step = total.div_ceil(shards).max(1);
    let work = work.unwrap();
    let mut first: Option<MockStatus> = None;
    let mut begin = 0;
    while begin < total {
        let end = (begin + step).min(total);
        let mut s = MockStatus::default();
        // SAFETY: the plugin's work function and user pointer.
        let code = unsafe { work(begin, end, user, s.ptr()) };
        if code != OPFORGE_OK && first.is_none() {
            s.code = code;
            first = Some(s);
        }
        begin = end;
    }
    match first {
        Some(s) => {
            let out = st(status);
            out.flags |= s.flags;
            fail(status, s.code, &s.message)
        }
        None => OPFORGE_OK,
    }
}

// ---------------------------------------------------------------------------
// Shape functions (just enough for "output = input shape")
// ---------------------------------------------------------------------------

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

fn sctx<'a>(c: *const OpforgeShapeCtx) -> &'a mut MockShapeCtx {
    // SAFETY: the ctx this host passes to shape functions.
    unsafe { &mut *(c as *mut MockShapeCtx) }
}

unsafe extern "C" fn s_num_inputs(c: *const OpforgeShapeCtx) -> usize {
    sctx(c).num_inputs
}
unsafe extern "C" fn s_num_outputs(c: *const OpforgeShapeCtx) -> usize {
    sctx(c).outputs.len()
}
unsafe extern "C" fn s_input(c: *const OpforgeShapeCtx, i: usize) -> OpforgeShape {
    if i < sctx(c).num_inputs {
        i as u64 + 1
    } else {
        OPFORGE_NO_HANDLE
    }
}
unsafe extern "C" fn s_set_output(
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
unsafe extern "C" fn s_rank(c: *const OpforgeShapeCtx, shape: OpforgeShape) -> i32 {
    match sctx(c).shape(shape) {
        Some(Some(s)) => s.len() as i32,
        _ => OPFORGE_UNKNOWN_RANK,
    }
}
unsafe extern "C" fn s_dim(
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
unsafe extern "C" fn s_value(c: *const OpforgeShapeCtx, dim: OpforgeDim) -> i64 {
    sctx(c)
        .dims
        .get((dim as usize).wrapping_sub(1))
        .copied()
        .unwrap_or(-1)
}
unsafe extern "C" fn s_make_shape(
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
unsafe extern "C" fn s_with_rank(
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
unsafe extern "C" fn s_shape_string(c: *const OpforgeShapeCtx, shape: OpforgeShape) -> OpforgeStr {
    // Leaked: lives as long as any context (a test host).
    let text: &'static str = Box::leak(sctx(c).text(shape).into_boxed_str());
    OpforgeStr::from_text(text)
}

// ---------------------------------------------------------------------------
// Gradients: a recording graph builder
// ---------------------------------------------------------------------------

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
    pub ranges: Vec<(String, bool, usize, usize)>,
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

fn gctx<'a>(c: *const OpforgeGradCtx) -> &'a mut MockGradCtx {
    // SAFETY: the ctx this host passes to gradient functions.
    unsafe { &mut *(c as *mut MockGradCtx) }
}

unsafe extern "C" fn g_op_name(c: *const OpforgeGradCtx) -> OpforgeStr {
    OpforgeStr::from_text(&gctx(c).op)
}
unsafe extern "C" fn g_attr(
    c: *const OpforgeGradCtx,
    name: OpforgeStr,
    value: *mut OpforgeAttrValue,
    status: *mut OpforgeStatus,
) -> OpforgeCode {
    fill_attr(&gctx(c).attrs, name, value, status)
}
unsafe extern "C" fn g_num_inputs(c: *const OpforgeGradCtx) -> usize {
    gctx(c).inputs.len()
}
unsafe extern "C" fn g_input(c: *const OpforgeGradCtx, i: usize) -> OpforgeSym {
    gctx(c).inputs.get(i).copied().unwrap_or(OPFORGE_NO_HANDLE)
}
unsafe extern "C" fn g_num_outputs(c: *const OpforgeGradCtx) -> usize {
    gctx(c).outputs.len()
}
unsafe extern "C" fn g_output(c: *const OpforgeGradCtx, i: usize) -> OpforgeSym {
    gctx(c).outputs.get(i).copied().unwrap_or(OPFORGE_NO_HANDLE)
}
unsafe extern "C" fn g_arg_range(
    c: *const OpforgeGradCtx,
    name: OpforgeStr,
    is_output: u8,
    start: *mut usize,
    stop: *mut usize,
    status: *mut OpforgeStatus,
) -> OpforgeCode {
    let name = text(name);
    match gctx(c)
        .ranges
        .iter()
        .find(|r| r.0 == name && r.1 == (is_output != 0))
    {
        Some(r) => {
            // SAFETY: the plugin's out-pointers.
            unsafe {
                *start = r.2;
                *stop = r.3;
            }
            OPFORGE_OK
        }
        None => fail(
            status,
            OPFORGE_INVALID_ARGUMENT,
            &format!("no argument {name}"),
        ),
    }
}
unsafe extern "C" fn g_output_grad(
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
unsafe extern "C" fn g_call(
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
        arg_syms.push(unsafe { std::slice::from_raw_parts(a.syms, a.num_syms) }.to_vec());
    }
    let mut int_attrs = Vec::new();
    for i in 0..num_attrs {
        // SAFETY: as above.
        let a = unsafe { &*attrs.add(i) };
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
unsafe extern "C" fn g_set_input_grad(
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

// ---------------------------------------------------------------------------
// The tables
// ---------------------------------------------------------------------------

pub static REGISTRATION: OpforgeRegistrationApi = OpforgeRegistrationApi {
    op: Some(reg_op),
    kernel: Some(reg_kernel),
    gradient_fn: Some(reg_gradient_fn),
    gradient_function: Some(reg_gradient_function),
    not_differentiable: Some(reg_not_differentiable),
    ..OpforgeRegistrationApi::new()
};

unsafe extern "C" fn reg_op_refused(
    _: *mut OpforgeRegistrar,
    def: *const OpforgeOpDef,
    status: *mut OpforgeStatus,
) -> OpforgeCode {
    // SAFETY: the plugin's def (R1).
    let d = unsafe { OpforgeOpDef::read_from(def) }.unwrap();
    fail(
        status,
        OPFORGE_ALREADY_EXISTS,
        &format!(
            "Op with name {} already registered by library other",
            text(d.name)
        ),
    )
}

/// A registration table that refuses every op.
pub static REGISTRATION_REFUSING: OpforgeRegistrationApi = OpforgeRegistrationApi {
    op: Some(reg_op_refused),
    ..REGISTRATION
};

pub static KERNEL: OpforgeKernelApi = OpforgeKernelApi {
    init_op_name: Some(init_op_name),
    init_num_inputs: Some(init_num_inputs),
    init_input_dtype: Some(init_input_dtype),
    init_num_outputs: Some(init_num_outputs),
    init_attr: Some(init_attr),
    op_name: Some(k_op_name),
    num_inputs: Some(k_num_inputs),
    num_outputs: Some(k_num_outputs),
    input_dtype: Some(k_input_dtype),
    output_dtype: Some(k_output_dtype),
    arg_range: Some(k_arg_range),
    input: Some(k_input),
    output: Some(k_output),
    allocate_output: Some(k_allocate_output),
    forward_input_or_allocate_output: Some(k_forward),
    attr: Some(k_attr),
    set_output_foreign: Some(k_set_output_foreign),
    num_threads: Some(k_num_threads),
    parallel_for: Some(k_parallel_for),
    ..OpforgeKernelApi::new()
};

/// A kernel table whose `parallel_for` slot is NULL (`OPFORGE_HAS_SLOT`
/// is false for it, as for a slot past an older host's struct_size; every
/// 1.0 table is at least the 1.0 size, so a NULL slot is how a 1.0 table
/// lacks one).
pub static KERNEL_WITHOUT_PARALLEL_FOR: OpforgeKernelApi = OpforgeKernelApi {
    parallel_for: None,
    ..KERNEL
};

pub static SHAPE: OpforgeShapeApi = OpforgeShapeApi {
    num_inputs: Some(s_num_inputs),
    num_outputs: Some(s_num_outputs),
    input: Some(s_input),
    set_output: Some(s_set_output),
    rank: Some(s_rank),
    dim: Some(s_dim),
    value: Some(s_value),
    make_shape: Some(s_make_shape),
    with_rank: Some(s_with_rank),
    shape_string: Some(s_shape_string),
    ..OpforgeShapeApi::new()
};

pub static GRAD: OpforgeGradApi = OpforgeGradApi {
    op_name: Some(g_op_name),
    attr: Some(g_attr),
    num_inputs: Some(g_num_inputs),
    input: Some(g_input),
    num_outputs: Some(g_num_outputs),
    output: Some(g_output),
    arg_range: Some(g_arg_range),
    output_grad: Some(g_output_grad),
    call: Some(g_call),
    set_input_grad: Some(g_set_input_grad),
    ..OpforgeGradApi::new()
};

pub static HOST: OpforgeHostApi = host_with(&KERNEL);
pub static REFUSING_HOST: OpforgeHostApi = OpforgeHostApi {
    registration: &REGISTRATION_REFUSING,
    ..host_with(&KERNEL)
};
/// A 1.0 host that lacks a slot (`parallel_for`).
pub static OLD_HOST: OpforgeHostApi = OpforgeHostApi {
    abi_minor: 0,
    ..host_with(&KERNEL_WITHOUT_PARALLEL_FOR)
};

const fn host_with(kernel: &'static OpforgeKernelApi) -> OpforgeHostApi {
    OpforgeHostApi {
        abi_major: OPFORGE_ABI_MAJOR,
        abi_minor: OPFORGE_ABI_MINOR,
        host_version: OpforgeStr::from_text("mock host"),
        registration: &REGISTRATION,
        kernel,
        shape: &SHAPE,
        grad: &GRAD,
        set_status: Some(set_status),
        status_code: Some(status_code),
        status_message: Some(status_message),
        set_status_flags: Some(set_status_flags),
        status_flags: Some(status_flags),
        log: Some(log),
        ..OpforgeHostApi::new()
    }
}

// ---------------------------------------------------------------------------
// Driving a plugin
// ---------------------------------------------------------------------------

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

/// A kernel instance of `k` made with `init`.
pub struct Instance<'a> {
    pub k: &'a KernelRec,
    pub state: *mut c_void,
}

impl<'a> Instance<'a> {
    pub fn create(k: &'a KernelRec, init: &MockInit) -> Result<Instance<'a>, MockStatus> {
        let mut state = std::ptr::null_mut();
        let mut s = MockStatus::default();
        // SAFETY: the plugin's create with this host's objects.
        let code = unsafe {
            (k.create.unwrap())(
                (init as *const MockInit).cast(),
                k.user,
                &mut state,
                s.ptr(),
            )
        };
        if code == OPFORGE_OK {
            Ok(Instance { k, state })
        } else {
            s.code = code;
            Err(s)
        }
    }

    pub fn compute(&self, ctx: &mut MockCtx) -> Result<(), MockStatus> {
        let mut s = MockStatus::default();
        // SAFETY: the plugin's compute with its state and this host's ctx.
        let code = unsafe { (self.k.compute.unwrap())(self.state, ctx.ptr(), s.ptr()) };
        if code == OPFORGE_OK {
            Ok(())
        } else {
            s.code = code;
            Err(s)
        }
    }

    /// What a 1.1 host does: every input's view, every declared output set
    /// (forwarded when the declaration and `ctx.allow_forward` allow it and
    /// the input matches), then the plugin's compute_views.
    pub fn compute_views(&self, ctx: &mut MockCtx) -> Result<(), MockStatus> {
        let mut ins = Vec::new();
        for t in ctx.inputs.iter_mut() {
            let mut v = OpforgeTensor::new();
            t.as_mut().unwrap().view(false, &mut v);
            ins.push(v);
        }
        let mut from = vec![OPFORGE_NOT_FORWARDED; ctx.outputs.len()];
        for &(o, j, flags) in &self.k.output_like {
            let dims = ctx.inputs[j]
                .as_ref()
                .map(|t| t.dims.clone())
                .unwrap_or_else(|| dims_arg(ins[j].dims, ins[j].rank));
            let forwardable = matches!(&ctx.inputs[j], Some(t) if t.dtype == ctx.output_dtypes[o]);
            if flags & OPFORGE_OUTPUT_FORWARD != 0 && ctx.allow_forward && forwardable {
                ctx.outputs[o] = ctx.inputs[j].take();
                from[o] = j as i64;
            } else {
                let mut t = MockTensor::zeros(ctx.output_dtypes[o], &dims);
                t.storage.fill(0x5a5a_5a5a_5a5a_5a5a);
                ctx.outputs[o] = Some(t);
            }
        }
        let mut outs = Vec::new();
        for (o, t) in ctx.outputs.iter_mut().enumerate() {
            let mut v = OpforgeTensor::new();
            match t {
                Some(t) => t.view(true, &mut v),
                None => v.dtype = ctx.output_dtypes[o],
            }
            outs.push(v);
        }
        let views = OpforgeKernelViews {
            inputs: ins.as_ptr(),
            num_inputs: ins.len(),
            outputs: outs.as_ptr(),
            num_outputs: outs.len(),
            forwarded_from: from.as_ptr(),
            ..OpforgeKernelViews::new()
        };
        let mut s = MockStatus::default();
        // SAFETY: the plugin's compute_views with its state, this host's
        // ctx, and views that live across the call (the tensors they point
        // into are the ctx's, moved, not copied, when forwarded).
        let code =
            unsafe { (self.k.compute_views.unwrap())(self.state, ctx.ptr(), &views, s.ptr()) };
        if code == OPFORGE_OK {
            Ok(())
        } else {
            s.code = code;
            Err(s)
        }
    }
}

impl Drop for Instance<'_> {
    fn drop(&mut self) {
        if let Some(d) = self.k.destroy {
            // SAFETY: the plugin's destroy, once, after the last compute.
            unsafe { d(self.state, self.k.user) };
        }
    }
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
