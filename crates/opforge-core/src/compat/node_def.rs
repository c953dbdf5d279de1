//! NodeDefs against OpDefs: validation (TensorFlow's `ValidateNodeDef`),
//! a node's flat dtypes, and what a NodeDef written for an old version of
//! an op becomes with the new one ([`check_node_def`]).

use super::rules::find_attr;
use super::summary::{format_node_name_for_error, summarize_node_def, summarize_op_def};
use crate::attrs::{add_defaults, in_out_types, AttrMap};
use crate::dtype::DataType;
use crate::op_def::validate_attr_value;
use crate::proto::{attr_value::Value, op_def::ArgDef, NodeDef, OpDef};
use crate::{Result, Status};

/// Validates a NodeDef against an OpDef with TensorFlow 2.21's
/// `ValidateNodeDef` rules and messages: the op name matches; control
/// inputs (`^x`) come last and have no `:`; every attr the node sets is
/// valid for the op's attr of that name; every attr of the op is set
/// (`NodeDef missing attr 'a' from Op<...>`); and the number of data inputs
/// is what the op's input args take given the attrs
/// (`NodeDef expected inputs 'int32' do not match 0 inputs specified`).
///
/// As in TensorFlow 2.21, attrs the op does not have are ignored (a graph
/// written by a newer binary may carry them), and so are internal attrs
/// starting with `_`. [`validate_node_def_strict`] rejects unknown attrs.
/// Defaults are not added here: call
/// [`add_defaults`](crate::attrs::add_defaults) on the attrs first, as a
/// graph import does.
///
/// ```
/// use opforge_core::{compat, proto::{self, NodeDef}, OpDefBuilder};
/// let op = OpDefBuilder::new("AddSingleInput").input("a: int32").finalize().unwrap();
/// let node: NodeDef = proto::from_text("name: 'fails' op: 'AddSingleInput'").unwrap();
/// assert_eq!(
///     compat::validate_node_def(&node, &op).unwrap_err().message(),
///     "NodeDef expected inputs 'int32' do not match 0 inputs specified; \
///      Op<name=AddSingleInput; signature=a:int32 -> >; NodeDef: {{node fails}}"
/// );
/// ```
pub fn validate_node_def(node: &NodeDef, op: &OpDef) -> Result<()> {
    validate_node_def_impl(node, op, false)
}

/// [`validate_node_def`], but an attr the op does not have is an error, as
/// in TensorFlow before 2.x ignored them:
/// `NodeDef mentions attr 'a' not in Op<...>; NodeDef: {{node n}}`.
pub fn validate_node_def_strict(node: &NodeDef, op: &OpDef) -> Result<()> {
    validate_node_def_impl(node, op, true)
}

/// More flat inputs or outputs than this are refused before their types are
/// listed (a huge `N` in a NodeDef must not exhaust memory).
const MAX_FLAT_ARGS: i64 = 1 << 20;

