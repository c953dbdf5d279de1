//! The docstring of an op's generated Python function, in the form of
//! TensorFlow's generated wrappers (`python_op_gen`): the summary and
//! description, `Args:` (each input's kind and types, each visible attr's
//! kind, allowed values, minimum and default), `name`, and `Returns:`.

use super::{python_dtype_name, python_literal, python_params};
use crate::proto::attr_value::Value;
use crate::proto::op_def::{ArgDef, AttrDef};
use crate::proto::OpDef;
use std::fmt::Write;

fn attr<'a>(op: &'a OpDef, name: &str) -> Option<&'a AttrDef> {
    op.attr.iter().find(|a| a.name == name)
}

/// The allowed types of a type attr, as `` `float32`, `int32` `` (empty if
/// it allows any type).
fn allowed_types(op: &OpDef, attr_name: &str, prefix: &str) -> String {
    let Some(Value::List(list)) = attr(op, attr_name)
        .and_then(|a| a.allowed_values.as_ref())
        .and_then(|v| v.value.as_ref())
    else {
        return String::new();
    };
    let names: Vec<String> = list
        .r#type
        .iter()
        .map(|&t| format!("`{prefix}{}`", dtype_name(t)))
        .collect();
    names.join(", ")
}

fn dtype_name(code: i32) -> String {
    python_dtype_name(code).unwrap_or_else(|| format!("<invalid dtype {code}>"))
}

/// The fixed dtype of an arg, if it has one.
fn fixed_type(arg: &ArgDef) -> Option<String> {
    (arg.r#type != 0).then(|| dtype_name(arg.r#type))
}

fn input_doc(op: &OpDef, arg: &ArgDef) -> String {
    if !arg.type_list_attr.is_empty() {
        let allowed = allowed_types(op, &arg.type_list_attr, "");
        return match allowed.is_empty() {
            true => "A list of `Tensor` objects.".to_string(),
            false => format!("A list of `Tensor` objects with types from: {allowed}."),
        };
    }
    if !arg.number_attr.is_empty() {
        let minimum = attr(op, &arg.number_attr).map_or(0, |a| a.minimum);
        let head = match minimum {
            0 => "A list of".to_string(),
            m => format!("A list of at least {m}"),
        };
        if let Some(fixed) = fixed_type(arg) {
            return format!("{head} `Tensor` objects with type `{fixed}`.");
        }
        let allowed = allowed_types(op, &arg.type_attr, "");
        return match allowed.is_empty() {
            true => format!("{head} `Tensor` objects with the same type."),
            false => format!("{head} `Tensor` objects with the same type in: {allowed}."),
        };
    }
    if let Some(fixed) = fixed_type(arg) {
        return format!("A `Tensor` of type `{fixed}`.");
    }
    let allowed = allowed_types(op, &arg.type_attr, "");
    match allowed.is_empty() {
        true => "A `Tensor`.".to_string(),
        false => format!("A `Tensor`. Must be one of the following types: {allowed}."),
    }
}

fn attr_doc(op: &OpDef, a: &AttrDef) -> String {
    let opt = match a.default_value {
        Some(_) => "An optional",
        None => "A",
    };
    let t = a.r#type.as_str();
    let mut kind = match t.strip_prefix("list(").and_then(|r| r.strip_suffix(')')) {
        Some(inner) => format!("{opt} list of `{inner}s`"),
        None if t == "type" => format!("{opt} `tf.DType`"),
        None => format!("{opt} `{t}`"),
    };
    if let Some(Value::List(list)) = a.allowed_values.as_ref().and_then(|v| v.value.as_ref()) {
        if !list.s.is_empty() {
            let values: Vec<String> = list
                .s
                .iter()
                .map(|s| format!("`\"{}\"`", String::from_utf8_lossy(s)))
                .collect();
            kind = format!("{opt} `string` from: {}", values.join(", "));
        } else if t == "type" && !list.r#type.is_empty() {
            kind = format!(
                "{opt} `tf.DType` from: {}",
                allowed_types(op, &a.name, "tf.")
            );
        }
    }
    if a.has_minimum {
        let _ = write!(kind, " that is `>= {}`", a.minimum);
    }
    match &a.default_value {
        Some(d) => format!("{kind}. Defaults to `{}`.", python_literal(d)),
        None => format!("{kind}."),
    }
}

fn output_doc(op: &OpDef, o: &ArgDef) -> String {
    if !o.number_attr.is_empty() || !o.type_list_attr.is_empty() {
        return "A list of `Tensor` objects.".to_string();
    }
    if let Some(fixed) = fixed_type(o) {
        return format!("A `Tensor` of type `{fixed}`.");
    }
    let ta = &o.type_attr;
    if ta.is_empty() {
        return "A `Tensor`.".to_string();
    }
    match op.input_arg.iter().find(|i| i.type_attr == *ta) {
        Some(same) => format!("A `Tensor`. Has the same type as `{}`.", same.name),
        None => format!("A `Tensor` of type `{ta}`."),
    }
}

