//! The mock host's kernel table: construction (`MockInit`), compute over
//! `Vec` buffers (`MockCtx`), and kernel instances driven as a 1.0 or a
//! 1.1 host drives them (`Instance`).

use std::ffi::c_void;

use opforge_abi::*;

use super::*;

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

pub(crate) fn init_of<'a>(i: *const OpforgeKernelInit) -> &'a MockInit {
    // SAFETY: the init this host passes to create is a MockInit.
    unsafe { &*i.cast::<MockInit>() }
}

pub(crate) unsafe extern "C" fn init_op_name(i: *const OpforgeKernelInit) -> OpforgeStr {
    OpforgeStr::from_text(&init_of(i).op)
}
pub(crate) unsafe extern "C" fn init_num_inputs(i: *const OpforgeKernelInit) -> usize {
    init_of(i).inputs.len()
}
pub(crate) unsafe extern "C" fn init_input_dtype(
    i: *const OpforgeKernelInit,
    n: usize,
) -> OpforgeDType {
    init_of(i)
        .inputs
        .get(n)
        .copied()
        .unwrap_or(OPFORGE_DT_INVALID)
}
pub(crate) unsafe extern "C" fn init_num_outputs(i: *const OpforgeKernelInit) -> usize {
    init_of(i).outputs.len()
}

pub(crate) fn fill_attr(
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

pub(crate) unsafe extern "C" fn init_attr(
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
    pub ranges: Vec<ArgRange>,
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

pub(crate) fn ctx_of<'a>(c: *const OpforgeKernelCtx) -> &'a mut MockCtx {
    // SAFETY: the ctx this host passes to compute is a MockCtx, used by
    // one thread.
    unsafe { &mut *(c as *mut MockCtx) }
}

pub(crate) unsafe extern "C" fn k_op_name(c: *const OpforgeKernelCtx) -> OpforgeStr {
    OpforgeStr::from_text(&ctx_of(c).op)
}
pub(crate) unsafe extern "C" fn k_num_inputs(c: *const OpforgeKernelCtx) -> usize {
    ctx_of(c).inputs.len()
}
pub(crate) unsafe extern "C" fn k_num_outputs(c: *const OpforgeKernelCtx) -> usize {
    ctx_of(c).outputs.len()
}
pub(crate) unsafe extern "C" fn k_input_dtype(
    c: *const OpforgeKernelCtx,
    i: usize,
) -> OpforgeDType {
    match ctx_of(c).inputs.get(i) {
        Some(Some(t)) => t.dtype,
        _ => OPFORGE_DT_INVALID,
    }
}
pub(crate) unsafe extern "C" fn k_output_dtype(
    c: *const OpforgeKernelCtx,
    i: usize,
) -> OpforgeDType {
    ctx_of(c)
        .output_dtypes
        .get(i)
        .copied()
        .unwrap_or(OPFORGE_DT_INVALID)
}
pub(crate) unsafe extern "C" fn k_arg_range(
    c: *const OpforgeKernelCtx,
    name: OpforgeStr,
    is_output: u8,
    start: *mut usize,
    stop: *mut usize,
    status: *mut OpforgeStatus,
) -> OpforgeCode {
    arg_range(&ctx_of(c).ranges, name, is_output, start, stop, status)
}
/// The view of `slots[i]` (inputs: read-only; outputs: writable).
fn view_of(
    slots: &mut [Option<MockTensor>],
    what: &str,
    i: usize,
    view: *mut OpforgeTensor,
    status: *mut OpforgeStatus,
) -> OpforgeCode {
    count_view_call();
    let writable = what == "output";
    match slots.get_mut(i) {
        Some(Some(t)) => {
            t.view(writable, view);
            OPFORGE_OK
        }
        Some(None) => {
            let why = if writable {
                "is not set"
            } else {
                "was forwarded"
            };
            fail(
                status,
                OPFORGE_FAILED_PRECONDITION,
                &format!("{what} {i} {why}"),
            )
        }
        None => fail(status, OPFORGE_INVALID_ARGUMENT, &format!("no {what} {i}")),
    }
}
pub(crate) unsafe extern "C" fn k_input(
    c: *const OpforgeKernelCtx,
    i: usize,
    view: *mut OpforgeTensor,
    status: *mut OpforgeStatus,
) -> OpforgeCode {
    view_of(&mut ctx_of(c).inputs, "input", i, view, status)
}
pub(crate) unsafe extern "C" fn k_output(
    c: *const OpforgeKernelCtx,
    i: usize,
    view: *mut OpforgeTensor,
    status: *mut OpforgeStatus,
) -> OpforgeCode {
    view_of(&mut ctx_of(c).outputs, "output", i, view, status)
}
pub(crate) fn dims_arg(dims: *const i64, rank: u32) -> Vec<i64> {
    if rank == 0 {
        return Vec::new();
    }
    // SAFETY: `rank` dims from the plugin.
    unsafe { std::slice::from_raw_parts(dims, rank as usize) }.to_vec()
}
pub(crate) unsafe extern "C" fn k_allocate_output(
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
pub(crate) unsafe extern "C" fn k_forward(
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
            // SAFETY: the plugin's `n` candidates, valid for the call (R5).
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
pub(crate) unsafe extern "C" fn k_set_output_foreign(
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
pub(crate) unsafe extern "C" fn k_attr(
    c: *const OpforgeKernelCtx,
    name: OpforgeStr,
    value: *mut OpforgeAttrValue,
    status: *mut OpforgeStatus,
) -> OpforgeCode {
    fill_attr(&ctx_of(c).attrs, name, value, status)
}
pub(crate) unsafe extern "C" fn k_num_threads(_: *const OpforgeKernelCtx) -> u32 {
    1
}
pub(crate) unsafe extern "C" fn k_parallel_for(
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
