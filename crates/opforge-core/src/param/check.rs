//! The checks and messages both parse paths share, the fields' attr specs
//! and the parameter table.

use super::parse::parse_text;
use super::{Bound, ParamField, ParamType};
use crate::attrs::AttrMap;
use crate::dtype::DataType;
use crate::op_def::{attr_value_has_type, c_escape, format_float, list_len, summarize_attr_value};
use crate::proto::attr_value::Value;
use crate::proto::AttrValue;
use crate::{Result, Status};

/// A value as errors and the table show it: strings in single quotes,
/// types by name (`float`), lists in brackets, the rest as TensorFlow
/// summarizes attr values.
pub fn display_value(value: &AttrValue) -> String {
    match &value.value {
        Some(Value::S(s)) => format!("'{}'", c_escape(s)),
        Some(Value::Type(t)) => {
            DataType::from_i32(*t).map_or_else(|| t.to_string(), |d| d.name().into())
        }
        Some(Value::List(l)) if !l.s.is_empty() || !l.r#type.is_empty() => {
            let items: Vec<String> =
                l.s.iter()
                    .map(|s| format!("'{}'", c_escape(s)))
                    .chain(l.r#type.iter().map(|t| {
                        DataType::from_i32(*t).map_or_else(|| t.to_string(), |d| d.name().into())
                    }))
                    .collect();
            format!("[{}]", items.join(", "))
        }
        _ => summarize_attr_value(value),
    }
}

fn invalid(owner: &str, field: &ParamField, shown: &str, allowed: &str) -> Status {
    Status::invalid_argument(format!(
        "{owner}: invalid value {shown} for parameter '{}': {allowed}",
        field.name
    ))
}

/// What a value of `attr_type` must look like, for messages.
pub(super) fn expected(attr_type: &str) -> String {
    match attr_type {
        "int" => "must be an integer".into(),
        "float" => "must be a number".into(),
        "bool" => "must be true or false".into(),
        "string" => "must be a string".into(),
        "type" => "must be a data type name such as float32".into(),
        "shape" => "must be a shape such as (2, 3)".into(),
        other => match other
            .strip_prefix("list(")
            .and_then(|t| t.strip_suffix(')'))
        {
            Some(inner) => format!("must be a list of {inner}s such as (a, b)"),
            None => format!("must be a {other}"),
        },
    }
}

fn bound_text(b: Bound) -> String {
    match b {
        Bound::Int(i) => i.to_string(),
        Bound::Float(f) => format_float(f as f32),
    }
}

/// What a field's range allows: `must be in [1, 8]`, `must be >= 0`.
fn range_text(field: &ParamField) -> Option<String> {
    let lower = match (field.lower_bound, field.minimum) {
        (Some(Bound::Int(l)), Some(m)) => Some(Bound::Int(l.max(m))),
        (Some(l), _) => Some(l),
        (None, Some(m)) if !field.attr_type.starts_with("list(") => Some(Bound::Int(m)),
        (None, _) => None,
    };
    match (lower, field.upper_bound) {
        (Some(l), Some(u)) => Some(format!("must be in [{}, {}]", bound_text(l), bound_text(u))),
        (Some(l), None) => Some(format!("must be >= {}", bound_text(l))),
        (None, Some(u)) => Some(format!("must be <= {}", bound_text(u))),
        (None, None) => None,
    }
}

