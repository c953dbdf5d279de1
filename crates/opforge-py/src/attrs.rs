//! Python values to `AttrValue`s, by the attr's declared type. The Python
//! layer has already turned dtypes (`opforge.float32`, `numpy.float32`,
//! `'float32'`) into `DataType` numbers; everything else is converted here,
//! with TypeError/ValueError naming the attr, the op and what was expected.

use crate::tensor::PyTensor;
use opforge::proto::attr_value::{ListValue, Value};
use opforge::proto::tensor_shape_proto::Dim;
use opforge::proto::{AttrValue, NameAttrList, OpDef, TensorShapeProto};
use opforge::DataType;
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyBytes, PyFloat, PyInt, PyString};

/// What a conversion error says: `op 'ZeroOut', attr 'preserve_index'
/// expects an int, got str 'a'`.
fn expected(op: &OpDef, attr: &str, what: &str, v: &Bound<'_, PyAny>) -> PyErr {
    let ty = v
        .get_type()
        .name()
        .map(|n| n.to_string())
        .unwrap_or_else(|_| "?".into());
    let shown = v
        .repr()
        .map(|r| r.to_string())
        .unwrap_or_else(|_| "?".into());
    let shown: String = shown.chars().take(60).collect();
    PyTypeError::new_err(format!(
        "op '{}', attr '{attr}' expects {what}, got {ty} {shown}",
        op.name
    ))
}

fn int(op: &OpDef, attr: &str, v: &Bound<'_, PyAny>) -> PyResult<i64> {
    if v.is_instance_of::<PyBool>() || !(v.is_instance_of::<PyInt>() || v.hasattr("__index__")?) {
        return Err(expected(op, attr, "an int", v));
    }
    v.call_method0("__index__")?.extract::<i64>().map_err(|_| {
        PyValueError::new_err(format!(
            "op '{}', attr '{attr}': {v} does not fit in int64",
            op.name
        ))
    })
}

fn float(op: &OpDef, attr: &str, v: &Bound<'_, PyAny>) -> PyResult<f32> {
    if v.is_instance_of::<PyBool>()
        || !(v.is_instance_of::<PyFloat>()
            || v.is_instance_of::<PyInt>()
            || v.hasattr("__float__")?)
    {
        return Err(expected(op, attr, "a float", v));
    }
    Ok(v.call_method0("__float__")?.extract::<f64>()? as f32)
}

fn boolean(op: &OpDef, attr: &str, v: &Bound<'_, PyAny>) -> PyResult<bool> {
    if !v.is_instance_of::<PyBool>() {
        return Err(expected(op, attr, "a bool", v));
    }
    v.extract()
}

fn string(op: &OpDef, attr: &str, v: &Bound<'_, PyAny>) -> PyResult<Vec<u8>> {
    if let Ok(s) = v.cast::<PyString>() {
        return Ok(s.to_str()?.as_bytes().to_vec());
    }
    if let Ok(b) = v.cast::<PyBytes>() {
        return Ok(b.as_bytes().to_vec());
    }
    Err(expected(op, attr, "a str or bytes", v))
}

fn dtype(op: &OpDef, attr: &str, v: &Bound<'_, PyAny>) -> PyResult<i32> {
    let code: i32 = v.extract().map_err(|_| expected(op, attr, "a dtype", v))?;
    match DataType::from_i32(code) {
        Some(d) if d != DataType::Invalid => Ok(code),
        _ => Err(PyValueError::new_err(format!(
            "op '{}', attr '{attr}': {code} is not a dtype",
            op.name
        ))),
    }
}

fn shape(op: &OpDef, attr: &str, v: &Bound<'_, PyAny>) -> PyResult<TensorShapeProto> {
    if v.is_none() {
        return Ok(TensorShapeProto {
            dim: vec![],
            unknown_rank: true,
        });
    }
    if v.is_instance_of::<PyString>() || v.is_instance_of::<PyBytes>() {
        return Err(expected(op, attr, "a shape (a list of ints or None)", v));
    }
    let items = v
        .try_iter()
        .map_err(|_| expected(op, attr, "a shape (a list of ints or None)", v))?;
    let mut dim = Vec::new();
    for item in items {
        let item = item?;
        let size = if item.is_none() {
            -1
        } else {
            let d = int(op, attr, &item)?;
            if d < -1 {
                return Err(PyValueError::new_err(format!(
                    "op '{}', attr '{attr}': dimension {d} is negative (use None or -1 for unknown)",
                    op.name
                )));
            }
            d
        };
        dim.push(Dim {
            size,
            ..Default::default()
        });
    }
    Ok(TensorShapeProto {
        dim,
        unknown_rank: false,
    })
}

fn tensor(op: &OpDef, attr: &str, v: &Bound<'_, PyAny>) -> PyResult<opforge::proto::TensorProto> {
    let t = v
        .cast::<PyTensor>()
        .map_err(|_| expected(op, attr, "a Tensor", v))?;
    t.get().t.to_proto().map_err(|e| {
        PyValueError::new_err(format!("op '{}', attr '{attr}': {}", op.name, e.message()))
    })
}

fn func(op: &OpDef, attr: &str, v: &Bound<'_, PyAny>) -> PyResult<NameAttrList> {
    let name = v
        .cast::<PyString>()
        .map_err(|_| expected(op, attr, "a function name (str)", v))?;
    Ok(NameAttrList {
        name: name.to_str()?.to_string(),
        ..Default::default()
    })
}

