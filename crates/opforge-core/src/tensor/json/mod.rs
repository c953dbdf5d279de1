//! The tensor JSON codec of `opforge exec` (and of any tool that prints or
//! reads tensors as JSON): one JSON object per tensor,
//!
//! ```json
//! {"dtype": "DT_FLOAT", "shape": [2, 3], "values": [1, 2.5, "nan", "inf", "-inf", -0.0]}
//! ```
//!
//! - `dtype`: the proto name (`DT_FLOAT`); the spec name (`float`,
//!   `float32`) is accepted on input. Every dtype with an [`Element`] type
//!   is supported, plus `DT_STRING` and `DT_RESOURCE`.
//! - `shape`: the dimension sizes, each `>= 0` (`[]` for a scalar).
//! - `values`: the elements flattened in row-major order, exactly as many as
//!   the shape has:
//!   - floating types (`DT_FLOAT`, `DT_DOUBLE`, `DT_HALF`, `DT_BFLOAT16`):
//!     JSON numbers, and the strings `"nan"`, `"inf"`, `"-inf"` (which JSON
//!     cannot write as numbers; `"+inf"`, `"infinity"` and any letter case
//!     are accepted on input). Printed as the shortest decimal that reads
//!     back as the same value of the dtype (`0.1` for `0.1f32`, not
//!     `0.10000000149011612`). A finite number whose magnitude is too large
//!     for the dtype is an error, not an infinity. NaN payloads and signs
//!     are not kept. Between a tensor and a [`Value`] every value round-trips
//!     exactly; through JSON *text*, `f64` values round-trip exactly only
//!     if serde_json's `float_roundtrip` feature is on (without it,
//!     serde_json's parser may be one ulp off for 17-digit decimals).
//!   - integer types: JSON integers (`1e3` and `7.0` are accepted since they
//!     are integral), or decimal strings (`"18446744073709551615"`, as proto3
//!     JSON writes 64-bit integers); a value outside the dtype's range or a
//!     non-integral number is an error.
//!   - `DT_BOOL`: `true` / `false`.
//!   - complex types: `[re, im]` pairs (each part as for the float types);
//!     a plain number means a zero imaginary part.
//!   - `DT_STRING`: JSON strings for byte strings that are valid UTF-8, and
//!     `{"base64": "..."}` (standard alphabet, padded) for the others, so
//!     every byte string round-trips exactly. Both forms are accepted on input.
//!   - `DT_RESOURCE`: handle objects `{"device", "container", "name",
//!     "type_name", "dtypes_and_shapes": [{"dtype": "DT_FLOAT", "shape":
//!     [2]}]}`; a shape there may have `-1` dims or be `null` (unknown
//!     rank). Every key is optional on input.
//!
//! Unknown keys are errors (they are usually typos), and so is anything a
//! dtype cannot hold; errors are `InvalidArgument` and say which value is wrong.
//!
//! ```
//! use opforge_core::tensor::json::{tensor_from_json, tensor_to_json};
//! let v = serde_json::json!({"dtype": "DT_INT32", "shape": [2], "values": [1, -2]});
//! let t = tensor_from_json(&v).unwrap();
//! assert_eq!(t.flat::<i32>().unwrap(), &[1, -2]);
//! assert_eq!(tensor_to_json(&t).unwrap(), v);
//! let bad = serde_json::json!({"dtype": "DT_UINT8", "shape": [1], "values": [300]});
//! assert!(tensor_from_json(&bad).unwrap_err().message().contains("out of range"));
//! ```

mod handle;

pub use handle::{handle_from_json, handle_to_json};

use super::{Element, Location, Tensor, TensorShape};
use crate::dtype::DataType;
use crate::{Result, Status};
use half::{bf16, f16};
use handle::{base64_decode, base64_encode};
use num_complex::Complex;
use serde_json::{Map, Number, Value};

fn err(msg: impl Into<String>) -> Status {
    Status::invalid_argument(msg.into())
}

/// A short rendering of a JSON value for error messages.
fn show(v: &Value) -> String {
    let s = v.to_string();
    if s.chars().count() > 40 {
        let cut: String = s.chars().take(37).collect();
        format!("{cut}...")
    } else {
        s
    }
}

