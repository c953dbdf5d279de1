//! Shape-function tests of `StridedSlice`.

use super::*;
use opforge_testing::shape::ShapeTestOp;
use opforge_testing::{infer_error, infer_ok};

fn ints(v: &[i32]) -> Tensor {
    Tensor::from_vec(&[v.len() as i64], v.to_vec()).unwrap()
}

/// A `StridedSlice` node with these masks (begin, end, ellipsis,
/// new_axis, shrink_axis) and constant `strides`.
fn ss(masks: [i64; 5], strides: &[i32]) -> ShapeTestOp {
    ShapeTestOp::new("StridedSlice")
        .attr("begin_mask", masks[0])
        .attr("end_mask", masks[1])
        .attr("ellipsis_mask", masks[2])
        .attr("new_axis_mask", masks[3])
        .attr("shrink_axis_mask", masks[4])
        .input_tensor(3, ints(strides))
}

fn ss_const(masks: [i64; 5], begin: &[i32], end: &[i32], strides: &[i32]) -> ShapeTestOp {
    ss(masks, strides)
        .input_tensor(1, ints(begin))
        .input_tensor(2, ints(end))
}

#[test]
fn unknown_without_strides_rank_or_spec_length() {
    let no_strides = ShapeTestOp::new("StridedSlice");
    infer_ok!(no_strides, "[2,3];[1];[1];[1]", "?");
    infer_ok!(ss([0; 5], &[1]), "?;[1];[1];[1]", "?");
    infer_ok!(ss([0; 5], &[1]), "[2,3];[?];[?];[?]", "?");
    infer_error!(
        no_strides,
        "[2,3];[2];[3];[?]",
        "Dimension 0 in both shapes must be equal, but are 2 and 3"
    );
    infer_error!(
        no_strides,
        "[2,3];[2,1];[2];[2]",
        "Shape must be rank 1 but is rank 2"
    );
    // The masks are read only once the slice can be worked out.
    infer_error!(
        ShapeTestOp::new("StridedSlice").input_tensor(3, ints(&[1])),
        "[2,3];[1];[1];[1]",
        "No attr named 'begin_mask'"
    );
}

#[test]
fn unknown_begin_and_end() {
    // x[b:e] with b and e unknown: dim 0 unknown, the rest kept.
    infer_ok!(ss([0; 5], &[1]), "[2,3];[1];[1];[1]", "[?,3]");
    // x[b] (shrink): the dim goes away.
    infer_ok!(
        ss([0, 0, 0, 0, 1], &[1]),
        "[2,3,4,5];[1];[1];[1]",
        "[3,4,5]"
    );
    infer_ok!(
        ss([0, 0, 0, 0, 1], &[1]),
        "[2,0,3,4];[1];[1];[1]",
        "[0,3,4]"
    );
    // x[:, :, ::2] with every begin and end masked: sizes known.
    infer_ok!(
        ss([7, 7, 0, 0, 0], &[1, 1, 2]),
        "[10,?,5];[3];[3];[3]",
        "[10,?,3]"
    );
    infer_ok!(
        ss([7, 7, 0, 0, 0], &[1, 1, -2]),
        "[10,?,5];[3];[3];[3]",
        "[10,?,3]"
    );
}

#[test]
fn constant_spec_on_partially_known_input() {
    // x[2:8, :, ::-1]
    infer_ok!(
        ss_const([6, 6, 0, 0, 0], &[2, 0, 0], &[8, 0, 0], &[1, 1, -1]),
        "[10,?,4];[3];[3];[3]",
        "[6,?,4]"
    );
    // x[-3:], x[:100], x[5:2]
    infer_ok!(
        ss_const([0; 5], &[-3], &[100], &[1]),
        "[10,2];[1];[1];[1]",
        "[3,2]"
    );
    infer_ok!(
        ss_const([1, 0, 0, 0, 0], &[0], &[100], &[1]),
        "[10];[1];[1];[1]",
        "[10]"
    );
    infer_ok!(
        ss_const([0; 5], &[5], &[2], &[1]),
        "[10];[1];[1];[1]",
        "[0]"
    );
    infer_ok!(
        ss_const([0; 5], &[1], &[8], &[3]),
        "[10];[1];[1];[1]",
        "[3]"
    );
    // x[tf.newaxis, ..., 1]
    infer_ok!(
        ss_const([0, 0, 2, 1, 4], &[0, 0, 1], &[0, 0, 2], &[1, 1, 1]),
        "[?,3,4];[3];[3];[3]",
        "[1,?,3]"
    );
    // x[0] on an unknown dim: shrunk without a bounds check.
    infer_ok!(
        ss_const([0, 0, 0, 0, 1], &[7], &[8], &[1]),
        "[?,3];[1];[1];[1]",
        "[3]"
    );
    // x[..., 1:5] with an ellipsis first.
    infer_ok!(
        ss_const([0, 0, 1, 0, 0], &[0, 1], &[0, 5], &[1, 1]),
        "[2,?,6];[2];[2];[2]",
        "[2,?,4]"
    );
}

#[test]
fn invalid_specs() {
    infer_error!(
        ss_const([0; 5], &[0], &[1], &[0]),
        "[10];[1];[1];[1]",
        "strides[0] must be non-zero"
    );
    infer_error!(
        ss_const([0, 0, 3, 0, 0], &[0, 0], &[1, 1], &[1, 1]),
        "[10];[2];[2];[2]",
        "Multiple ellipses in slice spec not allowed"
    );
    infer_error!(
        ss_const([0, 0, 0, 0, 1], &[5], &[6], &[1]),
        "[2,3];[1];[1];[1]",
        "slice index 5 of dimension 0 out of bounds."
    );
    infer_error!(
        ss_const([0, 0, 0, 0, 1], &[0], &[1], &[-1]),
        "[2,3];[1];[1];[1]",
        "only stride 1 allowed on non-range indexing."
    );
    infer_error!(
        ss_const([0; 5], &[0, 0], &[1, 1], &[1, 1]),
        "[2];[2];[2];[2]",
        "Index out of range using input dim 1; input has only 1 dims"
    );
    infer_error!(
        ss([0; 5], &[1, 1]).input_tensor(1, ints(&[0, 0, 0])),
        "[5,5];[?];[?];[2]",
        "Expected begin, end, and strides to be 1D equal size tensors, but got shape [2] for strides."
    );
    infer_error!(
        ss_const([0; 5], &[0, 0, 0], &[1, 1], &[1, 1]),
        "[5,5];[?];[?];[2]",
        "but got shapes [3], [2], and [2] instead."
    );
}

#[test]
fn partial_validation_matches_the_kernel_on_known_shapes() {
    let masks = StridedSliceMasks {
        begin: 1,
        end: 0,
        ellipsis: 0,
        new_axis: 0,
        shrink_axis: 2,
    };
    let (b, e, s) = (ints(&[0, 1]), ints(&[3, 2]), ints(&[2, 1]));
    let full = validate_strided_slice(&[5, 4], &b, &e, &s, &masks).unwrap();
    let partial = validate_strided_slice_partial(&[5, 4], Some(&b), Some(&e), &s, &masks).unwrap();
    assert_eq!(full, partial);
    assert_eq!(full.final_shape, vec![2]);
    let unknown = validate_strided_slice_partial(&[-1, 4], None, None, &s, &masks).unwrap();
    assert_eq!(unknown.processing_shape, vec![-1, 1]);
    assert_eq!(unknown.final_shape, vec![-1]);
}
