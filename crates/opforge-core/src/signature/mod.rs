//! Human-facing views of an OpDef: the Python function name, signature and
//! docstring TensorFlow's Python op wrappers would have (the Python
//! package's generated functions use them), and the page that `opforge ops
//! show` prints.
//!
//! ```
//! use opforge_core::proto::{self, OpDef};
//! use opforge_core::signature::{python_signature, snake_case};
//!
//! assert_eq!(snake_case("BatchMatMulV2"), "batch_mat_mul_v2");
//! let op: OpDef = proto::from_text(
//!     "name: 'ZeroOut' \
//!      input_arg { name: 'to_zero' type_attr: 'T' } \
//!      output_arg { name: 'zeroed' type_attr: 'T' } \
//!      attr { name: 'T' type: 'type' default_value { type: DT_INT32 } } \
//!      attr { name: 'preserve_index' type: 'int' default_value { i: 0 } }",
//! )
//! .unwrap();
//! assert_eq!(python_signature(&op), "zero_out(to_zero, preserve_index=0, name=None)");
//! ```

use crate::op_def::summarize_attr_value;
use crate::proto::attr_value::{ListValue, Value};
use crate::proto::op_def::{ArgDef, AttrDef};
use crate::proto::{AttrValue, OpDef, TensorShapeProto};
use crate::DataType;
use std::collections::BTreeSet;
use std::fmt::Write;

mod docstring;

pub use docstring::python_docstring;

/// The Python function name of an op, by TensorFlow's rule
/// (`GenerateLowerCaseOpName`): lower-case every letter and put `_` before an
/// upper-case letter that follows a lower-case one, or that is followed by a
/// lower-case one (the last capital of an acronym starts the next word).
/// Digits never start a word, and a `_` is never doubled, so a leading `_`
/// is kept as it is.
///
/// ```
/// use opforge_core::signature::snake_case;
/// assert_eq!(snake_case("ZeroOut"), "zero_out");
/// assert_eq!(snake_case("AddV2"), "add_v2");
/// assert_eq!(snake_case("Conv2D"), "conv2d");
/// assert_eq!(snake_case("TPUReplicate"), "tpu_replicate");
/// assert_eq!(snake_case("_Retval"), "_retval");
/// ```
pub fn snake_case(op_name: &str) -> String {
    let chars: Vec<char> = op_name.chars().collect();
    let mut out = String::with_capacity(op_name.len() + 4);
    for (i, &c) in chars.iter().enumerate() {
        // TensorFlow turns namespace separators ('>') into joiners.
        if c == '>' {
            out.push('_');
            continue;
        }
        if c.is_ascii_uppercase() && i > 0 {
            let prev = chars[i - 1];
            let next_is_lower = chars.get(i + 1).is_some_and(|n| n.is_ascii_lowercase());
            if (prev.is_ascii_lowercase() || next_is_lower) && prev != '>' && prev != '_' {
                out.push('_');
            }
        }
        out.push(c.to_ascii_lowercase());
    }
    out
}

/// Python's keywords, which cannot name a parameter (TensorFlow appends `_`).
const PYTHON_KEYWORDS: &[&str] = &[
    "False", "None", "True", "and", "as", "assert", "async", "await", "break", "class", "continue",
    "def", "del", "elif", "else", "except", "finally", "for", "from", "global", "if", "import",
    "in", "is", "lambda", "nonlocal", "not", "or", "pass", "raise", "return", "try", "while",
    "with", "yield",
];

/// The Python parameter name of an arg or attr: a keyword, or `name` (taken
/// by the op's own `name=None`), gets a trailing `_`.
fn python_param(name: &str) -> String {
    if name == "name" || PYTHON_KEYWORDS.contains(&name) {
        format!("{name}_")
    } else {
        name.to_string()
    }
}

/// The attrs whose values the Python wrapper infers from its inputs: those
/// named by an input's `type_attr`, `type_list_attr` or `number_attr`.
fn inferred_attrs(op: &OpDef) -> BTreeSet<&str> {
    op.input_arg
        .iter()
        .flat_map(|a| [&a.type_attr, &a.type_list_attr, &a.number_attr])
        .filter(|s| !s.is_empty())
        .map(String::as_str)
        .collect()
}

