//! The header's kernel API (`OpforgeKernelApi`): the functions a plugin
//! calls on a kernel's construction and compute contexts, over core's
//! `OpKernelConstruction` / `OpKernelContext` (see the parent module).
//! Each is written through [`host_fn!`]: the context pointer is checked
//! against the thread's current context before anything is read
//! (`crate::ctx`).

use super::context::{dtype_of, lend_str, shape_of, view, with_init, with_kctx};
use crate::ctx::host_fn;
use crate::host::*;
use opforge_abi::*;
use opforge_core::kernel::OutputRequest;
use opforge_core::tensor::{Buffer, Location};
use opforge_core::{DataType, Result, Status, Tensor, TensorShape};
use std::ffi::c_void;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

// ---- construction ----------------------------------------------------------

host_fn! {
    pub(super) fn init_op_name(p: *const OpforgeKernelInit) -> OpforgeStr [OpforgeStr::EMPTY],
    with_init, |c, arena| { Ok(arena.str(c.op_def().name.as_bytes())) }
}

host_fn! {
    pub(super) fn init_node_name(p: *const OpforgeKernelInit) -> OpforgeStr [OpforgeStr::EMPTY],
    with_init, |c, arena| { Ok(arena.str(c.node_name().as_bytes())) }
}

host_fn! {
    pub(super) fn init_device_type(p: *const OpforgeKernelInit) -> OpforgeStr [OpforgeStr::EMPTY],
    with_init, |c, arena| { Ok(arena.str(c.device_type().as_bytes())) }
}

host_fn! {
    pub(super) fn init_num_inputs(p: *const OpforgeKernelInit) -> usize [0],
    with_init, |c, _arena| { Ok(c.input_types().len()) }
}

host_fn! {
    pub(super) fn init_input_dtype(p: *const OpforgeKernelInit, i: usize) -> OpforgeDType
        [OPFORGE_DT_INVALID],
    with_init, |c, _arena| {
        Ok(c.input_types().get(i).map_or(OPFORGE_DT_INVALID, |d| d.base() as i32))
    }
}

host_fn! {
    pub(super) fn init_num_outputs(p: *const OpforgeKernelInit) -> usize [0],
    with_init, |c, _arena| { Ok(c.output_types().len()) }
}

host_fn! {
    pub(super) fn init_output_dtype(p: *const OpforgeKernelInit, i: usize) -> OpforgeDType
        [OPFORGE_DT_INVALID],
    with_init, |c, _arena| {
        Ok(c.output_types().get(i).map_or(OPFORGE_DT_INVALID, |d| d.base() as i32))
    }
}

/// The flat range of argument `name` from an OpDef and the flat dtypes'
/// attrs (computed as core's signature does).
pub(super) fn arg_range_of(
    op_def: &opforge_core::proto::OpDef,
    attrs: &opforge_core::attrs::AttrMap,
    name: &str,
    output: bool,
) -> Result<(usize, usize)> {
    let args = if output {
        &op_def.output_arg
    } else {
        &op_def.input_arg
    };
    let mut start = 0usize;
    for a in args {
        let n = arg_len(a, attrs)?;
        if a.name == name {
            return Ok((start, start + n));
        }
        start += n;
    }
    Err(Status::invalid_argument(format!(
        "{} has no {} argument named '{name}'",
        op_def.name,
        if output { "output" } else { "input" }
    )))
}

