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

/// `_C.set_hooks(dict)`: called by `opforge/__init__.py`. The first call
/// wins: a second import of the package (after a failed first one) reuses
/// the hooks already lent.
#[pyfunction]
pub fn set_hooks(hooks: Bound<'_, PyDict>) {
    let _ = HOOKS.set(hooks.unbind());
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
