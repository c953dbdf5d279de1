//! Shape-function tests of array ops whose kernels are tested elsewhere or
//! that have no kernel yet (`Diag`, `SpaceToBatchND`, `Gather`,
//! `MirrorPad`, ...); the space/batch/depth ops' kernels are tested in
//! `space_batch/tests.rs`.

use opforge_core::proto::TensorShapeProto;
use opforge_core::{DataType, Tensor};
use opforge_testing::shape::ShapeTestOp;
use opforge_testing::{infer_error, infer_ok};

fn op(name: &str) -> ShapeTestOp {
    ShapeTestOp::new(name)
}

fn i32s(dims: &[i64], v: Vec<i32>) -> Tensor {
    Tensor::from_vec(dims, v).unwrap()
}

fn i64s(dims: &[i64], v: Vec<i64>) -> Tensor {
    Tensor::from_vec(dims, v).unwrap()
}

fn shape(dims: &[i64]) -> TensorShapeProto {
    opforge_core::TensorShape::new(dims).unwrap().to_proto()
}

#[test]
fn tf_merge_semantics() {
    // Where both dims are unknown, the merge keeps the first's (the input's).
    let op = op("MatrixSetDiag");
    infer_ok!(op, "[?,?,3];[1,2]", "[d1_0,d0_1,d0_2]");
    infer_ok!(op, "[?,?,?];[?,?]", "in0");
    // Where both ranks are unknown, the first shape.
    let op = ShapeTestOp::new("ReverseSequence")
        .attr("seq_dim", 0i64)
        .attr("batch_dim", 0i64);
    infer_ok!(op, "?;?", "?");
}

#[test]
fn unravel_index() {
    let op = op("UnravelIndex");
    infer_ok!(op, "?;?", "?");
    infer_ok!(op, "[];[?]", "[d1_0]");
    infer_ok!(op, "[4,5];[?]", "[d1_0,20]");
    infer_ok!(op, "[2,3,4];[?]", "[d1_0,24]");
    infer_ok!(op, "[5];[3]", "[d1_0,5]");
    infer_ok!(op, "[5,0,?];[3]", "[d1_0,0]");
    infer_ok!(op, "?;[?]", "?");
    infer_ok!(op, "[?];[?]", "[d1_0,?]");
    infer_error!(op, "?;[1,1]", "Shape must be rank 1 but is rank 2");
    infer_error!(op, "[2];[]", "Shape must be rank 1 but is rank 0");
}

#[test]
fn unchanged_shape_ops() {
    for name in ["CheckNumerics", "RefIdentity", "GuaranteeConst"] {
        let op = op(name);
        infer_ok!(op, "?", "in0");
        infer_ok!(op, "[]", "in0");
        infer_ok!(op, "[1,2,?,4,5]", "in0");
    }
    let op = op("MatrixBandPart");
    infer_ok!(op, "?;?;?", "in0");
    infer_ok!(op, "[];?;?", "in0");
    infer_ok!(op, "[1,2,?,4,5];[];[]", "in0");
}

#[test]
fn diag_and_diag_part() {
    let op = op("Diag");
    infer_ok!(op, "?", "?");
    infer_ok!(op, "[1,?,3]", "[d0_0,d0_1,d0_2,d0_0,d0_1,d0_2]");
    infer_ok!(op, "[?,1,2,3]", "[d0_0,d0_1,d0_2,d0_3,d0_0,d0_1,d0_2,d0_3]");
    infer_error!(op, "[]", "Shape must be at least rank 1 but is rank 0");
    let op = ShapeTestOp::new("DiagPart");
    infer_ok!(op, "?", "?");
    infer_ok!(op, "[1,?,?,4]", "[d0_0,d0_3]");
    infer_ok!(op, "[?,?]", "[d0_0]");
    infer_ok!(op, "[1,?,3,?,4,3]", "[d0_0,d0_4,d0_2|d0_5]");
    infer_ok!(op, "[1,2,3,?,?,?,?,4]", "[d0_0,d0_1,d0_2,d0_7]");
    infer_error!(
        op,
        "[]",
        "Input must have even and non-zero rank, input rank is 0"
    );
    infer_error!(op, "[?]", "Input must have even and non-zero rank");
    infer_error!(op, "[1,2,3]", "Input must have even and non-zero rank");
    infer_error!(
        op,
        "[1,2,?,10]",
        "Dimensions must be equal, but are 2 and 10"
    );
}

