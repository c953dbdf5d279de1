//! The host table a library's init gets: statuses, logging, and the
//! registration table that stages ops, kernels, shape functions and
//! gradients (committed by the parent module's `Loader`).

use super::*;
use crate::manifest::OpRecord;
use serde_json::{json, Map, Value};

// ---- statuses and logging ------------------------------------------------------

pub(super) unsafe extern "C" fn set_status(
    status: *mut OpforgeStatus,
    code: OpforgeCode,
    message: OpforgeStr,
) {
    guard((), || {
        if status.is_null() {
            return;
        }
        // SAFETY: statuses are made only by the host (R6/R8).
        let s = unsafe { &mut *status.cast::<HostStatus>() };
        s.code = code;
        // SAFETY: plugin string (R5); copied.
        s.message = match unsafe { bytes(message, "message") } {
            Ok(b) => String::from_utf8_lossy(b).into_owned(),
            Err(e) => e.message().to_string(),
        };
        if code == OPFORGE_OK {
            s.message.clear();
            s.flags = 0;
        }
    })
}

pub(super) unsafe extern "C" fn status_code(status: *const OpforgeStatus) -> OpforgeCode {
    guard(OPFORGE_INTERNAL, || {
        if status.is_null() {
            return OPFORGE_INVALID_ARGUMENT;
        }
        // SAFETY: a host-made status.
        unsafe { &*status.cast::<HostStatus>() }.code
    })
}

pub(super) unsafe extern "C" fn status_message(status: *const OpforgeStatus) -> OpforgeStr {
    guard(OpforgeStr::EMPTY, || {
        if status.is_null() {
            return OpforgeStr::EMPTY;
        }
        // SAFETY: a host-made status; the message lives until it changes (header).
        let s = unsafe { &*status.cast::<HostStatus>() };
        OpforgeStr {
            ptr: s.message.as_ptr().cast(),
            len: s.message.len(),
        }
    })
}

pub(super) unsafe extern "C" fn set_status_flags(status: *mut OpforgeStatus, flags: u32) {
    guard((), || {
        if !status.is_null() {
            // SAFETY: a host-made status.
            unsafe { &mut *status.cast::<HostStatus>() }.flags |= flags;
        }
    })
}

pub(super) unsafe extern "C" fn status_flags(status: *const OpforgeStatus) -> u32 {
    guard(0, || {
        if status.is_null() {
            return 0;
        }
        // SAFETY: a host-made status.
        unsafe { &*status.cast::<HostStatus>() }.flags
    })
}

pub(super) unsafe extern "C" fn status_new() -> *mut OpforgeStatus {
    guard(std::ptr::null_mut(), || {
        Box::into_raw(Box::<HostStatus>::default()).cast()
    })
}

pub(super) unsafe extern "C" fn status_delete(status: *mut OpforgeStatus) {
    guard((), || {
        if !status.is_null() {
            // SAFETY: made by status_new (R6: the plugin frees what it made with status_new).
            drop(unsafe { Box::from_raw(status.cast::<HostStatus>()) });
        }
    })
}

pub(super) unsafe extern "C" fn log(host: *const OpforgeHostApi, level: u32, message: OpforgeStr) {
    guard((), || {
        let name = hosts()
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&(host as usize))
            .cloned()
            .unwrap_or_else(|| "unknown library".into());
        // SAFETY: plugin string (R5).
        let msg = unsafe { bytes(message, "message") }
            .map(String::from_utf8_lossy)
            .unwrap_or_default();
        let level = match level {
            OPFORGE_LOG_DEBUG => "DEBUG",
            OPFORGE_LOG_INFO => "INFO",
            OPFORGE_LOG_WARNING => "WARNING",
            OPFORGE_LOG_ERROR => "ERROR",
            _ => "LOG",
        };
        eprintln!("[opforge library {name}] {level}: {msg}");
    })
}

pub(super) unsafe extern "C" fn extension(_name: OpforgeStr, _min_version: u32) -> *const c_void {
    std::ptr::null()
}

// ---- registration ----------------------------------------------------------------