/// Reads a tensor from its JSON form (see the [module docs](self)).
pub fn tensor_from_json(v: &Value) -> Result<Tensor> {
    let obj = v.as_object().ok_or_else(|| {
        err(format!(
            "a tensor must be a JSON object {{\"dtype\", \"shape\", \"values\"}}, got {}",
            show(v)
        ))
    })?;
    if let Some(k) = obj
        .keys()
        .find(|k| !matches!(k.as_str(), "dtype" | "shape" | "values"))
    {
        return Err(err(format!(
            "unknown key \"{k}\" in a tensor (expected \"dtype\", \"shape\" and \"values\")"
        )));
    }
    let dtype = match obj.get("dtype") {
        Some(Value::String(name)) => parse_dtype(name)?,
        Some(other) => {
            return Err(err(format!(
                "a tensor's \"dtype\" must be a string like \"DT_FLOAT\", got {}",
                show(other)
            )))
        }
        None => return Err(err("a tensor has no \"dtype\" (like \"DT_FLOAT\")")),
    };
    let shape = match obj.get("shape") {
        Some(s) => parse_shape(s)?,
        None => {
            return Err(err(
                "a tensor has no \"shape\" (like [2, 3], or [] for a scalar)",
            ))
        }
    };
    let values = match obj.get("values") {
        Some(Value::Array(a)) => a.as_slice(),
        Some(other) => {
            return Err(err(format!(
                "a tensor's \"values\" must be a flat array, got {}",
                show(other)
            )))
        }
        None => return Err(err("a tensor has no \"values\" array")),
    };
    let n = shape.num_elements();
    if values.len() != n {
        return Err(err(format!(
            "a {} tensor of shape {shape} has {n} elements, but {} values were given",
            dtype.proto_name(),
            values.len()
        )));
    }
    let dims = shape.dims();
    match dtype {
        DataType::Float => from_vec(dims, read_all(values, dtype, read_f32)?),
        DataType::Double => from_vec(dims, read_all(values, dtype, read_f64)?),
        DataType::Half => from_vec(dims, read_all(values, dtype, read_f16)?),
        DataType::BFloat16 => from_vec(dims, read_all(values, dtype, read_bf16)?),
        DataType::Int8 => from_vec(dims, read_all(values, dtype, read_int::<i8>)?),
        DataType::Int16 => from_vec(dims, read_all(values, dtype, read_int::<i16>)?),
        DataType::Int32 => from_vec(dims, read_all(values, dtype, read_int::<i32>)?),
        DataType::Int64 => from_vec(dims, read_all(values, dtype, read_int::<i64>)?),
        DataType::UInt8 => from_vec(dims, read_all(values, dtype, read_int::<u8>)?),
        DataType::UInt16 => from_vec(dims, read_all(values, dtype, read_int::<u16>)?),
        DataType::UInt32 => from_vec(dims, read_all(values, dtype, read_int::<u32>)?),
        DataType::UInt64 => from_vec(dims, read_all(values, dtype, read_int::<u64>)?),
        DataType::Bool => from_vec(dims, read_all(values, dtype, read_bool)?),
        DataType::Complex64 => from_vec(
            dims,
            read_all(values, dtype, |v, dt| {
                read_complex(v, dt, read_f32).map(|(re, im)| Complex::new(re, im))
            })?,
        ),
        DataType::Complex128 => from_vec(
            dims,
            read_all(values, dtype, |v, dt| {
                read_complex(v, dt, read_f64).map(|(re, im)| Complex::new(re, im))
            })?,
        ),
        DataType::String => Tensor::from_strings(dims, read_all(values, dtype, read_string)?),
        DataType::Resource => Tensor::from_resource_handles(
            dims,
            read_all(values, dtype, |v, _| handle_from_json(v))?,
        ),
        other => Err(unsupported(other)),
    }
}

fn unsupported(dtype: DataType) -> Status {
    Status::unimplemented(format!(
        "the tensor JSON codec does not support {} tensors",
        dtype.proto_name()
    ))
}

fn from_vec<T: Element>(dims: &[i64], v: Vec<T>) -> Result<Tensor> {
    Tensor::from_vec(dims, v)
}

