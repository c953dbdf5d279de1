//! The header's kernel API (`OpforgeKernelApi`): the functions a plugin
//! calls on a kernel's construction and compute contexts, over core's
//! `OpKernelConstruction` / `OpKernelContext` (see the parent module).

use super::*;

// ---- construction ----------------------------------------------------------

pub(super) unsafe extern "C" fn init_op_name(p: *const OpforgeKernelInit) -> OpforgeStr {
    guard(OpforgeStr::EMPTY, || {
        // SAFETY: the plugin passes the init it was given.
        let Ok((c, arena)) = (unsafe { init(p) }) else {
            return OpforgeStr::EMPTY;
        };
        arena.str(c.op_def().name.as_bytes())
    })
}

pub(super) unsafe extern "C" fn init_node_name(p: *const OpforgeKernelInit) -> OpforgeStr {
    guard(OpforgeStr::EMPTY, || {
        // SAFETY: the plugin passes the context pointer the host gave this callback (R7); NULL is rejected.
        let Ok((c, arena)) = (unsafe { init(p) }) else {
            return OpforgeStr::EMPTY;
        };
        arena.str(c.node_name().as_bytes())
    })
}

pub(super) unsafe extern "C" fn init_device_type(p: *const OpforgeKernelInit) -> OpforgeStr {
    guard(OpforgeStr::EMPTY, || {
        // SAFETY: the plugin passes the context pointer the host gave this callback (R7); NULL is rejected.
        let Ok((c, arena)) = (unsafe { init(p) }) else {
            return OpforgeStr::EMPTY;
        };
        arena.str(c.device_type().as_bytes())
    })
}

pub(super) unsafe extern "C" fn init_num_inputs(p: *const OpforgeKernelInit) -> usize {
    guard(0, || {
        // SAFETY: `p` is the init the host passed to this create call (R7);
        // `init` rejects NULL.
        unsafe { init(p) }.map_or(0, |(c, _)| c.input_types().len())
    })
}

pub(super) unsafe extern "C" fn init_input_dtype(
    p: *const OpforgeKernelInit,
    i: usize,
) -> OpforgeDType {
    guard(OPFORGE_DT_INVALID, || {
        // SAFETY: the plugin passes the context pointer the host gave this callback (R7); NULL is rejected.
        unsafe { init(p) }
            .ok()
            .and_then(|(c, _)| c.input_types().get(i).map(|d| d.base() as i32))
            .unwrap_or(OPFORGE_DT_INVALID)
    })
}

pub(super) unsafe extern "C" fn init_num_outputs(p: *const OpforgeKernelInit) -> usize {
    guard(0, || {
        // SAFETY: `p` is the init the host passed to this create call (R7);
        // `init` rejects NULL.
        unsafe { init(p) }.map_or(0, |(c, _)| c.output_types().len())
    })
}

