//! `Status` to Python exceptions: the classes of `opforge.errors` (lent by
//! the Python layer, indexed by canonical code), and the panic guard.

use opforge::{Code, Status};
use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock, PoisonError};

static CLASSES: OnceLock<Vec<Option<Py<PyAny>>>> = OnceLock::new();

/// `_C.set_error_classes({code: class})`: called by `opforge.errors` (the
/// first call wins, as for the hooks).
#[pyfunction]
pub fn set_error_classes(classes: Bound<'_, PyDict>) -> PyResult<()> {
    let mut table: Vec<Option<Py<PyAny>>> = (0..17).map(|_| None).collect();
    for (k, v) in classes.iter() {
        let code: usize = k.extract()?;
        if let Some(slot) = table.get_mut(code) {
            *slot = Some(v.unbind());
        }
    }
    let _ = CLASSES.set(table);
    Ok(())
}

/// Python exceptions raised inside a callback the runtime made (a
/// gradient or a kernel written in Python), waiting to be raised again when
/// the runtime's error reaches Python: (marker, exception). Process-wide:
/// a kernel in a graph run raises on a worker thread, and the run's error
/// reaches Python on the thread that started the run.
static PENDING: Mutex<Vec<(String, PyErr)>> = Mutex::new(Vec::new());

/// How many stashed exceptions are kept (those whose status was dropped on
/// the way never come back).
const KEEP: usize = 64;

/// Keeps `err`, raised by Python code the runtime called for `what`, and
/// returns the `Status` the runtime passes on. Its message holds a marker:
/// when that status reaches [`to_py`], the original exception object is
/// raised instead (with the runtime's context added as a note), so a
/// user's exception in a Python gradient comes out as itself.
pub fn stash(py: Python<'_>, err: PyErr, what: &str) -> Status {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    let marker = format!("[python error {}]", NEXT.fetch_add(1, Ordering::Relaxed));
    let text = err
        .value(py)
        .str()
        .map(|s| s.to_string())
        .unwrap_or_else(|_| "?".into());
    let kind = err
        .get_type(py)
        .name()
        .map(|s| s.to_string())
        .unwrap_or_else(|_| "Exception".into());
    let status = Status::invalid_argument(format!("{what} raised {kind}: {text} {marker}"));
    let mut p = PENDING.lock().unwrap_or_else(PoisonError::into_inner);
    if p.len() >= KEEP {
        p.remove(0);
    }
    p.push((marker, err));
    status
}

/// The stashed exception whose marker `message` holds, taken.
fn take_stashed(message: &str) -> Option<PyErr> {
    if !message.contains("[python error ") {
        return None;
    }
    let mut p = PENDING.lock().unwrap_or_else(PoisonError::into_inner);
    let i = p.iter().position(|(m, _)| message.contains(m.as_str()))?;
    Some(p.remove(i).1)
}

/// The Python exception for `status`; `op` names the op the call ran, as
/// TensorFlow's `[Op:ZeroOut]` suffix does.
pub fn to_py(py: Python<'_>, status: &Status, op: Option<&str>) -> PyErr {
    if let Some(original) = take_stashed(status.message()) {
        let note = format!("opforge: {}", status.message());
        let _ = original.value(py).call_method1("add_note", (note,));
        return original;
    }
    let code = status.code() as usize;
    let mut message = status.message().to_string();
    if let Some(note) = crate::library::unloaded_note(status) {
        message.push_str(&note);
    }
    if let Some(op) = op {
        if !message.contains("[Op:") {
            message.push_str(&format!(" [Op:{op}]"));
        }
    }
    let class = CLASSES
        .get()
        .and_then(|t| t.get(code))
        .and_then(|c| c.as_ref());
    match class {
        Some(cls) => match cls.bind(py).call1((message.clone(), op, code)) {
            Ok(exc) => PyErr::from_value(exc),
            Err(e) => e,
        },
        None => PyRuntimeError::new_err(format!("{:?}: {message}", status.code())),
    }
}

/// The Python exception for an opforge `Result`.
pub fn check<T>(py: Python<'_>, r: opforge::Result<T>, op: Option<&str>) -> PyResult<T> {
    r.map_err(|e| to_py(py, &e, op))
}

/// Runs `f`, turning a Rust panic into `opforge.errors.InternalError`
/// (never pyo3's `PanicException`).
pub fn guard<T>(py: Python<'_>, what: &str, f: impl FnOnce() -> PyResult<T>) -> PyResult<T> {
    match std::panic::catch_unwind(AssertUnwindSafe(f)) {
        Ok(r) => r,
        Err(payload) => {
            let msg = payload
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "a panic".to_string());
            Err(to_py(
                py,
                &Status::new(
                    Code::Internal,
                    format!("opforge panicked in {what}: {msg} (a bug: please report it)"),
                ),
                None,
            ))
        }
    }
}
