//! A field's `#[param(...)]` keys and doc comment, read and checked
//! against the field's type.

use crate::kind::{classify, FieldType, Kind};
use proc_macro2::Span;
use syn::spanned::Spanned;
use syn::{Attribute, Expr, ExprLit, ExprUnary, Field, Lit, LitStr, UnOp};

/// The keys a field's `#[param(...)]` takes.
pub(crate) const FIELD_KEYS: &str =
    "default, none, lower_bound, upper_bound, minimum, enumeration, describe, name, flatten";

/// A number literal, with its sign applied.
#[derive(Clone, Debug)]
pub(crate) enum Number {
    /// An integer literal (and its value, which fits `i64`).
    Int(i64),
    /// A float literal, or an integer literal where a float is wanted.
    Float(f64),
}

impl Number {
    pub(crate) fn as_f64(&self) -> f64 {
        match *self {
            Number::Int(i) => i as f64,
            Number::Float(f) => f,
        }
    }
}

/// A checked default value.
#[derive(Clone, Debug)]
pub(crate) enum Default {
    Int(i64),
    /// The value as the `f32` the attr holds.
    Float(f32),
    Bool(bool),
    Str(String),
    /// A `DataType` variant's name.
    Type(syn::Ident),
    Ints(Vec<i64>),
    Floats(Vec<f32>),
    Bools(Vec<bool>),
    Strs(Vec<String>),
    Types(Vec<syn::Ident>),
}

/// One field of a `#[derive(Parameter)]` struct.
pub(crate) struct ParamFieldDef {
    pub(crate) ident: syn::Ident,
    pub(crate) ty: syn::Type,
    pub(crate) field_type: FieldType,
    /// The attr's name.
    pub(crate) name: String,
    pub(crate) default: Option<Default>,
    /// The default literal's span (for the enum membership check).
    pub(crate) default_span: Span,
    pub(crate) lower_bound: Option<Number>,
    pub(crate) upper_bound: Option<Number>,
    pub(crate) minimum: Option<i64>,
    pub(crate) enumeration: Option<Vec<String>>,
    pub(crate) description: String,
    /// Whether the field is a nested `Parameter` struct whose fields are
    /// this struct's (`#[param(flatten)]`).
    pub(crate) flatten: bool,
    /// For an `Option` field: the value that stands for `None` in an OpDef
    /// attr (`#[param(none = -1)]`).
    pub(crate) none: Option<Default>,
}

fn err(span: impl Spanned, msg: impl std::fmt::Display) -> syn::Error {
    syn::Error::new(span.span(), msg)
}

/// A number literal, optionally negated: `3`, `-6`, `0.5`, `-1e-3`.
fn number(expr: &Expr) -> Option<Number> {
    match expr {
        Expr::Lit(ExprLit {
            lit: Lit::Int(i), ..
        }) => i.base10_parse::<i64>().ok().map(Number::Int),
        Expr::Lit(ExprLit {
            lit: Lit::Float(f), ..
        }) => f
            .base10_parse::<f64>()
            .ok()
            .filter(|f| f.is_finite())
            .map(Number::Float),
        Expr::Unary(ExprUnary {
            op: UnOp::Neg(_),
            expr,
            ..
        }) => match number(expr)? {
            Number::Int(i) => i.checked_neg().map(Number::Int),
            Number::Float(f) => Some(Number::Float(-f)),
        },
        Expr::Group(g) => number(&g.expr),
        Expr::Paren(p) => number(&p.expr),
        _ => None,
    }
}

/// The `f32` value of a float literal, parsed from its digits (as the
/// OpDef's text would be), refusing values `f32` cannot hold.
fn float_value(expr: &Expr, field: &str, what: &str) -> syn::Result<f32> {
    let text = literal_text(expr).ok_or_else(|| {
        err(
            expr,
            format!("the {what} of float field '{field}' must be a number literal"),
        )
    })?;
    let value: f32 = text.parse().map_err(|_| {
        err(
            expr,
            format!("the {what} of float field '{field}' must be a number literal"),
        )
    })?;
    if !value.is_finite() {
        return Err(err(
            expr,
            format!("the {what} of float field '{field}' is out of the range of f32"),
        ));
    }
    Ok(value)
}