fn quoted_list(values: &[&str]) -> String {
    values
        .iter()
        .map(|v| format!("'{v}'"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The names a field's enumeration checks a value's strings (or types) by.
fn enumerated_names(value: &AttrValue) -> Vec<String> {
    match &value.value {
        Some(Value::S(s)) => vec![String::from_utf8_lossy(s).into_owned()],
        Some(Value::Type(t)) => vec![type_name(*t)],
        Some(Value::List(l)) => {
            l.s.iter()
                .map(|s| String::from_utf8_lossy(s).into_owned())
                .chain(l.r#type.iter().map(|t| type_name(*t)))
                .collect()
        }
        _ => Vec::new(),
    }
}

fn type_name(code: i32) -> String {
    DataType::from_i32(code).map_or_else(|| code.to_string(), |d| d.name().to_string())
}

/// Whether a type name of an enumeration (`float`, `float32`, `DT_FLOAT`)
/// names the type called `name`.
fn same_type(listed: &str, name: &str) -> bool {
    let listed = DataType::from_spec_name(listed).or_else(|| DataType::from_proto_name(listed));
    listed.is_some_and(|d| d.name() == name)
}

/// Checks a value of `field`: its type, enumeration, minimum and bounds.
pub(super) fn check_value(owner: &str, field: &ParamField, value: &AttrValue) -> Result<()> {
    let shown = || display_value(value);
    if attr_value_has_type(value, field.attr_type).is_err() {
        return Err(invalid(owner, field, &shown(), &expected(field.attr_type)));
    }
    if !field.enumeration.is_empty() {
        let is_type = field.attr_type.ends_with("type") || field.attr_type.ends_with("type)");
        for name in enumerated_names(value) {
            let listed = field
                .enumeration
                .iter()
                .any(|e| *e == name || (is_type && same_type(e, &name)));
            if !listed {
                let what = format!("must be one of {}", quoted_list(field.enumeration));
                let shown = if field.attr_type.starts_with("list(") {
                    format!("'{name}' in {}", shown())
                } else {
                    shown()
                };
                return Err(invalid(owner, field, &shown, &what));
            }
        }
    }
    if let Some(minimum) = field.minimum {
        if field.attr_type.starts_with("list(") {
            let len = match &value.value {
                Some(Value::List(l)) => list_len(l) as i64,
                _ => 0,
            };
            if len < minimum {
                return Err(invalid(
                    owner,
                    field,
                    &shown(),
                    &format!("must have at least {minimum} elements"),
                ));
            }
        }
    }
    let out_of_range = match &value.value {
        Some(Value::I(i)) => {
            let below = field.minimum.is_some_and(|m| *i < m)
                || matches!(field.lower_bound, Some(Bound::Int(l)) if *i < l)
                || matches!(field.lower_bound, Some(Bound::Float(l)) if (*i as f64) < l);
            let above = matches!(field.upper_bound, Some(Bound::Int(u)) if *i > u)
                || matches!(field.upper_bound, Some(Bound::Float(u)) if (*i as f64) > u);
            below || above
        }
        Some(Value::F(f)) => {
            let f = f64::from(*f);
            let in_range = |b: Option<Bound>, below: bool| match b {
                None => true,
                Some(Bound::Int(i)) if below => f >= i as f64,
                Some(Bound::Float(x)) if below => f >= x,
                Some(Bound::Int(i)) => f <= i as f64,
                Some(Bound::Float(x)) => f <= x,
            };
            // NaN is in no range.
            let bounded = field.lower_bound.is_some() || field.upper_bound.is_some();
            (bounded && f.is_nan())
                || !in_range(field.lower_bound, true)
                || !in_range(field.upper_bound, false)
        }
        _ => false,
    };
    if out_of_range {
        let what = range_text(field).unwrap_or_default();
        return Err(invalid(owner, field, &shown(), &what));
    }
    Ok(())
}

fn missing(owner: &str, field: &ParamField) -> Status {
    Status::invalid_argument(format!(
        "{owner}: missing required parameter '{}' ({})",
        field.name, field.attr_type
    ))
}

/// One checked value per field from a node's attrs (defaults filling gaps).
pub(super) fn values_from_attrs(
    owner: &str,
    fields: &[ParamField],
    attrs: &AttrMap,
) -> Result<Vec<Option<AttrValue>>> {
    let value = |field: &ParamField| -> Result<Option<AttrValue>> {
        match attrs.get(field.name).or(field.default.as_ref()) {
            Some(value) if field.optional && field.none.as_ref() == Some(value) => Ok(None),
            Some(value) => check_value(owner, field, value).map(|()| Some(value.clone())),
            None if field.optional => Ok(None),
            None => Err(missing(owner, field)),
        }
    };
    fields.iter().map(value).collect()
}

/// Parses the keyword argument `text` of `field` into its `AttrValue`,
/// unchecked: integers (`"3"`), numbers (`"0.5"`, `"inf"`), bools
/// (`"True"`, `"true"`, `"1"`, `"False"`, `"false"`, `"0"`), strings (as
/// given, or in quotes), type names (`"float32"`, `"float"`,
/// `"DT_FLOAT"`), shapes and lists (`"(2, 2)"`, `"[2, 2]"`, `"()"`, a
/// trailing comma allowed). The error says what the field expects.
pub fn parse_kwarg(owner: &str, field: &ParamField, text: &str) -> Result<AttrValue> {
    parse_text(field.attr_type, text).ok_or_else(|| {
        invalid(
            owner,
            field,
            &format!("'{text}'"),
            &expected(field.attr_type),
        )
    })
}

/// The given keyword arguments as checked attrs.
pub(super) fn given_from_kwargs(
    owner: &str,
    fields: &[ParamField],
    kwargs: &[(&str, &str)],
) -> Result<AttrMap> {
    let given = parse_given(owner, fields, kwargs)?;
    Ok(fields
        .iter()
        .zip(given)
        .filter_map(|(f, v)| Some((f.name.to_string(), v?)))
        .collect())
}

/// One checked value per field from keyword arguments.
pub(super) fn values_from_kwargs(
    owner: &str,
    fields: &[ParamField],
    kwargs: &[(&str, &str)],
) -> Result<Vec<Option<AttrValue>>> {
    let given = parse_given(owner, fields, kwargs)?;
    fields
        .iter()
        .zip(given)
        .map(
            |(field, value)| match value.or_else(|| field.default.clone()) {
                Some(v) => Ok(Some(v)),
                None if field.optional => Ok(None),
                None => Err(missing(owner, field)),
            },
        )
        .collect()
}

/// The checked value of each field given in `kwargs` (`None`: not given).
fn parse_given(
    owner: &str,
    fields: &[ParamField],
    kwargs: &[(&str, &str)],
) -> Result<Vec<Option<AttrValue>>> {
    let mut given: Vec<Option<AttrValue>> = vec![None; fields.len()];
    let mut seen = vec![false; fields.len()];
    for (name, text) in kwargs {
        let Some(i) = fields.iter().position(|f| f.name == *name) else {
            let known: Vec<&str> = fields.iter().map(|f| f.name).collect();
            return Err(Status::invalid_argument(format!(
                "{owner}: unknown parameter '{name}'; known: {}",
                if known.is_empty() {
                    "none".to_string()
                } else {
                    known.join(", ")
                }
            )));
        };
        if seen[i] {
            return Err(Status::invalid_argument(format!(
                "{owner}: parameter '{name}' is given twice"
            )));
        }
        seen[i] = true;
        // MXNet writes an absent optional value as "None".
        if fields[i].optional && text.trim() == "None" {
            continue;
        }
        let value = parse_kwarg(owner, &fields[i], text)?;
        if fields[i].optional && fields[i].none.as_ref() == Some(&value) {
            continue;
        }
        check_value(owner, &fields[i], &value)?;
        given[i] = Some(value);
    }
    Ok(given)
}

/// The field's value as a `T` (the generated `from_values` calls this per
/// field): a checked value that does not fit `T` (an `int` beyond `i32`)
/// is an error naming the field.
pub fn take<T: ParamType>(owner: &str, name: &str, value: Option<&Option<AttrValue>>) -> Result<T> {
    match value.and_then(Option::as_ref) {
        Some(v) => T::from_attr(v).ok_or_else(|| {
            Status::invalid_argument(format!(
                "{owner}: invalid value {} for parameter '{name}': does not fit {}",
                display_value(v),
                std::any::type_name::<T>()
            ))
        }),
        None => T::absent().ok_or_else(|| {
            Status::invalid_argument(format!(
                "{owner}: missing required parameter '{name}' ({})",
                T::ATTR_TYPE
            ))
        }),
    }
}

/// A default as the spec language writes it after `=`.
fn spec_value(value: &AttrValue) -> String {
    match &value.value {
        Some(Value::S(s)) => format!("'{}'", c_escape(s)),
        Some(Value::F(f)) => format_float(*f),
        Some(Value::Type(t)) => {
            DataType::from_i32(*t).map_or_else(|| t.to_string(), |d| d.proto_name().into())
        }
        Some(Value::Shape(s)) => format!("{{ {} }}", crate::proto::to_short_text(s)),
        Some(Value::List(l)) => {
            let items: Vec<String> = l
                .s
                .iter()
                .map(|s| format!("'{}'", c_escape(s)))
                .chain(l.i.iter().map(i64::to_string))
                .chain(l.f.iter().map(|f| format_float(*f)))
                .chain(l.b.iter().map(bool::to_string))
                .chain(l.r#type.iter().map(|t| {
                    DataType::from_i32(*t).map_or_else(|| t.to_string(), |d| d.proto_name().into())
                }))
                .chain(
                    l.shape
                        .iter()
                        .map(|s| format!("{{ {} }}", crate::proto::to_short_text(s))),
                )
                .collect();
            format!("[{}]", items.join(", "))
        }
        _ => summarize_attr_value(value),
    }
}

impl ParamField {
    /// The field as an OpDef attr spec in TensorFlow's syntax:
    /// `num_bits: int = 8`, `mode: {'clip', 'wrap'} = 'clip'`,
    /// `T: {half, float} = DT_FLOAT`, `block_size: int >= 2`,
    /// `ksize: list(int) >= 4`. Bounds are not part of it (the syntax
    /// has none). An `Option` field has no spec: an attr without a
    /// default is required.
    pub fn spec(&self) -> Result<String> {
        if self.optional && self.none.is_none() {
            return Err(Status::invalid_argument(format!(
                "parameter '{}' is an Option, which an OpDef attr cannot express (an attr \
                 without a default is required); give the field a default, or the value that \
                 stands for None (#[param(none = ...)])",
                self.name
            )));
        }
        let mut spec = format!("{}: ", self.name);
        if self.enumeration.is_empty() {
            spec.push_str(self.attr_type);
        } else {
            let (list, base) = match self
                .attr_type
                .strip_prefix("list(")
                .and_then(|t| t.strip_suffix(')'))
            {
                Some(inner) => (true, inner),
                None => (false, self.attr_type),
            };
            let values: Vec<String> = self
                .enumeration
                .iter()
                .map(|v| match base {
                    "type" => v.to_string(),
                    _ => format!("'{}'", c_escape(v.as_bytes())),
                })
                .collect();
            let set = format!("{{{}}}", values.join(", "));
            if list {
                spec.push_str(&format!("list({set})"));
            } else {
                spec.push_str(&set);
            }
        }
        if let Some(m) = self.minimum {
            spec.push_str(&format!(" >= {m}"));
        }
        if let Some(d) = self.default.as_ref().or(self.none.as_ref()) {
            spec.push_str(" = ");
            spec.push_str(&spec_value(d));
        }
        Ok(spec)
    }
}

/// The markdown table of `fields`.
pub(super) fn doc_table(fields: &[ParamField]) -> String {
    let cell = |s: &str| s.replace('|', "\\|").replace('\n', " ");
    let mut out = String::from(
        "| Parameter | Type | Default | Allowed | Description |\n|---|---|---|---|---|\n",
    );
    for f in fields {
        let default = match (&f.default, f.optional, &f.none) {
            (Some(d), _, _) => format!("`{}`", display_value(d)),
            (None, true, Some(none)) => format!("optional (None: `{}`)", display_value(none)),
            (None, true, None) => "optional".to_string(),
            (None, false, _) => "required".to_string(),
        };
        let mut allowed = Vec::new();
        if !f.enumeration.is_empty() {
            allowed.push(quoted_list(f.enumeration));
        }
        if let Some(range) = range_text(f) {
            let range = range.trim_start_matches("must be ");
            allowed.push(range.trim_start_matches("in ").to_string());
        }
        if let (Some(m), true) = (f.minimum, f.attr_type.starts_with("list(")) {
            allowed.push(format!("at least {m} elements"));
        }
        out.push_str(&format!(
            "| `{}` | {} | {} | {} | {} |\n",
            f.name,
            f.attr_type,
            cell(&default),
            cell(&allowed.join("; ")),
            cell(f.description)
        ));
    }
    out
}
