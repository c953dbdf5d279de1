//! Running ops eagerly from Python, and the OpDefs the Python layer
//! generates functions from.

use crate::attrs::attr_value;
use crate::errors;
use crate::tensor::PyTensor;
use opforge::attrs::{arg_ranges, resolve_call, ArgTypes, AttrMap};
use opforge::eager::{Arg, EagerContext};
use opforge::proto::OpDef;
use opforge::{Registry, Tensor};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyTuple};
use std::sync::OnceLock;

/// Calls whose inputs hold more elements than this run with the GIL
/// released (smaller ones cost less than releasing it).
pub const DETACH_ELEMENTS: usize = 32 * 1024;

/// The process's eager context: the global registry, the shared CPU device.
pub fn context() -> &'static EagerContext {
    static CTX: OnceLock<EagerContext> = OnceLock::new();
    CTX.get_or_init(EagerContext::default_cpu)
}

/// `_C.op_names()`: every registered op, sorted.
#[pyfunction]
pub fn op_names() -> Vec<String> {
    let mut n = Registry::global().names();
    n.sort();
    n
}

/// `_C.registry_generation()`: changes whenever an op library is loaded or
/// unloaded, so generated functions know to refresh.
#[pyfunction]
pub fn registry_generation() -> u64 {
    Registry::global().generation()
}

/// `_C.op_defs_json(names=None)`: the OpDefs (proto3 JSON, as `opforge ops
/// show --format json`) of `names`, or of every op.
#[pyfunction]
#[pyo3(signature = (names=None))]
pub fn op_defs_json(py: Python<'_>, names: Option<Vec<String>>) -> PyResult<String> {
    errors::guard(py, "op_defs_json", || {
        let r = Registry::global();
        let names = names.unwrap_or_else(|| r.names());
        let mut out = Vec::with_capacity(names.len());
        for n in &names {
            let def = errors::check(py, r.op_def(n), None)?;
            out.push(opforge::proto::to_json(&def));
        }
        Ok(serde_json::Value::Array(out).to_string())
    })
}

/// `_C.op_list_bytes(names)`: the serialized `OpList` (binary proto) of
/// `names`, as TensorFlow's `OP_LIST` of a loaded library.
#[pyfunction]
pub fn op_list_bytes<'py>(
    py: Python<'py>,
    names: Vec<String>,
) -> PyResult<Bound<'py, pyo3::types::PyBytes>> {
    let r = Registry::global();
    let mut list = opforge::proto::OpList::default();
    for n in &names {
        list.op.push(errors::check(py, r.op_def(n), None)?);
    }
    Ok(pyo3::types::PyBytes::new(
        py,
        &opforge::proto::to_binary(&list),
    ))
}

/// `_C.python_signature(op)`: the generated function's signature line, as
/// `opforge ops show` prints it (`zero_out(to_zero, preserve_index=0, name=None)`).
#[pyfunction]
pub fn python_signature(py: Python<'_>, op: &str) -> PyResult<String> {
    let def = errors::check(py, Registry::global().op_def(op), None)?;
    Ok(opforge::signature::python_signature(&def))
}

/// `_C.python_docstring(op)`: the generated function's docstring, in the
/// form of TensorFlow's generated wrappers (core's
/// `signature::python_docstring`).
#[pyfunction]
pub fn python_docstring(py: Python<'_>, op: &str) -> PyResult<String> {
    let def = errors::check(py, Registry::global().op_def(op), None)?;
    Ok(opforge::signature::python_docstring(&def))
}

/// `_C.snake_case(name)`: TensorFlow's Python name of an op
/// (`Conv2DBackpropInput` -> `conv2d_backprop_input`; core's
/// `signature::snake_case`).
#[pyfunction]
pub fn snake_case(name: &str) -> String {
    opforge::signature::snake_case(name)
}

/// One row of [`python_params`]: `(python_name, arg_name, is_input,
/// default_literal)`.
type ParamRow = (String, String, bool, Option<String>);