fn validate_node_def_impl(node: &NodeDef, op: &OpDef, strict: bool) -> Result<()> {
    let node_ref = format_node_name_for_error(&node.name);
    if node.op != op.name {
        return Err(Status::invalid_argument(format!(
            "NodeDef op '{}' does not match {}; NodeDef: {node_ref}",
            node.op,
            summarize_op_def(op)
        )));
    }
    let mut seen_control = false;
    let mut num_inputs: i64 = 0;
    for input in &node.input {
        if input.starts_with('^') {
            seen_control = true;
            if input.contains(':') {
                return Err(Status::invalid_argument(format!(
                    "Control input '{input}' must not have ':' in NodeDef: {node_ref}"
                )));
            }
        } else if seen_control {
            return Err(Status::invalid_argument(format!(
                "Non-control input '{input}' after control input in NodeDef: {node_ref}"
            )));
        } else {
            num_inputs += 1;
        }
    }
    for (i, attr) in op.attr.iter().enumerate() {
        if op.attr[..i].iter().any(|a| a.name == attr.name) {
            return Err(Status::invalid_argument(format!(
                "OpDef has duplicate attr name '{}': {}",
                attr.name,
                summarize_op_def(op)
            )));
        }
    }
    for (name, value) in &node.attr {
        if name.starts_with('_') {
            continue;
        }
        let Some(attr) = find_attr(op, name) else {
            if strict {
                return Err(Status::invalid_argument(format!(
                    "NodeDef mentions attr '{name}' not in {}; NodeDef: {node_ref}",
                    summarize_op_def(op)
                )));
            }
            continue;
        };
        if matches!(value.value, Some(Value::Placeholder(_))) {
            continue;
        }
        validate_attr_value(value, attr).map_err(|e| {
            Status::new(
                e.code(),
                format!(
                    "{}; NodeDef: {node_ref}; {}",
                    e.message(),
                    summarize_op_def(op)
                ),
            )
        })?;
    }
    let missing: Vec<&str> = op
        .attr
        .iter()
        .filter(|a| !node.attr.contains_key(&a.name))
        .map(|a| a.name.as_str())
        .collect();
    if !missing.is_empty() {
        return Err(Status::invalid_argument(format!(
            "NodeDef missing attr{} '{}' from {}; NodeDef: {node_ref}",
            if missing.len() == 1 { "" } else { "s" },
            missing.join("', '"),
            summarize_op_def(op)
        )));
    }
    let (inputs, _) = node_in_out_types(node, op)?;
    if num_inputs != inputs.len() as i64 {
        return Err(Status::invalid_argument(format!(
            "NodeDef expected inputs '{}' do not match {num_inputs} inputs specified; {}; NodeDef: {node_ref}",
            data_type_vector_string(&inputs),
            summarize_op_def(op)
        )));
    }
    Ok(())
}

/// `int32, float_ref`: a list of dtypes as TensorFlow's `DataTypeVectorString`.
fn data_type_vector_string(types: &[DataType]) -> String {
    types
        .iter()
        .map(|t| t.name())
        .collect::<Vec<_>>()
        .join(", ")
}

/// How many flat tensors `args` take given `attrs`, or `None` if a number
/// attr is missing or not an int.
fn flat_count(args: &[ArgDef], attrs: &AttrMap) -> Option<i64> {
    let mut total: i64 = 0;
    for arg in args {
        let n = if !arg.number_attr.is_empty() {
            match attrs.get(&arg.number_attr)?.value {
                Some(Value::I(n)) => n.max(0),
                _ => return None,
            }
        } else if !arg.type_list_attr.is_empty() {
            match &attrs.get(&arg.type_list_attr)?.value {
                Some(Value::List(l)) => l.r#type.len() as i64,
                _ => 0,
            }
        } else {
            1
        };
        total = total.saturating_add(n);
    }
    Some(total)
}

/// The flat input and output dtypes of a node, from its attrs (as they
/// are: defaults are not added), as TensorFlow's `InOutTypesForNode`.
/// Ref arguments give ref dtypes (`int32_ref`).
pub fn node_in_out_types(node: &NodeDef, op: &OpDef) -> Result<(Vec<DataType>, Vec<DataType>)> {
    for (what, args) in [("inputs", &op.input_arg), ("outputs", &op.output_arg)] {
        if let Some(n) = flat_count(args, &AttrMap::from(&node.attr)) {
            if n > MAX_FLAT_ARGS {
                return Err(Status::invalid_argument(format!(
                    "NodeDef {} has {n} flat {what}: more than the {MAX_FLAT_ARGS} supported; {}",
                    format_node_name_for_error(&node.name),
                    summarize_op_def(op)
                )));
            }
        }
    }
    in_out_types(op, &AttrMap::from(&node.attr))
}

/// Whether a node keeps its meaning for old graphs: the same flat input
/// and output dtypes, except that a ref input may become non-ref and a
/// non-ref output may become ref (what TensorFlow's compatibility test
/// accepts).
pub fn types_compatible(
    old: &(Vec<DataType>, Vec<DataType>),
    new: &(Vec<DataType>, Vec<DataType>),
) -> bool {
    let (old_in, old_out) = old;
    let (new_in, new_out) = new;
    old_in.len() == new_in.len()
        && old_out.len() == new_out.len()
        && old_in
            .iter()
            .zip(new_in)
            .all(|(&o, &n)| o == n || (o.is_ref() && o.base() == n))
        && old_out
            .iter()
            .zip(new_out)
            .all(|(&o, &n)| o == n || (!o.is_ref() && o.to_ref() == n))
}

