//! A mock host: a minimal `OpforgeHostApi` implemented in Rust that
//! records registrations and runs kernels over plain `Vec` buffers, so the
//! SDK's callbacks can be driven without opforge's loader.
#![allow(dead_code)]

mod grad;
mod kernel;
mod registration;
mod shape;

pub use grad::*;
pub use kernel::*;
pub use registration::*;
pub use shape::*;

use std::cell::RefCell;
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

pub(crate) fn st<'a>(s: *mut OpforgeStatus) -> &'a mut MockStatus {
    // SAFETY: every status this host hands out is a live MockStatus.
    unsafe { &mut *s.cast::<MockStatus>() }
}

pub(crate) fn text(s: OpforgeStr) -> String {
    // SAFETY: strings the plugin passes are valid for the call (R5).
    String::from_utf8(unsafe { s.as_bytes() }.to_vec()).unwrap()
}

pub(crate) fn fail(status: *mut OpforgeStatus, code: OpforgeCode, message: &str) -> OpforgeCode {
    let s = st(status);
    s.code = code;
    s.message = message.to_string();
    code
}

/// An argument's flat range as a context of this host knows it.
pub type ArgRange = (String, bool, usize, usize);

/// The `arg_range` slot of the kernel and gradient tables: the range of
/// the argument `name` among `ranges`, written to the plugin's
/// out-pointers.
pub(crate) fn arg_range(
    ranges: &[ArgRange],
    name: OpforgeStr,
    is_output: u8,
    start: *mut usize,
    stop: *mut usize,
    status: *mut OpforgeStatus,
) -> OpforgeCode {
    let name = text(name);
    match ranges
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

pub(crate) unsafe extern "C" fn set_status(
    status: *mut OpforgeStatus,
    code: OpforgeCode,
    m: OpforgeStr,
) {
    let s = st(status);
    s.code = code;
    s.message = text(m);
}
pub(crate) unsafe extern "C" fn status_code(status: *const OpforgeStatus) -> OpforgeCode {
    st(status as *mut _).code
}
pub(crate) unsafe extern "C" fn status_message(status: *const OpforgeStatus) -> OpforgeStr {
    let s = st(status as *mut _);
    OpforgeStr::from_text(&s.message)
}
pub(crate) unsafe extern "C" fn set_status_flags(status: *mut OpforgeStatus, flags: u32) {
    st(status).flags |= flags;
}
pub(crate) unsafe extern "C" fn status_flags(status: *const OpforgeStatus) -> u32 {
    st(status as *mut _).flags
}

thread_local! {
    pub static LOG: RefCell<Vec<String>> = const { RefCell::new(Vec::new()) };
    /// Calls of the kernel table's view-making slots (input, output,
    /// allocate_output, forward_input_or_allocate_output) on this thread.
    pub static VIEW_CALLS: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

pub(crate) fn count_view_call() {
    VIEW_CALLS.with(|c| c.set(c.get() + 1));
}

/// The view-making host calls made on this thread so far.
pub fn view_calls() -> u64 {
    VIEW_CALLS.with(|c| c.get())
}

pub(crate) unsafe extern "C" fn log(_: *const OpforgeHostApi, _level: u32, m: OpforgeStr) {
    LOG.with(|l| l.borrow_mut().push(text(m)));
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
