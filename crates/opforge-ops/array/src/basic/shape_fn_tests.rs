//! Shape-function tests of the basic array ops.

use super::*;
use opforge_core::attrs::AttrMap;
use opforge_core::proto::attr_value::Value;
use opforge_core::proto::{tensor_shape_proto::Dim, AttrValue, TensorProto};
use opforge_core::shape_inference::ShapeAndType;
use opforge_core::Registry;
use opforge_testing::shape::ShapeTestOp;
use opforge_testing::{infer_error, infer_ok};

fn ints(v: &[i32]) -> Tensor {
    Tensor::from_vec(&[v.len() as i64], v.to_vec()).unwrap()
}

fn longs(v: &[i64]) -> Tensor {
    Tensor::from_vec(&[v.len() as i64], v.to_vec()).unwrap()
}

#[test]
fn const_shape_fn() {
    let value = Tensor::from_vec(&[2, 3], vec![0f32; 6]).unwrap();
    let op = ShapeTestOp::new("Const")
        .attr("value", &value)
        .attr("dtype", DataType::Float);
    infer_ok!(op, "", "[2,3]");
    let op = ShapeTestOp::new("Const").attr("value", &Tensor::scalar(1i32));
    infer_ok!(op, "", "[]");
    let op =
        ShapeTestOp::new("Const").attr("value", &Tensor::zeros(DataType::Int64, &[0, 4]).unwrap());
    infer_ok!(op, "", "[0,4]");
    let proto = |dims: &[i64]| AttrValue {
        value: Some(Value::Tensor(Box::new(TensorProto {
            tensor_shape: Some(TensorShapeProto {
                dim: dims
                    .iter()
                    .map(|&size| Dim {
                        size,
                        name: String::new(),
                    })
                    .collect(),
                unknown_rank: false,
            }),
            ..Default::default()
        }))),
    };
    let op = ShapeTestOp::new("Const").attr("value", proto(&[1, -1]));
    infer_error!(op, "", "Shape [1,?] is not fully defined");
    let op = ShapeTestOp::new("Const").attr("value", proto(&[1 << 40, 1 << 40]));
    infer_error!(op, "", "is too large (more than 2**63 - 1 entries)");
    infer_error!(ShapeTestOp::new("Const"), "", "No attr named 'value'");
}

#[test]
fn pass_through_shape_fns() {
    for name in ["Identity", "StopGradient", "ZerosLike", "OnesLike"] {
        let op = ShapeTestOp::new(name);
        infer_ok!(op, "?", "in0");
        infer_ok!(op, "[]", "in0");
        infer_ok!(op, "[1,?,3]", "in0");
    }
    let op = ShapeTestOp::new("IdentityN").attr("T", vec![DataType::Float, DataType::Int32]);
    infer_ok!(op, "[1,?];?", "in0;in1");
    infer_error!(op, "[1]", "Must have exactly 1 shapes.");
}

#[test]
fn unchanged_shape_keeps_resource_data() {
    let op_def = Registry::global().op_def("Identity").unwrap();
    let mut c = InferenceContext::new(&op_def, "n", &AttrMap::new(), &[Some(vec![])], 1);
    let held = c.make_partial_shape(Some(&[2, -1]));
    let data = vec![ShapeAndType {
        shape: held,
        dtype: DataType::Float,
    }];
    c.set_input_handle_shapes_and_types(0, data.clone());
    common::unchanged_shape(&mut c).unwrap();
    assert_eq!(c.output(0), Some(c.input(0)));
    assert_eq!(c.output_handle_shapes_and_types(0), Some(&data[..]));
}

#[test]
fn shape_size_rank_shape_fns() {
    let op = ShapeTestOp::new("Shape");
    infer_ok!(op, "?", "[?]");
    infer_ok!(op, "[]", "[0]");
    infer_ok!(op, "[1,?,3]", "[3]");
    let op = ShapeTestOp::new("ShapeN")
        .attr("N", 3i64)
        .attr("T", DataType::Float)
        .attr("out_type", DataType::Int32);
    infer_ok!(op, "?;[];[?,2]", "[?];[0];[2]");
    for name in ["Size", "Rank"] {
        let op = ShapeTestOp::new(name);
        infer_ok!(op, "?", "[]");
        infer_ok!(op, "[1,?,3]", "[]");
    }
}

