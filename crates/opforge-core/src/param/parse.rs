//! Keyword-argument strings (MXNet passes every parameter as one) read as
//! attr values of a given attr type.

use crate::dtype::DataType;
use crate::proto::attr_value::{ListValue, Value};
use crate::proto::{tensor_shape_proto::Dim, AttrValue, TensorShapeProto};

/// `text` without one pair of matching surrounding quotes.
fn unquote(text: &str) -> &str {
    for q in ['\'', '"'] {
        if text.len() >= 2 && text.starts_with(q) && text.ends_with(q) {
            return &text[1..text.len() - 1];
        }
    }
    text
}

fn int(text: &str) -> Option<i64> {
    text.trim().parse().ok()
}

fn float(text: &str) -> Option<f32> {
    // Rust's parser also reads "inf", "infinity" and "nan" (any case).
    text.trim().parse::<f32>().ok()
}

fn boolean(text: &str) -> Option<bool> {
    match text.trim() {
        "True" | "true" | "1" => Some(true),
        "False" | "false" | "0" => Some(false),
        _ => None,
    }
}

fn dtype(text: &str) -> Option<DataType> {
    let t = unquote(text.trim());
    DataType::from_spec_name(t)
        .or_else(|| DataType::from_proto_name(t))
        .filter(|d| *d != DataType::Invalid && !d.is_ref())
}

/// The elements of `(a, b)`, `[a, b]` or `()`: split at top-level commas
/// (not inside quotes or nested brackets), a trailing comma allowed.
fn elements(text: &str) -> Option<Vec<&str>> {
    let t = text.trim();
    let inner = t
        .strip_prefix('(')
        .and_then(|r| r.strip_suffix(')'))
        .or_else(|| t.strip_prefix('[').and_then(|r| r.strip_suffix(']')))?;
    let mut out = Vec::new();
    let (mut depth, mut quote, mut start) = (0usize, None::<char>, 0usize);
    for (i, c) in inner.char_indices() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), _) => {}
            (None, '\'' | '"') => quote = Some(c),
            (None, '(' | '[') => depth += 1,
            (None, ')' | ']') => depth = depth.checked_sub(1)?,
            (None, ',') if depth == 0 => {
                out.push(inner[start..i].trim());
                start = i + 1;
            }
            _ => {}
        }
    }
    if quote.is_some() || depth != 0 {
        return None;
    }
    out.push(inner[start..].trim());
    if out.len() == 1 && out[0].is_empty() {
        return Some(Vec::new());
    }
    if out.len() > 1 && out.last() == Some(&"") {
        out.pop();
    }
    if out.iter().any(|e| e.is_empty()) {
        return None;
    }
    Some(out)
}

fn shape(text: &str) -> Option<TensorShapeProto> {
    let dims = elements(text)?
        .into_iter()
        .map(|d| {
            int(d).filter(|&d| d >= -1).map(|size| Dim {
                size,
                name: String::new(),
            })
        })
        .collect::<Option<Vec<_>>>()?;
    Some(TensorShapeProto {
        dim: dims,
        unknown_rank: false,
    })
}

fn value(v: Value) -> AttrValue {
    AttrValue { value: Some(v) }
}

/// `text` read as a value of `attr_type`, or `None` if it is not one.
pub(super) fn parse_text(attr_type: &str, text: &str) -> Option<AttrValue> {
    if let Some(base) = attr_type
        .strip_prefix("list(")
        .and_then(|t| t.strip_suffix(')'))
    {
        let items = elements(text)?;
        let mut list = ListValue::default();
        for item in items {
            match base {
                "int" => list.i.push(int(item)?),
                "float" => list.f.push(float(item)?),
                "bool" => list.b.push(boolean(item)?),
                "string" => list.s.push(unquote(item).as_bytes().to_vec()),
                "type" => list.r#type.push(dtype(item)? as i32),
                "shape" => list.shape.push(shape(item)?),
                _ => return None,
            }
        }
        return Some(value(Value::List(Box::new(list))));
    }
    Some(value(match attr_type {
        "int" => Value::I(int(text)?),
        "float" => Value::F(float(text)?),
        "bool" => Value::B(boolean(text)?),
        "string" => Value::S(unquote(text.trim()).as_bytes().to_vec()),
        "type" => Value::Type(dtype(text)? as i32),
        "shape" => Value::Shape(shape(text)?),
        _ => return None,
    }))
}