fn read_all<T>(
    values: &[Value],
    dtype: DataType,
    read: impl Fn(&Value, DataType) -> Result<T>,
) -> Result<Vec<T>> {
    values
        .iter()
        .enumerate()
        .map(|(i, v)| read(v, dtype).map_err(|e| e.prepend(format!("values[{i}]: "))))
        .collect()
}

/// A dtype by proto name (`DT_FLOAT`) or spec name (`float`, `float32`).
fn parse_dtype(name: &str) -> Result<DataType> {
    DataType::from_proto_name(name)
        .or_else(|| DataType::from_spec_name(name))
        .filter(|d| !d.is_ref() && *d != DataType::Invalid)
        .ok_or_else(|| {
            err(format!(
                "unknown dtype \"{name}\" (expected a name like \"DT_FLOAT\", \"DT_INT32\", \"DT_STRING\")"
            ))
        })
}

fn parse_shape(v: &Value) -> Result<TensorShape> {
    let Value::Array(dims) = v else {
        return Err(err(format!(
            "a tensor's \"shape\" must be an array of dimension sizes like [2, 3], got {}",
            show(v)
        )));
    };
    let dims: Vec<i64> = dims
        .iter()
        .enumerate()
        .map(|(i, d)| {
            d.as_i64().filter(|&d| d >= 0).ok_or_else(|| {
                err(format!(
                    "shape[{i}] must be a non-negative integer, got {}",
                    show(d)
                ))
            })
        })
        .collect::<Result<_>>()?;
    TensorShape::new(&dims)
}

/// A float given as a number or one of the special strings.
fn read_float(v: &Value, dtype: DataType) -> Result<f64> {
    match v {
        Value::Number(n) => n
            .as_f64()
            .ok_or_else(|| err(format!("{n} is not a number"))),
        Value::String(s) => match s.to_ascii_lowercase().as_str() {
            "nan" | "+nan" | "-nan" => Ok(f64::NAN),
            "inf" | "+inf" | "infinity" | "+infinity" => Ok(f64::INFINITY),
            "-inf" | "-infinity" => Ok(f64::NEG_INFINITY),
            _ => Err(err(format!(
                "{} is not a number for {} (write a JSON number, or \"nan\", \"inf\", \"-inf\")",
                show(v),
                dtype.proto_name()
            ))),
        },
        _ => Err(err(format!(
            "{} is not a number for {} (write a JSON number, or \"nan\", \"inf\", \"-inf\")",
            show(v),
            dtype.proto_name()
        ))),
    }
}

fn too_large(v: &Value, dtype: DataType) -> Status {
    err(format!(
        "{} is out of range for {} (write \"inf\" or \"-inf\" for an infinity)",
        show(v),
        dtype.proto_name()
    ))
}

fn read_f64(v: &Value, dtype: DataType) -> Result<f64> {
    read_float(v, dtype)
}

fn read_f32(v: &Value, dtype: DataType) -> Result<f32> {
    let d = read_float(v, dtype)?;
    let x = d as f32;
    if x.is_infinite() && d.is_finite() {
        return Err(too_large(v, dtype));
    }
    Ok(x)
}

fn read_f16(v: &Value, dtype: DataType) -> Result<f16> {
    let d = read_float(v, dtype)?;
    let x = f16::from_f64(d);
    if x.is_infinite() && d.is_finite() {
        return Err(too_large(v, dtype));
    }
    Ok(x)
}

fn read_bf16(v: &Value, dtype: DataType) -> Result<bf16> {
    let d = read_float(v, dtype)?;
    let x = bf16::from_f64(d);
    if x.is_infinite() && d.is_finite() {
        return Err(too_large(v, dtype));
    }
    Ok(x)
}

fn read_complex<F>(
    v: &Value,
    dtype: DataType,
    part: impl Fn(&Value, DataType) -> Result<F>,
) -> Result<(F, F)>
where
    F: Default,
{
    match v {
        Value::Array(pair) if pair.len() == 2 => {
            Ok((part(&pair[0], dtype)?, part(&pair[1], dtype)?))
        }
        Value::Number(_) => Ok((part(v, dtype)?, F::default())),
        _ => Err(err(format!(
            "{} is not a complex number for {} (write [re, im])",
            show(v),
            dtype.proto_name()
        ))),
    }
}