fn arg_len(
    a: &opforge_core::proto::op_def::ArgDef,
    attrs: &opforge_core::attrs::AttrMap,
) -> Result<usize> {
    use opforge_core::proto::attr_value::Value as AV;
    if !a.number_attr.is_empty() {
        return match attrs.get(&a.number_attr).and_then(|v| v.value.as_ref()) {
            Some(AV::I(n)) => Ok((*n).max(0) as usize),
            _ => Err(Status::invalid_argument(format!(
                "attr '{}' is not set",
                a.number_attr
            ))),
        };
    }
    if !a.type_list_attr.is_empty() {
        return match attrs.get(&a.type_list_attr).and_then(|v| v.value.as_ref()) {
            Some(AV::List(l)) => Ok(l.r#type.len()),
            _ => Err(Status::invalid_argument(format!(
                "attr '{}' is not set",
                a.type_list_attr
            ))),
        };
    }
    Ok(1)
}

/// Writes an argument's flat range `[start, stop)` through the plugin's
/// out-pointers.
///
/// # Safety
/// `start` and `stop` are NULL or writable `usize`s (NULL is refused).
unsafe fn write_range((a, b): (usize, usize), start: *mut usize, stop: *mut usize) -> Result<()> {
    // SAFETY: forwarded.
    unsafe {
        write_out(start, a, "start")?;
        write_out(stop, b, "stop")
    }
}

/// The `arg_range` of every context that has an OpDef and attrs: the flat
/// range of the input (`is_output` 0) or output argument the plugin names,
/// written through its out-pointers.
///
/// # Safety
/// `name` is a plugin string (R5); `start` and `stop` as [`write_range`].
pub(crate) unsafe fn write_arg_range(
    op_def: &opforge_core::proto::OpDef,
    attrs: &opforge_core::attrs::AttrMap,
    name: OpforgeStr,
    is_output: u8,
    start: *mut usize,
    stop: *mut usize,
) -> Result<()> {
    // SAFETY: forwarded.
    let name = unsafe { text(name, "argument name")? };
    let range = arg_range_of(op_def, attrs, name, is_output != 0)?;
    // SAFETY: forwarded.
    unsafe { write_range(range, start, stop) }
}

host_fn! {
    pub(super) fn init_arg_range(
        p: *const OpforgeKernelInit,
        name: OpforgeStr,
        is_output: u8,
        start: *mut usize,
        stop: *mut usize,
    ) -> status,
    with_init, |c, _arena| {
        // SAFETY: the plugin's string and out-pointers.
        unsafe { write_arg_range(c.op_def(), c.attrs(), name, is_output, start, stop) }
    }
}

host_fn! {
    pub(super) fn init_attr(
        p: *const OpforgeKernelInit,
        name: OpforgeStr,
        value: *mut OpforgeAttrValue,
    ) -> status,
    with_init, |c, arena| {
        // SAFETY: the plugin's string and out-struct; the values are lent
        // from the init's arena, which lives until the instance's destroy,
        // as R7 promises for init_attr values.
        unsafe { read_attr(c.op_def(), c.attrs(), arena, name, value) }
    }
}

// ---- compute ---------------------------------------------------------------

/// Writes a view through the plugin's out-pointer: one struct copy when the
/// out-struct's struct_size is this host's (the common case), else
/// [`write_struct`]'s prefix copy.
///
/// # Safety
/// As [`write_struct`]: `out` is NULL or the plugin's out-struct, readable
/// for its first `usize` and writable for its struct_size bytes.
#[inline(always)]
unsafe fn write_view(v: &OpforgeTensor, out: *mut OpforgeTensor) -> Result<()> {
    if !out.is_null() && out.is_aligned() {
        // SAFETY: non-null and aligned; readable for its first usize (caller).
        let size = unsafe { out.cast::<usize>().read() };
        if size == size_of::<OpforgeTensor>() && v.struct_size == size {
            // SAFETY: writable for its struct_size bytes, which are the
            // whole struct (caller); `v` keeps that struct_size.
            unsafe { out.write(*v) };
            return Ok(());
        }
    }
    // SAFETY: forwarded from the caller.
    unsafe { write_struct(v, out) }
}

host_fn! {
    pub(super) fn op_name(p: *const OpforgeKernelCtx) -> OpforgeStr [OpforgeStr::EMPTY],
    // The op name lives as the kernel definition, held across the compute.
    with_kctx, |k, _c| { Ok(lend_str(&k.def.op)) }
}

host_fn! {
    pub(super) fn node_name(p: *const OpforgeKernelCtx) -> OpforgeStr [OpforgeStr::EMPTY],
    // The node name lives as the OpKernelContext, across the compute.
    with_kctx, |_k, c| { Ok(lend_str(c.node_name())) }
}

host_fn! {
    pub(super) fn num_inputs(p: *const OpforgeKernelCtx) -> usize [0],
    with_kctx, |_k, c| { Ok(c.num_inputs()) }
}

host_fn! {
    pub(super) fn num_outputs(p: *const OpforgeKernelCtx) -> usize [0],
    with_kctx, |_k, c| { Ok(c.num_outputs()) }
}

host_fn! {
    pub(super) fn input_dtype(p: *const OpforgeKernelCtx, i: usize) -> OpforgeDType
        [OPFORGE_DT_INVALID],
    with_kctx, |k, c| {
        k.check_input(c, i)?;
        Ok(c.input_dtype(i).base() as i32)
    }
}

host_fn! {
    pub(super) fn output_dtype(p: *const OpforgeKernelCtx, i: usize) -> OpforgeDType
        [OPFORGE_DT_INVALID],
    with_kctx, |k, c| {
        k.check_output(c, i)?;
        Ok(c.output_type(i).base() as i32)
    }
}

host_fn! {
    pub(super) fn arg_range(
        p: *const OpforgeKernelCtx,
        name: OpforgeStr,
        is_output: u8,
        start: *mut usize,
        stop: *mut usize,
    ) -> status,
    with_kctx, |_k, c| {
        // SAFETY: a plugin string (R5).
        let name = unsafe { text(name, "argument name")? };
        let r = c.signature().arg_range(name, is_output != 0)?;
        // SAFETY: the plugin's out-pointers.
        unsafe { write_range((r.start, r.end), start, stop) }
    }
}

host_fn! {
    pub(super) fn input(p: *const OpforgeKernelCtx, i: usize, out: *mut OpforgeTensor) -> status,
    with_kctx, |k, c| {
        k.check_input(c, i)?;
        if k.moved(i) {
            return Err(Status::failed_precondition(format!(
                "{}: input {i} was forwarded or moved to an output; use the output's view",
                k.def.op
            )));
        }
        let v = k.input_view(c, i)?;
        // SAFETY: the plugin's out-struct.
        unsafe { write_view(&v, out) }
    }
}

host_fn! {
    pub(super) fn output(p: *const OpforgeKernelCtx, i: usize, out: *mut OpforgeTensor) -> status,
    with_kctx, |k, c| {
        k.check_output(c, i)?;
        if c.output(i).is_none() {
            return Err(Status::failed_precondition(format!(
                "{}: output {i} is not set yet",
                k.def.op
            )));
        }
        let v = k.output_view(c, i)?;
        // SAFETY: the plugin's out-struct.
        unsafe { write_view(&v, out) }
    }
}

host_fn! {
    pub(super) fn output_request(p: *const OpforgeKernelCtx, i: usize) -> u32 [OPFORGE_REQ_WRITE],
    with_kctx, |k, c| {
        k.check_output(c, i)?;
        // Core asks for more than WRITE only of kernels whose library set
        // OPFORGE_KERNEL_OUTPUT_REQUESTS (`PluginKernel::supported_requests`).
        Ok(match c.output_request(i) {
            OutputRequest::Null => OPFORGE_REQ_NULL,
            OutputRequest::Write => OPFORGE_REQ_WRITE,
            OutputRequest::InPlace => OPFORGE_REQ_INPLACE,
            OutputRequest::Add => OPFORGE_REQ_ADD,
        })
    }
}

/// INVALID_ARGUMENT if output `i` is a string (set with set_output_strings).
fn check_not_string(
    op: &str,
    c: &opforge_core::kernel::OpKernelContext<'_>,
    i: usize,
) -> Result<()> {
    if c.output_type(i).base() == DataType::String {
        return Err(Status::invalid_argument(format!(
            "{op}: output {i} is a string; use set_output_strings"
        )));
    }
    Ok(())
}

host_fn! {
    pub(super) fn allocate_output(
        p: *mut OpforgeKernelCtx,
        i: usize,
        dims: *const i64,
        rank: u32,
        out: *mut OpforgeTensor,
    ) -> status,
    with_kctx, |k, c| {
        k.check_output(c, i)?;
        check_not_string(&k.def.op, c, i)?;
        let what = format!("allocate_output of op '{}' (output {i})", k.def.op);
        // SAFETY: the plugin passes `rank` dims.
        let shape = unsafe { shape_of(dims, rank, &what)? };
        k.retire_output(c, i);
        c.allocate_output(i, shape)?;
        let v = k.output_view(c, i)?;
        // SAFETY: the plugin's out-struct.
        unsafe { write_view(&v, out) }
    }
}

host_fn! {
    #[allow(clippy::too_many_arguments)]
    pub(super) fn forward_input_or_allocate_output(
        p: *mut OpforgeKernelCtx,
        candidates: *const usize,
        num_candidates: usize,
        i: usize,
        dims: *const i64,
        rank: u32,
        forwarded_from: *mut i64,
        out: *mut OpforgeTensor,
    ) -> status,
    with_kctx, |k, c| {
        k.check_output(c, i)?;
        check_not_string(&k.def.op, c, i)?;
        // SAFETY: the plugin passes `num_candidates` indices.
        let cands = unsafe { slice(candidates, num_candidates, "candidates")? };
        let mut any_moved = false;
        for &j in cands {
            k.check_input(c, j)?;
            any_moved |= k.moved(j);
        }
        // Moved inputs are no candidates (rare: a list only then).
        let usable: Vec<usize>;
        let cands = if any_moved {
            usable = cands.iter().copied().filter(|&j| !k.moved(j)).collect();
            &usable[..]
        } else {
            cands
        };
        let what = format!(
            "forward_input_or_allocate_output of op '{}' (output {i})",
            k.def.op
        );
        // SAFETY: the plugin passes `rank` dims.
        let shape = unsafe { shape_of(dims, rank, &what)? };
        k.retire_output(c, i);
        let f = c.forward_input_or_allocate_output(cands, i, &shape)?;
        if let Some(j) = f {
            k.set_moved(j);
        }
        if !forwarded_from.is_null() {
            let from = f.map_or(OPFORGE_NOT_FORWARDED, |j| j as i64);
            // SAFETY: the plugin's out-pointer (not NULL).
            unsafe { write_out(forwarded_from, from, "forwarded_from")? };
        }
        let v = k.output_view(c, i)?;
        // SAFETY: the plugin's out-struct.
        unsafe { write_view(&v, out) }
    }
}

host_fn! {
    pub(super) fn set_output_from_input(p: *mut OpforgeKernelCtx, o: usize, i: usize) -> status,
    with_kctx, |k, c| {
        k.check_output(c, o)?;
        k.check_input(c, i)?;
        if k.moved(i) {
            return Err(Status::failed_precondition(format!(
                "{}: input {i} was already moved to an output",
                k.def.op
            )));
        }
        let want = c.output_type(o).base();
        let have = c.input_dtype(i).base();
        if want != have {
            return Err(Status::invalid_argument(format!(
                "{}: output {o} is {want} but input {i} is {have}",
                k.def.op
            )));
        }
        let t = c.inputs()[i].clone();
        k.retire_output(c, o);
        c.set_output(o, t)
    }
}

host_fn! {
    pub(super) fn set_output_foreign(
        p: *mut OpforgeKernelCtx,
        i: usize,
        tensor: *const OpforgeForeignTensor,
    ) -> status,
    with_kctx, |k, c| {
        k.check_output(c, i)?;
        // SAFETY: the plugin's in-struct (R1).
        let f = unsafe { read_struct(tensor)? };
        let dtype = dtype_of(f.dtype)?;
        let want = c.output_type(i).base();
        if dtype != want || dtype == DataType::String {
            return Err(Status::invalid_argument(format!(
                "{}: a foreign output {i} must be {want} (not a string), got {dtype}",
                k.def.op
            )));
        }
        let what = format!("set_output_foreign of op '{}' (output {i})", k.def.op);
        // SAFETY: the plugin passes `rank` dims.
        let dims = unsafe { plugin_dims(f.dims, f.rank, &what)? };
        let shape = TensorShape::new(dims)?;
        if !f.strides.is_null() {
            // SAFETY: non-NULL strides are `rank` of them (header).
            let strides = unsafe { slice(f.strides, f.rank as usize, "strides")? };
            if strides != row_major_strides(dims).as_slice() {
                return Err(Status::unimplemented(format!(
                    "{}: foreign output {i} has strides {strides:?}; this host takes \
                     row-major memory only (pass NULL strides)",
                    k.def.op
                )));
            }
        }
        let need = shape.num_elements() * dtype.size();
        if (f.byte_len as usize) < need {
            return Err(Status::invalid_argument(format!(
                "{}: foreign output {i} has {} bytes, its shape needs {need}",
                k.def.op, f.byte_len
            )));
        }
        let Some(release) = f.release else {
            return Err(Status::invalid_argument(format!(
                "{}: a foreign output needs a release callback",
                k.def.op
            )));
        };
        let ptr = match NonNull::new(f.data.cast::<u8>()) {
            Some(p) if (p.as_ptr() as usize) % dtype.size().max(1) == 0 => p,
            _ if need == 0 => NonNull::<u64>::dangling().cast(),
            _ => {
                return Err(Status::invalid_argument(format!(
                    "{}: foreign output {i}: NULL or misaligned data",
                    k.def.op
                )));
            }
        };
        // The release runs only once the tensor took ownership: if
        // making the tensor fails, the plugin still owns the memory.
        let armed = Arc::new(AtomicBool::new(false));
        let armed2 = armed.clone();
        let lib = k.def.lib.clone();
        let (data, user) = (SendPtr(f.data), SendPtr(f.release_user));
        let release = move || {
            if armed2.load(Ordering::Acquire) {
                // SAFETY: the plugin's release, exactly once (FnOnce),
                // while the library is still mapped (`lib` is held); R9
                // allows it on any thread.
                guard((), || unsafe { release(data.get(), user.get()) });
                lib.foreign_released();
            }
            drop(lib);
        };
        // SAFETY: the header's contract of set_output_foreign: `data`
        // holds `byte_len` initialised bytes (at least what the shape
        // needs, checked above) that stay valid and unwritten by the
        // plugin until its release callback runs.
        let buffer =
            unsafe { Buffer::from_foreign(ptr, f.byte_len as usize, Location::Host, release) };
        let t = Tensor::from_buffer(dtype, dims, buffer)?;
        k.def.lib.foreign_created();
        armed.store(true, Ordering::Release);
        k.retire_output(c, i);
        c.set_output(i, t)
    }
}

host_fn! {
    pub(super) fn set_output_strings(
        p: *mut OpforgeKernelCtx,
        i: usize,
        dims: *const i64,
        rank: u32,
        elements: *const OpforgeStr,
    ) -> status,
    with_kctx, |k, c| {
        k.check_output(c, i)?;
        if c.output_type(i).base() != DataType::String {
            return Err(Status::invalid_argument(format!(
                "{}: output {i} is not a string output",
                k.def.op
            )));
        }
        let what = format!("set_output_strings of op '{}' (output {i})", k.def.op);
        // SAFETY: the plugin passes `rank` dims.
        let shape = unsafe { shape_of(dims, rank, &what)? };
        // SAFETY: the plugin passes one string per element (header).
        let elems = unsafe { slice(elements, shape.num_elements(), "elements")? };
        let mut v = Vec::with_capacity(elems.len());
        for e in elems {
            // SAFETY: a plugin string (R5).
            v.push(unsafe { bytes(*e, "string element")? }.to_vec());
        }
        let t = Tensor::from_strings(shape.dims(), v)?;
        k.retire_output(c, i);
        c.set_output(i, t)
    }
}

host_fn! {
    pub(super) fn allocate_temp(
        p: *mut OpforgeKernelCtx,
        dtype: OpforgeDType,
        dims: *const i64,
        rank: u32,
        out: *mut OpforgeTensor,
    ) -> status,
    with_kctx, |k, c| {
        let dtype = dtype_of(dtype)?;
        if dtype == DataType::String {
            return Err(Status::invalid_argument(
                "allocate_temp: string temporaries are not supported",
            ));
        }
        let what = format!("allocate_temp of op '{}'", k.def.op);
        // SAFETY: the plugin passes `rank` dims.
        let shape = unsafe { shape_of(dims, rank, &what)? };
        let mut t = c.allocate_temp(dtype, shape)?;
        let v = view(&mut t, true, &k.extra().arena)?;
        // The buffer stays where it is when the tensor moves into the list.
        k.extra().temps.borrow_mut().push(t);
        // SAFETY: the plugin's out-struct.
        unsafe { write_view(&v, out) }
    }
}

host_fn! {
    pub(super) fn attr(
        p: *const OpforgeKernelCtx,
        name: OpforgeStr,
        value: *mut OpforgeAttrValue,
    ) -> status,
    with_kctx, |k, c| {
        // SAFETY: the plugin's string and out-struct; the values are lent
        // from the context's arena, which lives until compute returns.
        unsafe { read_attr(c.op_def(), c.attrs(), &k.extra().arena, name, value) }
    }
}

host_fn! {
    pub(super) fn num_threads(p: *const OpforgeKernelCtx) -> u32 [1],
    with_kctx, |_k, c| {
        Ok(u32::try_from(c.thread_pool().num_threads().max(1)).unwrap_or(u32::MAX))
    }
}

host_fn! {
    pub(super) fn parallel_for(
        p: *mut OpforgeKernelCtx,
        total: u64,
        cost_per_unit: u64,
        work: OpforgeWorkFn,
        user: *mut c_void,
    ) -> status,
    with_kctx, |k, c| {
        let Some(work) = work else {
            return Err(Status::invalid_argument(
                "parallel_for: a NULL work function",
            ));
        };
        let total = usize::try_from(total)
            .map_err(|_| Status::invalid_argument("parallel_for: total does not fit in usize"))?;
        let cost = usize::try_from(cost_per_unit).unwrap_or(usize::MAX);
        let first: Mutex<Option<(OpforgeCode, String)>> = Mutex::new(None);
        let failed = AtomicBool::new(false);
        let user = SendPtr(user);
        // The work functions run with no context of this thread's current
        // (this host function holds it; on the pool's threads there is
        // none): a kernel-context call from them is refused (R9).
        let body = |b: usize, e: usize| {
            if failed.load(Ordering::Relaxed) {
                return;
            }
            let mut st = HostStatus::default();
            // SAFETY: the plugin's work function with its user pointer,
            // which R9 allows on any thread; `st` lives across the call.
            let code = unsafe { work(b as u64, e as u64, user.get(), st.as_ptr()) };
            if code != OPFORGE_OK {
                failed.store(true, Ordering::Relaxed);
                let mut f = first
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                if f.is_none() {
                    *f = Some((code, st.message));
                }
            }
        };
        let pool = c.thread_pool();
        if k.def.flags & OPFORGE_KERNEL_PARALLEL_ISOLATED != 0 {
            pool.shard_isolated(total, cost, body);
        } else {
            pool.shard(total, cost, body);
        }
        match first
            .into_inner()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
        {
            None => Ok(()),
            Some((code, message)) => {
                let st = HostStatus {
                    code,
                    message,
                    flags: 0,
                };
                Err(callback_error(
                    &k.def.lib.label(),
                    &format!("a parallel_for shard of op '{}'", k.def.op),
                    code,
                    &st,
                ))
            }
        }
    }
}