#[test]
fn matrix_diag_ops() {
    let op = op("MatrixDiag");
    infer_ok!(op, "?", "?");
    infer_error!(op, "[]", "Shape must be at least rank 1 but is rank 0");
    infer_ok!(op, "[?]", "[d0_0,d0_0]");
    infer_ok!(op, "[1,?,?,4]", "[d0_0,d0_1,d0_2,d0_3,d0_3]");
    let op = ShapeTestOp::new("MatrixDiagPart");
    infer_ok!(op, "?", "?");
    infer_error!(op, "[?]", "Shape must be at least rank 2 but is rank 1");
    infer_ok!(op, "[?,1,2,2]", "[d0_0,d0_1,d0_2|d0_3]");
    infer_ok!(op, "[?,1,2,3]", "[d0_0,d0_1,d0_2]");
    infer_ok!(op, "[?,1,3,2]", "[d0_0,d0_1,d0_3]");
    infer_ok!(op, "[?,?]", "[?]");
    infer_ok!(op, "[0,?]", "[d0_0]");
}

#[test]
fn matrix_set_diag() {
    let op = op("MatrixSetDiag");
    infer_error!(op, "[1];?", "Shape must be at least rank 2 but is rank 1");
    infer_error!(op, "?;[]", "Shape must be at least rank 1 but is rank 0");
    infer_error!(
        op,
        "[2,2];[]",
        "Shape must be at least rank 1 but is rank 0"
    );
    infer_error!(op, "[2,2];[2,2]", "Shape must be rank 1 but is rank 2");
    infer_error!(op, "[2,3];[3]", "Dimensions must be equal, but are 2 and 3");
    infer_ok!(op, "?;?", "in0");
    infer_ok!(op, "[1,2,2];[1,2]", "in0");
    infer_ok!(op, "[1,2,3];?", "in0");
    infer_ok!(op, "[1,3,2];?", "in0");
    infer_ok!(op, "[1,?,2];[?,?]", "in0");
    infer_ok!(op, "[1,?,?];[?,2]", "in0");
    infer_ok!(op, "?;[1,2]", "[d1_0,?,?]");
    infer_ok!(op, "[?,?,3];[1,2]", "[d1_0,d0_1,d0_2]");
    infer_ok!(op, "[?,3,?];[1,2]", "[d1_0,d0_1,d0_2]");
    infer_ok!(op, "[?,3,2];[1,2]", "[d1_0,d0_1,d0_2]");
    infer_error!(
        op,
        "[2,?,3];[4,3]",
        "Dimension 0 in both shapes must be equal, but are 2 and 4"
    );
}

#[test]
fn gather_and_gather_nd() {
    let op = op("Gather");
    infer_ok!(op, "?;?", "?");
    infer_ok!(op, "[1,?,2];[3]", "[d1_0,d0_1,d0_2]");
    infer_ok!(op, "[5];[?,2]", "[d1_0,d1_1]");
    infer_ok!(op, "?;[3]", "?");
    infer_error!(
        op,
        "[];[1,2,3]",
        "Shape must be at least rank 1 but is rank 0"
    );
    let op = ShapeTestOp::new("GatherNd");
    infer_ok!(op, "?;?", "?");
    infer_ok!(op, "[1,?,3,?];[?,0]", "[d1_0,d0_0,d0_1,d0_2,d0_3]");
    infer_ok!(op, "[1,?,3,?];[?,4]", "[d1_0]");
    infer_ok!(op, "[1,?,3,?];[2,?]", "?");
    infer_ok!(op, "?;[2,1]", "?");
    infer_error!(
        op,
        "[1,2,3];[4]",
        "indices.shape[-1] must be <= params.rank, but saw indices shape: [4] and params shape: [1,2,3]"
    );
    infer_error!(op, "[1];[]", "Shape must be at least rank 1 but is rank 0");
}

#[test]
fn unique_ops() {
    let op = op("Unique");
    infer_ok!(op, "?", "[?];in0");
    infer_ok!(op, "[5]", "[?];in0");
    infer_error!(op, "[1,2,3,?,5]", "Shape must be rank 1 but is rank 5");
    let op = ShapeTestOp::new("UniqueWithCounts");
    infer_ok!(op, "?", "[?];in0;[?]");
    infer_ok!(op, "[1,2,3,?,5]", "[?];in0;[?]");
}