/// `_C.python_params(op)`: the generated function's parameters in order,
/// as `(python_name, arg_name, is_input, default_literal)` (the default as
/// the Python literal TensorFlow's wrappers show, `None` without one).
#[pyfunction]
pub fn python_params(py: Python<'_>, op: &str) -> PyResult<Vec<ParamRow>> {
    let def = errors::check(py, Registry::global().op_def(op), None)?;
    Ok(opforge::signature::python_params(&def)
        .into_iter()
        .map(|p| {
            let lit = p.default.as_ref().map(opforge::signature::python_literal);
            (p.name, p.arg, p.is_input, lit)
        })
        .collect())
}

/// One input argument from Python: a Tensor, or a list/tuple of Tensors.
fn arg(op: &str, name: &str, v: &Bound<'_, PyAny>) -> PyResult<Arg> {
    if let Ok(t) = v.cast::<PyTensor>() {
        return Ok(Arg::One(t.get().t.clone()));
    }
    if v.is_instance_of::<PyList>() || v.is_instance_of::<PyTuple>() {
        let mut l = Vec::new();
        for item in v.try_iter()? {
            let item = item?;
            let t = item.cast::<PyTensor>().map_err(|_| {
                PyTypeError::new_err(format!(
                    "op '{op}', input '{name}': list items must be Tensors (convert them first)"
                ))
            })?;
            l.push(t.get().t.clone());
        }
        return Ok(Arg::List(l));
    }
    Err(PyTypeError::new_err(format!(
        "op '{op}', input '{name}' must be a Tensor or a list of Tensors"
    )))
}

/// The inputs of a call, one [`Arg`] per input argument of `def`.
pub fn input_args(def: &OpDef, inputs: &Bound<'_, PyList>) -> PyResult<Vec<Arg>> {
    let op = &def.name;
    if inputs.len() != def.input_arg.len() {
        return Err(PyTypeError::new_err(format!(
            "op '{op}' takes {} inputs, got {}",
            def.input_arg.len(),
            inputs.len()
        )));
    }
    let mut args = Vec::with_capacity(inputs.len());
    for (i, v) in inputs.iter().enumerate() {
        args.push(arg(op, &def.input_arg[i].name, &v)?);
    }
    Ok(args)
}

/// The attrs of a call, converted by their declared types.
pub fn attr_map(def: &OpDef, attrs: &Bound<'_, PyDict>) -> PyResult<AttrMap> {
    let mut map = AttrMap::new();
    for (k, v) in attrs.iter() {
        let name: String = k.extract()?;
        let value = attr_value(def, &name, &v)?;
        map.insert(name, value);
    }
    Ok(map)
}

fn elements(a: &Arg) -> usize {
    match a {
        Arg::One(t) => t.num_elements(),
        Arg::List(l) => l.iter().map(Tensor::num_elements).sum(),
    }
}

/// `_C.execute(op, inputs, attrs)`: runs `op` eagerly. `inputs` holds one
/// entry per input argument (a Tensor, or a list of Tensors for list
/// arguments); `attrs` maps attr names to Python values (dtypes as
/// `DataType` numbers). Returns one entry per output argument: a Tensor,
/// or a list of Tensors for list outputs.
#[pyfunction]
pub fn execute<'py>(
    py: Python<'py>,
    op: &str,
    inputs: Bound<'py, PyList>,
    attrs: Bound<'py, PyDict>,
) -> PyResult<Bound<'py, PyList>> {
    errors::guard(py, "execute", || {
        let reg = errors::check(py, Registry::global().lookup(op), None)?;
        let def = &reg.op_def;
        let args = input_args(def, &inputs)?;
        let map = attr_map(def, &attrs)?;
        let list_outputs = def
            .output_arg
            .iter()
            .any(|a| !a.number_attr.is_empty() || !a.type_list_attr.is_empty());
        let grouping = if list_outputs {
            let types: Vec<ArgTypes> = args
                .iter()
                .map(|a| match a {
                    Arg::One(t) => ArgTypes::Single(t.dtype()),
                    Arg::List(l) => ArgTypes::List(l.iter().map(Tensor::dtype).collect()),
                })
                .collect();
            let call = errors::check(py, resolve_call(def, &types, &map), Some(op))?;
            Some(errors::check(
                py,
                arg_ranges(def, &def.output_arg, &call.attrs),
                Some(op),
            )?)
        } else {
            None
        };
        let big = args.iter().map(elements).sum::<usize>() > DETACH_ELEMENTS;
        let ctx = context();
        let result = if big {
            py.detach(|| ctx.execute_args(op, args, &map))
        } else {
            ctx.execute_args(op, args, &map)
        };
        let outs = errors::check(py, result, Some(op))?;
        let out = PyList::empty(py);
        match grouping {
            None => {
                for t in outs {
                    out.append(PyTensor::new(t))?;
                }
            }
            Some(ranges) => {
                let mut outs: Vec<Option<Tensor>> = outs.into_iter().map(Some).collect();
                for (i, r) in ranges.into_iter().enumerate() {
                    let arg = &def.output_arg[i];
                    let mut ts = Vec::with_capacity(r.len());
                    for j in r {
                        let t = outs.get_mut(j).and_then(Option::take).ok_or_else(|| {
                            PyValueError::new_err("a kernel returned too few outputs")
                        })?;
                        ts.push(PyTensor::new(t));
                    }
                    if arg.number_attr.is_empty() && arg.type_list_attr.is_empty() {
                        for t in ts {
                            out.append(t)?;
                        }
                    } else {
                        out.append(PyList::new(py, ts)?)?;
                    }
                }
            }
        }
        Ok(out)
    })
}

