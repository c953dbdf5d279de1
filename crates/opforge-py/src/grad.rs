//! Gradients written in Python (`@opforge.RegisterGradient("Op")`) and
//! `opforge.NotDifferentiable`: registered in opforge's registry as the op's
//! `Gradient` attribute, so the tape (and every other differentiation of
//! the op) uses them exactly as gradients registered in Rust or by an op
//! library.

use crate::attrs::attr_to_py;
use crate::errors;
use crate::graph_grad::{graph_sym, graph_tensor};
use crate::tensor::PyTensor;
use opforge::autodiff::{Gradient, GradientContext, GradientFn, Ops, Sym};
use opforge::registry::{OwnerId, Registry};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyTuple};
use std::sync::{Arc, OnceLock};

/// The owner of everything Python registers.
pub(crate) fn owner() -> OwnerId {
    static OWNER: OnceLock<OwnerId> = OnceLock::new();
    *OWNER.get_or_init(|| Registry::global().add_owner("python"))
}

/// The Python object for handle `s` of the gradient computation: a
/// symbolic tensor in graph gradients, an eager Tensor under a tape.
fn value<'py>(py: Python<'py>, ops: &dyn Ops, s: Sym, what: &str) -> PyResult<Bound<'py, PyAny>> {
    if let Some(t) = ops.value_of(s) {
        return Ok(Bound::new(py, PyTensor::new(t.clone()))?.into_any());
    }
    if let Some(t) = graph_tensor(py, s) {
        return t;
    }
    Err(pyo3::exceptions::PyNotImplementedError::new_err(format!(
        "a gradient written in Python runs under a GradientTape or in opforge.gradients on an \
         opforge.Graph; this differentiation has neither the {what} values nor their graph"
    )))
}

/// The handle of one result of a Python gradient.
fn result_sym(ops: &mut dyn Ops, scope: u32, item: &Bound<'_, PyAny>) -> PyResult<Sym> {
    let py = item.py();
    if let Ok(t) = item.cast::<PyTensor>() {
        return ops
            .constant(t.get().t.clone())
            .map_err(|e| errors::to_py(py, &e, None));
    }
    match graph_sym(scope, item)? {
        Some(s) => Ok(s),
        None => Err(pyo3::exceptions::PyTypeError::new_err(format!(
            "a gradient function returned {}, not a Tensor",
            item.get_type().name()?
        ))),
    }
}

/// Calls the Python gradient `f` as TensorFlow does, `f(op, *grads)`, for
/// the call `ctx`, and sets the input gradients it returns.
fn call(f: &Py<PyAny>, ctx: &mut GradientContext<'_>) -> opforge::Result<()> {
    let (inputs, outputs) = (ctx.inputs(), ctx.outputs());
    let scope = inputs.iter().chain(outputs).next().map_or(0, |s| s.scope());
    Python::attach(|py| {
        let mut run = || -> PyResult<Vec<Option<Sym>>> {
            let py_inputs = PyList::empty(py);
            for &s in inputs {
                py_inputs.append(value(py, &*ctx, s, "input")?)?;
            }
            let py_outputs = PyList::empty(py);
            for &s in outputs {
                py_outputs.append(value(py, &*ctx, s, "output")?)?;
            }
            let attrs = PyDict::new(py);
            for (k, v) in ctx.attrs() {
                attrs.set_item(k, attr_to_py(py, v)?)?;
            }
            let mut args: Vec<Bound<'_, PyAny>> = Vec::with_capacity(outputs.len() + 1);
            let op_obj = crate::hooks::hook(py, "grad_op")?.call1((
                ctx.op_name(),
                py_inputs,
                py_outputs,
                attrs,
            ))?;
            args.push(op_obj);
            for i in 0..outputs.len() {
                args.push(match ctx.output_grad(i) {
                    Some(s) => value(py, &*ctx, s, "gradient")?,
                    None => py.None().into_bound(py),
                });
            }
            let result = crate::hooks::hook(py, "call_gradient")?.call1((
                f.bind(py),
                PyTuple::new(py, args)?,
                inputs.len(),
            ))?;
            let mut out = Vec::with_capacity(inputs.len());
            for item in result.cast::<PyList>().map_err(PyErr::from)?.iter() {
                if item.is_none() {
                    out.push(None);
                    continue;
                }
                out.push(Some(result_sym(&mut *ctx, scope, &item)?));
            }
            Ok(out)
        };
        let grads = run().map_err(|e| {
            errors::stash(
                py,
                e,
                &format!("the Python gradient of op '{}'", ctx.op_name()),
            )
        })?;
        for (i, g) in grads.into_iter().enumerate() {
            if let Some(g) = g {
                ctx.set_input_grad(i, g)?;
            }
        }
        Ok(())
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
    let g = Arc::new(GradientFn::from_fn(move |ctx| call(&f, ctx)));
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