/// One parameter of an op's generated Python function.
#[derive(Clone, Debug, PartialEq)]
pub struct PythonParam {
    /// The Python name (the arg or attr name, with `_` appended to a
    /// keyword or to `name`).
    pub name: String,
    /// The input arg's or attr's name in the OpDef.
    pub arg: String,
    /// Whether it is an input (else an attr).
    pub is_input: bool,
    /// The attr's default, if it has one.
    pub default: Option<AttrValue>,
}

/// The parameters of the Python function TensorFlow would generate for
/// `op`, in order: the inputs, then the attrs that have no default and are
/// not inferred from the inputs, then the other non-inferred attrs (with
/// their defaults); `name=None` follows them in the signature.
pub fn python_params(op: &OpDef) -> Vec<PythonParam> {
    let inferred = inferred_attrs(op);
    let mut params: Vec<PythonParam> = op
        .input_arg
        .iter()
        .map(|a| PythonParam {
            name: python_param(&a.name),
            arg: a.name.clone(),
            is_input: true,
            default: None,
        })
        .collect();
    let visible = || {
        op.attr
            .iter()
            .filter(|a| !inferred.contains(a.name.as_str()))
    };
    let attr = |a: &AttrDef| PythonParam {
        name: python_param(&a.name),
        arg: a.name.clone(),
        is_input: false,
        default: a.default_value.clone(),
    };
    params.extend(visible().filter(|a| a.default_value.is_none()).map(attr));
    params.extend(visible().filter(|a| a.default_value.is_some()).map(attr));
    params
}

/// The Python signature TensorFlow would generate for `op`: the
/// [parameters](python_params), defaults as Python literals, then
/// `name=None`.
///
/// `ZeroOut` prints `zero_out(to_zero, preserve_index=0, name=None)`.
pub fn python_signature(op: &OpDef) -> String {
    let mut params: Vec<String> = python_params(op)
        .into_iter()
        .map(|p| match &p.default {
            Some(d) => format!("{}={}", p.name, python_literal(d)),
            None => p.name,
        })
        .collect();
    params.push("name=None".to_string());
    format!("{}({})", snake_case(&op.name), params.join(", "))
}

/// The Python name of a dtype (`float32`, `float16`, `int32_ref`), or
/// `None` for a code that is no dtype.
fn python_dtype_name(code: i32) -> Option<String> {
    let dt = DataType::from_i32(code)?;
    let base = match dt.base() {
        DataType::Float => "float32",
        DataType::Double => "float64",
        DataType::Half => "float16",
        other => other.name(),
    };
    Some(match dt.is_ref() {
        true => format!("{base}_ref"),
        false => base.to_string(),
    })
}

/// The Python name of a dtype, as in `tf.float32`.
fn python_dtype(code: i32) -> String {
    match python_dtype_name(code) {
        Some(name) => format!("tf.{name}"),
        None => format!("tf.as_dtype({code})"),
    }
}

/// A Python string literal (`'...'`) of `bytes`.
fn python_str(bytes: &[u8]) -> String {
    let mut out = String::from("'");
    match std::str::from_utf8(bytes) {
        Ok(text) => {
            for c in text.chars() {
                match c {
                    '\\' => out.push_str("\\\\"),
                    '\'' => out.push_str("\\'"),
                    '\n' => out.push_str("\\n"),
                    '\r' => out.push_str("\\r"),
                    '\t' => out.push_str("\\t"),
                    c if c.is_control() => {
                        let _ = write!(out, "\\x{:02x}", u32::from(c));
                    }
                    c => out.push(c),
                }
            }
        }
        Err(_) => {
            out.insert(0, 'b');
            for &b in bytes {
                match b {
                    b'\\' => out.push_str("\\\\"),
                    b'\'' => out.push_str("\\'"),
                    0x20..=0x7e => out.push(char::from(b)),
                    _ => {
                        let _ = write!(out, "\\x{b:02x}");
                    }
                }
            }
        }
    }
    out.push('\'');
    out
}

