//! `Status` to Python exceptions: the classes of `opforge.errors` (lent by
//! the Python layer, indexed by canonical code), and the panic guard.

use opforge::{Code, Status};
use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use std::panic::AssertUnwindSafe;
use std::sync::OnceLock;

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

/// The Python exception for `status`; `op` names the op the call ran, as
/// TensorFlow's `[Op:ZeroOut]` suffix does.
pub fn to_py(py: Python<'_>, status: &Status, op: Option<&str>) -> PyErr {
    let code = status.code() as usize;
    let mut message = status.message().to_string();
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
