//! Gradients written in Python (`@opforge.RegisterGradient("Op")`) and
//! `opforge.NotDifferentiable`: registered in opforge's registry as the op's
//! `Gradient` attribute, so the tape (and every other differentiation of
//! the op) uses them exactly as gradients registered in Rust or by an op
//! library.

use crate::attrs::attr_to_py;
use crate::errors;
use crate::tensor::PyTensor;
use opforge::autodiff::{GradOp, Gradient, GradientFn, Ops, Sym};
use opforge::registry::{OwnerId, Registry};
use opforge::Status;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyTuple};
use std::sync::{Arc, OnceLock};

/// The owner of everything Python registers.
fn owner() -> OwnerId {
    static OWNER: OnceLock<OwnerId> = OnceLock::new();
    *OWNER.get_or_init(|| Registry::global().add_owner("python"))
}

fn value<'py>(
    py: Python<'py>,
    ops: &dyn Ops,
    s: Sym,
    what: &str,
) -> PyResult<Bound<'py, PyTensor>> {
    let t = ops.value_of(s).ok_or_else(|| {
        pyo3::exceptions::PyNotImplementedError::new_err(format!(
            "a gradient written in Python needs the {what} values: it runs under a GradientTape \
             (eager), not in graph gradients yet"
        ))
    })?;
    Bound::new(py, PyTensor::new(t.clone()))
}

/// Calls the Python gradient `f` for `op`.
fn call(
    f: &Py<PyAny>,
    ops: &mut dyn Ops,
    op: &GradOp<'_>,
    grads: &[Option<Sym>],
) -> opforge::Result<Vec<Option<Sym>>> {
    Python::attach(|py| {
        let mut run = || -> PyResult<Vec<Option<Sym>>> {
            let inputs = PyList::empty(py);
            for &s in op.inputs {
                inputs.append(value(py, &*ops, s, "input")?)?;
            }
            let outputs = PyList::empty(py);
            for &s in op.outputs {
                outputs.append(value(py, &*ops, s, "output")?)?;
            }
            let attrs = PyDict::new(py);
            for (k, v) in op.attrs {
                attrs.set_item(k, attr_to_py(py, v)?)?;
            }
            let mut args: Vec<Bound<'_, PyAny>> = Vec::with_capacity(grads.len() + 1);
            let op_obj =
                crate::hooks::hook(py, "grad_op")?.call1((op.op, inputs, outputs, attrs))?;
            args.push(op_obj);
            for g in grads {
                args.push(match g {
                    Some(s) => value(py, &*ops, *s, "gradient")?.into_any(),
                    None => py.None().into_bound(py),
                });
            }
            let result = crate::hooks::hook(py, "call_gradient")?.call1((
                f.bind(py),
                PyTuple::new(py, args)?,
                op.inputs.len(),
            ))?;
            let mut out = Vec::with_capacity(op.inputs.len());
            for item in result.cast::<PyList>().map_err(PyErr::from)?.iter() {
                if item.is_none() {
                    out.push(None);
                    continue;
                }
                let t = item.cast::<PyTensor>().map_err(PyErr::from)?;
                out.push(Some(
                    ops.constant(t.get().t.clone())
                        .map_err(|e| errors::to_py(py, &e, None))?,
                ));
            }
            Ok(out)
        };
        run().map_err(|e| {
            Status::invalid_argument(format!(
                "the Python gradient of op '{}' failed: {}",
                op.op,
                e.value(py)
                    .str()
                    .map(|s| s.to_string())
                    .unwrap_or_else(|_| "?".into())
            ))
        })
    })
}

/// `_C.register_gradient(op, f, override, location)`: `f(op, *grads)`
/// becomes `op`'s gradient. AlreadyExists naming the existing gradient's
/// origin when it has one, unless `override`.
#[pyfunction]
pub fn register_gradient(
    py: Python<'_>,
    op: &str,
    f: Py<PyAny>,
    r#override: bool,
    location: &str,
) -> PyResult<()> {
    let g = Arc::new(GradientFn::from_fn(move |ops, gop, grads| {
        call(&f, ops, gop, grads)
    }));
    set(py, op, g, r#override, location)
}

/// `_C.not_differentiable(op, location)`: no gradient flows through `op`.
#[pyfunction]
pub fn not_differentiable(py: Python<'_>, op: &str, location: &str) -> PyResult<()> {
    set(
        py,
        op,
        Arc::new(GradientFn::NotDifferentiable),
        false,
        location,
    )
}

fn set(
    py: Python<'_>,
    op: &str,
    g: Arc<GradientFn>,
    replace: bool,
    location: &str,
) -> PyResult<()> {
    let r = Registry::global();
    let registrar = r.registrar(owner(), location);
    let result = if replace {
        registrar.replace_attr::<Gradient>(op, g).map(|_| ())
    } else {
        registrar.set_attr::<Gradient>(op, g)
    };
    errors::check(py, result, None)
}