/// A Python float literal, as Python's `repr` prints it.
fn python_float(f: f32) -> String {
    if f.is_nan() {
        return "float('nan')".to_string();
    }
    if f.is_infinite() {
        return if f > 0.0 {
            "float('inf')"
        } else {
            "float('-inf')"
        }
        .to_string();
    }
    let text = format!("{f:?}");
    match text.split_once('e') {
        // Rust prints `1e-5`, Python `1e-05`.
        Some((mantissa, exp)) => {
            let exp: i32 = exp.parse().unwrap_or(0);
            let sign = if exp < 0 { '-' } else { '+' };
            format!("{mantissa}e{sign}{:02}", exp.unsigned_abs())
        }
        None => text,
    }
}

/// A Python literal of a shape: `None` for an unknown rank, else a list of
/// dims with `None` for unknown ones.
fn python_shape(shape: &TensorShapeProto) -> String {
    if shape.unknown_rank {
        return "None".to_string();
    }
    let dims: Vec<String> = shape
        .dim
        .iter()
        .map(|d| {
            if d.size < 0 {
                "None".to_string()
            } else {
                d.size.to_string()
            }
        })
        .collect();
    format!("[{}]", dims.join(", "))
}

fn python_list(list: &ListValue) -> String {
    let items: Vec<String> = if !list.s.is_empty() {
        list.s.iter().map(|s| python_str(s)).collect()
    } else if !list.i.is_empty() {
        list.i.iter().map(i64::to_string).collect()
    } else if !list.f.is_empty() {
        list.f.iter().map(|&f| python_float(f)).collect()
    } else if !list.b.is_empty() {
        list.b.iter().map(|&b| python_bool(b).to_string()).collect()
    } else if !list.r#type.is_empty() {
        list.r#type.iter().map(|&t| python_dtype(t)).collect()
    } else if !list.shape.is_empty() {
        list.shape.iter().map(python_shape).collect()
    } else if !list.tensor.is_empty() {
        list.tensor
            .iter()
            .map(|t| format!("\"\"\"{}\"\"\"", crate::proto::to_short_text(t)))
            .collect()
    } else {
        list.func
            .iter()
            .map(|f| python_str(f.name.as_bytes()))
            .collect()
    };
    format!("[{}]", items.join(", "))
}

fn python_bool(b: bool) -> &'static str {
    if b {
        "True"
    } else {
        "False"
    }
}

/// An attr value as a Python literal: `0`, `1.0`, `True`, `'foo'`,
/// `tf.int32`, `[1, 2]` (also for shapes), `None`.
///
/// ```
/// use opforge_core::proto::{attr_value::Value, AttrValue};
/// use opforge_core::signature::python_literal;
/// let v = AttrValue { value: Some(Value::Type(3)) };
/// assert_eq!(python_literal(&v), "tf.int32");
/// ```
pub fn python_literal(value: &AttrValue) -> String {
    match &value.value {
        None | Some(Value::Placeholder(_)) => "None".to_string(),
        Some(Value::S(s)) => python_str(s),
        Some(Value::I(i)) => i.to_string(),
        Some(Value::F(f)) => python_float(*f),
        Some(Value::B(b)) => python_bool(*b).to_string(),
        Some(Value::Type(t)) => python_dtype(*t),
        Some(Value::Shape(shape)) => python_shape(shape),
        Some(Value::Tensor(t)) => format!("\"\"\"{}\"\"\"", crate::proto::to_short_text(&**t)),
        Some(Value::List(list)) => python_list(list),
        Some(Value::Func(f)) => python_str(f.name.as_bytes()),
    }
}

/// The spec name of a dtype code (`float`, `int32_ref`, or the number).
fn dtype_name(code: i32) -> String {
    DataType::from_i32(code).map_or_else(|| format!("<invalid dtype {code}>"), |d| d.to_string())
}

/// The allowed values of an attr, as `{float, int32}` for types or
/// `{'SAME', 'VALID'}` for strings; `None` if the attr is unrestricted.
fn allowed_values(attr: &AttrDef) -> Option<String> {
    let Some(Value::List(list)) = attr.allowed_values.as_ref()?.value.as_ref() else {
        return attr.allowed_values.as_ref().map(summarize_attr_value);
    };
    let items: Vec<String> = if !list.r#type.is_empty() {
        list.r#type.iter().map(|&t| dtype_name(t)).collect()
    } else if !list.s.is_empty() {
        list.s.iter().map(|s| python_str(s)).collect()
    } else {
        return attr.allowed_values.as_ref().map(summarize_attr_value);
    };
    Some(format!("{{{}}}", items.join(", ")))
}