/// What init registered, not yet visible: committed only if init succeeds.
/// Holds no strong reference to the library or the registry once init is
/// over (no cycles).
#[derive(Default)]
pub(crate) struct Staging {
    pub(super) lib: Weak<LibInner>,
    pub(super) registry: Option<Arc<Registry>>,
    pub(super) active: bool,
    pub(super) ops: Vec<(String, OpDefBuilder, bool)>,
    pub(super) kernels: Vec<(KernelDefBuilder, Arc<PluginKernelDef>)>,
    pub(super) gradients: Vec<(String, &'static str, GradientFn)>,
    /// What init registered as manifest records (op, kernel, gradient), in
    /// registration order: the declaration `opforge lib seal` writes.
    pub(super) records: Vec<Value>,
}

impl Staging {
    fn lib(&self) -> Result<Arc<LibInner>> {
        self.lib
            .upgrade()
            .ok_or_else(|| Status::internal("the library being initialised is gone"))
    }

    fn registry(&self) -> Result<&Arc<Registry>> {
        self.registry
            .as_ref()
            .ok_or_else(|| Status::failed_precondition("the registrar is valid during init only"))
    }

    fn has_op(&self, op: &str) -> bool {
        self.ops.iter().any(|(n, ..)| n == op)
            || self.registry.as_ref().is_some_and(|r| r.lookup(op).is_ok())
    }

