//! The native half of `opforge.operator.Custom` (MXNet's `mx.nd.Custom`):
//! the common call goes from Python straight to the custom operator's op
//! function, with no Python frame of opforge's; `crate::pykernel` runs the
//! operator's kernels.

use crate::tensor::PyTensor;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyTuple};
use smallvec::SmallVec;

thread_local! {
    /// Whether custom operators called on this thread run in training mode
    /// (`opforge.operator.train_mode()`).
    static TRAINING: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// `_C.set_custom_training(on)`: `train_mode()` on this thread; the
/// previous setting.
#[pyfunction]
pub fn set_custom_training(on: bool) -> bool {
    TRAINING.with(|t| t.replace(on))
}

/// `opforge.operator.Custom(*inputs, op_type, name=None, **params)`: runs
/// the custom operator `op_type` (registered with `register`) on `inputs`,
/// with `params` passed to its prop's `__init__`; one tensor for one
/// output, else a list (MXNet's `mx.nd.Custom`); in a graph, adds the op's
/// node.
///
/// `_C.CustomCaller`: the common call,
/// `Custom(*tensors, op_type=name)` eagerly with no tape recording and no
/// parameters, goes straight to the op function the Python layer prepared
/// for the type and the inputs' dtypes (`table[(op_type, dtypes)] = (fn,
/// attrs)`, attrs passed after the inputs); every other call runs
/// `fallback` (the Python `Custom`), which prepares the table.
#[pyclass(module = "opforge._C", name = "CustomCaller", frozen)]
pub struct CustomCaller {
    table: Py<PyDict>,
    fallback: Py<PyAny>,
}

#[pymethods]
impl CustomCaller {
    #[new]
    fn new(table: Py<PyDict>, fallback: Py<PyAny>) -> CustomCaller {
        CustomCaller { table, fallback }
    }

    #[pyo3(signature = (*args, **kwargs))]
    fn __call__<'py>(
        &self,
        py: Python<'py>,
        args: &Bound<'py, PyTuple>,
        kwargs: Option<&Bound<'py, PyDict>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        if let Some(r) = self.fast(py, args, kwargs)? {
            return Ok(r);
        }
        self.fallback.bind(py).call(args, kwargs)
    }
}

impl CustomCaller {
    /// The fast call's result, or `None` when the call is not the common
    /// one (or not prepared yet).
    fn fast<'py>(
        &self,
        py: Python<'py>,
        args: &Bound<'py, PyTuple>,
        kwargs: Option<&Bound<'py, PyDict>>,
    ) -> PyResult<Option<Bound<'py, PyAny>>> {
        let Some(kw) = kwargs else { return Ok(None) };
        if kw.len() != 1 || crate::fast::tapes_or_graphs() || TRAINING.with(|t| t.get()) {
            return Ok(None);
        }
        let Some(op_type) = kw.get_item("op_type")? else {
            return Ok(None);
        };
        let mut enums: SmallVec<[i32; 4]> = SmallVec::new();
        for a in args.iter() {
            match a.cast_exact::<PyTensor>() {
                Ok(t) => enums.push(t.get().t.dtype() as i32),
                Err(_) => return Ok(None),
            }
        }
        let key = PyTuple::new(py, [op_type, PyTuple::new(py, enums)?.into_any()])?;
        let Some(plan) = self.table.bind(py).get_item(key)? else {
            return Ok(None);
        };
        let plan = plan.cast_into::<PyTuple>().map_err(PyErr::from)?;
        let (f, attrs) = (plan.get_item(0)?, plan.get_item(1)?);
        let attrs = attrs.cast_into::<PyTuple>().map_err(PyErr::from)?;
        let all: SmallVec<[Bound<'py, PyAny>; 8]> = args.iter().chain(attrs.iter()).collect();
        let call_args = PyTuple::new(py, all)?;
        let out = f.call1(call_args)?;
        if out.is_exact_instance_of::<PyTensor>() {
            return Ok(Some(out));
        }
        Ok(Some(
            PyList::new(py, out.try_iter()?.collect::<PyResult<Vec<_>>>()?)?.into_any(),
        ))
    }
}
