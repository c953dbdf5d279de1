//! What the vectorcall entries of opforge's callables share (op functions,
//! `fast::op_function_vectorcall`; `operator.Custom`,
//! `custom::custom_caller_vectorcall`): enabling the protocol on a pyo3
//! type, running an entry's body with panics turned into errors, counting
//! its keyword arguments and passing a call on unchanged.

use crate::errors;
use pyo3::exceptions::PyRuntimeError;
use pyo3::ffi;
use pyo3::prelude::*;

/// The number of keyword arguments of a vectorcall (`kwnames` null or a
/// tuple of str, as CPython passes it).
pub(crate) fn keyword_count(kwnames: *mut ffi::PyObject) -> usize {
    if kwnames.is_null() {
        0
    } else {
        // SAFETY: a non-null `kwnames` is a tuple (the vectorcall contract).
        unsafe { ffi::PyTuple_GET_SIZE(kwnames) as usize }
    }
}

/// Runs the body of a vectorcall entry: its result as a new reference, or
/// null with the error set; a panic becomes an Internal error naming `what`
/// (CPython must never see one unwind through it).
pub(crate) fn guarded<'py>(
    py: Python<'py>,
    what: &str,
    f: impl FnOnce() -> PyResult<Bound<'py, PyAny>>,
) -> *mut ffi::PyObject {
    match errors::guard(py, what, f) {
        Ok(r) => r.into_ptr(),
        Err(e) => {
            e.restore(py);
            std::ptr::null_mut()
        }
    }
}

/// Calls `f` with a vectorcall's arguments as they came.
///
/// # Safety
/// `args`, `nargsf` and `kwnames` follow CPython's vectorcall contract (see
/// `fast::op_function_vectorcall`).
pub(crate) unsafe fn forward_vectorcall<'py>(
    py: Python<'py>,
    f: &Py<PyAny>,
    args: *const *mut ffi::PyObject,
    nargsf: usize,
    kwnames: *mut ffi::PyObject,
) -> PyResult<Bound<'py, PyAny>> {
    // SAFETY: `f` is a live callable; the arguments follow the contract.
    let r = unsafe { ffi::PyObject_Vectorcall(f.as_ptr(), args, nargsf, kwnames) };
    // SAFETY: `r` is a new reference, or null with an exception set.
    unsafe { Bound::from_owned_ptr_or_err(py, r) }
}

/// Sets the vectorcall offset of `probe`'s type to where `field` (a field
/// of `probe`'s Rust struct holding its `Option<vectorcallfunc>`) lies, and
/// its `Py_TPFLAGS_HAVE_VECTORCALL` flag.
///
/// # Safety
/// `field` points into `probe`'s object, at a field of type
/// `Option<ffi::vectorcallfunc>` that every instance of the type has at the
/// same offset and sets to its entry point; the type is ready and has not
/// been called through yet; its `tp_call` stays pyo3's `__call__`.
pub(crate) unsafe fn set_vectorcall_field(
    probe: &Bound<'_, PyAny>,
    field: *const Option<ffi::vectorcallfunc>,
) -> PyResult<()> {
    let offset = (field as usize)
        .checked_sub(probe.as_ptr() as usize)
        .ok_or_else(|| PyRuntimeError::new_err("the vectorcall field is not in the object"))?;
    let tp = probe.get_type().as_type_ptr();
    // SAFETY: by the contract, `offset` is where every instance holds its
    // `Option<vectorcallfunc>` (a nullable C function pointer, the layout
    // CPython reads).
    unsafe {
        (*tp).tp_vectorcall_offset = offset as ffi::Py_ssize_t;
        (*tp).tp_flags |= ffi::Py_TPFLAGS_HAVE_VECTORCALL;
        ffi::PyType_Modified(tp);
    }
    Ok(())
}
