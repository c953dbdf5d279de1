//! Reading the arguments of ops: shape, axis and index values, and
//! printing shapes and floats as TensorFlow's error messages do.

use opforge_core::shape_inference::InferenceContext;
use opforge_core::{ensure, DataType, Element, Result, Status, Tensor, TensorShape};

/// `[2,3]`, as TensorFlow prints shapes.
pub fn fmt_shape(dims: &[i64]) -> String {
    let parts: Vec<String> = dims.iter().map(i64::to_string).collect();
    format!("[{}]", parts.join(","))
}

/// The values of an int32 or int64 tensor as `i64`s (shape and index arguments).
pub fn index_values(t: &Tensor, what: &str) -> Result<Vec<i64>> {
    match t.dtype() {
        DataType::Int32 => Ok(t.flat::<i32>()?.iter().map(|&v| v as i64).collect()),
        DataType::Int64 => Ok(t.flat::<i64>()?.to_vec()),
        other => Err(Status::invalid_argument(format!(
            "{what} must be int32 or int64, not {other}"
        ))),
    }
}

/// Normalizes `axis` into `[0, rank)`, accepting `[-rank, rank)`.
pub fn normalize_axis(axis: i64, rank: usize, what: &str) -> Result<usize> {
    let r = rank as i64;
    if axis < -r || axis >= r {
        return Err(Status::invalid_argument(format!(
            "{what} {axis} is out of range: it must be in [{}, {r}) for a tensor of rank {rank}",
            -r
        )));
    }
    Ok(if axis < 0 {
        (axis + r) as usize
    } else {
        axis as usize
    })
}

/// A tensor of `i64` values in the dtype `dtype` (int32 or int64), for shape outputs.
pub fn index_tensor(dtype: DataType, dims: &[i64], values: &[i64]) -> Result<Tensor> {
    match dtype {
        DataType::Int32 => {
            let v: Vec<i32> = values
                .iter()
                .map(|&x| {
                    i32::try_from(x)
                        .map_err(|_| Status::invalid_argument(format!("{x} does not fit in int32")))
                })
                .collect::<Result<_>>()?;
            Tensor::from_vec(dims, v)
        }
        DataType::Int64 => Tensor::from_slice(dims, values),
        other => Err(Status::invalid_argument(format!(
            "index outputs must be int32 or int64, not {other}"
        ))),
    }
}

/// The values of an integer tensor (int8 to int64, unsigned up to uint32)
/// as `i64`s.
pub fn int_values(t: &Tensor, what: &str) -> Result<Vec<i64>> {
    fn conv<T: Element + Into<i64>>(t: &Tensor) -> Result<Vec<i64>> {
        Ok(t.flat::<T>()?.iter().map(|&v| v.into()).collect())
    }
    match t.dtype() {
        DataType::Int8 => conv::<i8>(t),
        DataType::UInt8 => conv::<u8>(t),
        DataType::Int16 => conv::<i16>(t),
        DataType::UInt16 => conv::<u16>(t),
        DataType::Int32 => conv::<i32>(t),
        DataType::UInt32 => conv::<u32>(t),
        DataType::Int64 => conv::<i64>(t),
        other => Err(Status::invalid_argument(format!(
            "{what} must be an integer tensor, not {other}"
        ))),
    }
}

/// A float as C++'s `%.{digits}g` prints it (`1e+20`, `0.5`, `inf`).
fn fmt_g(v: f64, digits: usize) -> String {
    if v.is_nan() {
        return "nan".into();
    }
    if v.is_infinite() {
        return if v > 0.0 { "inf" } else { "-inf" }.into();
    }
    if v == 0.0 {
        return if v.is_sign_negative() { "-0" } else { "0" }.into();
    }
    let digits = digits.max(1);
    let sci = format!("{:.*e}", digits - 1, v);
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i64 = exp.parse().unwrap_or(0);
    let trim = |s: &str| -> String {
        if s.contains('.') {
            s.trim_end_matches('0').trim_end_matches('.').to_string()
        } else {
            s.to_string()
        }
    };
    if exp < -4 || exp >= digits as i64 {
        let sign = if exp < 0 { '-' } else { '+' };
        format!("{}e{sign}{:02}", trim(mantissa), exp.abs())
    } else {
        let prec = (digits as i64 - 1 - exp).max(0) as usize;
        trim(&format!("{v:.prec$}"))
    }
}

/// A float as TensorFlow's `StrCat` prints it: the shortest of `%.6g` /
/// `%.9g` (single precision) or `%.15g` / `%.17g` (double) that reads back
/// as the same value.
pub fn fmt_float(v: f64, single: bool) -> String {
    if single {
        let s = fmt_g(v, 6);
        if s.parse::<f32>().ok() == Some(v as f32) {
            return s;
        }
        fmt_g(v, 9)
    } else {
        let s = fmt_g(v, 15);
        if s.parse::<f64>().ok() == Some(v) {
            return s;
        }
        fmt_g(v, 17)
    }
}

/// TensorFlow's `TensorShapeUtils::MakeShape`: a shape from dimension values,
/// each of which must be `>= 0`.
pub fn make_shape(dims: &[i64]) -> Result<TensorShape> {
    let mut n: i64 = 1;
    for &d in dims {
        ensure!(d >= 0, InvalidArgument, "Dimension {d} must be >= 0");
        n = n.checked_mul(d).ok_or_else(|| {
            Status::invalid_argument(format!(
                "Shape {} would have more than 2**63 - 1 elements",
                fmt_shape(dims)
            ))
        })?;
    }
    TensorShape::new(dims)
}

/// The value of constant scalar input `idx` (int32 or int64), if known
/// (TensorFlow's `GetScalarFromTensor`).
pub fn scalar_input_value(c: &InferenceContext, idx: usize) -> Result<Option<i64>> {
    let Some(t) = c.input_tensor(idx) else {
        return Ok(None);
    };
    ensure!(
        t.rank() == 0,
        InvalidArgument,
        "Input must be scalar but has rank {}",
        t.rank()
    );
    match t.dtype() {
        DataType::Int32 | DataType::Int64 => Ok(index_values(t, "input")?.first().copied()),
        _ => Err(Status::invalid_argument(
            "Scalar input for dim size must be int32 or int64",
        )),
    }
}

/// TensorFlow's `SliceDebugString`: the multi-index of flat element `flat`
/// of `dims` (`""` for a scalar, `[1]`, `[0,2]`).
pub fn slice_debug_string(dims: &[i64], flat: usize) -> String {
    match dims.len() {
        0 => String::new(),
        1 => format!("[{flat}]"),
        _ => {
            let mut idx = vec![0i64; dims.len()];
            let mut rem = flat as i64;
            for k in (0..dims.len()).rev() {
                if dims[k] > 0 {
                    idx[k] = rem % dims[k];
                    rem /= dims[k];
                }
            }
            fmt_shape(&idx)
        }
    }
}

/// The product of some of a tensor's dims, saturating at `i64::MAX`. A
/// tensor's shape bounds the products of its dims up to its first zero
/// only: dims after a zero may multiply past 2^63 (`[0, 2^62, 4]` is an
/// empty shape), so a product over a slice of dims that does not start at
/// the first one must not trust that it fits (`tests/hostile_kernel.rs`).
/// Exact whenever the tensor has elements.
pub fn dims_product(dims: &[i64]) -> i64 {
    dims.iter().fold(1i64, |p, &d| p.saturating_mul(d))
}