#[test]
fn mirror_pad() {
    let op = op("MirrorPad");
    infer_ok!(op, "?;?", "?");
    infer_error!(op, "?;[1,2,3]", "Shape must be rank 2 but is rank 3");
    infer_error!(op, "?;[1,4]", "Dimension must be 2 but is 4");
    infer_error!(op, "[1,2,3];[4,2]", "Shape must be rank 4 but is rank 3");
    infer_error!(op, "[1,2,3];[2,2]", "Shape must be rank 2 but is rank 3");
    infer_ok!(op, "[1,2,3];?", "[?,?,?]");
    infer_ok!(op, "?;[3,2]", "[?,?,?]");
    let pads = i64s(&[3, 2], vec![1, 10, 2, 20, 3, 30]);
    let op = ShapeTestOp::new("MirrorPad").input_tensor(1, pads);
    infer_ok!(op, "[100,200,300];[3,2]", "[111,222,333]");
    infer_ok!(op, "[100,?,300];[3,2]", "[111,?,333]");
    infer_ok!(op, "?;[3,2]", "[?,?,?]");
    infer_ok!(op, "?;?", "[?,?,?]");
    infer_error!(op, "[1,2];?", "Shape must be rank 3 but is rank 2");
    let zero = i32s(&[2, 2], vec![0, 0, 1, 0]);
    let op = ShapeTestOp::new("MirrorPad").input_tensor(1, zero);
    infer_ok!(op, "[4,5];[2,2]", "[d0_0,6]");
    let neg = i32s(&[1, 2], vec![-1, 0]);
    let op = ShapeTestOp::new("MirrorPad").input_tensor(1, neg);
    infer_error!(op, "[4];[1,2]", "Paddings must be non-negative");
    let bad = i32s(&[2], vec![1, 1]);
    let op = ShapeTestOp::new("MirrorPad").input_tensor(1, bad);
    infer_error!(op, "[4];?", "paddings must be a matrix with 2 columns");
}

#[test]
fn mirror_pad_grad() {
    let op = op("MirrorPadGrad");
    infer_ok!(op, "?;?", "?");
    infer_ok!(op, "?;[?,4]", "?");
    infer_error!(op, "[?,?];[3,2]", "must be rank 3 but is rank 2");
    infer_error!(
        op,
        "[?,?,?];[3,3]",
        "Dimension 1 in both shapes must be equal, but are 3 and 2"
    );
    infer_ok!(op, "[?,?,?];[3,2]", "[?,?,?]");
    let pads = i64s(&[3, 2], vec![1, 10, 2, 20, 3, 30]);
    let op = ShapeTestOp::new("MirrorPadGrad").input_tensor(1, pads);
    infer_ok!(op, "[111,222,333];[3,2]", "[100,200,300]");
    infer_ok!(op, "[111,?,333];[3,2]", "[100,?,300]");
    infer_error!(
        op,
        "[10,222,333];[3,2]",
        "Negative dimension size caused by subtracting 11 from 10"
    );
    let zero = i32s(&[1, 2], vec![0, 0]);
    let op = ShapeTestOp::new("MirrorPadGrad").input_tensor(1, zero);
    infer_ok!(op, "[7];[1,2]", "[d0_0]");
    let neg = i32s(&[1, 2], vec![0, -3]);
    let op = ShapeTestOp::new("MirrorPadGrad").input_tensor(1, neg);
    infer_error!(op, "[7];[1,2]", "Paddings must be non-negative");
}

#[test]
fn explicit_shape_ops() {
    let op = op("ImmutableConst")
        .attr("dtype", DataType::Float)
        .attr("shape", shape(&[1, 2, 3]))
        .attr("memory_region_name", "test_region");
    infer_ok!(op, "", "[1,2,3]");
    let op = ShapeTestOp::new("ImmutableConst")
        .attr("dtype", DataType::Float)
        .attr("shape", shape(&[]))
        .attr("memory_region_name", "test_region");
    infer_ok!(op, "", "[]");
    let op = ShapeTestOp::new("ImmutableConst")
        .attr("dtype", DataType::Float)
        .attr("shape", "invalid")
        .attr("memory_region_name", "test_region");
    infer_error!(
        op,
        "",
        "AttrValue had value with type 'string' when 'shape' expected"
    );
    let unknown = TensorShapeProto {
        unknown_rank: true,
        ..Default::default()
    };
    let op = ShapeTestOp::new("_ParallelConcatStart")
        .attr("dtype", DataType::Float)
        .attr("shape", unknown);
    infer_ok!(op, "", "?");
    let op = ShapeTestOp::new("_ParallelConcatStart")
        .attr("dtype", DataType::Float)
        .attr("shape", shape(&[1, 2, 3]));
    infer_ok!(op, "", "[1,2,3]");
    infer_error!(
        ShapeTestOp::new("_ParallelConcatStart"),
        "",
        "No attr named 'shape' in NodeDef"
    );
}

fn concat(n: i64) -> ShapeTestOp {
    op("Concat").attr("N", n).attr("T", DataType::Float)
}

