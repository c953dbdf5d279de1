//! Shape-function tests of the joining, splitting, slicing and padding ops.

use opforge_core::{DataType, Tensor};
use opforge_testing::shape::ShapeTestOp;
use opforge_testing::{infer_error, infer_ok};

fn ints(v: &[i32]) -> Tensor {
    Tensor::from_vec(&[v.len() as i64], v.to_vec()).unwrap()
}

fn concat(n: i64) -> ShapeTestOp {
    ShapeTestOp::new("ConcatV2")
        .attr("N", n)
        .attr("T", DataType::Float)
}

#[test]
fn concat_v2_shape_fn() {
    let op = concat(2);
    infer_ok!(op, "?;?;[]", "?");
    infer_ok!(op, "?;[1,?];[]", "[?,?]");
    infer_error!(op, "[1];[2];[1]", "Shape must be rank 0 but is rank 1");
    infer_error!(
        op,
        "[];?;[]",
        "Can't concatenate scalars (use tf.stack instead)"
    );
    infer_error!(op, "[1,2];[1,2,3];[]", "Shape must be rank 2 but is rank 3");
    let with = |n: i64, axis: i32| concat(n).input_tensor(n as usize, Tensor::scalar(axis));
    infer_ok!(with(2, 0), "[1,2];[3,2];[]", "[4,d0_1|d1_1]");
    infer_ok!(with(2, 0), "[1,?];[3,2];[]", "[4,d1_1]");
    infer_ok!(with(2, 1), "[?,2];[3,?];[]", "[d1_0,?]");
    infer_ok!(with(2, -1), "[5,2];[5,3];[]", "[d0_0|d1_0,5]");
    infer_ok!(with(3, 0), "?;[2,3];?;[]", "[?,d1_1]");
    infer_ok!(with(2, 0), "?;?;[]", "?");
    infer_error!(
        with(2, 0),
        "[1,2];[3,4];[]",
        "Dimension 0 in both shapes must be equal, but are 2 and 4"
    );
    infer_error!(
        with(2, 2),
        "[1,2];[3,4];[]",
        "Shape must be at least rank 3 but is rank 2"
    );
    infer_error!(
        concat(2).input_tensor(2, ints(&[])),
        "[1];[1];[]",
        "axis must be a scalar"
    );
}

#[test]
fn pack_unpack_shape_fns() {
    let pack = |axis: i64| {
        ShapeTestOp::new("Pack")
            .attr("N", 2i64)
            .attr("T", DataType::Float)
            .attr("axis", axis)
    };
    infer_ok!(pack(0), "?;?", "?");
    infer_ok!(pack(0), "[];?", "[2]");
    infer_ok!(pack(0), "[2,?];[?,3]", "[2,d0_0,d1_1]");
    infer_ok!(pack(1), "[2,3];?", "[d0_0,2,d0_1]");
    infer_ok!(pack(-1), "[2,3];[2,3]", "[d0_0,d0_1,2]");
    infer_error!(pack(3), "[2,3];?", "Invalid axis: 3; must be in [-3,3)");
    infer_error!(pack(-4), "[2,3];?", "Invalid axis: -4; must be in [-3,3)");
    infer_error!(
        pack(0),
        "[2,3];[2,4]",
        "Dimension 1 in both shapes must be equal, but are 3 and 4"
    );
    infer_error!(
        pack(0),
        "[2,3];[2]",
        "From merging shape 0 with other shapes."
    );
    let unpack = |num: i64, axis: i64| {
        ShapeTestOp::new("Unpack")
            .attr("num", num)
            .attr("T", DataType::Float)
            .attr("axis", axis)
    };
    infer_ok!(unpack(2, 0), "?", "?;?");
    infer_ok!(unpack(2, 0), "[2,?,3]", "[d0_1,d0_2];[d0_1,d0_2]");
    infer_ok!(unpack(2, 1), "[4,?,3]", "[d0_0,d0_2];[d0_0,d0_2]");
    infer_ok!(
        unpack(3, -1),
        "[4,?,3]",
        "[d0_0,d0_1];[d0_0,d0_1];[d0_0,d0_1]"
    );
    infer_ok!(unpack(0, 0), "[0,2]", "");
    infer_error!(unpack(2, 0), "[3,2]", "Dimension must be 2 but is 3");
    infer_error!(unpack(1, 0), "[]", "Invalid axis: 0; must be in [0,0)");
    infer_error!(unpack(1, 2), "[1,1]", "Invalid axis: 2; must be in [-2,2)");
}

#[test]
fn split_shape_fn() {
    let op = ShapeTestOp::new("Split")
        .attr("num_split", 2i64)
        .attr("T", DataType::Float);
    infer_ok!(op, "?;?", "?;?");
    infer_ok!(op, "[];[4,?]", "[?,?];[?,?]");
    let with = |d: i32| op.clone().input_tensor(0, Tensor::scalar(d));
    infer_ok!(with(0), "[];[4,?]", "[2,d1_1];[2,d1_1]");
    infer_ok!(with(-1), "[];[4,?]", "[d1_0,?];[d1_0,?]");
    infer_ok!(with(1), "[];?", "?;?");
    infer_ok!(with(-1), "[];?", "?;?");
    infer_error!(
        with(0),
        "[];[5,?]",
        "Dimension size must be evenly divisible by 2 but is 5"
    );
    infer_error!(
        with(0),
        "[];[5,?]",
        "Number of ways to split should evenly divide the split dimension"
    );
    infer_error!(
        with(2),
        "[];[4,?]",
        "Dimension size, given by scalar input 2 must be in range [-2, 2)"
    );
    infer_error!(
        with(-3),
        "[];[4,?]",
        "Dimension size, given by scalar input -3 must be in range [-2, 2)"
    );
    infer_error!(
        op.clone().input_tensor(0, ints(&[0])),
        "[1];[4]",
        "Input must be scalar but has rank 1"
    );
}

