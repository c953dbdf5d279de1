//! Resource handles as JSON objects, and the base64 form of byte strings
//! that are not UTF-8 (part of the tensor JSON codec, see [`super`]).

use super::{err, parse_dtype, show};
use crate::dtype::DataType;
use crate::proto::{tensor_shape_proto::Dim, TensorShapeProto};
use crate::resource_handle::ResourceHandle;
use crate::Result;
use serde_json::{Map, Value};

/// A resource handle as a JSON object.
pub fn handle_to_json(h: &ResourceHandle) -> Value {
    let mut o = Map::new();
    o.insert("device".into(), Value::from(h.device.as_str()));
    o.insert("container".into(), Value::from(h.container.as_str()));
    o.insert("name".into(), Value::from(h.name.as_str()));
    o.insert("type_name".into(), Value::from(h.type_name.as_str()));
    let ds: Vec<Value> = h
        .dtypes_and_shapes
        .iter()
        .map(|(dt, shape)| {
            let mut e = Map::new();
            e.insert("dtype".into(), Value::from(dt.proto_name()));
            let shape = if shape.unknown_rank {
                Value::Null
            } else {
                Value::Array(shape.dim.iter().map(|d| Value::from(d.size)).collect())
            };
            e.insert("shape".into(), shape);
            Value::Object(e)
        })
        .collect();
    o.insert("dtypes_and_shapes".into(), Value::Array(ds));
    Value::Object(o)
}

/// A resource handle from its JSON object (every key optional).
pub fn handle_from_json(v: &Value) -> Result<ResourceHandle> {
    let o = v.as_object().ok_or_else(|| {
        err(format!(
            "{} is not a resource handle object {{\"container\", \"name\", ...}}",
            show(v)
        ))
    })?;
    let mut h = ResourceHandle::default();
    for (k, val) in o {
        let text = || {
            val.as_str().map(str::to_string).ok_or_else(|| {
                err(format!(
                    "the handle's \"{k}\" must be a string, got {}",
                    show(val)
                ))
            })
        };
        match k.as_str() {
            "device" => h.device = text()?,
            "container" => h.container = text()?,
            "name" => h.name = text()?,
            "type_name" => h.type_name = text()?,
            "dtypes_and_shapes" => {
                let items = val.as_array().ok_or_else(|| {
                    err(format!(
                        "the handle's \"dtypes_and_shapes\" must be an array, got {}",
                        show(val)
                    ))
                })?;
                for item in items {
                    h.dtypes_and_shapes.push(dtype_and_shape_from_json(item)?);
                }
            }
            other => {
                return Err(err(format!(
                    "unknown key \"{other}\" in a resource handle (expected \"device\", \
                     \"container\", \"name\", \"type_name\", \"dtypes_and_shapes\")"
                )))
            }
        }
    }
    Ok(h)
}

fn dtype_and_shape_from_json(v: &Value) -> Result<(DataType, TensorShapeProto)> {
    let bad = || {
        err(format!(
            "{} is not a {{\"dtype\": \"DT_FLOAT\", \"shape\": [2]}} object",
            show(v)
        ))
    };
    let o = v.as_object().ok_or_else(bad)?;
    if o.keys().any(|k| k != "dtype" && k != "shape") {
        return Err(bad());
    }
    let dtype = match o.get("dtype") {
        Some(Value::String(s)) => parse_dtype(s)?,
        None => DataType::Invalid,
        Some(_) => return Err(bad()),
    };
    let shape = match o.get("shape") {
        None | Some(Value::Null) => TensorShapeProto {
            dim: Vec::new(),
            unknown_rank: true,
        },
        Some(Value::Array(dims)) => TensorShapeProto {
            dim: dims
                .iter()
                .map(|d| {
                    d.as_i64().filter(|&d| d >= -1).map(|size| Dim {
                        size,
                        name: String::new(),
                    })
                })
                .collect::<Option<_>>()
                .ok_or_else(bad)?,
            unknown_rank: false,
        },
        Some(_) => return Err(bad()),
    };
    Ok((dtype, shape))
}

const B64: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/// Standard base64 with padding.
pub(super) fn base64_encode(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for (i, shift) in [18u32, 12, 6, 0].into_iter().enumerate() {
            if i <= chunk.len() {
                out.push(char::from(B64[((n >> shift) & 63) as usize]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// Standard base64; padding optional.
pub(super) fn base64_decode(s: &str) -> Result<Vec<u8>> {
    let bad = || err(format!("\"{s}\" is not valid base64"));
    let trimmed = s.trim_end_matches('=');
    if s.len() - trimmed.len() > 2 || trimmed.len() % 4 == 1 {
        return Err(bad());
    }
    let mut out = Vec::with_capacity(trimmed.len() * 3 / 4);
    let mut acc: u32 = 0;
    let mut bits = 0u32;
    for c in trimmed.bytes() {
        let v = B64.iter().position(|&b| b == c).ok_or_else(bad)? as u32;
        acc = (acc << 6) | v;
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
            acc &= (1 << bits) - 1;
        }
    }
    // Leftover bits must be zero (canonical encoding).
    if acc != 0 {
        return Err(bad());
    }
    Ok(out)
}