#[test]
fn concat_unknown_axis() {
    infer_error!(concat(2), "[1];?;?", "Shape must be rank 0 but is rank 1");
    infer_ok!(concat(7), "?;?;?;?;[1,2,3];?;[3,2,1];?", "[?,?,?]");
    infer_ok!(concat(4), "?;?;?;[1,2,3,4];[4,3,2,1]", "[?,?,?,?]");
    infer_ok!(concat(4), "?;?;?;?;?", "?");
    infer_error!(
        concat(4),
        "?;?;?;[];[]",
        "Can't concatenate scalars (use tf.stack instead)"
    );
    infer_error!(
        concat(4),
        "?;?;?;[1,2];[1,2,3]",
        "Shape must be rank 2 but is rank 3"
    );
}

#[test]
fn concat_known_axis() {
    for axis in [0, -3] {
        let op = concat(2).input_tensor(0, Tensor::scalar(axis));
        infer_ok!(op, "[];[100,2,?];[10,?,3]", "[110,d1_1,d2_2]");
        infer_error!(
            op,
            "[];[100,2,5];[10,?,3]",
            "Dimension 1 in both shapes must be equal, but are 5 and 3"
        );
        infer_ok!(op, "[];[100,2,?];[?,?,3]", "[?,d1_1,d2_2]");
        infer_ok!(op, "[];[?,2,?];[10,?,3]", "[?,d1_1,d2_2]");
    }
    let op = concat(2).input_tensor(0, Tensor::scalar(1i32));
    infer_ok!(op, "[];[1,100,?];[?,10,3]", "[d1_0,110,d2_2]");
    infer_ok!(op, "[];[1,100];[?,10]", "[d1_0,110]");
    infer_ok!(op, "[];[?,100];[1,10]", "[d2_0,110]");
    infer_error!(
        op,
        "[];[100];[10,?]",
        "Shape must be at least rank 2 but is rank 1"
    );
    let op = concat(5).input_tensor(0, Tensor::scalar(1i32));
    infer_ok!(op, "[];?;[1,100,?];[?,?,?];[?,10,3];?", "[d2_0,?,d4_2]");
    let op = concat(2).input_tensor(0, Tensor::scalar(-1i32));
    infer_ok!(op, "[];[?,100];[1,10]", "[d2_0,110]");
    infer_error!(op, "", "Concat expects at least 1 inputs, got 0");
}

#[test]
fn concat_offset() {
    let op = op("ConcatOffset")
        .attr("N", 4i64)
        .attr("shape_type", DataType::Int32);
    infer_ok!(op, "?;?;?;?;?", "in1;in2;in3;in4");
    infer_ok!(op, "[];[3];[3];[3];[3]", "in1;in2;in3;in4");
}

#[test]
fn bitcast() {
    let cast = |from: DataType, to: DataType| op("Bitcast").attr("T", from).attr("type", to);
    use DataType::*;
    infer_ok!(cast(Float, Int32), "?", "?");
    infer_ok!(cast(Float, Int32), "[1,2]", "in0");
    infer_ok!(cast(Int32, Int64), "[1,2]", "[d0_0]");
    infer_ok!(cast(Int32, Int64), "[1,?]", "[d0_0]");
    infer_error!(
        cast(Int32, Int64),
        "[1,4]",
        "Cannot bitcast from 3 to 9 due to shape. 4 does not match 2"
    );
    infer_error!(cast(Int32, Int64), "[1,3]", "does not match");
    infer_error!(
        cast(Int32, Int64),
        "[]",
        "Shape must be at least rank 1 but is rank 0"
    );
    infer_ok!(cast(Int64, Int32), "[4,5]", "[d0_0,d0_1,2]");
    infer_ok!(cast(Complex128, Int32), "[4,5]", "[d0_0,d0_1,4]");
    infer_ok!(cast(Complex128, Half), "[4,5]", "[d0_0,d0_1,8]");
    infer_ok!(cast(Complex128, Int8), "[4,5]", "[d0_0,d0_1,16]");
    infer_ok!(cast(QUInt8, QInt16), "[?,2]", "[d0_0]");
    infer_error!(
        cast(String, Int32),
        "[1,2,3]",
        "Cannot bitcast type 7 to 3 because one of the type sizes is zero"
    );
    infer_error!(
        cast(Int32, String),
        "[1,2,3]",
        "one of the type sizes is zero"
    );
    infer_error!(op("Bitcast"), "[1]", "No attr named 'T' in NodeDef");
}

fn reverse_sequence(seq_dim: i64, batch_dim: i64) -> ShapeTestOp {
    op("ReverseSequence")
        .attr("T", DataType::Float)
        .attr("Tlen", DataType::Int64)
        .attr("seq_dim", seq_dim)
        .attr("batch_dim", batch_dim)
}