/// What happens to a NodeDef written for an old version of an op when it
/// is loaded with the new one ([`check_node_def`]).
#[derive(Clone, Debug)]
pub struct NodeDefCheck {
    /// The NodeDef with the new op's defaults added (what a graph import
    /// makes of it).
    pub node_def: NodeDef,
    /// [`validate_node_def`] of `node_def` against the new op.
    pub validation: Result<()>,
    /// Whether the node's flat input and output dtypes are the same under
    /// both ops (see [`types_compatible`]); `None` if they cannot be
    /// computed for one of them.
    pub types_match: Option<bool>,
    /// [`summarize_node_def`] of `node_def`.
    pub summary: String,
}

impl NodeDefCheck {
    /// Whether the node loads with the new op and has the same signature.
    pub fn is_ok(&self) -> bool {
        self.validation.is_ok() && self.types_match == Some(true)
    }
}

/// Loads a NodeDef written for `old` with `new`, as TensorFlow's
/// compatibility test does: the old op's defaults fill the old node's
/// missing attrs to compute its dtypes; the new op's defaults are added to
/// the node as written, which must then validate against `new` and have
/// the same dtypes (a ref input may become non-ref, a non-ref output ref).
///
/// ```
/// use opforge_core::{compat, proto::{self, NodeDef}, OpDefBuilder};
/// let v1 = OpDefBuilder::new("ZeroOut").input("to_zero: int32").output("zeroed: int32")
///     .finalize().unwrap();
/// let v3 = OpDefBuilder::new("ZeroOut").attr("T: {float, int32} = DT_INT32")
///     .attr("preserve_index: int = 0").input("to_zero: T").output("zeroed: T")
///     .finalize().unwrap();
/// let node: NodeDef = proto::from_text("name: 'z' op: 'ZeroOut' input: 'x'").unwrap();
/// let report = compat::check_node_def(&node, &v1, &v3);
/// assert!(report.is_ok());
/// assert_eq!(report.summary, "{{node z}} = ZeroOut[T=DT_INT32, preserve_index=0](x)");
/// ```
pub fn check_node_def(node: &NodeDef, old: &OpDef, new: &OpDef) -> NodeDefCheck {
    let with_defaults = |op: &OpDef| {
        let mut n = node.clone();
        let mut attrs = AttrMap::from(&n.attr);
        add_defaults(op, &mut attrs);
        n.attr = attrs.into();
        n
    };
    let old_node = with_defaults(old);
    let old_types = node_in_out_types(&old_node, old);
    let new_node = with_defaults(new);
    let validation = validate_node_def(&new_node, new);
    let new_types = node_in_out_types(&new_node, new);
    let types_match = match (&old_types, &new_types) {
        (Ok(o), Ok(n)) => Some(types_compatible(o, n)),
        _ => None,
    };
    let summary = summarize_node_def(&new_node);
    NodeDefCheck {
        node_def: new_node,
        validation,
        types_match,
        summary,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compat::test_util::{node, op};

    #[test]
    fn node_validation_messages_match_tensorflow() {
        let o = op("AddAttrNoDefault", &["attr a: int"]);
        let n = node("name: 'fails' op: 'AddAttrNoDefault'");
        assert_eq!(
            validate_node_def(&n, &o).unwrap_err().message(),
            "NodeDef missing attr 'a' from Op<name=AddAttrNoDefault; signature= -> ; attr=a:int>; NodeDef: {{node fails}}"
        );
        let o2 = op("Two", &["attr a: int", "attr b: int"]);
        let n2 = node("name: 'n' op: 'Two'");
        assert!(validate_node_def(&n2, &o2)
            .unwrap_err()
            .message()
            .starts_with("NodeDef missing attrs 'a', 'b' from Op<name=Two;"));

        let o = op("ChangeAttrType", &["attr a: int"]);
        let n = node("name: 'fails' op: 'ChangeAttrType' attr { key: 'a' value { b: true } }");
        assert_eq!(
            validate_node_def(&n, &o).unwrap_err().message(),
            "AttrValue had value with type 'bool' when 'int' expected for attr 'a'; NodeDef: {{node fails}}; Op<name=ChangeAttrType; signature= -> ; attr=a:int>"
        );

        let o = op("RemoveInput", &[]);
        let n = node("name: 'fails' op: 'RemoveInput' input: 'a'");
        assert_eq!(
            validate_node_def(&n, &o).unwrap_err().message(),
            "NodeDef expected inputs '' do not match 1 inputs specified; Op<name=RemoveInput; signature= -> >; NodeDef: {{node fails}}"
        );

        let n = node("name: 'x' op: 'Other'");
        assert_eq!(
            validate_node_def(&n, &o).unwrap_err().message(),
            "NodeDef op 'Other' does not match Op<name=RemoveInput; signature= -> >; NodeDef: {{node x}}"
        );
        let o = op("In", &["in a: int32"]);
        let n = node("name: 'x' op: 'In' input: '^c' input: 'a'");
        assert!(validate_node_def(&n, &o)
            .unwrap_err()
            .message()
            .starts_with("Non-control input 'a' after control input in NodeDef: {{node x}}"));
        let n = node("name: 'x' op: 'In' input: 'a' input: '^c:1'");
        assert!(validate_node_def(&n, &o)
            .unwrap_err()
            .message()
            .starts_with("Control input '^c:1' must not have ':'"));
        let n = node("name: 'x' op: 'In' input: 'a' input: '^c'");
        validate_node_def(&n, &o).unwrap();
    }

    #[test]
    fn unknown_attrs_are_ignored_unless_strict() {
        let o = op("RemoveAttr", &[]);
        let n = node("name: 'fails' op: 'RemoveAttr' attr { key: 'a' value { i: 3 } } attr { key: '_class' value { s: 'x' } }");
        validate_node_def(&n, &o).unwrap();
        assert_eq!(
            validate_node_def_strict(&n, &o).unwrap_err().message(),
            "NodeDef mentions attr 'a' not in Op<name=RemoveAttr; signature= -> >; NodeDef: {{node fails}}"
        );
        let n = node("name: 'ok' op: 'RemoveAttr' attr { key: '_class' value { s: 'x' } }");
        validate_node_def_strict(&n, &o).unwrap();
    }

    #[test]
    fn huge_list_lengths_in_a_node_are_refused() {
        let o = op("L", &["in a: N * int32", "attr N: int"]);
        let n = node("name: 'n' op: 'L' input: 'x' attr { key: 'N' value { i: 1000000000000 } }");
        let err = validate_node_def(&n, &o).unwrap_err();
        assert!(err.message().contains("1000000000000 flat inputs"), "{err}");
    }

    #[test]
    fn node_checks_compare_types_with_ref_rules() {
        let old = op("R", &["in i: Ref(int32)", "out ndef: string"]);
        let new = op("R", &["in i: int32", "out ndef: string"]);
        let n = node("name: 'n' op: 'R' input: 'a'");
        assert!(check_node_def(&n, &old, &new).is_ok());
        // The reverse is a type mismatch, though the node validates.
        let back = check_node_def(&n, &new, &old);
        assert!(back.validation.is_ok());
        assert_eq!(back.types_match, Some(false));
        let old = op("O", &["out o: int32"]);
        let new = op("O", &["out o: Ref(int32)"]);
        let n = node("name: 'n' op: 'O'");
        assert_eq!(check_node_def(&n, &old, &new).types_match, Some(true));
        assert_eq!(check_node_def(&n, &new, &old).types_match, Some(false));
        // A node whose types cannot be computed.
        let old = op("P", &["in a: T", "attr T: type"]);
        let n = node("name: 'n' op: 'P' input: 'x'");
        let r = check_node_def(&n, &old, &old);
        assert_eq!(r.types_match, None);
        assert!(!r.is_ok());
    }

    #[test]
    fn old_node_defs_load_with_new_defaults() {
        let v1 = op("ZeroOut", &["in to_zero: int32", "out zeroed: int32"]);
        let v4 = op(
            "ZeroOut",
            &[
                "attr T: realnumbertype = DT_INT32",
                "attr preserve_index: int = 0",
                "in to_zero: T",
                "out zeroed: T",
            ],
        );
        let n = node("name: 'z' op: 'ZeroOut' input: 'c'");
        let r = check_node_def(&n, &v1, &v4);
        assert!(r.is_ok(), "{r:?}");
        assert_eq!(
            r.summary,
            "{{node z}} = ZeroOut[T=DT_INT32, preserve_index=0](c)"
        );
        assert_eq!(r.node_def.attr.len(), 2);
    }
}
