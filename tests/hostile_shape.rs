//! Hostile input to shape functions: every registered op's shape function,
//! given fewer input shapes than the op has inputs, or unknown and odd
//! shapes, answers a value or a clean error; none panics.

use opforge::registry::Registry;
use opforge::shape_inference::ShapeFn;
use opforge_core::attrs::arg_ranges;
use opforge_core::proto::attr_value::{ListValue, Value};
use opforge_core::proto::{AttrValue, OpDef};
use opforge_core::{Code, DataType};
use opforge_testing::shape::{run_shape_fn, ShapeTestOp};
use std::panic::{catch_unwind, AssertUnwindSafe};

/// A plausible value for every attr of `op` (its default, else one of the
/// attr's type), so shape functions get past their attr reads.
fn plausible_attrs(op: &OpDef) -> Vec<(String, AttrValue)> {
    op.attr
        .iter()
        .map(|a| {
            if let Some(d) = &a.default_value {
                return (a.name.clone(), d.clone());
            }
            let allowed_type = a
                .allowed_values
                .as_ref()
                .and_then(|v| match &v.value {
                    Some(Value::List(l)) => l.r#type.first().copied(),
                    _ => None,
                })
                .unwrap_or(DataType::Float as i32);
            let value = match a.r#type.as_str() {
                "type" => Value::Type(allowed_type),
                "int" => Value::I(a.minimum.max(2)),
                "float" => Value::F(0.5),
                "bool" => Value::B(false),
                "string" => Value::S(
                    a.allowed_values
                        .as_ref()
                        .and_then(|v| match &v.value {
                            Some(Value::List(l)) => l.s.first().cloned(),
                            _ => None,
                        })
                        .unwrap_or_default(),
                ),
                "shape" => Value::Shape(Default::default()),
                "list(type)" => Value::List(ListValue {
                    r#type: vec![allowed_type; (a.minimum.max(2)) as usize],
                    ..Default::default()
                }),
                "list(int)" => Value::List(ListValue {
                    i: vec![1; (a.minimum.max(4)) as usize],
                    ..Default::default()
                }),
                _ => Value::List(ListValue::default()),
            };
            (a.name.clone(), AttrValue { value: Some(value) })
        })
        .collect()
}

#[test]
fn no_shape_function_panics_on_missing_or_odd_inputs() {
    opforge::opforge_ops::link();
    let registry = Registry::global();
    let mut panics = Vec::new();
    let mut missing_checked = 0;
    for name in registry.ops_with_attr::<ShapeFn>() {
        let op_def = registry.op_def(&name).expect("registered");
        let mut op = ShapeTestOp::new(&name);
        for (k, v) in plausible_attrs(&op_def) {
            op.attrs.insert(k, v);
        }
        let n = arg_ranges(&op_def, &op_def.input_arg, &op.attrs)
            .map(|r| r.last().map_or(0, |l| l.end))
            .unwrap_or(op_def.input_arg.len());
        let mut cases: Vec<String> = (0..n).map(|k| vec!["?"; k].join(";")).collect();
        cases.push(vec!["?"; n].join(";"));
        cases.push(vec!["[]"; n].join(";"));
        cases.push(vec!["[0,0,0,0]"; n].join(";"));
        cases.push(vec!["[1,?,2,3]"; n].join(";"));
        for ins in &cases {
            match catch_unwind(AssertUnwindSafe(|| run_shape_fn(&op, ins))) {
                Err(_) => panics.push(format!("{name} on '{ins}'")),
                Ok(Err(e)) if ins.matches(';').count() + usize::from(!ins.is_empty()) < n => {
                    // Too few shapes: a clean error (which one depends on
                    // what the shape function reads first).
                    if e.code() == Code::InvalidArgument && e.message().contains("give one shape") {
                        missing_checked += 1;
                    }
                }
                Ok(_) => {}
            }
        }
    }
    assert!(
        panics.is_empty(),
        "shape functions panicked ({}):\n{}",
        panics.len(),
        panics.join("\n")
    );
    assert!(
        missing_checked > 20,
        "only {missing_checked} reads of a missing input were reported"
    );
}

#[test]
fn a_missing_input_is_invalid_argument_naming_it() {
    opforge::opforge_ops::link();
    let op = ShapeTestOp::new("AddV2").attr("T", DataType::Float);
    let e = run_shape_fn(&op, "[2,3]").unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument);
    assert!(
        e.message()
            .contains("The shape function of AddV2 read input 1, but the node has only 1 inputs"),
        "{e}"
    );
}