#[test]
fn reverse_sequence_shapes() {
    let op = reverse_sequence(1, 2);
    infer_ok!(op, "?;[10]", "?");
    infer_error!(op, "?;[10,10]", "Shape must be rank 1 but is rank 2");
    infer_ok!(op, "[1,2,3];[3]", "[d0_0,d0_1,d0_2]");
    infer_ok!(op, "[1,2,?];[3]", "[d0_0,d0_1,d1_0]");
    infer_ok!(op, "[1,2,3];[?]", "[d0_0,d0_1,d0_2]");
    infer_error!(
        op,
        "[1,2,3];[4]",
        "Dimensions must be equal, but are 3 and 4"
    );
    infer_error!(
        reverse_sequence(1, 4),
        "[1,2,3];[3]",
        "batch_dim must be < input rank: 4 vs. 3"
    );
    infer_error!(
        reverse_sequence(4, 1),
        "[1,2,3];[3]",
        "seq_dim must be < input rank: 4 vs. 3"
    );
    infer_error!(
        reverse_sequence(1, -1),
        "[1,2,3];[3]",
        "batch_dim must be >=0, got -1"
    );
    infer_error!(
        ShapeTestOp::new("ReverseSequence"),
        "[1,2,3];[3]",
        "No attr named 'seq_dim' in NodeDef"
    );
}

#[test]
fn edit_distance() {
    let op = op("EditDistance");
    infer_ok!(op, "[?,?];[?];[4];[?,?];[?];[4]", "?");
    infer_ok!(op, "?;?;?;?;?;?", "?");
    infer_error!(
        op,
        "[5,?];[4];[?];[?,?];[?];[?]",
        "Number of elements in index (5) and values (4) do not match."
    );
    infer_error!(
        op,
        "[?,?];[?];[?];[?,3];[?];[4]",
        "Index rank (3) and shape rank (4) do not match."
    );
    infer_error!(
        op,
        "[?];[?];[?];[?,?];[?];[?]",
        "Shape must be rank 2 but is rank 1"
    );
    let with = |h: Tensor, tr: Tensor| {
        ShapeTestOp::new("EditDistance")
            .input_tensor(2, h)
            .input_tensor(5, tr)
    };
    let op = with(
        i64s(&[4], vec![2, 30, 4, 50]),
        i64s(&[4], vec![20, 3, 40, 5]),
    );
    infer_ok!(op, "[?,?];[?];[4];[?,?];[?];[4]", "[20,30,40]");
    let op = with(i64s(&[1], vec![2]), i64s(&[4], vec![20, 3, 40, 5]));
    infer_error!(
        op,
        "[?,?];[?];[1];[?,?];[?];[4]",
        "Num elements of hypothesis_shape does not match truth_shape: 1 vs. 4"
    );
    let op = with(i64s(&[0], vec![]), i64s(&[0], vec![]));
    infer_error!(op, "[?,?];[?];[0];[?,?];[?];[0]", "at least one element");
    let op = with(i64s(&[1], vec![7]), i64s(&[1], vec![3]));
    infer_ok!(op, "[?,?];[?];[1];[?,?];[?];[1]", "[]");
}

fn patches(ksizes: Vec<i64>, rates: Vec<i64>, strides: Vec<i64>, padding: &str) -> ShapeTestOp {
    op("ExtractImagePatches")
        .attr("T", DataType::Float)
        .attr("ksizes", ksizes)
        .attr("rates", rates)
        .attr("strides", strides)
        .attr("padding", padding)
}

#[test]
fn extract_image_patches() {
    let one = vec![1i64, 1, 1, 1];
    let op = patches(vec![1, 2, 2, 1], vec![1, 2, 2, 1], one.clone(), "VALID");
    infer_ok!(op, "[1,7,7,2]", "[d0_0,5,5,8]");
    infer_ok!(op, "[1,?,7,2]", "[d0_0,?,?,8]");
    infer_ok!(op, "?", "[?,?,?,?]");
    infer_error!(op, "[1,7,7]", "Shape must be rank 4 but is rank 3");
    let op = patches(one.clone(), vec![1, 2, 2, 1], one.clone(), "VALID");
    infer_ok!(op, "[1,7,7,2]", "[d0_0,7,7,d0_3]");
    let op = patches(vec![1, 3, 3, 1], one.clone(), vec![1, 2, 2, 1], "SAME");
    infer_ok!(op, "[2,7,8,1]", "[d0_0,4,4,9]");
    let op = patches(vec![1, 9, 9, 1], one.clone(), one.clone(), "VALID");
    infer_error!(
        op,
        "[1,7,7,2]",
        "Computed output size would be negative: -1 [input_size: 7, effective_filter_size: 9, stride: 1]"
    );
    let op = patches(vec![1, 2, 2, 1, 1], vec![1, 2, 2, 1], one.clone(), "VALID");
    infer_error!(
        op,
        "[1,7,7,2]",
        "ExtractImagePatches requires the ksizes attribute to contain 4 values, but got: 5"
    );
    let op = patches(one.clone(), one.clone(), vec![1, 1, 1], "VALID");
    infer_error!(
        op,
        "[1,7,7,2]",
        "ExtractImagePatches requires the stride attribute to contain 4 values, but got: 3"
    );
    let op = patches(one.clone(), one.clone(), vec![1, 0, 1, 1], "VALID");
    infer_error!(op, "[1,7,7,2]", "Stride must be > 0, but got 0");
    // Fuzz finding (shape_inference): a ksize or rate of i64::MIN
    // overflowed `ksize - 1` (a panic in debug builds).
    let op = patches(
        vec![1, i64::MIN, 2, 1],
        vec![1, 2, 2, 1],
        one.clone(),
        "VALID",
    );
    infer_error!(op, "[1,7,7,2]", "ExtractImagePatches sizes overflow");
    let op = patches(
        vec![1, 2, 2, 1],
        vec![1, i64::MIN, 2, 1],
        one.clone(),
        "VALID",
    );
    infer_error!(op, "[1,7,7,2]", "ExtractImagePatches sizes overflow");
}

