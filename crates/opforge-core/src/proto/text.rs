//! A protobuf text-format printer with the layout of TensorFlow's `.pbtxt`
//! files (protobuf's C++ `TextFormat::Printer`): fields in field-number
//! order, one repeated element per line, map entries sorted by key,
//! C-escaped strings and floats printed the shortest way that reads back.

use prost_reflect::{DynamicMessage, FieldDescriptor, Kind, MapKey, Value};
use std::fmt::Write;

/// Prints `msg`: multi-line with two-space indentation when `pretty`, else
/// on one line with single spaces (like `ShortDebugString`).
pub(crate) fn print(msg: &DynamicMessage, pretty: bool) -> String {
    let mut out = String::new();
    Printer {
        out: &mut out,
        pretty,
    }
    .message(msg, 0);
    if !pretty {
        let trimmed = out.trim_end().len();
        out.truncate(trimmed);
    }
    out
}

struct Printer<'a> {
    out: &'a mut String,
    pretty: bool,
}

impl Printer<'_> {
    fn start_line(&mut self, depth: usize) {
        if self.pretty {
            for _ in 0..depth {
                self.out.push_str("  ");
            }
        }
    }

    fn end_line(&mut self) {
        self.out.push(if self.pretty { '\n' } else { ' ' });
    }

    fn message(&mut self, msg: &DynamicMessage, depth: usize) {
        let mut fields: Vec<(FieldDescriptor, &Value)> = msg.fields().collect();
        fields.sort_by_key(|(f, _)| f.number());
        for (field, value) in fields {
            match value {
                Value::List(items) => {
                    for item in items {
                        self.field(&field, item, depth);
                    }
                }
                Value::Map(map) => {
                    let Kind::Message(entry) = field.kind() else {
                        continue;
                    };
                    let mut entries: Vec<(&MapKey, &Value)> = map.iter().collect();
                    entries.sort_by(|a, b| map_key_order(a.0, b.0));
                    for (key, value) in entries {
                        self.start_line(depth);
                        let _ = write!(self.out, "{} {{", field.name());
                        self.end_line();
                        let key_field = entry.map_entry_key_field();
                        let value_field = entry.map_entry_value_field();
                        self.field(&key_field, &key.clone().into(), depth + 1);
                        self.field(&value_field, value, depth + 1);
                        self.start_line(depth);
                        self.out.push('}');
                        self.end_line();
                    }
                }
                single => self.field(&field, single, depth),
            }
        }
    }

    fn field(&mut self, field: &FieldDescriptor, value: &Value, depth: usize) {
        self.start_line(depth);
        self.out.push_str(field.name());
        if let Value::Message(m) = value {
            self.out.push_str(" {");
            self.end_line();
            self.message(m, depth + 1);
            self.start_line(depth);
            self.out.push('}');
        } else {
            self.out.push_str(": ");
            self.scalar(field, value);
        }
        self.end_line();
    }

    fn scalar(&mut self, field: &FieldDescriptor, value: &Value) {
        let out = &mut *self.out;
        let _ = match value {
            Value::Bool(b) => write!(out, "{b}"),
            Value::I32(v) => write!(out, "{v}"),
            Value::I64(v) => write!(out, "{v}"),
            Value::U32(v) => write!(out, "{v}"),
            Value::U64(v) => write!(out, "{v}"),
            Value::F32(v) => write!(out, "{}", format_f32(*v)),
            Value::F64(v) => write!(out, "{}", format_f64(*v)),
            Value::String(s) => write!(out, "\"{}\"", crate::strings::c_escape(s.as_bytes())),
            Value::Bytes(b) => write!(out, "\"{}\"", crate::strings::c_escape(b)),
            Value::EnumNumber(n) => match field.kind() {
                Kind::Enum(e) => match e.get_value(*n) {
                    Some(v) => write!(out, "{}", v.name()),
                    None => write!(out, "{n}"),
                },
                _ => write!(out, "{n}"),
            },
            Value::Message(_) | Value::List(_) | Value::Map(_) => Ok(()),
        };
    }
}

fn map_key_order(a: &MapKey, b: &MapKey) -> std::cmp::Ordering {
    match (a, b) {
        (MapKey::String(x), MapKey::String(y)) => x.cmp(y),
        (MapKey::I32(x), MapKey::I32(y)) => x.cmp(y),
        (MapKey::I64(x), MapKey::I64(y)) => x.cmp(y),
        (MapKey::U32(x), MapKey::U32(y)) => x.cmp(y),
        (MapKey::U64(x), MapKey::U64(y)) => x.cmp(y),
        (MapKey::Bool(x), MapKey::Bool(y)) => x.cmp(y),
        _ => std::cmp::Ordering::Equal,
    }
}

/// `%.{precision}g` of C's printf.
fn format_g(v: f64, precision: usize) -> String {
    if v == 0.0 {
        return if v.is_sign_negative() {
            "-0".into()
        } else {
            "0".into()
        };
    }
    let sci = format!("{:.*e}", precision - 1, v);
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let strip = |s: &str| -> String {
        if s.contains('.') {
            s.trim_end_matches('0').trim_end_matches('.').to_string()
        } else {
            s.to_string()
        }
    };
    if exp < -4 || exp >= precision as i32 {
        let sign = if exp < 0 { '-' } else { '+' };
        format!("{}e{sign}{:02}", strip(mantissa), exp.abs())
    } else {
        let decimals = (precision as i32 - 1 - exp).max(0) as usize;
        strip(&format!("{v:.decimals$}"))
    }
}

fn non_finite(v: f64) -> Option<&'static str> {
    if v.is_nan() {
        Some("nan")
    } else if v.is_infinite() {
        Some(if v > 0.0 { "inf" } else { "-inf" })
    } else {
        None
    }
}

/// A float as protobuf's C++ printer writes it (`SimpleFtoa`): `%.6g`, or
/// `%.9g` when six digits do not read back the same value.
pub(crate) fn format_f32(v: f32) -> String {
    if let Some(s) = non_finite(v as f64) {
        return s.into();
    }
    let short = format_g(v as f64, 6);
    if short.parse::<f32>() == Ok(v) {
        short
    } else {
        format_g(v as f64, 9)
    }
}

/// A double as protobuf's C++ printer writes it (`SimpleDtoa`): `%.15g`, or `%.17g`.
pub(crate) fn format_f64(v: f64) -> String {
    if let Some(s) = non_finite(v) {
        return s.into();
    }
    let short = format_g(v, 15);
    if short.parse::<f64>() == Ok(v) {
        short
    } else {
        format_g(v, 17)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floats_print_like_protobuf_cpp() {
        for (v, s) in [
            (1.0f32, "1"),
            (0.0001, "0.0001"),
            (1e-5, "1e-05"),
            (0.1, "0.1"),
            (1.33, "1.33"),
            (4000.0, "4000"),
            (-6.0, "-6"),
            (1e20, "1e+20"),
            (123456789.0, "123456792"),
            (0.3333333, "0.333333313"),
            (f32::NEG_INFINITY, "-inf"),
            (0.0, "0"),
        ] {
            assert_eq!(format_f32(v), s, "{v}");
            if v.is_finite() {
                assert_eq!(s.parse::<f32>().unwrap(), v);
            }
        }
        assert_eq!(format_f64(0.1), "0.1");
        assert_eq!(format_f64(1.0 / 3.0), "0.33333333333333331");
    }
}