/// The decimal text of a number literal with its sign (`-6`, `0.25`).
fn literal_text(expr: &Expr) -> Option<String> {
    match expr {
        Expr::Lit(ExprLit {
            lit: Lit::Int(i), ..
        }) => Some(i.base10_digits().to_string()),
        Expr::Lit(ExprLit {
            lit: Lit::Float(f), ..
        }) => Some(f.base10_digits().to_string()),
        Expr::Unary(ExprUnary {
            op: UnOp::Neg(_),
            expr,
            ..
        }) => literal_text(expr).map(|t| format!("-{t}")),
        Expr::Group(g) => literal_text(&g.expr),
        Expr::Paren(p) => literal_text(&p.expr),
        _ => None,
    }
}

/// `expr` without the invisible groups a `macro_rules!` expansion may
/// wrap a literal in, and without parentheses.
fn ungroup(expr: &Expr) -> &Expr {
    match expr {
        Expr::Group(g) => ungroup(&g.expr),
        Expr::Paren(p) => ungroup(&p.expr),
        other => other,
    }
}

fn string_lit(expr: &Expr) -> Option<&LitStr> {
    match ungroup(expr) {
        Expr::Lit(ExprLit {
            lit: Lit::Str(s), ..
        }) => Some(s),
        _ => None,
    }
}

fn bool_lit(expr: &Expr) -> Option<bool> {
    match ungroup(expr) {
        Expr::Lit(ExprLit {
            lit: Lit::Bool(b), ..
        }) => Some(b.value),
        _ => None,
    }
}

/// A `DataType` variant: `Float` or `DataType::Float`.
fn type_ident(expr: &Expr) -> Option<syn::Ident> {
    match ungroup(expr) {
        Expr::Path(p) if p.qself.is_none() => {
            let segs = &p.path.segments;
            let ok = match segs.len() {
                1 => true,
                2 => segs[0].ident == "DataType",
                _ => false,
            };
            (ok && segs.iter().all(|s| s.arguments.is_none()))
                .then(|| segs.last().map(|s| s.ident.clone()))
                .flatten()
        }
        _ => None,
    }
}

/// Checks the default expression against the field's type.
fn default_value(expr: &Expr, ft: FieldType, field: &str, what: &str) -> syn::Result<Default> {
    let wrong = |expected: &str| {
        err(
            expr,
            format!(
                "the {what} of field '{field}' ({}) must be {expected}",
                ft.describe()
            ),
        )
    };
    if ft.optional {
        return Err(err(
            expr,
            format!(
                "field '{field}' is an Option: its absence is None, so it takes no default \
                 (drop the Option to give one, or name the value that stands for None with \
                 none = ...)"
            ),
        ));
    }
    if ft.list {
        let Expr::Array(array) = ungroup(expr) else {
            return Err(wrong("an array literal such as [1, 2]"));
        };
        let elems: Vec<&Expr> = array.elems.iter().collect();
        return Ok(match ft.kind {
            Kind::Int => Default::Ints(
                elems
                    .iter()
                    .map(|e| match number(e) {
                        Some(Number::Int(i)) => Ok(i),
                        _ => Err(wrong("an array of integer literals")),
                    })
                    .collect::<syn::Result<_>>()?,
            ),
            Kind::Float => Default::Floats(
                elems
                    .iter()
                    .map(|e| float_value(e, field, what))
                    .collect::<syn::Result<_>>()?,
            ),
            Kind::Bool => Default::Bools(
                elems
                    .iter()
                    .map(|e| bool_lit(e).ok_or_else(|| wrong("an array of bool literals")))
                    .collect::<syn::Result<_>>()?,
            ),
            Kind::Str => Default::Strs(
                elems
                    .iter()
                    .map(|e| {
                        string_lit(e)
                            .map(LitStr::value)
                            .ok_or_else(|| wrong("an array of string literals"))
                    })
                    .collect::<syn::Result<_>>()?,
            ),
            Kind::Type => Default::Types(
                elems
                    .iter()
                    .map(|e| type_ident(e).ok_or_else(|| wrong("an array of DataType variants")))
                    .collect::<syn::Result<_>>()?,
            ),
            Kind::Shape | Kind::Enum => {
                return Err(err(
                    expr,
                    format!(
                        "field '{field}': a Vec field takes integers, floats, bools, Strings or \
                         DataTypes"
                    ),
                ))
            }
        });
    }
    Ok(match ft.kind {
        Kind::Int => match number(expr) {
            Some(Number::Int(i)) => Default::Int(i),
            _ => return Err(wrong("an integer literal that fits i64")),
        },
        Kind::Float => Default::Float(float_value(expr, field, what)?),
        Kind::Bool => Default::Bool(bool_lit(expr).ok_or_else(|| wrong("true or false"))?),
        Kind::Str => Default::Str(
            string_lit(expr)
                .map(LitStr::value)
                .ok_or_else(|| wrong("a string literal"))?,
        ),
        Kind::Enum => Default::Str(
            string_lit(expr)
                .map(LitStr::value)
                .ok_or_else(|| wrong("a string literal naming a variant"))?,
        ),
        Kind::Type => Default::Type(
            type_ident(expr).ok_or_else(|| wrong("a DataType variant such as Float"))?,
        ),
        Kind::Shape => Default::Ints(match ungroup(expr) {
            Expr::Array(array) => array
                .elems
                .iter()
                .map(|e| match number(e) {
                    Some(Number::Int(i)) => Ok(i),
                    _ => Err(wrong("an array of dims such as [2, -1]")),
                })
                .collect::<syn::Result<_>>()?,
            _ => return Err(wrong("an array of dims such as [2, -1]")),
        }),
    })
}