fn s2b(block: i64) -> ShapeTestOp {
    op("SpaceToBatch")
        .attr("T", DataType::Float)
        .attr("Tpaddings", DataType::Int32)
        .attr("block_size", block)
}

#[test]
fn space_to_batch() {
    infer_ok!(s2b(2), "[1,10,10,3];[2,2]", "[4,?,?,d0_3]");
    infer_ok!(s2b(2), "[1,10,10,3];?", "[4,?,?,d0_3]");
    infer_ok!(s2b(2), "?;?", "[?,?,?,?]");
    infer_error!(
        s2b(2),
        "[1,10,10,3];[4]",
        "Shapes must be equal rank, but are 1 and 2"
    );
    infer_error!(
        s2b(2),
        "[1,10,10,3];[2,3]",
        "Dimension 1 in both shapes must be equal, but are 3 and 2"
    );
    infer_error!(
        s2b(2),
        "[1,10,10];[2,2]",
        "Shape must be rank 4 but is rank 3"
    );
    let op = s2b(2).input_tensor(1, i32s(&[2, 2], vec![4, 2, 2, 4]));
    infer_ok!(op, "[1,10,10,3];[2,2]", "[4,8,8,d0_3]");
    let op = s2b(2).input_tensor(1, i64s(&[2, 2], vec![4, 2, 2, 4]));
    infer_ok!(op, "[1,10,10,3];[2,2]", "[4,8,8,d0_3]");
    let op = s2b(2).input_tensor(1, i32s(&[2, 2], vec![1, 2, 3, 4]));
    infer_error!(
        op,
        "[1,10,10,3];[2,2]",
        "Dimension size must be evenly divisible by 2 but is 13"
    );
    let op = s2b(2).input_tensor(1, i32s(&[2, 2], vec![1, -2, 3, 4]));
    infer_error!(op, "[1,10,10,3];[2,2]", "paddings cannot be negative");
    let op = s2b(2).input_tensor(1, i32s(&[1, 2], vec![0, 0]));
    infer_error!(
        op,
        "[1,10,10,3];[2,2]",
        "paddings must have at least 4 elements"
    );
}

fn nd(name: &str) -> ShapeTestOp {
    op(name).attr("T", DataType::Float)
}