    fn require_op(&self, op: &str, what: &str) -> Result<()> {
        if self.has_op(op) {
            Ok(())
        } else {
            Err(Status::not_found(format!(
                "{what} for op '{op}', which is not registered: register the op first (in this \
                 library's init, or load the library that defines it before this one)"
            )))
        }
    }
}

/// # Safety
/// `r` is the registrar init received.
unsafe fn staging<'a>(r: *mut OpforgeRegistrar) -> Result<&'a Mutex<Staging>> {
    if r.is_null() {
        return Err(Status::invalid_argument("a NULL OpforgeRegistrar"));
    }
    // SAFETY: the registrar is the Mutex<Staging> the loader made for init;
    // it lives until the library is released.
    let m = unsafe { &*r.cast::<Mutex<Staging>>() };
    if !m.lock().unwrap_or_else(PoisonError::into_inner).active {
        return Err(Status::failed_precondition(
            "the registrar is valid during init only; register everything in \
             opforge_plugin_init_v1",
        ));
    }
    Ok(m)
}

pub(super) unsafe extern "C" fn reg_op(
    r: *mut OpforgeRegistrar,
    def: *const OpforgeOpDef,
    status: *mut OpforgeStatus,
) -> OpforgeCode {
    // SAFETY: plugin pointers (R7).
    unsafe {
        guard_status(status, || {
            let m = staging(r)?;
            let d = read_struct(def)?;
            let name = text(d.name, "op name")?.to_string();
            let mut b = OpDefBuilder::new(name.clone());
            let mut rec = OpRecord {
                name: name.clone(),
                ..OpRecord::default()
            };
            for s in slice(d.attrs, d.num_attrs, "attrs")? {
                let spec = text(*s, "attr spec")?;
                rec.attrs.push(spec.to_string());
                b = b.attr(spec);
            }
            for s in slice(d.inputs, d.num_inputs, "inputs")? {
                let spec = text(*s, "input spec")?;
                rec.inputs.push(spec.to_string());
                b = b.input(spec);
            }
            for s in slice(d.outputs, d.num_outputs, "outputs")? {
                let spec = text(*s, "output spec")?;
                rec.outputs.push(spec.to_string());
                b = b.output(spec);
            }
            for s in slice(d.control_outputs, d.num_control_outputs, "control_outputs")? {
                let spec = text(*s, "control output")?;
                rec.control_outputs.push(spec.to_string());
                b = b.control_output(spec);
            }
            let known = OPFORGE_OP_STATEFUL
                | OPFORGE_OP_COMMUTATIVE
                | OPFORGE_OP_AGGREGATE
                | OPFORGE_OP_ALLOWS_UNINITIALIZED_INPUT
                | OPFORGE_OP_DISTRIBUTED_COMMUNICATION;
            if d.flags & !known != 0 {
                return Err(Status::unimplemented(format!(
                    "op '{name}': unknown flag bits {:#x}; upgrade opforge",
                    d.flags & !known
                )));
            }
            for (bit, flag) in [
                (OPFORGE_OP_STATEFUL, "stateful"),
                (OPFORGE_OP_COMMUTATIVE, "commutative"),
                (OPFORGE_OP_AGGREGATE, "aggregate"),
                (
                    OPFORGE_OP_ALLOWS_UNINITIALIZED_INPUT,
                    "allows_uninitialized_input",
                ),
                (
                    OPFORGE_OP_DISTRIBUTED_COMMUNICATION,
                    "distributed_communication",
                ),
            ] {
                if d.flags & bit != 0 {
                    rec.flags.push(flag.to_string());
                }
            }
            // The record's flags set the builder's, as a manifest reader does.
            b = OpRecord {
                flags: rec.flags.clone(),
                ..OpRecord::default()
            }
            .apply_flags(b)?;
            let doc = text(d.doc, "doc")?;
            if !doc.is_empty() {
                rec.doc = doc.to_string();
                b = b.doc(doc);
            }
            if d.deprecation_version != 0 {
                let explanation = text(d.deprecation_explanation, "deprecation")?;
                rec.deprecation = Some((d.deprecation_version, explanation.to_string()));
                b = b.deprecated(d.deprecation_version, explanation);
            }
            let mut st = m.lock().unwrap_or_else(PoisonError::into_inner);
            let has_shape_fn = d.shape_fn.is_some();
            if let Some(f) = d.shape_fn {
                let lib = st.lib()?;
                let user = SendPtr(d.shape_fn_user);
                let op = name.clone();
                b = b.set_shape_fn(move |ic| run_shape_fn(&lib, &op, f, user, ic));
            }
            let op_def = b
                .finalize()
                .map_err(|e| e.prepend(format!("op '{name}': ")))?;
            if st.ops.iter().any(|(n, ..)| *n == name) {
                return Err(Status::already_exists(format!(
                    "op '{name}' is registered twice by library {}",
                    st.lib()?.label()
                )));
            }
            if let Ok(existing) = st.registry()?.lookup(&name) {
                if *existing.op_def != op_def {
                    return Err(Status::already_exists(format!(
                        "Op with name '{name}' is already registered with a different \
                         definition by {}; library {} registers another one ({}). Rename the \
                         op in one of the libraries, or unload the other first",
                        existing.state().describe_origins(),
                        st.lib()?.label(),
                        opforge_core::registry::describe_difference(&existing.op_def, &op_def)
                    )));
                }
            }
            rec.shape_fn = has_shape_fn;
            st.records.push(rec.to_record());
            st.ops.push((name, b, has_shape_fn));
            Ok(())
        })
    }
}

pub(super) unsafe extern "C" fn reg_kernel(
    r: *mut OpforgeRegistrar,
    def: *const OpforgeKernelDef,
    status: *mut OpforgeStatus,
) -> OpforgeCode {
    // SAFETY: plugin pointers (R7).
    unsafe {
        guard_status(status, || {
            let m = staging(r)?;
            let d = read_struct(def)?;
            let op = text(d.op, "kernel op")?.to_string();
            let device = text(d.device_type, "device_type")?;
            if device != "CPU" {
                return Err(Status::unimplemented(format!(
                    "kernel of op '{op}' for device '{device}': this host runs plugin kernels on \
                     CPU only"
                )));
            }
            let known = OPFORGE_KERNEL_NOT_THREAD_SAFE
                | OPFORGE_KERNEL_PARALLEL_ISOLATED
                | OPFORGE_KERNEL_OUTPUT_REQUESTS;
            if d.flags & !known != 0 {
                return Err(Status::unimplemented(format!(
                    "kernel of op '{op}': unknown flag bits {:#x}; upgrade opforge",
                    d.flags & !known
                )));
            }
            // R1: a 1.0 plugin's shorter struct reads with the 1.1 fields
            // zero (no views entry, no declarations): the 1.0 path.
            let compute = d.compute;
            let compute_views = d.compute_views;
            if compute.is_none() && compute_views.is_none() {
                return Err(Status::invalid_argument(format!(
                    "kernel of op '{op}' has no compute callback"
                )));
            }
            if compute.is_none() {
                let lib = m.lock().unwrap_or_else(PoisonError::into_inner).lib()?;
                if lib.min_host_minor < 1 {
                    return Err(Status::failed_precondition(format!(
                        "kernel of op '{op}' has only the 1.1 compute_views entry, but library \
                         {} declares min_host_minor {}: a 1.0 host would load it and could \
                         not run the kernel; declare min_host_minor 1 \
                         (OPFORGE_MIN_HOST_MINOR) or give a 1.0 compute too",
                        lib.label(),
                        lib.min_host_minor
                    )));
                }
            }
            let output_like = read_output_like(&op, &d)?;
            let mut kb = KernelDefBuilder::new(&op).device(device);
            let mut constraints = Map::new();
            let mut host_memory = Vec::new();
            for c in read_array(d.constraints, d.num_constraints)? {
                let attr = text(c.attr, "constraint attr")?;
                let mut types = Vec::new();
                for &t in slice(c.types, c.num_types, "constraint types")? {
                    types.push(
                        DataType::from_i32(t)
                            .filter(|d| !d.is_ref())
                            .ok_or_else(|| {
                                Status::invalid_argument(format!(
                                    "kernel of op '{op}': constraint on '{attr}' names dtype {t}, \
                             which this host does not know"
                                ))
                            })?,
                    );
                }
                constraints.insert(
                    attr.to_string(),
                    types.iter().map(|t| json!(t.proto_name())).collect(),
                );
                kb = kb.type_constraint_list(attr, &types);
            }
            for s in slice(
                d.host_memory_args,
                d.num_host_memory_args,
                "host_memory_args",
            )? {
                let arg = text(*s, "host memory arg")?;
                host_memory.push(arg.to_string());
                kb = kb.host_memory(arg);
            }
            let label = text(d.label, "label")?;
            kb = kb.label(label).priority(d.priority);
            let flags: Vec<&str> = [
                (OPFORGE_KERNEL_NOT_THREAD_SAFE, "not_thread_safe"),
                (OPFORGE_KERNEL_PARALLEL_ISOLATED, "parallel_isolated"),
                (OPFORGE_KERNEL_OUTPUT_REQUESTS, "output_requests"),
            ]
            .into_iter()
            .filter(|(bit, _)| d.flags & bit != 0)
            .map(|(_, name)| name)
            .collect();
            let record = json!({
                "kind": "kernel",
                "op": op,
                "device": device,
                "constraints": constraints,
                "host_memory": host_memory,
                "label": label,
                "priority": d.priority,
                "flags": flags,
            });
            let mut st = m.lock().unwrap_or_else(PoisonError::into_inner);
            st.require_op(&op, "a kernel")?;
            let pk = Arc::new(PluginKernelDef {
                lib: st.lib()?,
                op,
                create: d.create,
                compute,
                compute_views,
                declared_mask: output_like
                    .iter()
                    .filter(|l| l.output < 64)
                    .fold(0, |m, l| m | (1u64 << l.output)),
                output_like,
                destroy: d.destroy,
                user: SendPtr(d.user),
                flags: d.flags,
            });
            st.kernels.push((kb, pk));
            st.records.push(record);
            Ok(())
        })
    }
}

/// The kernel's output declarations (1.1), checked: only with
/// compute_views, known flag bits, at most one per output.
///
/// # Safety
/// `d` was read from the plugin's registration: its `output_like` is NULL
/// or points to `num_output_like` structs (R1).
unsafe fn read_output_like(op: &str, d: &OpforgeKernelDef) -> Result<Box<[OutputLike]>> {
    if d.num_output_like == 0 {
        return Ok(Box::default());
    }
    if d.compute_views.is_none() {
        return Err(Status::invalid_argument(format!(
            "kernel of op '{op}' declares output_like without compute_views (the host sets \
             declared outputs only for compute_views)"
        )));
    }
    // SAFETY: forwarded from the caller.
    let decls = unsafe { read_array(d.output_like, d.num_output_like)? };
    let mut out: Vec<OutputLike> = Vec::with_capacity(decls.len());
    for l in decls {
        if l.flags & !OPFORGE_OUTPUT_FORWARD != 0 {
            return Err(Status::unimplemented(format!(
                "kernel of op '{op}': output_like of output {} has unknown flag bits {:#x}; \
                 upgrade opforge",
                l.output,
                l.flags & !OPFORGE_OUTPUT_FORWARD
            )));
        }
        if out.iter().any(|o| o.output == l.output) {
            return Err(Status::invalid_argument(format!(
                "kernel of op '{op}' declares output {} in output_like twice",
                l.output
            )));
        }
        out.push(OutputLike {
            output: l.output,
            input: l.input,
            forward: l.flags & OPFORGE_OUTPUT_FORWARD != 0,
        });
    }
    Ok(out.into_boxed_slice())
}

pub(super) unsafe extern "C" fn reg_gradient_fn(
    r: *mut OpforgeRegistrar,
    op: OpforgeStr,
    f: OpforgeGradFn,
    user: *mut c_void,
    status: *mut OpforgeStatus,
) -> OpforgeCode {
    // SAFETY: plugin pointers (R7).
    unsafe {
        guard_status(status, || {
            let m = staging(r)?;
            let op = text(op, "op")?.to_string();
            let Some(f) = f else {
                return Err(Status::invalid_argument(format!(
                    "gradient of op '{op}': a NULL gradient function"
                )));
            };
            let mut st = m.lock().unwrap_or_else(PoisonError::into_inner);
            st.require_op(&op, "a gradient")?;
            if st.gradients.iter().any(|(o, ..)| *o == op) {
                return Err(Status::already_exists(format!(
                    "the gradient of op '{op}' is registered twice by this library"
                )));
            }
            let lib = st.lib()?;
            let user = SendPtr(user);
            let g = GradientFn::from_fn(move |ctx| run_grad_fn(&lib, f, user, ctx));
            st.records
                .push(json!({"kind": "gradient", "op": op, "form": "fn"}));
            st.gradients.push((op, "fn", g));
            Ok(())
        })
    }
}

pub(super) unsafe extern "C" fn reg_gradient_function(
    r: *mut OpforgeRegistrar,
    def: *const OpforgeGradientFunction,
    status: *mut OpforgeStatus,
) -> OpforgeCode {
    // SAFETY: plugin pointers (R7).
    unsafe {
        guard_status(status, || {
            let m = staging(r)?;
            let d = read_struct(def)?;
            let decl = DeclGradient::read(&d)?;
            let mut st = m.lock().unwrap_or_else(PoisonError::into_inner);
            let op = decl.op().to_string();
            st.require_op(&op, "a gradient")?;
            if st.gradients.iter().any(|(o, ..)| *o == op) {
                return Err(Status::already_exists(format!(
                    "the gradient of op '{op}' is registered twice by this library"
                )));
            }
            {
                let staged = &st.ops;
                let registry = st.registry.clone();
                let find = |name: &str| {
                    staged
                        .iter()
                        .find(|(n, ..)| n == name)
                        .and_then(|(_, b, _)| b.finalize().ok())
                        .or_else(|| registry.as_ref().and_then(|r| r.op_def(name).ok()))
                };
                decl.validate(&find)?;
            }
            let label = st.lib()?.label();
            let g = GradientFn::from_fn(move |ctx| {
                decl.eval(ctx)
                    .map_err(|e| e.append(format!(" [library {label}]")))
            });
            st.records
                .push(json!({"kind": "gradient", "op": op, "form": "nodes"}));
            st.gradients.push((op, "nodes", g));
            Ok(())
        })
    }
}

pub(super) unsafe extern "C" fn reg_not_differentiable(
    r: *mut OpforgeRegistrar,
    op: OpforgeStr,
    status: *mut OpforgeStatus,
) -> OpforgeCode {
    // SAFETY: plugin pointers (R7).
    unsafe {
        guard_status(status, || {
            let m = staging(r)?;
            let op = text(op, "op")?.to_string();
            let mut st = m.lock().unwrap_or_else(PoisonError::into_inner);
            st.require_op(&op, "a gradient")?;
            if st.gradients.iter().any(|(o, ..)| *o == op) {
                return Err(Status::already_exists(format!(
                    "the gradient of op '{op}' is registered twice by this library"
                )));
            }
            st.records.push(json!({
                "kind": "gradient",
                "op": op,
                "form": "not_differentiable",
            }));
            st.gradients
                .push((op, "not_differentiable", GradientFn::NotDifferentiable));
            Ok(())
        })
    }
}

pub(super) static REGISTRATION_API: OpforgeRegistrationApi = {
    let mut t = OpforgeRegistrationApi::new();
    t.op = Some(reg_op);
    t.kernel = Some(reg_kernel);
    t.gradient_fn = Some(reg_gradient_fn);
    t.gradient_function = Some(reg_gradient_function);
    t.not_differentiable = Some(reg_not_differentiable);
    t
};

const HOST_VERSION: &str = concat!("opforge ", env!("CARGO_PKG_VERSION"));

pub(super) fn host_table() -> OpforgeHostApi {
    let mut t = OpforgeHostApi::new();
    t.abi_major = OPFORGE_ABI_MAJOR;
    t.abi_minor = OPFORGE_ABI_MINOR;
    t.host_version = OpforgeStr::from_text(HOST_VERSION);
    t.registration = &REGISTRATION_API;
    t.kernel = &KERNEL_API;
    t.shape = &SHAPE_API;
    t.grad = &GRAD_API;
    t.set_status = Some(set_status);
    t.status_code = Some(status_code);
    t.status_message = Some(status_message);
    t.set_status_flags = Some(set_status_flags);
    t.status_flags = Some(status_flags);
    t.status_new = Some(status_new);
    t.status_delete = Some(status_delete);
    t.log = Some(log);
    t.extension = Some(extension);
    t
}
