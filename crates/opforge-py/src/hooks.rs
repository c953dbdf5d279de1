//! What the Python layer lends the native module once, at import: the
//! dtype objects (indexed by TensorFlow's `DataType` number) and the Python
//! functions behind `Tensor`'s dunder methods (`repr`, `numpy`, operators,
//! indexing), so that there is one `opforge.Tensor` class, native, whose
//! Python-level behaviour lives in Python.

use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use std::sync::OnceLock;

static HOOKS: OnceLock<Py<PyDict>> = OnceLock::new();

/// `_C.set_hooks(dict)`: called once by `opforge/__init__.py`.
#[pyfunction]
pub fn set_hooks(hooks: Bound<'_, PyDict>) -> PyResult<()> {
    HOOKS
        .set(hooks.unbind())
        .map_err(|_| PyRuntimeError::new_err("opforge._C hooks are already set"))
}

/// The hook `name`.
pub fn hook<'py>(py: Python<'py>, name: &str) -> PyResult<Bound<'py, PyAny>> {
    let hooks = HOOKS.get().ok_or_else(|| {
        PyRuntimeError::new_err("opforge._C is used before `import opforge` finished")
    })?;
    hooks
        .bind(py)
        .get_item(name)?
        .ok_or_else(|| PyRuntimeError::new_err(format!("opforge._C: no hook '{name}'")))
}