/// Integer element types, with their range.
trait JsonInt: Element {
    const MIN: i128;
    const MAX: i128;
    fn from_i128(v: i128) -> Self;
    fn to_json(self) -> Value;
}

macro_rules! json_ints {
    ($($t:ty),*) => {
        $(
            impl JsonInt for $t {
                const MIN: i128 = <$t>::MIN as i128;
                const MAX: i128 = <$t>::MAX as i128;
                fn from_i128(v: i128) -> Self {
                    // In range: checked by the caller against MIN and MAX.
                    v as $t
                }
                fn to_json(self) -> Value {
                    Value::from(self)
                }
            }
        )*
    };
}

json_ints!(i8, i16, i32, i64, u8, u16, u32, u64);

fn read_int<T: JsonInt>(v: &Value, dtype: DataType) -> Result<T> {
    let wide: i128 = match v {
        Value::Number(n) => {
            if let Some(i) = n.as_i64() {
                i128::from(i)
            } else if let Some(u) = n.as_u64() {
                i128::from(u)
            } else {
                let f = n.as_f64().unwrap_or(f64::NAN);
                if !f.is_finite() || f.fract() != 0.0 {
                    return Err(err(format!(
                        "{n} is not an integer, as {} needs",
                        dtype.proto_name()
                    )));
                }
                // 64-bit integer literals took a branch above; this one came
                // rounded (-2^63 - 1 as -2^63): at or past the bounds, refuse it.
                let past = f <= -(2f64.powi(63)) || f >= 2f64.powi(64);
                if past {
                    i128::MAX
                } else {
                    f as i128
                }
            }
        }
        Value::String(s) => s.parse::<i128>().map_err(|_| {
            err(format!(
                "{} is not an integer, as {} needs",
                show(v),
                dtype.proto_name()
            ))
        })?,
        _ => {
            return Err(err(format!(
                "{} is not an integer, as {} needs",
                show(v),
                dtype.proto_name()
            )))
        }
    };
    if wide < T::MIN || wide > T::MAX {
        return Err(err(format!(
            "{} is out of range for {} [{}, {}]",
            show(v),
            dtype.proto_name(),
            T::MIN,
            T::MAX
        )));
    }
    Ok(T::from_i128(wide))
}

fn read_bool(v: &Value, dtype: DataType) -> Result<bool> {
    v.as_bool().ok_or_else(|| {
        err(format!(
            "{} is not true or false, as {} needs",
            show(v),
            dtype.proto_name()
        ))
    })
}

fn read_string(v: &Value, _: DataType) -> Result<Vec<u8>> {
    match v {
        Value::String(s) => Ok(s.as_bytes().to_vec()),
        Value::Object(o) => match (o.len(), o.get("base64")) {
            (1, Some(Value::String(b))) => base64_decode(b),
            _ => Err(err(format!(
                "{} is not a string or {{\"base64\": \"...\"}}",
                show(v)
            ))),
        },
        _ => Err(err(format!(
            "{} is not a string or {{\"base64\": \"...\"}}, as DT_STRING needs",
            show(v)
        ))),
    }
}

/// The most elements [`tensor_to_json`] prints (each costs a JSON value of
/// about 32 bytes plus its text, so larger outputs would exhaust memory).
pub const MAX_JSON_ELEMENTS: usize = 1 << 26;