#[test]
fn reshape_shape_fn() {
    let op = ShapeTestOp::new("Reshape");
    infer_ok!(op, "?;?", "?");
    infer_ok!(op, "[2,3];[?]", "?");
    infer_ok!(op, "[2,3];[3]", "[?,?,?]");
    infer_error!(op, "[2,3];[3,1]", "Shape must be rank 1 but is rank 2");
    let with = |t: Tensor| ShapeTestOp::new("Reshape").input_tensor(1, t);
    infer_ok!(with(ints(&[3, 2])), "[2,3];[2]", "[3,2]");
    infer_ok!(with(ints(&[3, 2])), "?;[2]", "[3,2]");
    infer_error!(
        with(ints(&[3, 3])),
        "[2,3];[2]",
        "Cannot reshape a tensor with 6 elements to shape [3,3] (9 elements)"
    );
    // One unknown output dim, inferred from a known input.
    infer_ok!(with(longs(&[-1, 2])), "[2,3];[2]", "[3,2]");
    infer_error!(
        with(ints(&[-1, 4])),
        "[2,3];[2]",
        "Dimension size must be evenly divisible by 4 but is 6"
    );
    // One unknown input dim: checked against a known output.
    infer_ok!(with(ints(&[3, 4])), "[2,?];[2]", "[3,4]");
    infer_error!(
        with(ints(&[5, 3])),
        "[2,?];[2]",
        "Dimension size must be evenly divisible by 2 but is 15"
    );
    // One unknown dim on each side, with equal known parts: the same dim.
    infer_ok!(with(ints(&[-1, 6])), "[6,?];[2]", "[d0_1,6]");
    infer_ok!(with(ints(&[-1, 5])), "[6,?];[2]", "[?,5]");
    // Two unknown input dims: nothing to infer.
    infer_ok!(with(ints(&[-1, 4])), "[?,?];[2]", "[?,4]");
    infer_ok!(with(ints(&[0, -1])), "[0,5];[2]", "[0,?]");
    infer_ok!(with(ints(&[])), "[1,1];[0]", "[]");
    infer_error!(
        with(ints(&[2, -2])),
        "[4];[2]",
        "Invalid value in tensor used for shape: -2"
    );
}

#[test]
fn expand_dims_shape_fn() {
    let op = ShapeTestOp::new("ExpandDims");
    infer_ok!(op, "?;?", "?");
    infer_ok!(op, "[2,?];[]", "?");
    let with = |t: Tensor| ShapeTestOp::new("ExpandDims").input_tensor(1, t);
    infer_ok!(with(Tensor::scalar(0i32)), "?;[]", "?");
    infer_ok!(with(Tensor::scalar(0i32)), "[2,?];[]", "[1,d0_0,d0_1]");
    infer_ok!(with(Tensor::scalar(1i64)), "[2,?];[]", "[d0_0,1,d0_1]");
    infer_ok!(with(Tensor::scalar(2i32)), "[2,?];[]", "[d0_0,d0_1,1]");
    infer_ok!(with(Tensor::scalar(-1i32)), "[2,?];[]", "[d0_0,d0_1,1]");
    infer_ok!(with(Tensor::scalar(-3i64)), "[2,?];[]", "[1,d0_0,d0_1]");
    infer_ok!(with(ints(&[0])), "[];[1]", "[1]");
    infer_error!(
        with(Tensor::scalar(3i32)),
        "[2,?];[]",
        "dim 3 not in the interval [-3, 2]."
    );
    infer_error!(
        with(Tensor::scalar(-4i32)),
        "[2,?];[]",
        "dim -4 not in the interval [-3, 2]."
    );
    infer_error!(
        with(ints(&[0, 1])),
        "?;[2]",
        "'dim' input must be a tensor with a single value"
    );
}

#[test]
fn squeeze_shape_fn() {
    let all = ShapeTestOp::new("Squeeze").attr("squeeze_dims", Vec::<i64>::new());
    infer_ok!(all, "?", "?");
    infer_ok!(all, "[1,4,1,5,1]", "[d0_1,d0_3]");
    infer_ok!(all, "[1,?,1]", "?");
    infer_ok!(all, "[1,1]", "[]");
    let some = ShapeTestOp::new("Squeeze").attr("squeeze_dims", vec![1i64, -1]);
    infer_ok!(some, "?", "?");
    infer_ok!(some, "[4,1,?]", "[d0_0]");
    infer_ok!(some, "[1,?,1,1]", "[d0_0,d0_2]");
    infer_error!(
        some,
        "[4,6,1]",
        "Can not squeeze dim[1], expected a dimension of 1, got 6"
    );
    infer_error!(some, "[1]", "squeeze_dims[0] not in [-1,1).");
    infer_error!(
        ShapeTestOp::new("Squeeze"),
        "[1]",
        "No attr named 'squeeze_dims'"
    );
}

