//! Attr values: parsing a default written in an op spec, checking a value
//! against an attr's type and constraints, and printing a value the way
//! TensorFlow's `SummarizeAttrValue` does.

use crate::dtype::DataType;
use crate::proto::{self, attr_value::ListValue, attr_value::Value, op_def::AttrDef, AttrValue};
use crate::strings::c_escape;
use crate::{Result, Status};

/// The attr types an op spec may declare (`list(<t>)` of each is also valid).
pub const ATTR_BASE_TYPES: &[&str] = &[
    "string", "int", "float", "bool", "type", "shape", "tensor", "func",
];

/// The text-format field of `AttrValue` that holds a value of attr type `base`.
fn field_for(base: &str) -> Option<&'static str> {
    Some(match base {
        "string" => "s",
        "int" => "i",
        "float" => "f",
        "bool" => "b",
        "type" => "type",
        "shape" => "shape",
        "tensor" => "tensor",
        "func" => "func",
        _ => return None,
    })
}

/// Splits `list(x)` into `("x", true)` and `x` into `("x", false)`.
pub fn split_list_type(attr_type: &str) -> (&str, bool) {
    match attr_type
        .strip_prefix("list(")
        .and_then(|t| t.strip_suffix(')'))
    {
        Some(inner) => (inner, true),
        None => (attr_type, false),
    }
}

/// Parses `text`, an attr value written in TensorFlow's syntax, as a value of
/// attr type `attr_type` (TensorFlow's `ParseAttrValue`): the text is a
/// protobuf text-format field value (`'foo'`, `3`, `1e-3`, `true`, `DT_INT32`,
/// `{ dim { size: 2 } }`, `{ dtype: DT_INT32 int_val: 5 }`), and list values
/// must be written in brackets (`[]`, `[2, 3]`, `[DT_INT32, DT_FLOAT]`).
///
/// ```
/// use opforge_core::op_def::parse_attr_value;
/// use opforge_core::proto::attr_value::Value;
/// let v = parse_attr_value("shape", "{ dim { size: 1 } dim { size: 2 } }").unwrap();
/// assert!(matches!(v.value, Some(Value::Shape(ref s)) if s.dim.len() == 2));
/// let v = parse_attr_value("list(int)", "[2, 3, 5, 7]").unwrap();
/// assert!(matches!(v.value, Some(Value::List(ref l)) if l.i == vec![2, 3, 5, 7]));
/// assert!(parse_attr_value("int", "1.5").is_err());
/// ```
pub fn parse_attr_value(attr_type: &str, text: &str) -> Result<AttrValue> {
    let (base, is_list) = split_list_type(attr_type);
    let field = field_for(base)
        .ok_or_else(|| Status::invalid_argument(format!("unknown attr type '{attr_type}'")))?;
    let trimmed = text.trim();
    if trimmed.is_empty() {
        return Err(Status::invalid_argument("the value is empty"));
    }
    let to_parse = if is_list {
        // Text format would read `i: 7` like `i: [7]`; TensorFlow wants the brackets.
        if trimmed.len() < 2 || !trimmed.starts_with('[') || !trimmed.ends_with(']') {
            return Err(Status::invalid_argument(format!(
                "a {attr_type} value must be written in brackets, e.g. '[{trimmed}]'"
            )));
        }
        if trimmed[1..trimmed.len() - 1].trim().is_empty() {
            return Ok(AttrValue {
                value: Some(Value::List(Box::default())),
            });
        }
        format!("list {{ {field}: {trimmed} }}")
    } else {
        format!("{field}: {trimmed}")
    };
    let value: AttrValue = proto::from_text(&to_parse).map_err(|e| {
        Status::invalid_argument(format!(
            "'{trimmed}' is not a valid {attr_type} value ({})",
            e.message()
                .trim_start_matches("cannot parse text-format tensorflow.AttrValue: ")
        ))
    })?;
    // The text could have closed our wrapper and set other fields; insist that
    // exactly the expected field was set.
    attr_value_has_type(&value, attr_type).map_err(|e| {
        Status::invalid_argument(format!(
            "'{trimmed}' is not a valid {attr_type} value: {}",
            e.message()
        ))
    })?;
    Ok(value)
}

/// The attr type a value holds, like `int` or `list(string)`, or `None` for
/// an unset value. An empty list reports `list(*)`.
pub fn attr_value_type(value: &AttrValue) -> Option<String> {
    Some(match value.value.as_ref()? {
        Value::S(_) => "string".into(),
        Value::I(_) => "int".into(),
        Value::F(_) => "float".into(),
        Value::B(_) => "bool".into(),
        Value::Type(_) => "type".into(),
        Value::Shape(_) => "shape".into(),
        Value::Tensor(_) => "tensor".into(),
        Value::Func(_) => "func".into(),
        Value::Placeholder(_) => "placeholder".into(),
        Value::List(l) => match list_kinds(l).first() {
            Some((kind, _)) => format!("list({kind})"),
            None => "list(*)".into(),
        },
    })
}

