//! One-line descriptions of ops and nodes for messages, as TensorFlow's
//! `SummarizeOpDef` and `SummarizeNodeDef` print them.

use crate::dtype::DataType;
use crate::op_def::summarize_attr_value;
use crate::proto::{op_def::ArgDef, NodeDef, OpDef};

/// A short description of an op, as TensorFlow's `SummarizeOpDef`:
/// `Op<name=ZeroOut; signature=to_zero:T -> zeroed:T; attr=T:type,default=DT_INT32,allowed=[DT_FLOAT, DT_INT32]>`.
///
/// ```
/// use opforge_core::{compat, OpDefBuilder};
/// let op = OpDefBuilder::new("AddN").attr("N: int >= 1").attr("T: {float, int32}")
///     .input("inputs: N * T").output("sum: T").finalize().unwrap();
/// assert_eq!(
///     compat::summarize_op_def(&op),
///     "Op<name=AddN; signature=inputs:N*T -> sum:T; attr=N:int,min=1; \
///      attr=T:type,allowed=[DT_FLOAT, DT_INT32]>"
/// );
/// ```
pub fn summarize_op_def(op: &OpDef) -> String {
    let mut s = format!(
        "Op<name={}; signature={} -> {}",
        op.name,
        summarize_args(&op.input_arg),
        summarize_args(&op.output_arg)
    );
    for attr in &op.attr {
        s.push_str(&format!("; attr={}:{}", attr.name, attr.r#type));
        if let Some(default) = &attr.default_value {
            s.push_str(&format!(",default={}", summarize_attr_value(default)));
        }
        if attr.has_minimum {
            s.push_str(&format!(",min={}", attr.minimum));
        }
        if let Some(allowed) = &attr.allowed_values {
            s.push_str(&format!(",allowed={}", summarize_attr_value(allowed)));
        }
    }
    for (flag, name) in [
        (op.is_commutative, "is_commutative"),
        (op.is_aggregate, "is_aggregate"),
        (op.is_stateful, "is_stateful"),
        (op.allows_uninitialized_input, "allows_uninitialized_input"),
        (
            op.is_distributed_communication,
            "is_distributed_communication",
        ),
    ] {
        if flag {
            s.push_str(&format!("; {name}=true"));
        }
    }
    s.push('>');
    s
}

fn summarize_args(args: &[ArgDef]) -> String {
    args.iter()
        .map(|arg| {
            let mut s = format!("{}:", arg.name);
            if arg.is_ref {
                s.push_str("Ref(");
            }
            if !arg.number_attr.is_empty() {
                s.push_str(&format!("{}*", arg.number_attr));
            }
            if arg.r#type != DataType::Invalid as i32 {
                s.push_str(&dtype_string(arg.r#type));
            } else {
                s.push_str(&arg.type_attr);
            }
            if arg.is_ref {
                s.push(')');
            }
            s
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// TensorFlow's `DataTypeString` of a type code (`int32`, `float`).
pub(super) fn dtype_string(code: i32) -> String {
    match DataType::from_i32(code) {
        Some(DataType::Invalid) => "INVALID".to_string(),
        Some(dt) => dt.name().to_string(),
        None => format!("unknown dtype enum ({code})"),
    }
}

/// How TensorFlow names a node in error messages: `{{node NAME}}`.
pub fn format_node_name_for_error(name: &str) -> String {
    format!("{{{{node {name}}}}}")
}

/// A one-line description of a node, as TensorFlow 2.x's
/// `SummarizeNodeDef`: `{{node NAME}} = Op[attr=value, ...](inputs)`, attrs
/// sorted by name (internal `_` attrs included), the device last as
/// `_device="..."`.
///
/// ```
/// use opforge_core::{compat, proto::{self, NodeDef}};
/// let node: NodeDef = proto::from_text(
///     "name: 'z' op: 'ZeroOut' input: 'x' attr { key: 'T' value { type: DT_INT32 } }",
/// ).unwrap();
/// assert_eq!(compat::summarize_node_def(&node), "{{node z}} = ZeroOut[T=DT_INT32](x)");
/// ```
pub fn summarize_node_def(node: &NodeDef) -> String {
    let mut attrs: Vec<String> = node
        .attr
        .iter()
        .map(|(k, v)| format!("{k}={}", summarize_attr_value(v)))
        .collect();
    if !node.device.is_empty() {
        attrs.push(format!("_device=\"{}\"", node.device));
    }
    format!(
        "{} = {}[{}]({})",
        format_node_name_for_error(&node.name),
        node.op,
        attrs.join(", "),
        node.input.join(", ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compat::test_util::{node, op};

    #[test]
    fn node_summaries() {
        let n = node(
            "name: 'n' op: 'Op' input: 'a' input: 'b:1' input: '^c' device: '/cpu:0' \
             attr { key: 'T' value { type: DT_FLOAT } } attr { key: '_x' value { i: 1 } } \
             attr { key: 'N' value { i: 3 } }",
        );
        assert_eq!(
            summarize_node_def(&n),
            "{{node n}} = Op[N=3, T=DT_FLOAT, _x=1, _device=\"/cpu:0\"](a, b:1, ^c)"
        );
        assert_eq!(
            summarize_node_def(&node("name: 'e' op: 'E'")),
            "{{node e}} = E[]()"
        );
    }

    #[test]
    fn op_summaries() {
        let o = op(
            "S",
            &[
                "in a: Ref(int32)",
                "in b: N * T",
                "in c: L",
                "out d: string",
                "attr N: int >= 2 = 2",
                "attr T: {float, int32} = DT_INT32",
                "attr L: list(type) >= 0",
            ],
        );
        let mut o = o;
        o.is_stateful = true;
        o.is_commutative = true;
        assert_eq!(
            summarize_op_def(&o),
            "Op<name=S; signature=a:Ref(int32), b:N*T, c: -> d:string; attr=N:int,default=2,min=2; \
             attr=T:type,default=DT_INT32,allowed=[DT_FLOAT, DT_INT32]; attr=L:list(type),min=0; \
             is_commutative=true; is_stateful=true>"
        );
    }
}