#[test]
fn fill_shape_fn() {
    let op = ShapeTestOp::new("Fill");
    infer_ok!(op, "?;?", "?");
    infer_ok!(op, "[?];[]", "?");
    infer_ok!(op, "[3];[]", "[?,?,?]");
    infer_error!(op, "[2,2];[]", "Shape must be rank 1 but is rank 2");
    infer_error!(op, "[2];[1]", "Shape must be rank 0 but is rank 1");
    let with = |t: Tensor| ShapeTestOp::new("Fill").input_tensor(0, t);
    infer_ok!(with(ints(&[2, 0, 3])), "[3];[]", "[2,0,3]");
    infer_ok!(with(ints(&[2, 3])), "?;?", "[2,3]");
    infer_error!(
        with(ints(&[2, -1])),
        "[2];[]",
        "Fill dimensions must be >= 0"
    );
    let op = ShapeTestOp::new("Fill")
        .attr("index_type", DataType::Int64)
        .input_tensor(0, longs(&[4]));
    infer_ok!(op, "[1];[]", "[4]");
}

#[test]
fn broadcast_shape_fns() {
    let op = ShapeTestOp::new("BroadcastTo");
    infer_ok!(op, "?;[?]", "?");
    infer_ok!(op, "?;[2]", "[?,?]");
    infer_ok!(op, "[2,1];[3]", "[?,d0_0,?]");
    infer_error!(op, "[2];[]", "Shape must be rank 1 but is rank 0");
    infer_error!(
        op,
        "[1,2,3];[2]",
        "Shape must be at most rank 2 but is rank 3"
    );
    let with = |t: Tensor| ShapeTestOp::new("BroadcastTo").input_tensor(1, t);
    infer_ok!(with(ints(&[2, 5])), "[5];[2]", "[2,d0_0]");
    infer_ok!(with(ints(&[2, 5])), "[?];[2]", "[2,5]");
    infer_ok!(with(longs(&[4, 3])), "?;[2]", "[4,3]");
    infer_ok!(with(ints(&[-1, 3])), "[7,1];[2]", "[d0_0,3]");
    infer_error!(
        with(ints(&[2, 4])),
        "[3];[2]",
        "Dimensions must be equal, but are 3 and 4"
    );
    let op = ShapeTestOp::new("BroadcastArgs");
    infer_ok!(op, "?;?", "[?]");
    infer_ok!(op, "[3];[?]", "[?]");
    infer_ok!(op, "[2];[4]", "[4]");
    infer_error!(op, "[2,2];[2]", "Shape must be rank 1 but is rank 2");
    let op = ShapeTestOp::new("BroadcastGradientArgs");
    infer_ok!(op, "?;?", "[?];[?]");
    infer_ok!(op, "[2];[4]", "[?];[?]");
    infer_error!(op, "[2];[]", "Shape must be rank 1 but is rank 0");
}

#[test]
fn range_shape_fn() {
    let op = ShapeTestOp::new("Range").attr("Tidx", DataType::Int32);
    infer_ok!(op, "?;?;?", "[?]");
    infer_ok!(op, "[];[];[]", "[?]");
    infer_error!(
        op,
        "[1];[];[]",
        "Shape must be rank 0 but is rank 1\n\t for 'start'"
    );
    infer_error!(op, "[];[];[2]", "for 'delta'");
    infer_error!(
        ShapeTestOp::new("Range"),
        "[];[];[]",
        "No attr named 'Tidx'"
    );
    let consts = |dtype: DataType, s: Tensor, l: Tensor, d: Tensor| {
        ShapeTestOp::new("Range")
            .attr("Tidx", dtype)
            .input_tensor(0, s)
            .input_tensor(1, l)
            .input_tensor(2, d)
    };
    let i32s = |s: i32, l: i32, d: i32| {
        consts(
            DataType::Int32,
            Tensor::scalar(s),
            Tensor::scalar(l),
            Tensor::scalar(d),
        )
    };
    infer_ok!(i32s(0, 10, 3), "[];[];[]", "[4]");
    infer_ok!(i32s(10, 0, -2), "[];[];[]", "[5]");
    infer_ok!(i32s(3, 3, 1), "[];[];[]", "[0]");
    infer_error!(
        i32s(5, 1, 1),
        "[];[];[]",
        "Requires start <= limit when delta > 0: 5/1"
    );
    infer_error!(
        i32s(1, 5, -1),
        "[];[];[]",
        "Requires start >= limit when delta < 0: 1/5"
    );
    infer_error!(i32s(1, 1, 0), "[];[];[]", "Requires delta != 0");
    let f = consts(
        DataType::Float,
        Tensor::scalar(0f32),
        Tensor::scalar(1f32),
        Tensor::scalar(0.3f32),
    );
    infer_ok!(f, "[];[];[]", "[4]");
    let big = consts(
        DataType::Int64,
        Tensor::scalar(-(1i64 << 62)),
        Tensor::scalar(1i64 << 62),
        Tensor::scalar(1i64 << 61),
    );
    infer_ok!(big, "[];[];[]", "[4]");
}

#[test]
fn invert_permutation_shape_fn() {
    let op = ShapeTestOp::new("InvertPermutation");
    infer_ok!(op, "?", "[?]");
    infer_ok!(op, "[3]", "in0");
    infer_error!(op, "[]", "Shape must be rank 1 but is rank 0");
}