/// The non-empty fields of a list value: `(attr type, length)`.
fn list_kinds(l: &ListValue) -> Vec<(&'static str, usize)> {
    [
        ("string", l.s.len()),
        ("int", l.i.len()),
        ("float", l.f.len()),
        ("bool", l.b.len()),
        ("type", l.r#type.len()),
        ("shape", l.shape.len()),
        ("tensor", l.tensor.len()),
        ("func", l.func.len()),
    ]
    .into_iter()
    .filter(|(_, n)| *n > 0)
    .collect()
}

/// The length of a list value whatever its element type.
pub fn list_len(l: &ListValue) -> usize {
    list_kinds(l).iter().map(|(_, n)| n).sum()
}

fn check_dtype(code: i32, list: bool) -> Result<()> {
    let contains = if list { "contains" } else { "has" };
    match DataType::from_i32(code) {
        None => Err(Status::invalid_argument(format!(
            "AttrValue {contains} invalid DataType enum: {code}"
        ))),
        Some(dt) if dt.is_ref() => Err(Status::invalid_argument(format!(
            "AttrValue must not have reference type value of {}",
            dt.name()
        ))),
        Some(DataType::Invalid) => Err(Status::invalid_argument(format!(
            "AttrValue {contains} invalid DataType"
        ))),
        Some(_) => Ok(()),
    }
}

/// Checks that `value` holds a value of attr type `attr_type` (TensorFlow's
/// `AttrValueHasType`, with its messages). An empty list matches any list type.
pub fn attr_value_has_type(value: &AttrValue, attr_type: &str) -> Result<()> {
    let is_list_type = attr_type.starts_with("list(");
    match &value.value {
        None => {
            if !is_list_type {
                return Err(Status::invalid_argument(format!(
                    "AttrValue missing value with expected type '{attr_type}'"
                )));
            }
        }
        Some(Value::Placeholder(_)) => {
            return Err(Status::invalid_argument(
                "AttrValue had value with unexpected type 'placeholder'",
            ));
        }
        Some(Value::List(l)) => {
            let kinds = list_kinds(l);
            if let Some((kind, _)) = kinds
                .iter()
                .find(|(k, _)| format!("list({k})") != attr_type)
            {
                return Err(Status::invalid_argument(format!(
                    "AttrValue had value with type 'list({kind})' when '{attr_type}' expected"
                )));
            }
            if kinds.is_empty() && !is_list_type {
                return Err(Status::invalid_argument(format!(
                    "AttrValue missing value with expected type '{attr_type}'"
                )));
            }
        }
        Some(_) => {
            let actual = attr_value_type(value).unwrap_or_default();
            if actual != attr_type {
                return Err(Status::invalid_argument(format!(
                    "AttrValue had value with type '{actual}' when '{attr_type}' expected"
                )));
            }
        }
    }
    match (&value.value, attr_type) {
        (Some(Value::Type(code)), "type") => check_dtype(*code, false),
        (Some(Value::List(l)), "list(type)") => {
            l.r#type.iter().try_for_each(|&c| check_dtype(c, true))
        }
        _ => Ok(()),
    }
}

/// `float, double, int32`: the names of allowed types as TensorFlow lists them.
pub fn data_type_list_string(types: &[i32]) -> String {
    types
        .iter()
        .map(|&c| {
            DataType::from_i32(c).map_or_else(
                || format!("unknown dtype enum ({c})"),
                |d| d.name().to_string(),
            )
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// Checks a value against an attr definition: its type, its minimum and its
/// allowed values (TensorFlow's `ValidateAttrValue`, with its messages).
pub fn validate_attr_value(value: &AttrValue, attr: &AttrDef) -> Result<()> {
    attr_value_has_type(value, &attr.r#type).map_err(|e| {
        Status::invalid_argument(format!("{} for attr '{}'", e.message(), attr.name))
    })?;
    if attr.has_minimum {
        if attr.r#type == "int" {
            let i = match value.value {
                Some(Value::I(i)) => i,
                _ => 0,
            };
            if i < attr.minimum {
                return Err(Status::invalid_argument(format!(
                    "Value for attr '{}' of {} must be at least minimum {}",
                    attr.name, i, attr.minimum
                )));
            }
        } else {
            let len = match &value.value {
                Some(Value::List(l)) => list_len(l) as i64,
                _ => 0,
            };
            if len < attr.minimum {
                return Err(Status::invalid_argument(format!(
                    "Length for attr '{}' of {} must be at least minimum {}",
                    attr.name, len, attr.minimum
                )));
            }
        }
    }
    let Some(allowed) = attr.allowed_values.as_ref() else {
        return Ok(());
    };
    let empty = ListValue::default();
    let allowed = match &allowed.value {
        Some(Value::List(l)) => l,
        _ => &empty,
    };
    let check_type = |code: i32| -> Result<()> {
        if allowed.r#type.contains(&code) {
            return Ok(());
        }
        let name =
            DataType::from_i32(code).map_or_else(|| code.to_string(), |d| d.name().to_string());
        Err(Status::invalid_argument(format!(
            "Value for attr '{}' of {} is not in the list of allowed values: {}",
            attr.name,
            name,
            data_type_list_string(&allowed.r#type)
        )))
    };
    let check_string = |s: &[u8]| -> Result<()> {
        if allowed.s.iter().any(|a| a == s) {
            return Ok(());
        }
        let list = allowed
            .s
            .iter()
            .map(|a| format!("\"{}\"", c_escape(a)))
            .collect::<Vec<_>>()
            .join(", ");
        Err(Status::invalid_argument(format!(
            "Value for attr '{}' of \"{}\" is not in the list of allowed values: {}",
            attr.name,
            c_escape(s),
            list
        )))
    };
    match (attr.r#type.as_str(), &value.value) {
        ("type", Some(Value::Type(c))) => check_type(*c),
        ("list(type)", Some(Value::List(l))) => l.r#type.iter().try_for_each(|&c| check_type(c)),
        ("string", Some(Value::S(s))) => check_string(s),
        ("list(string)", Some(Value::List(l))) => l.s.iter().try_for_each(|s| check_string(s)),
        ("type" | "list(type)" | "string" | "list(string)", _) => Ok(()),
        (other, _) => Err(Status::unimplemented(format!(
            "Support for allowed_values not implemented for type {other}"
        ))),
    }
}

/// Formats a float the shortest way that reads back the same, in positional
/// notation for magnitudes in `[1e-4, 1e16)` (`1`, `0.0001`) and scientific
/// notation outside it (`1e-5`), like `%g`.
pub fn format_float(f: f32) -> String {
    if f.is_nan() {
        return "nan".into();
    }
    if f.is_infinite() {
        return if f > 0.0 { "inf".into() } else { "-inf".into() };
    }
    let magnitude = f.abs();
    if f == 0.0 || (1e-4..1e16).contains(&magnitude) {
        format!("{f}")
    } else {
        format!("{f:e}")
    }
}

/// Prints a shape like TensorFlow's `PartialTensorShape::DebugString`:
/// `[1,?,3]`, `[]` for a scalar, `<unknown>` for an unknown rank.
pub fn summarize_shape(shape: &proto::TensorShapeProto) -> String {
    if shape.unknown_rank {
        return "<unknown>".into();
    }
    let dims: Vec<String> = shape
        .dim
        .iter()
        .map(|d| {
            if d.size < 0 {
                "?".to_string()
            } else {
                d.size.to_string()
            }
        })
        .collect();
    format!("[{}]", dims.join(","))
}

fn summarize_tensor(t: &proto::TensorProto) -> String {
    let dtype =
        DataType::from_i32(t.dtype).map_or_else(|| t.dtype.to_string(), |d| d.name().to_string());
    let shape = t
        .tensor_shape
        .as_ref()
        .map_or_else(|| "[]".to_string(), summarize_shape);
    let mut values: Vec<String> = Vec::new();
    values.extend(t.float_val.iter().map(|v| format_float(*v)));
    values.extend(t.double_val.iter().map(|v| v.to_string()));
    values.extend(t.int_val.iter().map(|v| v.to_string()));
    values.extend(t.int64_val.iter().map(|v| v.to_string()));
    values.extend(t.uint32_val.iter().map(|v| v.to_string()));
    values.extend(t.uint64_val.iter().map(|v| v.to_string()));
    values.extend(t.bool_val.iter().map(|v| v.to_string()));
    values.extend(t.string_val.iter().map(|v| format!("\"{}\"", c_escape(v))));
    if !t.tensor_content.is_empty() {
        values.push(format!("<{} bytes>", t.tensor_content.len()));
    }
    format!(
        "Tensor<type: {dtype} shape: {shape} values: {}>",
        values.join(" ")
    )
}

fn summarize_func(f: &proto::NameAttrList) -> String {
    if f.attr.is_empty() {
        return f.name.clone();
    }
    let attrs: Vec<String> = f
        .attr
        .iter()
        .map(|(k, v)| format!("{k}={}", summarize_attr_value(v)))
        .collect();
    format!("{}[{}]", f.name, attrs.join(", "))
}

fn dtype_enum_name(code: i32) -> String {
    DataType::from_i32(code).map_or_else(|| code.to_string(), |d| d.proto_name().to_string())
}

/// Prints an attr value the way TensorFlow's `SummarizeAttrValue` does:
/// `"foo"`, `3`, `1.5`, `true`, `DT_INT32`, `[1,2]`, `[2, 3, 5]`.
///
/// ```
/// use opforge_core::op_def::{parse_attr_value, summarize_attr_value};
/// let v = parse_attr_value("list(type)", "[DT_INT32, DT_FLOAT]").unwrap();
/// assert_eq!(summarize_attr_value(&v), "[DT_INT32, DT_FLOAT]");
/// ```
pub fn summarize_attr_value(value: &AttrValue) -> String {
    match &value.value {
        None => "<Unknown AttrValue type>".into(),
        Some(Value::S(s)) => format!("\"{}\"", c_escape(s)),
        Some(Value::I(i)) => i.to_string(),
        Some(Value::F(f)) => format_float(*f),
        Some(Value::B(b)) => b.to_string(),
        Some(Value::Type(t)) => dtype_enum_name(*t),
        Some(Value::Shape(s)) => summarize_shape(s),
        Some(Value::Tensor(t)) => summarize_tensor(t),
        Some(Value::Func(f)) => summarize_func(f),
        Some(Value::Placeholder(p)) => format!("${p}"),
        Some(Value::List(l)) => {
            let mut pieces: Vec<String> = Vec::new();
            pieces.extend(l.s.iter().map(|s| format!("\"{}\"", c_escape(s))));
            pieces.extend(l.i.iter().map(|i| i.to_string()));
            pieces.extend(l.f.iter().map(|f| format_float(*f)));
            pieces.extend(l.b.iter().map(|b| b.to_string()));
            pieces.extend(l.r#type.iter().map(|t| dtype_enum_name(*t)));
            pieces.extend(l.shape.iter().map(summarize_shape));
            pieces.extend(l.tensor.iter().map(summarize_tensor));
            pieces.extend(l.func.iter().map(summarize_func));
            format!("[{}]", pieces.join(", "))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(t: &str, text: &str) -> AttrValue {
        parse_attr_value(t, text).unwrap_or_else(|e| panic!("{t} = {text}: {e}"))
    }

    #[test]
    fn parses_every_attr_type() {
        assert_eq!(ok("string", "'foo'").value, Some(Value::S(b"foo".to_vec())));
        assert_eq!(
            ok("string", "\"a\\tb\"").value,
            Some(Value::S(b"a\tb".to_vec()))
        );
        assert_eq!(ok("int", "-1").value, Some(Value::I(-1)));
        assert_eq!(ok("float", "1e-3").value, Some(Value::F(1e-3)));
        assert_eq!(ok("float", "0").value, Some(Value::F(0.0)));
        assert_eq!(ok("float", "-inf").value, Some(Value::F(f32::NEG_INFINITY)));
        assert_eq!(ok("bool", "true").value, Some(Value::B(true)));
        assert_eq!(ok("type", "DT_INT32").value, Some(Value::Type(3)));
        let shape = ok("shape", "{ unknown_rank: true }");
        assert_eq!(summarize_attr_value(&shape), "<unknown>");
        let shape = ok("shape", "{ dim { size: 1 } dim { size: -1 } }");
        assert_eq!(summarize_attr_value(&shape), "[1,?]");
        let tensor = ok("tensor", "{ dtype: DT_INT32 int_val: 5 }");
        assert_eq!(
            summarize_attr_value(&tensor),
            "Tensor<type: int32 shape: [] values: 5>"
        );
        assert_eq!(summarize_attr_value(&ok("func", "{ name: 'f' }")), "f");
        assert_eq!(summarize_attr_value(&ok("list(int)", "[]")), "[]");
        assert_eq!(summarize_attr_value(&ok("list(int)", "[ ]")), "[]");
        assert_eq!(
            summarize_attr_value(&ok("list(string)", "['a', 'b']")),
            "[\"a\", \"b\"]"
        );
        assert_eq!(
            summarize_attr_value(&ok("list(float)", "[1.5, 2]")),
            "[1.5, 2]"
        );
        assert_eq!(
            summarize_attr_value(&ok("list(bool)", "[true, false]")),
            "[true, false]"
        );
        assert_eq!(
            summarize_attr_value(&ok("list(shape)", "[{dim {size: 2}}, {}]")),
            "[[2], []]"
        );
    }

    #[test]
    fn rejects_bad_values() {
        for (t, text) in [
            ("int", "1.5"),
            ("int", "'x'"),
            ("int", ""),
            ("bool", "yes"),
            ("type", "int32"),
            ("type", "DT_BOGUS"),
            ("list(int)", "3"),
            ("list(int)", "[1, 'a']"),
            ("string", "'unterminated"),
            ("string", "'a' i: 3"),
            ("list(int)", "[1] } s: 'x' list { i: [2]"),
            ("shape", "{ dim { size: 1 }"),
            ("nosuchtype", "1"),
        ] {
            assert!(
                parse_attr_value(t, text).is_err(),
                "{t} = {text} should fail"
            );
        }
    }

    #[test]
    fn has_type_messages_match_tensorflow() {
        let v = ok("int", "3");
        assert_eq!(
            attr_value_has_type(&v, "string").unwrap_err().message(),
            "AttrValue had value with type 'int' when 'string' expected"
        );
        assert_eq!(
            attr_value_has_type(&AttrValue::default(), "int")
                .unwrap_err()
                .message(),
            "AttrValue missing value with expected type 'int'"
        );
        assert!(attr_value_has_type(&AttrValue::default(), "list(int)").is_ok());
        let v = ok("list(int)", "[1]");
        assert_eq!(
            attr_value_has_type(&v, "list(string)")
                .unwrap_err()
                .message(),
            "AttrValue had value with type 'list(int)' when 'list(string)' expected"
        );
        let r = AttrValue {
            value: Some(Value::Type(101)),
        };
        assert_eq!(
            attr_value_has_type(&r, "type").unwrap_err().message(),
            "AttrValue must not have reference type value of float_ref"
        );
        let inv = AttrValue {
            value: Some(Value::Type(0)),
        };
        assert_eq!(
            attr_value_has_type(&inv, "type").unwrap_err().message(),
            "AttrValue has invalid DataType"
        );
        let bad = AttrValue {
            value: Some(Value::Type(77)),
        };
        assert_eq!(
            attr_value_has_type(&bad, "type").unwrap_err().message(),
            "AttrValue has invalid DataType enum: 77"
        );
    }

    #[test]
    fn validate_checks_minimum_and_allowed_values() {
        let attr = AttrDef {
            name: "T".into(),
            r#type: "type".into(),
            allowed_values: Some(ok("list(type)", "[DT_FLOAT, DT_DOUBLE, DT_INT32]")),
            ..Default::default()
        };
        let err = validate_attr_value(&ok("type", "DT_BOOL"), &attr).unwrap_err();
        assert_eq!(
            err.message(),
            "Value for attr 'T' of bool is not in the list of allowed values: float, double, int32"
        );
        assert!(validate_attr_value(&ok("type", "DT_INT32"), &attr).is_ok());
        let attr = AttrDef {
            name: "mode".into(),
            r#type: "string".into(),
            allowed_values: Some(ok("list(string)", "['A', 'B']")),
            ..Default::default()
        };
        assert_eq!(
            validate_attr_value(&ok("string", "'C'"), &attr)
                .unwrap_err()
                .message(),
            "Value for attr 'mode' of \"C\" is not in the list of allowed values: \"A\", \"B\""
        );
        let attr = AttrDef {
            name: "N".into(),
            r#type: "int".into(),
            has_minimum: true,
            minimum: 2,
            ..Default::default()
        };
        assert_eq!(
            validate_attr_value(&ok("int", "1"), &attr)
                .unwrap_err()
                .message(),
            "Value for attr 'N' of 1 must be at least minimum 2"
        );
        let attr = AttrDef {
            name: "l".into(),
            r#type: "list(int)".into(),
            has_minimum: true,
            minimum: 3,
            ..Default::default()
        };
        assert_eq!(
            validate_attr_value(&ok("list(int)", "[1, 2]"), &attr)
                .unwrap_err()
                .message(),
            "Length for attr 'l' of 2 must be at least minimum 3"
        );
        assert!(validate_attr_value(&ok("list(int)", "[1, 2, 3]"), &attr).is_ok());
    }

    #[test]
    fn floats() {
        assert_eq!(format_float(1.0), "1");
        assert_eq!(format_float(0.0001), "0.0001");
        assert_eq!(format_float(1e-5), "1e-5");
        assert_eq!(format_float(f32::INFINITY), "inf");
    }
}
