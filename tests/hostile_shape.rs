//! Hostile input to shape functions: every registered op's shape function,
//! given fewer input shapes than the op has inputs, or unknown and odd
//! shapes, answers a value or a clean error; none panics.

use opforge::registry::Registry;
use opforge::shape_inference::ShapeFn;
use opforge_core::attrs::arg_ranges;
use opforge_core::proto::attr_value::Value;
use opforge_core::proto::AttrValue;
use opforge_core::{Code, DataType};
use opforge_testing::hostile::plausible_attrs;
use opforge_testing::shape::{run_shape_fn, ShapeTestOp};
use std::panic::{catch_unwind, AssertUnwindSafe};

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

#[test]
fn a_shape_attr_whose_element_count_overflows_is_too_large() {
    use opforge_core::proto::tensor_shape_proto::Dim;
    use opforge_core::proto::TensorShapeProto;
    opforge::opforge_ops::link();
    let shape = |dims: &[i64]| AttrValue {
        value: Some(Value::Shape(TensorShapeProto {
            dim: dims
                .iter()
                .map(|&size| Dim {
                    size,
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        })),
    };
    let mut op = ShapeTestOp::new("ImmutableConst")
        .attr("dtype", DataType::Float)
        .attr("memory_region_name", "x");
    op.attrs.insert("shape".into(), shape(&[1 << 62, 1 << 62]));
    let e = run_shape_fn(&op, "").unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument);
    assert!(
        e.message()
            .contains("is too large (more than 2**63 - 1 entries)"),
        "{e}"
    );
    // An unknown dim stops the count (as TensorFlow's IsValidShape).
    op.attrs
        .insert("shape".into(), shape(&[-1, 1 << 62, 1 << 62]));
    assert!(run_shape_fn(&op, "").is_ok());
    op.attrs.insert("shape".into(), shape(&[1 << 31, 1 << 31]));
    assert!(run_shape_fn(&op, "").is_ok());
}