/// The field's doc comment: its lines, trimmed, joined by spaces.
fn doc_comment(attrs: &[Attribute]) -> String {
    let mut lines = Vec::new();
    for attr in attrs {
        if !attr.path().is_ident("doc") {
            continue;
        }
        if let syn::Meta::NameValue(nv) = &attr.meta {
            if let Some(s) = string_lit(&nv.value) {
                let line = s.value();
                let line = line.trim();
                if !line.is_empty() {
                    lines.push(line.to_string());
                }
            }
        }
    }
    lines.join(" ")
}

/// Whether `name` is a valid attr name (TensorFlow's: a letter, then
/// letters, digits or '_').
pub(crate) fn is_attr_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic())
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Sets `slot` once, or fails naming the repeated key.
fn once<T>(slot: &mut Option<T>, value: T, key: &syn::Path) -> syn::Result<()> {
    if slot.is_some() {
        let name = key.get_ident().map(ToString::to_string).unwrap_or_default();
        return Err(err(key, format!("duplicate param key '{name}'")));
    }
    *slot = Some(value);
    Ok(())
}

/// Reads and checks one field.
pub(crate) fn parse_field(field: &Field) -> syn::Result<ParamFieldDef> {
    let ident = field
        .ident
        .clone()
        .ok_or_else(|| err(field, "Parameter fields must be named"))?;
    let field_name = ident.to_string().trim_start_matches("r#").to_string();
    let ft = classify(&field.ty);
    let mut default_expr: Option<Expr> = None;
    let mut lower: Option<Expr> = None;
    let mut upper: Option<Expr> = None;
    let mut minimum: Option<Expr> = None;
    let mut enumeration: Option<Vec<LitStr>> = None;
    let mut describe: Option<LitStr> = None;
    let mut name: Option<LitStr> = None;
    let mut flatten: Option<syn::Path> = None;
    let mut none_expr: Option<Expr> = None;
    let mut keys = 0usize;
    for attr in field.attrs.iter().filter(|a| a.path().is_ident("param")) {
        attr.parse_nested_meta(|meta| {
            let key = meta.path.get_ident().map(ToString::to_string);
            keys += 1;
            match key.as_deref() {
                Some("flatten") => once(&mut flatten, meta.path.clone(), &meta.path),
                Some("none") => once(&mut none_expr, meta.value()?.parse()?, &meta.path),
                Some("default") => once(&mut default_expr, meta.value()?.parse()?, &meta.path),
                Some("lower_bound") => once(&mut lower, meta.value()?.parse()?, &meta.path),
                Some("upper_bound") => once(&mut upper, meta.value()?.parse()?, &meta.path),
                Some("minimum") => once(&mut minimum, meta.value()?.parse()?, &meta.path),
                Some("describe") => once(&mut describe, meta.value()?.parse()?, &meta.path),
                Some("name") => once(&mut name, meta.value()?.parse()?, &meta.path),
                Some("enumeration") => {
                    let content;
                    syn::parenthesized!(content in meta.input);
                    let values = content
                        .parse_terminated(|s| s.parse::<LitStr>(), syn::Token![,])?
                        .into_iter()
                        .collect::<Vec<_>>();
                    if values.is_empty() {
                        return Err(meta.error("enumeration(...) needs at least one value"));
                    }
                    once(&mut enumeration, values, &meta.path)
                }
                _ => Err(crate::unknown_key(
                    &meta,
                    "",
                    &format!("a field takes: {FIELD_KEYS}"),
                )),
            }
        })?;
    }
    if let Some(path) = &flatten {
        if keys > 1 {
            return Err(err(
                path,
                format!("field '{field_name}' is flattened: it takes no other param key"),
            ));
        }
        if ft.optional || ft.list {
            return Err(err(
                &field.ty,
                format!(
                    "a flattened field is a Parameter struct, not {}",
                    ft.describe()
                ),
            ));
        }
        return Ok(ParamFieldDef {
            ident,
            ty: field.ty.clone(),
            field_type: ft,
            name: String::new(),
            default: None,
            default_span: field.span(),
            lower_bound: None,
            upper_bound: None,
            minimum: None,
            enumeration: None,
            description: String::new(),
            flatten: true,
            none: None,
        });
    }
    let name_value = match &name {
        Some(n) => {
            if !is_attr_name(&n.value()) {
                return Err(err(
                    n,
                    "an attr name is a letter, then letters, digits or '_'",
                ));
            }
            n.value()
        }
        None => {
            if !is_attr_name(&field_name) {
                return Err(err(
                    &ident,
                    format!(
                        "field '{field_name}' is not a valid attr name (a letter, then letters, \
                         digits or '_'); give one with #[param(name = \"...\")]"
                    ),
                ));
            }
            field_name.clone()
        }
    };
    let bound = |expr: &Option<Expr>, key: &str| -> syn::Result<Option<Number>> {
        let Some(expr) = expr else { return Ok(None) };
        if !ft.kind.is_number() || ft.list {
            return Err(err(
                expr,
                format!(
                    "{key} applies to number fields only; field '{field_name}' is {}",
                    ft.describe()
                ),
            ));
        }
        match (number(expr), ft.kind) {
            (Some(Number::Int(i)), Kind::Int) => Ok(Some(Number::Int(i))),
            (Some(n), Kind::Float) => Ok(Some(Number::Float(n.as_f64()))),
            _ => Err(err(
                expr,
                format!(
                    "{key} of field '{field_name}' must be {} literal",
                    if ft.kind == Kind::Int {
                        "an integer"
                    } else {
                        "a number"
                    }
                ),
            )),
        }
    };
    let lower_bound = bound(&lower, "lower_bound")?;
    let upper_bound = bound(&upper, "upper_bound")?;
    if let (Some(l), Some(u)) = (&lower_bound, &upper_bound) {
        if l.as_f64() > u.as_f64() {
            return Err(err(
                upper.as_ref().map_or(field.span(), Spanned::span),
                format!("field '{field_name}': lower_bound is above upper_bound"),
            ));
        }
    }
    let minimum_value = match &minimum {
        None => None,
        Some(expr) => {
            if !(ft.kind == Kind::Int || ft.list) {
                return Err(err(
                    expr,
                    format!(
                        "minimum (TensorFlow's '>= N') applies to integer and Vec fields only; \
                         field '{field_name}' is {}",
                        ft.describe()
                    ),
                ));
            }
            match number(expr) {
                Some(Number::Int(i)) if !ft.list || i >= 0 => Some(i),
                _ => {
                    return Err(err(
                        expr,
                        format!(
                            "minimum of field '{field_name}' must be {}",
                            if ft.list {
                                "a non-negative integer literal (a length)"
                            } else {
                                "an integer literal"
                            }
                        ),
                    ))
                }
            }
        }
    };
    if let Some(values) = &enumeration {
        match ft.kind {
            Kind::Str | Kind::Type => {}
            Kind::Enum => {
                return Err(err(
                    &values[0],
                    format!(
                        "field '{field_name}' is an enum: its values are its variants' names \
                         (#[derive(ParamEnum)]), not an enumeration(...)"
                    ),
                ))
            }
            _ => {
                return Err(err(
                    &values[0],
                    format!(
                        "enumeration applies to String and DataType fields only; field \
                         '{field_name}' is {}",
                        ft.describe()
                    ),
                ))
            }
        }
        let mut seen = Vec::new();
        for v in values {
            if seen.contains(&v.value()) {
                return Err(err(
                    v,
                    format!("'{}' is listed twice in the enumeration", v.value()),
                ));
            }
            seen.push(v.value());
        }
    }
    let enumeration_values: Option<Vec<String>> = enumeration
        .as_ref()
        .map(|v| v.iter().map(LitStr::value).collect());
    let default = match &default_expr {
        None => None,
        Some(expr) => Some(default_value(expr, ft, &field_name, "default")?),
    };
    let none = match &none_expr {
        None => None,
        Some(expr) if ft.optional => {
            let inner = FieldType {
                optional: false,
                ..ft
            };
            Some(default_value(expr, inner, &field_name, "none value")?)
        }
        Some(expr) => {
            return Err(err(
                expr,
                format!(
                    "none (the value that stands for None in the OpDef) applies to Option \
                     fields only; field '{field_name}' is {}",
                    ft.describe()
                ),
            ))
        }
    };
    if let (Some(d), Some(expr)) = (&default, &default_expr) {
        check_default(
            d,
            expr,
            &field_name,
            &lower_bound,
            &upper_bound,
            minimum_value,
            &enumeration_values,
        )?;
    }
    let description = match &describe {
        Some(d) => d.value(),
        None => doc_comment(&field.attrs),
    };
    Ok(ParamFieldDef {
        ident,
        ty: field.ty.clone(),
        field_type: ft,
        name: name_value,
        default,
        default_span: default_expr.as_ref().map_or(field.span(), Spanned::span),
        lower_bound,
        upper_bound,
        minimum: minimum_value,
        enumeration: enumeration_values,
        description,
        flatten: false,
        none,
    })
}