#[test]
fn space_to_batch_nd() {
    let op = nd("SpaceToBatchND");
    infer_ok!(op, "?;[2];?", "?");
    infer_ok!(op, "[?,?,?,?];[2];?", "[?,?,?,d0_3]");
    infer_ok!(op, "[?,?,?,2];[2];?", "[?,?,?,d0_3]");
    infer_ok!(op, "[5,2];[0];?", "[d0_0,d0_1]");
    infer_error!(op, "?;[1,1];?", "block_shape must have rank 1.");
    infer_error!(op, "?;?;?", "block_shape must have rank 1.");
    infer_error!(op, "?;[?];?", "block_shape must have known size.");
    infer_error!(op, "[1,3,3,1];[2];[1]", "Shapes must be equal rank");
    infer_error!(op, "[1,3,3,1];[2];[1,2]", "both shapes must be equal");
    infer_error!(
        op,
        "[1,3];[2];?",
        "Shape must be at least rank 3 but is rank 2"
    );
    let block = i32s(&[2], vec![2, 3]);
    let op = nd("SpaceToBatchND").input_tensor(1, block.clone());
    infer_ok!(op, "[3,?,?,2];[2];?", "[18,?,?,d0_3]");
    infer_ok!(op, "[?,?,?,2];[2];?", "[?,?,?,d0_3]");
    let op = nd("SpaceToBatchND")
        .input_tensor(1, block.clone())
        .input_tensor(2, i32s(&[2, 2], vec![1, 1, 0, 1]));
    infer_ok!(op, "[3,?,2,2];[2];[2,2]", "[18,?,1,d0_3]");
    let op = nd("SpaceToBatchND")
        .input_tensor(1, block)
        .input_tensor(2, i32s(&[2, 2], vec![1, 1, 0, 0]));
    infer_ok!(op, "[3,2,3,2];[2];[2,2]", "[18,2,1,d0_3]");
    let op = nd("SpaceToBatchND").input_tensor(1, i32s(&[2], vec![0, 2]));
    infer_error!(op, "[1,2,2];[2];[2,2]", "block_shape must be positive");
    let op = nd("SpaceToBatchND")
        .input_tensor(1, i32s(&[2], vec![1, 1]))
        .input_tensor(2, i32s(&[2, 2], vec![0, -1, 0, 0]));
    infer_error!(op, "[1,2,2];[2];[2,2]", "paddings cannot be negative");
    let op = nd("SpaceToBatchND")
        .input_tensor(1, i32s(&[2], vec![3, 3]))
        .input_tensor(2, i32s(&[2, 2], vec![0, 0, 0, 0]));
    infer_error!(
        op,
        "[1,2,3,1];[2];[2,2]",
        "Dimension size must be evenly divisible by 3 but is 2"
    );
    let op = nd("SpaceToBatchND")
        .input_tensor(1, i32s(&[1], vec![2]))
        .input_tensor(2, i32s(&[2, 2], vec![0, 0, 0, 0]));
    infer_error!(
        op,
        "[1,2,4,1];[2];[2,2]",
        "block_shape must have at least 2 elements"
    );
}

fn b2s(block: i64) -> ShapeTestOp {
    op("BatchToSpace")
        .attr("T", DataType::Float)
        .attr("Tidx", DataType::Int32)
        .attr("block_size", block)
}

#[test]
fn batch_to_space() {
    infer_ok!(b2s(2), "[4,8,8,3];[2,2]", "[1,?,?,d0_3]");
    infer_error!(
        b2s(2),
        "[5,8,8,3];[2,2]",
        "Dimension size must be evenly divisible by 2 but is 5"
    );
    infer_ok!(b2s(2), "[4,8,8,3];?", "[1,?,?,d0_3]");
    infer_ok!(b2s(2), "?;?", "[?,?,?,?]");
    infer_error!(
        b2s(2),
        "[4,8,8,3];[4]",
        "Shapes must be equal rank, but are 1 and 2"
    );
    infer_error!(
        b2s(2),
        "[4,8,8,3];[2,3]",
        "Dimension 1 in both shapes must be equal, but are 3 and 2"
    );
    let op = b2s(2).input_tensor(1, i64s(&[2, 2], vec![4, 2, 2, 4]));
    infer_ok!(op, "[4,8,8,3];[2,2]", "[1,10,10,d0_3]");
    let op = b2s(2).input_tensor(1, i32s(&[2, 2], vec![100, 2, 3, 4]));
    infer_error!(
        op,
        "[4,8,8,3];[2,2]",
        "Negative dimension size caused by subtracting 100 from 16"
    );
    let op = b2s(2).input_tensor(1, i32s(&[2, 2], vec![1, 2, 3, 400]));
    infer_error!(
        op,
        "[4,8,8,3];[2,2]",
        "Negative dimension size caused by subtracting 400 from 13"
    );
    let op = b2s(2).input_tensor(1, i32s(&[2, 2], vec![1, -2, 3, 4]));
    infer_error!(op, "[4,8,8,3];[2,2]", "crops cannot be negative");
}