#[test]
fn slice_shape_fn() {
    let op = ShapeTestOp::new("Slice");
    infer_ok!(op, "?;?;?", "?");
    infer_ok!(op, "[2,3];?;?", "[?,?]");
    infer_ok!(op, "?;[2];[2]", "[?,?]");
    infer_ok!(op, "?;[2];?", "[?,?]");
    infer_error!(op, "[2,3];[2,1];[2]", "Shape must be rank 1 but is rank 2");
    infer_error!(op, "[2,3];[3];[3]", "Shape must be rank 3 but is rank 2");
    infer_error!(
        op,
        "?;[2];[3]",
        "Dimension 0 in both shapes must be equal, but are 2 and 3"
    );
    let with = |begin: &[i32], size: &[i32]| {
        ShapeTestOp::new("Slice")
            .input_tensor(1, ints(begin))
            .input_tensor(2, ints(size))
    };
    infer_ok!(with(&[0, 1], &[2, 1]), "[2,3];[2];[2]", "[2,1]");
    infer_ok!(with(&[0, 1], &[-1, -1]), "[2,?];[2];[2]", "[d0_0,?]");
    infer_ok!(with(&[1, 1], &[-1, -1]), "[2,3];[2];[2]", "[1,2]");
    infer_ok!(with(&[0, 0], &[1, -1]), "?;[2];[2]", "[1,?]");
    infer_error!(
        with(&[0, 4], &[1, -1]),
        "[2,3];[2];[2]",
        "Negative dimension size caused by subtracting 4 from 3"
    );
    infer_error!(
        with(&[0, 0], &[1, -2]),
        "[2,3];[2];[2]",
        "Out of bounds slicing on dimension 1 of length 3: sizes vector cannot be < -1, but was -2"
    );
    // Only `size` known: the begin is not needed for explicit sizes.
    let sizes_only = ShapeTestOp::new("Slice").input_tensor(2, ints(&[1, 2]));
    infer_ok!(sizes_only, "[4,5];[2];[2]", "[1,2]");
    let sizes_only = ShapeTestOp::new("Slice").input_tensor(2, ints(&[1, -1]));
    infer_ok!(sizes_only, "[4,5];[2];[2]", "[1,?]");
}

#[test]
fn tile_shape_fn() {
    let op = ShapeTestOp::new("Tile");
    infer_ok!(op, "?;?", "?");
    infer_ok!(op, "[2,3];?", "[?,?]");
    infer_ok!(op, "?;[2]", "[?,?]");
    infer_error!(op, "[2,3];[3]", "Shape must be rank 2 but is rank 3");
    infer_error!(op, "[2,3];[2,1]", "Shape must be rank 1 but is rank 2");
    let with = |m: Tensor| ShapeTestOp::new("Tile").input_tensor(1, m);
    infer_ok!(with(ints(&[1, 3])), "[2,?];[2]", "[d0_0,?]");
    infer_ok!(with(ints(&[2, 3])), "[2,4];[2]", "[4,12]");
    infer_ok!(with(ints(&[0, 3])), "[?,4];[2]", "[0,12]");
    infer_ok!(
        with(Tensor::from_vec(&[2], vec![2i64, 1]).unwrap()),
        "?;[2]",
        "[?,?]"
    );
    infer_ok!(with(ints(&[-1, 2])), "[5,1];[2]", "[?,2]");
}

#[test]
fn pad_shape_fns() {
    for (name, ins) in [("Pad", ""), ("PadV2", ";[]")] {
        let op = ShapeTestOp::new(name);
        let i = |s: &str| format!("{s}{ins}");
        infer_ok!(op, &i("?;?"), "?");
        infer_ok!(op, &i("[2,?];?"), "[?,?]");
        infer_ok!(op, &i("?;[3,2]"), "[?,?,?]");
        infer_error!(op, &i("?;[3]"), "Shape must be rank 2 but is rank 1");
        infer_error!(op, &i("?;[3,3]"), "Dimension must be 2 but is 3");
        infer_error!(op, &i("[1,2];[3,2]"), "Shape must be rank 3 but is rank 2");
        infer_ok!(op, &i("[1,2];[?,2]"), "[?,?]");
        let pads = Tensor::from_vec(&[2, 2], vec![1i32, 2, 0, 0]).unwrap();
        let op = ShapeTestOp::new(name).input_tensor(1, pads);
        infer_ok!(op, &i("[4,?];[2,2]"), "[7,d0_1]");
        infer_ok!(op, &i("?;?"), "[?,?]");
        let pads = Tensor::from_vec(&[1, 2], vec![-1i64, 2]).unwrap();
        let op = ShapeTestOp::new(name).input_tensor(1, pads);
        infer_error!(op, &i("[4];[1,2]"), "Paddings must be non-negative");
    }
}