/// What an input or output arg is: `T in {float, double}`, `int32`,
/// `N tensors of type T`, `list(type) Tin`, marked `(ref)` if it is a
/// reference.
fn describe_arg_type(arg: &ArgDef, op: &OpDef) -> String {
    let attr = |name: &str| op.attr.iter().find(|a| a.name == name);
    let restriction = |name: &str| -> String {
        match attr(name).and_then(allowed_values) {
            Some(allowed) => format!(" in {allowed}"),
            None => " (any type)".to_string(),
        }
    };
    let mut text = if !arg.type_list_attr.is_empty() {
        let name = &arg.type_list_attr;
        format!("list(type) {name}{}", restriction(name))
    } else {
        let (element, restricted) = if arg.type_attr.is_empty() {
            (dtype_name(arg.r#type), String::new())
        } else {
            (arg.type_attr.clone(), restriction(&arg.type_attr))
        };
        if arg.number_attr.is_empty() {
            format!("{element}{restricted}")
        } else {
            format!("{} tensors of type {element}{restricted}", arg.number_attr)
        }
    };
    if arg.is_ref {
        text.push_str(" (ref)");
    }
    text
}

/// Appends `text` indented by `indent` spaces on every line.
fn push_indented(out: &mut String, text: &str, indent: usize) {
    for line in text.trim().lines() {
        if line.trim().is_empty() {
            out.push('\n');
        } else {
            let _ = writeln!(out, "{:indent$}{line}", "");
        }
    }
}

/// The human-readable page of an op (what `opforge ops show` prints): the
/// op's name and Python signature, its summary and description, then its
/// inputs, outputs, control outputs, attrs (type, constraints, allowed
/// values, default; attrs inferred from the inputs are marked) and flags.
pub fn describe(op: &OpDef) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "{}", op.name);
    let _ = writeln!(out, "{}", python_signature(op));
    for text in [&op.summary, &op.description] {
        if !text.trim().is_empty() {
            out.push('\n');
            push_indented(&mut out, text, 0);
        }
    }

    for (title, args) in [("Inputs", &op.input_arg), ("Outputs", &op.output_arg)] {
        let _ = write!(out, "\n{title}:");
        if args.is_empty() {
            out.push_str(" none\n");
            continue;
        }
        out.push('\n');
        for arg in args {
            let _ = writeln!(out, "  {}: {}", arg.name, describe_arg_type(arg, op));
            push_indented(&mut out, &arg.description, 6);
        }
    }
    if !op.control_output.is_empty() {
        let _ = writeln!(out, "\nControl outputs:");
        for name in &op.control_output {
            let _ = writeln!(out, "  {name}");
        }
    }

    let inferred = inferred_attrs(op);
    out.push_str("\nAttrs:");
    if op.attr.is_empty() {
        out.push_str(" none\n");
    } else {
        out.push('\n');
        for attr in &op.attr {
            let _ = write!(out, "  {}: {}", attr.name, attr.r#type);
            if attr.has_minimum {
                let _ = write!(out, " >= {}", attr.minimum);
            }
            if let Some(allowed) = allowed_values(attr) {
                let _ = write!(out, " in {allowed}");
            }
            if let Some(default) = &attr.default_value {
                let _ = write!(out, " = {}", summarize_attr_value(default));
            }
            if inferred.contains(attr.name.as_str()) {
                out.push_str(" (inferred from the inputs)");
            }
            out.push('\n');
            push_indented(&mut out, &attr.description, 6);
        }
    }

    let mut flags: Vec<String> = [
        (op.is_stateful, "stateful"),
        (op.is_commutative, "commutative"),
        (op.is_aggregate, "aggregate"),
        (op.allows_uninitialized_input, "allows_uninitialized_input"),
        (op.is_distributed_communication, "distributed_communication"),
    ]
    .into_iter()
    .filter(|(set, _)| *set)
    .map(|(_, name)| name.to_string())
    .collect();
    if let Some(dep) = &op.deprecation {
        let mut text = format!("deprecated at GraphDef version {}", dep.version);
        if !dep.explanation.is_empty() {
            let _ = write!(text, ": {}", dep.explanation);
        }
        flags.push(text);
    }
    out.push_str("\nFlags:");
    if flags.is_empty() {
        out.push_str(" none\n");
    } else {
        out.push('\n');
        for flag in flags {
            let _ = writeln!(out, "  {flag}");
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto;

    fn op(text: &str) -> OpDef {
        proto::from_text(text).unwrap()
    }

    fn zero_out() -> OpDef {
        op(r#"
            name: "ZeroOut"
            input_arg { name: "to_zero" type_attr: "T" }
            output_arg { name: "zeroed" type_attr: "T" }
            attr {
              name: "T" type: "type" default_value { type: DT_INT32 }
              allowed_values { list { type: [DT_FLOAT, DT_DOUBLE, DT_INT32] } }
            }
            attr { name: "preserve_index" type: "int" default_value { i: 0 } }
            summary: "Zeros out every element of the input except one."
            description: "Keeps the element at flat index `preserve_index`."
        "#)
    }

    #[test]
    fn snake_case_follows_tensorflow() {
        for (camel, snake) in [
            ("ZeroOut", "zero_out"),
            ("AddV2", "add_v2"),
            ("Conv2D", "conv2d"),
            ("BatchMatMulV2", "batch_mat_mul_v2"),
            ("TPUReplicate", "tpu_replicate"),
            ("BatchToSpaceND", "batch_to_space_nd"),
            ("Conv3DBackpropInput", "conv3d_backprop_input"),
            ("Conv2DBackpropFilterV2", "conv2d_backprop_filter_v2"),
            ("_Retval", "_retval"),
            ("_MklAddN", "_mkl_add_n"),
            ("Abs", "abs"),
            ("MatMul", "mat_mul"),
            ("LRN", "lrn"),
            ("LRNGrad", "lrn_grad"),
            ("IsNan", "is_nan"),
            ("Log1p", "log1p"),
            ("FFT2D", "fft2d"),
            ("RGBToHSV", "rgb_to_hsv"),
            ("Inner>Op", "inner_op"),
            ("", ""),
            ("already_snake", "already_snake"),
        ] {
            assert_eq!(snake_case(camel), snake, "{camel}");
        }
    }

    #[test]
    fn zero_out_signature() {
        assert_eq!(
            python_signature(&zero_out()),
            "zero_out(to_zero, preserve_index=0, name=None)"
        );
    }

    #[test]
    fn required_attrs_come_before_defaults_and_inferred_attrs_are_hidden() {
        let o = op(r#"
            name: "Fancy"
            input_arg { name: "in" type_attr: "T" number_attr: "N" }
            input_arg { name: "lists" type_list_attr: "Tl" }
            input_arg { name: "name" type: DT_STRING }
            output_arg { name: "out" type_attr: "out_type" }
            attr { name: "N" type: "int" has_minimum: true minimum: 1 }
            attr { name: "T" type: "type" }
            attr { name: "Tl" type: "list(type)" }
            attr { name: "alpha" type: "float" default_value { f: 0.2 } }
            attr { name: "out_type" type: "type" default_value { type: DT_FLOAT } }
            attr { name: "shape" type: "shape" }
            attr { name: "mode" type: "string" default_value { s: "it's" } }
        "#);
        assert_eq!(
            python_signature(&o),
            "fancy(in_, lists, name_, shape, alpha=0.2, out_type=tf.float32, \
             mode='it\\'s', name=None)"
        );
    }

    #[test]
    fn python_literals() {
        let lit = |text: &str| python_literal(&proto::from_text::<AttrValue>(text).unwrap());
        assert_eq!(lit("s: 'foo'"), "'foo'");
        assert_eq!(lit("i: -3"), "-3");
        assert_eq!(lit("f: 1"), "1.0");
        assert_eq!(lit("f: 0.0001"), "0.0001");
        assert_eq!(lit("f: 1e-5"), "1e-05");
        assert_eq!(lit("f: 1e20"), "1e+20");
        assert_eq!(lit("f: inf"), "float('inf')");
        assert_eq!(lit("b: true"), "True");
        assert_eq!(lit("b: false"), "False");
        assert_eq!(lit("type: DT_DOUBLE"), "tf.float64");
        assert_eq!(lit("type: DT_HALF"), "tf.float16");
        assert_eq!(lit("type: DT_STRING"), "tf.string");
        assert_eq!(lit("type: DT_INT32_REF"), "tf.int32_ref");
        assert_eq!(
            lit("shape { dim { size: 1 } dim { size: -1 } }"),
            "[1, None]"
        );
        assert_eq!(lit("shape { unknown_rank: true }"), "None");
        assert_eq!(lit("shape { }"), "[]");
        assert_eq!(lit("list { }"), "[]");
        assert_eq!(lit("list { i: [2, 3, 5, 7] }"), "[2, 3, 5, 7]");
        assert_eq!(lit("list { s: ['a', 'b'] }"), "['a', 'b']");
        assert_eq!(
            lit("list { type: [DT_FLOAT, DT_INT64] }"),
            "[tf.float32, tf.int64]"
        );
        assert_eq!(lit("list { b: [true] }"), "[True]");
        assert_eq!(
            lit("tensor { dtype: DT_INT32 int_val: 5 }"),
            "\"\"\"dtype: DT_INT32 int_val: 5\"\"\""
        );
        assert_eq!(lit(""), "None");
        assert_eq!(lit("func { name: 'f' }"), "'f'");
    }

    #[test]
    fn describe_zero_out() {
        let page = describe(&zero_out());
        let mut lines = page.lines();
        assert_eq!(lines.next(), Some("ZeroOut"));
        assert_eq!(
            lines.next(),
            Some("zero_out(to_zero, preserve_index=0, name=None)")
        );
        for expected in [
            "Zeros out every element of the input except one.",
            "Keeps the element at flat index `preserve_index`.",
            "Inputs:\n  to_zero: T in {float, double, int32}\n",
            "Outputs:\n  zeroed: T in {float, double, int32}\n",
            "Attrs:\n  T: type in {float, double, int32} = DT_INT32 (inferred from the inputs)\n",
            "  preserve_index: int = 0\n",
            "Flags: none\n",
        ] {
            assert!(page.contains(expected), "{expected:?} not in\n{page}");
        }
    }

    #[test]
    fn describe_lists_refs_and_flags() {
        let o = op(r#"
            name: "Everything"
            input_arg { name: "values" type_attr: "T" number_attr: "N" description: "The values." }
            input_arg { name: "fixed" type: DT_INT32 number_attr: "N" }
            input_arg { name: "ref" type: DT_FLOAT is_ref: true }
            input_arg { name: "args" type_list_attr: "Tin" }
            output_arg { name: "out" type: DT_STRING }
            control_output: "side_effect"
            attr { name: "N" type: "int" has_minimum: true minimum: 2 }
            attr { name: "T" type: "type" }
            attr { name: "Tin" type: "list(type)" }
            attr { name: "padding" type: "string" allowed_values { list { s: ["SAME", "VALID"] } } }
            is_stateful: true
            is_commutative: true
            is_aggregate: true
            allows_uninitialized_input: true
            deprecation { version: 26 explanation: "Use Other" }
        "#);
        let page = describe(&o);
        for expected in [
            "  values: N tensors of type T (any type)\n      The values.\n",
            "  fixed: N tensors of type int32\n",
            "  ref: float (ref)\n",
            "  args: list(type) Tin (any type)\n",
            "Outputs:\n  out: string\n",
            "Control outputs:\n  side_effect\n",
            "  N: int >= 2 (inferred from the inputs)\n",
            "  padding: string in {'SAME', 'VALID'}\n",
            "Flags:\n  stateful\n  commutative\n  aggregate\n  allows_uninitialized_input\n  \
             deprecated at GraphDef version 26: Use Other\n",
        ] {
            assert!(page.contains(expected), "{expected:?} not in\n{page}");
        }
        assert!(page
            .starts_with("Everything\neverything(values, fixed, ref, args, padding, name=None)\n"));
    }

    #[test]
    fn describe_an_empty_op() {
        let page = describe(&op("name: 'NoOp'"));
        assert_eq!(
            page,
            "NoOp\nno_op(name=None)\n\nInputs: none\n\nOutputs: none\n\nAttrs: none\n\nFlags: none\n"
        );
    }
}