#[test]
fn batch_to_space_nd() {
    let op = nd("BatchToSpaceND");
    infer_ok!(op, "?;[2];?", "?");
    infer_ok!(op, "[?,?,?,?];[2];?", "[?,?,?,d0_3]");
    infer_error!(op, "?;[1,1];?", "block_shape must have rank 1.");
    infer_error!(op, "?;[?];?", "block_shape must have known size.");
    infer_error!(
        op,
        "[2,2];[2];[2,2]",
        "Shape must be at least rank 3 but is rank 2"
    );
    infer_error!(
        op,
        "[2,2,3];[3];[3,2]",
        "Shape must be at least rank 4 but is rank 3"
    );
    let block = i32s(&[2], vec![2, 3]);
    let op = nd("BatchToSpaceND").input_tensor(1, block.clone());
    infer_ok!(op, "[?,?,?,2];[2];?", "[?,?,?,d0_3]");
    infer_ok!(op, "[18,?,?,2];[2];?", "[3,?,?,d0_3]");
    infer_error!(
        op,
        "[3,1,1,1];[2];[2,2]",
        "Dimension size must be evenly divisible by 2 but is 3"
    );
    let op = nd("BatchToSpaceND")
        .input_tensor(1, block.clone())
        .input_tensor(2, i32s(&[2, 2], vec![1, 1, 0, 1]));
    infer_ok!(op, "[18,?,2,2];[2];[2,2]", "[3,?,5,d0_3]");
    let op = nd("BatchToSpaceND")
        .input_tensor(1, block)
        .input_tensor(2, i32s(&[2, 2], vec![1, 1, 0, 0]));
    infer_ok!(op, "[18,2,1,2];[2];[2,2]", "[3,2,3,d0_3]");
    let op = nd("BatchToSpaceND").input_tensor(1, i32s(&[2], vec![0, 2]));
    infer_error!(op, "[1,2,2];[2];[2,2]", "block_shape must be positive");
    let op = nd("BatchToSpaceND")
        .input_tensor(1, i32s(&[2], vec![1, 1]))
        .input_tensor(2, i32s(&[2, 2], vec![0, -1, 0, 0]));
    infer_error!(op, "[1,2,2];[2];[2,2]", "crops cannot be negative");
    let op = nd("BatchToSpaceND")
        .input_tensor(1, i32s(&[2], vec![2, 2]))
        .input_tensor(2, i32s(&[2, 2], vec![3, 2, 0, 0]));
    infer_error!(
        op,
        "[4,2,3,1];[2];[2,2]",
        "Negative dimension size caused by subtracting 2 from 1"
    );
}

fn depth_op(name: &str, block: i64, format: &str) -> ShapeTestOp {
    op(name)
        .attr("T", DataType::Float)
        .attr("block_size", block)
        .attr("data_format", format)
}

#[test]
fn space_to_depth() {
    let op = depth_op("SpaceToDepth", 2, "NHWC");
    infer_ok!(op, "[1,2,4,4]", "[d0_0,1,2,16]");
    infer_error!(
        op,
        "[1,3,8,4]",
        "Dimension size must be evenly divisible by 2 but is 3"
    );
    infer_error!(
        op,
        "[1,2,5,4]",
        "Dimension size must be evenly divisible by 2 but is 5"
    );
    infer_ok!(op, "[1,2,4,?]", "[d0_0,1,2,?]");
    infer_ok!(op, "?", "[?,?,?,?]");
    infer_error!(op, "[1,2,4]", "Shape must be rank 4 but is rank 3");
    let op = depth_op("SpaceToDepth", 2, "NCHW");
    infer_ok!(op, "[1,4,2,4]", "[d0_0,16,1,2]");
    let op = depth_op("SpaceToDepth", 2, "NCHW_VECT_C");
    infer_ok!(op, "[1,4,2,4,4]", "[d0_0,16,1,2,4]");
    infer_error!(
        ShapeTestOp::new("SpaceToDepth"),
        "[1,2,4,4]",
        "No attr named 'data_format' in NodeDef"
    );
}

#[test]
fn depth_to_space() {
    let op = depth_op("DepthToSpace", 2, "NHWC");
    infer_ok!(op, "[1,1,2,16]", "[d0_0,2,4,4]");
    infer_error!(
        op,
        "[1,1,2,15]",
        "Dimension size must be evenly divisible by 4 but is 15"
    );
    infer_ok!(op, "[1,2,4,?]", "[d0_0,4,8,?]");
    let op = depth_op("DepthToSpace", 10, "NHWC");
    infer_ok!(op, "[1,1,2,200]", "[d0_0,10,20,2]");
    let op = depth_op("DepthToSpace", 2, "NCHW");
    infer_ok!(op, "[1,16,1,2]", "[d0_0,4,2,4]");
    infer_ok!(op, "[?,?,?,?]", "[d0_0,?,?,?]");
}

#[test]
fn strided_slice_grad() {
    let op = op("StridedSliceGrad");
    infer_ok!(op, "?;?;?;?;?", "?");
    infer_ok!(op, "[?];?;?;?;?", "?");
    infer_ok!(op, "[4];?;?;?;?", "[?,?,?,?]");
    infer_error!(op, "[4,1];?;?;?;?", "Shape must be rank 1 but is rank 2");
    let op = ShapeTestOp::new("StridedSliceGrad").input_tensor(0, i32s(&[4], vec![1, 2, 3, 4]));
    infer_ok!(op, "[4];?;?;?;?", "[1,2,3,4]");
    let op = ShapeTestOp::new("StridedSliceGrad").input_tensor(0, i64s(&[2], vec![-1, 5]));
    infer_ok!(op, "[2];?;?;?;?", "[?,5]");
}