/// Prints a tensor in its JSON form (see the [module docs](self)).
/// `FailedPrecondition` for a tensor whose data is not in host memory,
/// `Unimplemented` for a dtype the codec does not support (quantized types).
pub fn tensor_to_json(t: &Tensor) -> Result<Value> {
    if t.location() != Location::Host {
        return Err(Status::failed_precondition(format!(
            "a tensor on {:?} cannot be printed as JSON; copy it to the host first",
            t.location()
        )));
    }
    if t.num_elements() > MAX_JSON_ELEMENTS {
        return Err(Status::resource_exhausted(format!(
            "a {} tensor of shape {} has {} elements; JSON output is limited to {MAX_JSON_ELEMENTS}",
            t.dtype().proto_name(), t.shape(), t.num_elements()
        )));
    }
    let values: Vec<Value> = match t.dtype() {
        DataType::Float => t.flat::<f32>()?.iter().map(|&x| f32_to_json(x)).collect(),
        DataType::Double => t.flat::<f64>()?.iter().map(|&x| f64_to_json(x)).collect(),
        DataType::Half => t
            .flat::<f16>()?
            .iter()
            .map(|&x| short_json(x.to_f32(), |d| f16::from_f64(d) == x))
            .collect(),
        DataType::BFloat16 => t
            .flat::<bf16>()?
            .iter()
            .map(|&x| short_json(x.to_f32(), |d| bf16::from_f64(d) == x))
            .collect(),
        DataType::Int8 => ints(t.flat::<i8>()?),
        DataType::Int16 => ints(t.flat::<i16>()?),
        DataType::Int32 => ints(t.flat::<i32>()?),
        DataType::Int64 => ints(t.flat::<i64>()?),
        DataType::UInt8 => ints(t.flat::<u8>()?),
        DataType::UInt16 => ints(t.flat::<u16>()?),
        DataType::UInt32 => ints(t.flat::<u32>()?),
        DataType::UInt64 => ints(t.flat::<u64>()?),
        DataType::Bool => t.flat::<bool>()?.iter().map(|&b| Value::Bool(b)).collect(),
        DataType::Complex64 => t
            .flat::<Complex<f32>>()?
            .iter()
            .map(|c| Value::Array(vec![f32_to_json(c.re), f32_to_json(c.im)]))
            .collect(),
        DataType::Complex128 => t
            .flat::<Complex<f64>>()?
            .iter()
            .map(|c| Value::Array(vec![f64_to_json(c.re), f64_to_json(c.im)]))
            .collect(),
        DataType::String => t.strings()?.iter().map(|s| string_to_json(s)).collect(),
        DataType::Resource => t.resource_handles()?.iter().map(handle_to_json).collect(),
        other => return Err(unsupported(other)),
    };
    let mut obj = Map::new();
    obj.insert("dtype".into(), Value::from(t.dtype().proto_name()));
    obj.insert(
        "shape".into(),
        Value::Array(t.dims().iter().map(|&d| Value::from(d)).collect()),
    );
    obj.insert("values".into(), Value::Array(values));
    Ok(Value::Object(obj))
}

fn ints<T: JsonInt>(v: &[T]) -> Vec<Value> {
    v.iter().map(|&x| x.to_json()).collect()
}

fn special(x: f64) -> Option<Value> {
    if x.is_nan() {
        Some(Value::from("nan"))
    } else if x == f64::INFINITY {
        Some(Value::from("inf"))
    } else if x == f64::NEG_INFINITY {
        Some(Value::from("-inf"))
    } else {
        None
    }
}

/// A JSON number for an f64 (`"nan"`, `"inf"`, `"-inf"` for the non-finite values).
fn f64_to_json(x: f64) -> Value {
    special(x).unwrap_or_else(|| Number::from_f64(x).map_or(Value::Null, Value::Number))
}

/// A JSON number for an f32: the shortest decimal that reads back as `x`,
/// as an f64 (`0.1`, not `0.10000000149011612`).
fn f32_to_json(x: f32) -> Value {
    if let Some(s) = special(f64::from(x)) {
        return s;
    }
    let short = format!("{x}").parse::<f64>().ok();
    // The shortest decimal, parsed as an f64, rounds back to x except in
    // pathological double-rounding cases; then print x's exact value.
    let d = match short {
        Some(d) if d as f32 == x => d,
        _ => f64::from(x),
    };
    f64_to_json(d)
}

/// A JSON number for a half or bfloat16 value `x` (given as its exact f32):
/// the decimal with the fewest significant digits that `reads_back`.
fn short_json(x: f32, reads_back: impl Fn(f64) -> bool) -> Value {
    if let Some(s) = special(f64::from(x)) {
        return s;
    }
    (0..9)
        .filter_map(|digits| format!("{x:.digits$e}").parse::<f64>().ok())
        .find(|&d| reads_back(d))
        .map_or_else(|| f32_to_json(x), f64_to_json)
}

fn string_to_json(s: &[u8]) -> Value {
    match std::str::from_utf8(s) {
        Ok(s) => Value::from(s),
        Err(_) => {
            let mut o = Map::new();
            o.insert("base64".into(), Value::from(base64_encode(s)));
            Value::Object(o)
        }
    }
}

#[cfg(test)]
mod tests;