/// The docstring of `op`'s generated Python function, as TensorFlow's
/// generated wrappers write it (attr defaults as
/// [`python_literal`]s, dtypes by their Python names):
///
/// ```
/// use opforge_core::{signature::python_docstring, OpDefBuilder};
/// let op = OpDefBuilder::new("ZeroOut")
///     .attr("T: {float, int32} = DT_INT32")
///     .attr("preserve_index: int >= 0 = 0")
///     .input("to_zero: T")
///     .output("zeroed: T")
///     .doc("Zeros out all but one element.")
///     .finalize()
///     .unwrap();
/// assert_eq!(
///     python_docstring(&op),
///     "Zeros out all but one element.\n\
///      \n\
///      Args:\n  \
///        to_zero: A `Tensor`. Must be one of the following types: `float32`, `int32`.\n  \
///        preserve_index: An optional `int` that is `>= 0`. Defaults to `0`.\n  \
///        name: A name for the operation (optional).\n\
///      \n\
///      Returns:\n  \
///        A `Tensor`. Has the same type as `to_zero`."
/// );
/// ```
pub fn python_docstring(op: &OpDef) -> String {
    let mut lines = Vec::new();
    lines.push(match op.summary.is_empty() {
        true => format!("The `{}` op.", op.name),
        false => op.summary.clone(),
    });
    if !op.description.is_empty() {
        lines.push(String::new());
        lines.push(op.description.clone());
    }
    lines.push(String::new());
    lines.push("Args:".to_string());
    for p in python_params(op) {
        let (text, description) = if p.is_input {
            match op.input_arg.iter().find(|a| a.name == p.arg) {
                Some(a) => (input_doc(op, a), a.description.as_str()),
                None => continue,
            }
        } else {
            match attr(op, &p.arg) {
                Some(a) => (attr_doc(op, a), a.description.as_str()),
                None => continue,
            }
        };
        let mut line = format!("  {}: {text}", p.name);
        if !description.is_empty() {
            let _ = write!(line, "\n    {description}");
        }
        lines.push(line);
    }
    lines.push("  name: A name for the operation (optional).".to_string());
    lines.push(String::new());
    lines.push("Returns:".to_string());
    match op.output_arg.as_slice() {
        [] => lines.push("  None (the op has no outputs).".to_string()),
        [one] => lines.push(format!("  {}", output_doc(op, one))),
        several => {
            let names: Vec<&str> = several.iter().map(|o| o.name.as_str()).collect();
            lines.push(format!(
                "  A tuple of `Tensor` objects ({}).",
                names.join(", ")
            ));
            for o in several {
                lines.push(format!("  {}: {}", o.name, output_doc(op, o)));
            }
        }
    }
    lines.join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto;

    fn op(text: &str) -> OpDef {
        proto::from_text(text).unwrap()
    }

    #[test]
    fn lists_strings_minimums_and_several_outputs() {
        let o = op(r#"
            name: "Fancy"
            summary: "Does fancy things."
            description: "At length."
            input_arg { name: "xs" type_attr: "T" number_attr: "N" description: "The xs." }
            input_arg { name: "ids" type: DT_INT64 number_attr: "N" }
            input_arg { name: "mixed" type_list_attr: "Tl" }
            input_arg { name: "any" type_attr: "U" }
            output_arg { name: "y" type_attr: "T" }
            output_arg { name: "ys" type_attr: "T" number_attr: "N" }
            output_arg { name: "z" type_attr: "out_type" }
            output_arg { name: "flag" type: DT_BOOL }
            attr { name: "N" type: "int" has_minimum: true minimum: 2 }
            attr { name: "T" type: "type" allowed_values { list { type: [DT_HALF, DT_DOUBLE] } } }
            attr { name: "Tl" type: "list(type)" allowed_values { list { type: [DT_INT32] } } }
            attr { name: "U" type: "type" }
            attr { name: "out_type" type: "type" default_value { type: DT_FLOAT }
                   allowed_values { list { type: [DT_FLOAT, DT_BFLOAT16] } } }
            attr { name: "padding" type: "string" allowed_values { list { s: ["SAME", "VALID"] } }
                   description: "How to pad." }
            attr { name: "sizes" type: "list(int)" has_minimum: true minimum: 1
                   default_value { list { i: [1, 2] } } }
            attr { name: "alpha" type: "float" default_value { f: inf } }
        "#);
        let want = "Does fancy things.\n\
            \n\
            At length.\n\
            \n\
            Args:\n\
            \x20 xs: A list of at least 2 `Tensor` objects with the same type in: `float16`, `float64`.\n\
            \x20   The xs.\n\
            \x20 ids: A list of at least 2 `Tensor` objects with type `int64`.\n\
            \x20 mixed: A list of `Tensor` objects with types from: `int32`.\n\
            \x20 any: A `Tensor`.\n\
            \x20 padding: A `string` from: `\"SAME\"`, `\"VALID\"`.\n\
            \x20   How to pad.\n\
            \x20 out_type: An optional `tf.DType` from: `tf.float32`, `tf.bfloat16`. Defaults to `tf.float32`.\n\
            \x20 sizes: An optional list of `ints` that is `>= 1`. Defaults to `[1, 2]`.\n\
            \x20 alpha: An optional `float`. Defaults to `float('inf')`.\n\
            \x20 name: A name for the operation (optional).\n\
            \n\
            Returns:\n\
            \x20 A tuple of `Tensor` objects (y, ys, z, flag).\n\
            \x20 y: A `Tensor`. Has the same type as `xs`.\n\
            \x20 ys: A list of `Tensor` objects.\n\
            \x20 z: A `Tensor` of type `out_type`.\n\
            \x20 flag: A `Tensor` of type `bool`.";
        assert_eq!(python_docstring(&o), want);
    }

    #[test]
    fn no_summary_and_no_outputs() {
        let o = op(r#"name: "Marker" input_arg { name: "x" type: DT_STRING }"#);
        assert_eq!(
            python_docstring(&o),
            "The `Marker` op.\n\nArgs:\n  x: A `Tensor` of type `string`.\n  \
             name: A name for the operation (optional).\n\nReturns:\n  \
             None (the op has no outputs)."
        );
    }
}