/// Checks a default against the field's bounds, minimum and enumeration.
fn check_default(
    default: &Default,
    expr: &Expr,
    field: &str,
    lower: &Option<Number>,
    upper: &Option<Number>,
    minimum: Option<i64>,
    enumeration: &Option<Vec<String>>,
) -> syn::Result<()> {
    let value = match default {
        Default::Int(i) => Some(*i as f64),
        Default::Float(f) => Some(f64::from(*f)),
        _ => None,
    };
    if let Some(v) = value {
        if lower.as_ref().is_some_and(|l| v < l.as_f64())
            || upper.as_ref().is_some_and(|u| v > u.as_f64())
        {
            return Err(err(
                expr,
                format!("the default of field '{field}' is outside its bounds"),
            ));
        }
    }
    if let (Some(m), Default::Int(i)) = (minimum, default) {
        if *i < m {
            return Err(err(
                expr,
                format!("the default of field '{field}' is below its minimum {m}"),
            ));
        }
    }
    let len = match default {
        Default::Ints(v) => Some(v.len()),
        Default::Floats(v) => Some(v.len()),
        Default::Bools(v) => Some(v.len()),
        Default::Strs(v) => Some(v.len()),
        Default::Types(v) => Some(v.len()),
        _ => None,
    };
    if let (Some(m), Some(len)) = (minimum, len) {
        if (len as i64) < m {
            return Err(err(
                expr,
                format!("the default of field '{field}' has fewer than {m} elements"),
            ));
        }
    }
    if let Some(allowed) = enumeration {
        let strings: Vec<String> = match default {
            Default::Str(s) => vec![s.clone()],
            Default::Strs(v) => v.clone(),
            _ => Vec::new(),
        };
        for s in strings {
            if !allowed.contains(&s) {
                return Err(err(
                    expr,
                    format!(
                        "the default '{s}' of field '{field}' is not in its enumeration ({})",
                        allowed
                            .iter()
                            .map(|a| format!("'{a}'"))
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                ));
            }
        }
    }
    Ok(())
}