pub(super) unsafe extern "C" fn init_output_dtype(
    p: *const OpforgeKernelInit,
    i: usize,
) -> OpforgeDType {
    guard(OPFORGE_DT_INVALID, || {
        // SAFETY: the plugin passes the context pointer the host gave this callback (R7); NULL is rejected.
        unsafe { init(p) }
            .ok()
            .and_then(|(c, _)| c.output_types().get(i).map(|d| d.base() as i32))
            .unwrap_or(OPFORGE_DT_INVALID)
    })
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

pub(super) fn arg_len(
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

pub(super) unsafe extern "C" fn init_arg_range(
    p: *const OpforgeKernelInit,
    name: OpforgeStr,
    is_output: u8,
    start: *mut usize,
    stop: *mut usize,
    status: *mut OpforgeStatus,
) -> OpforgeCode {
    // SAFETY: `status` is the plugin's status pointer (host-made).
    unsafe {
        guard_status(status, || {
            let (c, _) = init(p)?;
            let name = text(name, "argument name")?;
            let (a, b) = arg_range_of(c.op_def(), c.attrs(), name, is_output != 0)?;
            write_out(start, a, "start")?;
            write_out(stop, b, "stop")
        })
    }
}

pub(super) unsafe extern "C" fn init_attr(
    p: *const OpforgeKernelInit,
    name: OpforgeStr,
    value: *mut OpforgeAttrValue,
    status: *mut OpforgeStatus,
) -> OpforgeCode {
    // SAFETY: the init's arena lives until the instance's destroy, as R7
    // promises for init_attr values; pointers are the plugin's.
    unsafe {
        guard_status(status, || {
            let (c, arena) = init(p)?;
            read_attr(c.op_def(), c.attrs(), arena, name, value)
        })
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

pub(super) unsafe extern "C" fn op_name(p: *const OpforgeKernelCtx) -> OpforgeStr {
    guard(OpforgeStr::EMPTY, || {
        // SAFETY: the plugin passes the ctx it was given.
        let Ok(k) = (unsafe { kctx(p) }) else {
            return OpforgeStr::EMPTY;
        };
        // The op name lives as the kernel definition, held across the compute.
        lend_str(&k.def.op)
    })
}

pub(super) unsafe extern "C" fn node_name(p: *const OpforgeKernelCtx) -> OpforgeStr {
    guard(OpforgeStr::EMPTY, || {
        // SAFETY: the plugin passes the context pointer the host gave this callback (R7); NULL is rejected.
        let Ok(k) = (unsafe { kctx(p) }) else {
            return OpforgeStr::EMPTY;
        };
        // The node name lives as the OpKernelContext, across the compute.
        lend_str(k.ctx().node_name())
    })
}

pub(super) unsafe extern "C" fn num_inputs(p: *const OpforgeKernelCtx) -> usize {
    // SAFETY: the plugin passes the context pointer the host gave this callback (R7); NULL is rejected.
    guard(0, || unsafe { kctx(p) }.map_or(0, |k| k.ctx().num_inputs()))
}

pub(super) unsafe extern "C" fn num_outputs(p: *const OpforgeKernelCtx) -> usize {
    guard(0, || {
        // SAFETY: `p` is the ctx the host passed to this compute (R7);
        // `kctx` rejects NULL.
        unsafe { kctx(p) }.map_or(0, |k| k.ctx().num_outputs())
    })
}

pub(super) unsafe extern "C" fn input_dtype(p: *const OpforgeKernelCtx, i: usize) -> OpforgeDType {
    guard(OPFORGE_DT_INVALID, || {
        // SAFETY: the plugin passes the context pointer the host gave this callback (R7); NULL is rejected.
        match unsafe { kctx(p) } {
            Ok(k) if i < k.ctx().num_inputs() => k.ctx().input_dtype(i).base() as i32,
            _ => OPFORGE_DT_INVALID,
        }
    })
}

pub(super) unsafe extern "C" fn output_dtype(p: *const OpforgeKernelCtx, i: usize) -> OpforgeDType {
    guard(OPFORGE_DT_INVALID, || {
        // SAFETY: the plugin passes the context pointer the host gave this callback (R7); NULL is rejected.
        match unsafe { kctx(p) } {
            Ok(k) if i < k.ctx().num_outputs() => k.ctx().output_type(i).base() as i32,
            _ => OPFORGE_DT_INVALID,
        }
    })
}

pub(super) unsafe extern "C" fn arg_range(
    p: *const OpforgeKernelCtx,
    name: OpforgeStr,
    is_output: u8,
    start: *mut usize,
    stop: *mut usize,
    status: *mut OpforgeStatus,
) -> OpforgeCode {
    // SAFETY: plugin pointers (R7).
    unsafe {
        guard_status(status, || {
            let k = kctx(p)?;
            let name = text(name, "argument name")?;
            let r = k.ctx().signature().arg_range(name, is_output != 0)?;
            write_out(start, r.start, "start")?;
            write_out(stop, r.end, "stop")
        })
    }
}

pub(super) unsafe extern "C" fn input(
    p: *const OpforgeKernelCtx,
    i: usize,
    out: *mut OpforgeTensor,
    status: *mut OpforgeStatus,
) -> OpforgeCode {
    // SAFETY: plugin pointers (R7).
    unsafe {
        guard_status(status, || {
            let k = kctx(p)?;
            k.check_input(i)?;
            if k.moved(i) {
                return Err(Status::failed_precondition(format!(
                    "{}: input {i} was forwarded or moved to an output; use the output's view",
                    k.def.op
                )));
            }
            let v = k.input_view(i)?;
            write_view(&v, out)
        })
    }
}

pub(super) unsafe extern "C" fn output(
    p: *const OpforgeKernelCtx,
    i: usize,
    out: *mut OpforgeTensor,
    status: *mut OpforgeStatus,
) -> OpforgeCode {
    // SAFETY: plugin pointers (R7).
    unsafe {
        guard_status(status, || {
            let k = kctx(p)?;
            k.check_output(i)?;
            if k.ctx().output(i).is_none() {
                return Err(Status::failed_precondition(format!(
                    "{}: output {i} is not set yet",
                    k.def.op
                )));
            }
            let v = k.output_view(i)?;
            write_view(&v, out)
        })
    }
}

pub(super) unsafe extern "C" fn output_request(_p: *const OpforgeKernelCtx, _i: usize) -> u32 {
    OPFORGE_REQ_WRITE
}

pub(super) unsafe extern "C" fn allocate_output(
    p: *mut OpforgeKernelCtx,
    i: usize,
    dims: *const i64,
    rank: u32,
    out: *mut OpforgeTensor,
    status: *mut OpforgeStatus,
) -> OpforgeCode {
    // SAFETY: plugin pointers (R7).
    unsafe {
        guard_status(status, || {
            let k = kctx(p)?;
            k.check_output(i)?;
            if k.ctx().output_type(i).base() == DataType::String {
                return Err(Status::invalid_argument(format!(
                    "{}: output {i} is a string; use set_output_strings",
                    k.def.op
                )));
            }
            let shape = shape_of(dims, rank)?;
            k.retire_output(i);
            k.ctx().allocate_output(i, shape)?;
            let v = k.output_view(i)?;
            write_view(&v, out)
        })
    }
}

#[allow(clippy::too_many_arguments)]
pub(super) unsafe extern "C" fn forward_input_or_allocate_output(
    p: *mut OpforgeKernelCtx,
    candidates: *const usize,
    num_candidates: usize,
    i: usize,
    dims: *const i64,
    rank: u32,
    forwarded_from: *mut i64,
    out: *mut OpforgeTensor,
    status: *mut OpforgeStatus,
) -> OpforgeCode {
    // SAFETY: plugin pointers (R7).
    unsafe {
        guard_status(status, || {
            let k = kctx(p)?;
            k.check_output(i)?;
            if k.ctx().output_type(i).base() == DataType::String {
                return Err(Status::invalid_argument(format!(
                    "{}: output {i} is a string; use set_output_strings",
                    k.def.op
                )));
            }
            let cands = slice(candidates, num_candidates, "candidates")?;
            let mut any_moved = false;
            for &c in cands {
                k.check_input(c)?;
                any_moved |= k.moved(c);
            }
            // Moved inputs are no candidates (rare: a list only then).
            let usable: Vec<usize>;
            let cands = if any_moved {
                usable = cands.iter().copied().filter(|&c| !k.moved(c)).collect();
                &usable[..]
            } else {
                cands
            };
            let shape = shape_of(dims, rank)?;
            k.retire_output(i);
            let f = k.ctx().forward_input_or_allocate_output(cands, i, &shape)?;
            if let Some(c) = f {
                k.set_moved(c);
            }
            if !forwarded_from.is_null() {
                write_out(
                    forwarded_from,
                    f.map_or(OPFORGE_NOT_FORWARDED, |c| c as i64),
                    "forwarded_from",
                )?;
            }
            let v = k.output_view(i)?;
            write_view(&v, out)
        })
    }
}

pub(super) unsafe extern "C" fn set_output_from_input(
    p: *mut OpforgeKernelCtx,
    o: usize,
    i: usize,
    status: *mut OpforgeStatus,
) -> OpforgeCode {
    // SAFETY: plugin pointers (R7).
    unsafe {
        guard_status(status, || {
            let k = kctx(p)?;
            k.check_output(o)?;
            k.check_input(i)?;
            if k.moved(i) {
                return Err(Status::failed_precondition(format!(
                    "{}: input {i} was already moved to an output",
                    k.def.op
                )));
            }
            let want = k.ctx().output_type(o).base();
            let have = k.ctx().input_dtype(i).base();
            if want != have {
                return Err(Status::invalid_argument(format!(
                    "{}: output {o} is {want} but input {i} is {have}",
                    k.def.op
                )));
            }
            let t = k.ctx().inputs()[i].clone();
            k.retire_output(o);
            k.ctx().set_output(o, t)
        })
    }
}

pub(super) unsafe extern "C" fn set_output_foreign(
    p: *mut OpforgeKernelCtx,
    i: usize,
    tensor: *const OpforgeForeignTensor,
    status: *mut OpforgeStatus,
) -> OpforgeCode {
    // SAFETY: plugin pointers (R7).
    unsafe {
        guard_status(status, || {
            let k = kctx(p)?;
            k.check_output(i)?;
            let f = read_struct(tensor)?;
            let dtype = dtype_of(f.dtype)?;
            let want = k.ctx().output_type(i).base();
            if dtype != want || dtype == DataType::String {
                return Err(Status::invalid_argument(format!(
                    "{}: a foreign output {i} must be {want} (not a string), got {dtype}",
                    k.def.op
                )));
            }
            let dims = slice(f.dims, f.rank as usize, "dims")?;
            let shape = TensorShape::new(dims)?;
            if !f.strides.is_null() {
                let strides = slice(f.strides, f.rank as usize, "strides")?;
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
            let buffer =
                Buffer::from_foreign(ptr, f.byte_len as usize, Location::Host, move || {
                    if armed2.load(Ordering::Acquire) {
                        // SAFETY: the plugin's release, exactly once (FnOnce),
                        // while the library is still mapped (`lib` is held).
                        guard((), || release(data.get(), user.get()));
                        lib.foreign_released();
                    }
                    drop(lib);
                });
            let t = Tensor::from_buffer(dtype, dims, buffer)?;
            k.def.lib.foreign_created();
            armed.store(true, Ordering::Release);
            k.retire_output(i);
            k.ctx().set_output(i, t)
        })
    }
}

pub(super) unsafe extern "C" fn set_output_strings(
    p: *mut OpforgeKernelCtx,
    i: usize,
    dims: *const i64,
    rank: u32,
    elements: *const OpforgeStr,
    status: *mut OpforgeStatus,
) -> OpforgeCode {
    // SAFETY: plugin pointers (R7).
    unsafe {
        guard_status(status, || {
            let k = kctx(p)?;
            k.check_output(i)?;
            if k.ctx().output_type(i).base() != DataType::String {
                return Err(Status::invalid_argument(format!(
                    "{}: output {i} is not a string output",
                    k.def.op
                )));
            }
            let shape = shape_of(dims, rank)?;
            let elems = slice(elements, shape.num_elements(), "elements")?;
            let mut v = Vec::with_capacity(elems.len());
            for e in elems {
                v.push(bytes(*e, "string element")?.to_vec());
            }
            let t = Tensor::from_strings(shape.dims(), v)?;
            k.retire_output(i);
            k.ctx().set_output(i, t)
        })
    }
}

pub(super) unsafe extern "C" fn allocate_temp(
    p: *mut OpforgeKernelCtx,
    dtype: OpforgeDType,
    dims: *const i64,
    rank: u32,
    out: *mut OpforgeTensor,
    status: *mut OpforgeStatus,
) -> OpforgeCode {
    // SAFETY: plugin pointers (R7).
    unsafe {
        guard_status(status, || {
            let k = kctx(p)?;
            let dtype = dtype_of(dtype)?;
            if dtype == DataType::String {
                return Err(Status::invalid_argument(
                    "allocate_temp: string temporaries are not supported",
                ));
            }
            let shape = shape_of(dims, rank)?;
            let mut t = k.ctx().allocate_temp(dtype, shape)?;
            let v = view(&mut t, true, &k.extra().arena)?;
            // The buffer stays where it is when the tensor moves into the list.
            k.extra().temps.borrow_mut().push(t);
            write_view(&v, out)
        })
    }
}

pub(super) unsafe extern "C" fn attr(
    p: *const OpforgeKernelCtx,
    name: OpforgeStr,
    value: *mut OpforgeAttrValue,
    status: *mut OpforgeStatus,
) -> OpforgeCode {
    // SAFETY: plugin pointers (R7); the ctx's arena lives until compute returns.
    unsafe {
        guard_status(status, || {
            let k = kctx(p)?;
            let c = k.ctx();
            read_attr(c.op_def(), c.attrs(), &k.extra().arena, name, value)
        })
    }
}

pub(super) unsafe extern "C" fn num_threads(p: *const OpforgeKernelCtx) -> u32 {
    guard(1, || {
        // SAFETY: the plugin passes the context pointer the host gave this callback (R7); NULL is rejected.
        unsafe { kctx(p) }.map_or(1, |k| {
            u32::try_from(k.ctx().thread_pool().num_threads().max(1)).unwrap_or(u32::MAX)
        })
    })
}

pub(super) unsafe extern "C" fn parallel_for(
    p: *mut OpforgeKernelCtx,
    total: u64,
    cost_per_unit: u64,
    work: OpforgeWorkFn,
    user: *mut c_void,
    status: *mut OpforgeStatus,
) -> OpforgeCode {
    // SAFETY: plugin pointers (R7).
    unsafe {
        guard_status(status, || {
            let k = kctx(p)?;
            let Some(work) = work else {
                return Err(Status::invalid_argument(
                    "parallel_for: a NULL work function",
                ));
            };
            let total = usize::try_from(total).map_err(|_| {
                Status::invalid_argument("parallel_for: total does not fit in usize")
            })?;
            let cost = usize::try_from(cost_per_unit).unwrap_or(usize::MAX);
            let first: Mutex<Option<(OpforgeCode, String)>> = Mutex::new(None);
            let failed = AtomicBool::new(false);
            let user = SendPtr(user);
            let body = |b: usize, e: usize| {
                if failed.load(Ordering::Relaxed) {
                    return;
                }
                let mut st = HostStatus::default();
                // SAFETY: the plugin's work function with its user pointer,
                // which R9 allows on any thread; `st` lives across the call.
                let code = work(b as u64, e as u64, user.get(), st.as_ptr());
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
            let pool = k.ctx().thread_pool();
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
        })
    }
}