fn list<'py, T>(
    op: &OpDef,
    attr: &str,
    v: &Bound<'py, PyAny>,
    f: impl Fn(&OpDef, &str, &Bound<'py, PyAny>) -> PyResult<T>,
) -> PyResult<Vec<T>> {
    if v.is_instance_of::<PyString>() || v.is_instance_of::<PyBytes>() {
        return Err(expected(op, attr, "a list", v));
    }
    let items = v.try_iter().map_err(|_| expected(op, attr, "a list", v))?;
    items.map(|item| f(op, attr, &item?)).collect()
}

/// The `AttrValue` of `v` for attr `attr` of `op`.
pub fn attr_value(op: &OpDef, attr: &str, v: &Bound<'_, PyAny>) -> PyResult<AttrValue> {
    let Some(def) = op.attr.iter().find(|a| a.name == attr) else {
        let names: Vec<&str> = op.attr.iter().map(|a| a.name.as_str()).collect();
        return Err(PyTypeError::new_err(format!(
            "op '{}' has no attr '{attr}' (its attrs: {})",
            op.name,
            names.join(", ")
        )));
    };
    let value = match def.r#type.as_str() {
        "int" => Value::I(int(op, attr, v)?),
        "float" => Value::F(float(op, attr, v)?),
        "bool" => Value::B(boolean(op, attr, v)?),
        "string" => Value::S(string(op, attr, v)?),
        "type" => Value::Type(dtype(op, attr, v)?),
        "shape" => Value::Shape(shape(op, attr, v)?),
        "tensor" => Value::Tensor(Box::new(tensor(op, attr, v)?)),
        "func" => Value::Func(func(op, attr, v)?),
        t if t.starts_with("list(") => {
            let mut l = ListValue::default();
            match t {
                "list(int)" => l.i = list(op, attr, v, int)?,
                "list(float)" => l.f = list(op, attr, v, float)?,
                "list(bool)" => l.b = list(op, attr, v, boolean)?,
                "list(string)" => l.s = list(op, attr, v, string)?,
                "list(type)" => l.r#type = list(op, attr, v, dtype)?,
                "list(shape)" => l.shape = list(op, attr, v, shape)?,
                "list(tensor)" => l.tensor = list(op, attr, v, tensor)?,
                "list(func)" => l.func = list(op, attr, v, func)?,
                other => {
                    return Err(PyTypeError::new_err(format!(
                        "op '{}', attr '{attr}' has type {other}, which Python cannot set yet",
                        op.name
                    )))
                }
            }
            Value::List(Box::new(l))
        }
        other => {
            return Err(PyTypeError::new_err(format!(
                "op '{}', attr '{attr}' has type {other}, which Python cannot set yet",
                op.name
            )))
        }
    };
    Ok(AttrValue { value: Some(value) })
}

/// A Python value of an `AttrValue` (the reverse of [`attr_value`], for
/// `op.get_attr(name)` in Python gradient functions): ints, floats, bools,
/// `bytes` for strings (as TensorFlow), dtypes as `opforge.DType`, shapes as
/// lists (None for unknown dims or rank), tensors as `opforge.Tensor`,
/// functions by name, lists of these.
pub fn attr_to_py<'py>(py: Python<'py>, v: &AttrValue) -> PyResult<Bound<'py, PyAny>> {
    fn dtype<'py>(py: Python<'py>, code: i32) -> PyResult<Bound<'py, PyAny>> {
        crate::hooks::hook(py, "dtypes")?.get_item(code)
    }
    fn shape<'py>(py: Python<'py>, s: &TensorShapeProto) -> PyResult<Bound<'py, PyAny>> {
        if s.unknown_rank {
            return Ok(py.None().into_bound(py));
        }
        let dims: Vec<Option<i64>> = s
            .dim
            .iter()
            .map(|d| (d.size >= 0).then_some(d.size))
            .collect();
        Ok(pyo3::types::PyList::new(py, dims)?.into_any())
    }
    fn tensor<'py>(
        py: Python<'py>,
        t: &opforge::proto::TensorProto,
    ) -> PyResult<Bound<'py, PyAny>> {
        let t = opforge::Tensor::from_proto(t)
            .map_err(|e| PyValueError::new_err(e.message().to_string()))?;
        Ok(Bound::new(py, PyTensor::new(t))?.into_any())
    }
    use pyo3::types::PyList;
    Ok(match &v.value {
        None | Some(Value::Placeholder(_)) => py.None().into_bound(py),
        Some(Value::I(i)) => i.into_pyobject(py)?.into_any(),
        Some(Value::F(f)) => f.into_pyobject(py)?.into_any(),
        Some(Value::B(b)) => PyBool::new(py, *b).to_owned().into_any(),
        Some(Value::S(s)) => PyBytes::new(py, s).into_any(),
        Some(Value::Type(t)) => dtype(py, *t)?,
        Some(Value::Shape(s)) => shape(py, s)?,
        Some(Value::Tensor(t)) => tensor(py, t)?,
        Some(Value::Func(f)) => PyString::new(py, &f.name).into_any(),
        Some(Value::List(l)) => {
            let out = PyList::empty(py);
            for i in &l.i {
                out.append(i)?;
            }
            for f in &l.f {
                out.append(f)?;
            }
            for b in &l.b {
                out.append(b)?;
            }
            for s in &l.s {
                out.append(PyBytes::new(py, s))?;
            }
            for t in &l.r#type {
                out.append(dtype(py, *t)?)?;
            }
            for s in &l.shape {
                out.append(shape(py, s)?)?;
            }
            for t in &l.tensor {
                out.append(tensor(py, t)?)?;
            }
            for f in &l.func {
                out.append(&f.name)?;
            }
            out.into_any()
        }
    })
}
