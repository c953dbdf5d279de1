//! Shape-function tests of the indexing ops.

use opforge_core::Tensor;
use opforge_testing::shape::ShapeTestOp;
use opforge_testing::{infer_error, infer_ok};

fn ints(v: &[i32]) -> Tensor {
    Tensor::from_vec(&[v.len() as i64], v.to_vec()).unwrap()
}

/// Fuzz finding (shape_inference): an input of unknown rank and a `perm`
/// whose length is 2^63 - 1 made the shape function reserve that many dims
/// (a capacity-overflow panic); it is a rank above the maximum.
#[test]
fn transpose_of_a_huge_perm_length_is_a_rank_error() {
    let op = ShapeTestOp::new("Transpose");
    infer_error!(
        op,
        "?;[9223372036854775807]",
        "asked for a shape of rank 9223372036854775807; a shape has at most 254 dimensions"
    );
    infer_error!(op, "?;[255]", "a shape has at most 254 dimensions");
    infer_ok!(op, "?;[254]", &format!("[{}]", vec!["?"; 254].join(",")));
}

/// The kernel's fuzz finding at the i64 limits, in the shape function: an
/// axis of i64::MAX on params of unknown rank overflowed `axis + 1`.
#[test]
fn gather_v2_shape_fn_with_an_axis_of_i64_max() {
    let op = ShapeTestOp::new("GatherV2")
        .with_defaults()
        .unwrap()
        .input_tensor(2, Tensor::scalar(i64::MAX));
    infer_ok!(op, "?;[2];[]", "?");
    infer_error!(
        op,
        "[3];[2];[]",
        "Shape must be at least rank 9223372036854775808 but is rank 1"
    );
}

#[test]
fn transpose_shape_fn() {
    let op = ShapeTestOp::new("Transpose");
    infer_ok!(op, "?;?", "?");
    infer_ok!(op, "?;[?]", "?");
    infer_ok!(op, "?;[3]", "[?,?,?]");
    infer_ok!(op, "?;[1]", "in0");
    infer_ok!(op, "[?,2];?", "[?,?]");
    infer_error!(op, "[1,2,3];[2]", "Dimension must be 3 but is 2");
    infer_error!(op, "[1,2];[2,2]", "Shape must be rank 1 but is rank 2");
    let with = |perm: &[i32]| ShapeTestOp::new("Transpose").input_tensor(1, ints(perm));
    infer_ok!(with(&[1, 0]), "[2,?];[2]", "[d0_1,d0_0]");
    infer_ok!(with(&[1, 0]), "?;[2]", "[?,?]");
    infer_ok!(with(&[2, 0, 1]), "?;?", "[?,?,?]");
    infer_ok!(with(&[2, 0, 1]), "[1,2,3];[3]", "[d0_2,d0_0,d0_1]");
    // Negative entries above -rank count from the end, as in TensorFlow.
    infer_ok!(with(&[-1, 0, 1]), "[1,2,3];[3]", "[d0_2,d0_0,d0_1]");
    infer_error!(
        with(&[-3, 0, 1]),
        "[1,2,3];[3]",
        "perm dim -3 is out of range of input rank 3"
    );
    infer_error!(
        with(&[0, 3, 1]),
        "[1,2,3];[3]",
        "perm dim 3 is out of range of input rank 3"
    );
}

#[test]
fn gather_v2_shape_fn() {
    let op = ShapeTestOp::new("GatherV2").attr("batch_dims", 0i64);
    infer_ok!(op, "?;?;?", "?");
    infer_ok!(op, "[1,2,3];?;[]", "?");
    infer_ok!(op, "[1,2,3];[4,5];[]", "[?,?,?,?]");
    infer_error!(
        op,
        "[];[1];[]",
        "Shape must be at least rank 1 but is rank 0"
    );
    infer_error!(op, "[1];[1];[1]", "Shape must be rank 0 but is rank 1");
    let with = |axis: i32, batch_dims: i64| {
        ShapeTestOp::new("GatherV2")
            .attr("batch_dims", batch_dims)
            .input_tensor(2, Tensor::scalar(axis))
    };
    infer_ok!(with(0, 0), "[1,2,3];[4,5];[]", "[d1_0,d1_1,d0_1,d0_2]");
    infer_ok!(with(1, 0), "[1,2,3];[4,5];[]", "[d0_0,d1_0,d1_1,d0_2]");
    infer_ok!(with(-1, 0), "[1,2,3];[4,5];[]", "[d0_0,d0_1,d1_0,d1_1]");
    infer_ok!(with(1, 0), "[1,2,3];[];[]", "[d0_0,d0_2]");
    infer_ok!(with(1, 0), "[1,2,3];?;[]", "?");
    infer_ok!(with(1, 0), "?;[4];[]", "?");
    infer_error!(
        with(3, 0),
        "[1,2,3];[4];[]",
        "Shape must be at least rank 4 but is rank 3"
    );
    infer_error!(
        with(-4, 0),
        "[1,2,3];[4];[]",
        "Shape must be at least rank 4 but is rank 3"
    );
    // batch_dims leading dims are shared by params and indices.
    infer_ok!(with(1, 1), "[5,2,3];[5,4];[]", "[d0_0,d1_1,d0_2]");
    infer_ok!(with(2, -1), "[5,2,3];[5,4];[]", "[d0_0,d0_1,d1_1]");
    infer_error!(
        with(1, 3),
        "[5,2,3];[5,4];[]",
        "Shape must be at least rank 3 but is rank 2"
    );
    let unknown_axis = ShapeTestOp::new("GatherV2").attr("batch_dims", 1i64);
    infer_ok!(unknown_axis, "[5,2,3];[5,4];[]", "[?,?,?]");
    // A bare node has no batch_dims (TensorFlow 2.21 fails the same way).
    infer_error!(
        ShapeTestOp::new("GatherV2").input_tensor(2, Tensor::scalar(0i32)),
        "[1,2];[3];[]",
        "No attr named 'batch_dims'"
    );
}