/// `_C.graph_call(op, inputs, attrs)`: the same call as `execute`, as a
/// one-op graph whose inputs are `Const` nodes (so shape functions see
/// their values), run by a `Session`. Returns `(outputs, shapes)`: the flat
/// output tensors and, per output, the shape the graph inferred (a list
/// with None for unknown dims, or None for an unknown rank). For
/// `opforge.test.opcheck`: eager against graph, kernel against shape
/// function.
#[pyfunction]
pub fn graph_call<'py>(
    py: Python<'py>,
    op: &str,
    inputs: Bound<'py, PyList>,
    attrs: Bound<'py, PyDict>,
) -> PyResult<(Bound<'py, PyList>, Bound<'py, PyList>)> {
    use opforge::graph::{Graph, Input, NodeSpec, Output, Session};
    errors::guard(py, "graph_call", || {
        let reg = errors::check(py, Registry::global().lookup(op), None)?;
        let def = &reg.op_def;
        let args = input_args(def, &inputs)?;
        let map = attr_map(def, &attrs)?;
        let mut g = Graph::new();
        let mut k = 0usize;
        let mut constant = |g: &mut Graph, t: &Tensor| -> opforge::Result<Output> {
            k += 1;
            let spec = NodeSpec::new("Const", &format!("input_{k}"))
                .attr("value", t)
                .attr("dtype", t.dtype());
            Ok(Output::new(g.add(spec)?, 0))
        };
        let mut spec = NodeSpec::new(op, "op");
        for a in &args {
            let input = match a {
                Arg::One(t) => Input::One(errors::check(py, constant(&mut g, t), Some(op))?),
                Arg::List(l) => {
                    let mut outs = Vec::with_capacity(l.len());
                    for t in l {
                        outs.push(errors::check(py, constant(&mut g, t), Some(op))?);
                    }
                    Input::List(outs)
                }
            };
            spec.inputs.push(input);
        }
        spec.attrs = map;
        let id = errors::check(py, g.add(spec), Some(op))?;
        let n = errors::check(py, g.node(id), Some(op))?.output_types.len();
        let fetches: Vec<Output> = (0..n).map(|i| Output::new(id, i)).collect();
        let shapes = PyList::empty(py);
        for &o in &fetches {
            match errors::check(py, g.output_shape(o), Some(op))? {
                None => shapes.append(py.None())?,
                Some(dims) => {
                    let dims: Vec<Option<i64>> =
                        dims.iter().map(|&d| (d >= 0).then_some(d)).collect();
                    shapes.append(PyList::new(py, dims)?)?;
                }
            }
        }
        let session = errors::check(py, Session::new(g), Some(op))?;
        let outs = errors::check(
            py,
            py.detach(|| session.run(vec![], &fetches, &[])),
            Some(op),
        )?;
        let out = PyList::empty(py);
        for t in outs {
            out.append(PyTensor::new(t))?;
        }
        Ok((out, shapes))
    })
}