#[test]
fn one_hot_shape_fn() {
    let op = ShapeTestOp::new("OneHot").attr("axis", -1i64);
    infer_ok!(op, "?;[];[];[]", "?");
    infer_ok!(op, "[2,?];[];[];[]", "[d0_0,d0_1,?]");
    let with = |axis: i64, depth: Tensor| {
        ShapeTestOp::new("OneHot")
            .attr("axis", axis)
            .input_tensor(1, depth)
    };
    infer_ok!(
        with(-1, Tensor::scalar(5i32)),
        "[2,?];[];[];[]",
        "[d0_0,d0_1,5]"
    );
    infer_ok!(
        with(0, Tensor::scalar(5i32)),
        "[2,?];[];[];[]",
        "[5,d0_0,d0_1]"
    );
    infer_ok!(
        with(1, Tensor::scalar(5i64)),
        "[2,?];[];[];[]",
        "[d0_0,5,d0_1]"
    );
    infer_ok!(with(0, Tensor::scalar(3i32)), "[];[];[];[]", "[3]");
    infer_ok!(with(0, Tensor::scalar(3i32)), "?;[];[];[]", "?");
    infer_error!(
        with(-2, Tensor::scalar(3i32)),
        "[2];[];[];[]",
        "axis must be >= -1"
    );
    infer_error!(
        with(-1, Tensor::scalar(-1i32)),
        "[2];[];[];[]",
        "Dimension size, given by scalar input 1, must be non-negative but is -1"
    );
    infer_error!(
        with(-1, ints(&[2])),
        "[2];[1];[];[]",
        "Input must be scalar but has rank 1"
    );
    infer_error!(
        with(-1, Tensor::scalar(2.0f32)),
        "[2];[];[];[]",
        "Scalar input for dim size must be int32 or int64"
    );
}

#[test]
fn reverse_shape_fns() {
    let op = ShapeTestOp::new("Reverse");
    infer_ok!(op, "?;?", "in0");
    infer_ok!(op, "?;[3]", "[?,?,?]");
    infer_ok!(op, "[1,?,3];[3]", "in0");
    infer_error!(op, "[1,2,3];[2]", "Shape must be rank 2 but is rank 3");
    infer_error!(op, "?;[]", "Shape must be rank 1 but is rank 0");
    infer_error!(
        op,
        "[1,1,1,1,1,1,1,1,1];?",
        "reverse does not work on tensors with more than 8 dimensions"
    );
    let op = ShapeTestOp::new("ReverseV2");
    infer_ok!(op, "?;?", "in0");
    infer_ok!(op, "?;[3]", "in0");
    infer_ok!(op, "[1,?,3];[5]", "in0");
    infer_error!(op, "?;[1,1]", "Shape must be rank 1 but is rank 2");
    infer_error!(
        op,
        "[1,1,1,1,1,1,1,1,1];[1]",
        "reverse does not work on tensors with more than 8 dimensions"
    );
    let with = |axes: &[i32]| ShapeTestOp::new("ReverseV2").input_tensor(1, ints(axes));
    infer_ok!(with(&[0, -1]), "[1,?,3];[2]", "in0");
    infer_ok!(with(&[0, 5]), "?;[2]", "in0");
    infer_error!(
        with(&[0, 3]),
        "[1,?,3];[2]",
        "'axis'[1] = 3 is out of valid range [0, 2"
    );
    infer_error!(
        with(&[1, -2]),
        "[1,?,3];[2]",
        "axis 1 specified more than once."
    );
}
