//! TensorFlow's common shape functions (opforge-core `shape_inference::common`),
//! checked with the `INFER_OK`-style grammar.

use opforge_core::attrs::{AttrMap, IntoAttrValue};
use opforge_core::proto::OpDef;
use opforge_core::shape_inference::common::*;
use opforge_core::shape_inference::InferenceContext;
use opforge_core::Result;
use opforge_core::Tensor;
use opforge_testing::shape::{check_outputs, parse_shapes};

fn run(
    f: fn(&mut InferenceContext) -> Result<()>,
    ins: &str,
    attrs: &[(&str, bool)],
    t1: Option<Tensor>,
) -> Result<InferenceContext> {
    let attrs: AttrMap = attrs
        .iter()
        .map(|(k, v)| (k.to_string(), v.into_attr_value()))
        .collect();
    let mut c = InferenceContext::new(
        &OpDef::default(),
        "n",
        &attrs,
        &parse_shapes(ins).unwrap(),
        1,
    );
    if let Some(t) = t1 {
        c.set_input_tensor(1, t);
    }
    f(&mut c).map(|_| c)
}

fn ok(
    f: fn(&mut InferenceContext) -> Result<()>,
    ins: &str,
    attrs: &[(&str, bool)],
    t1: Option<Tensor>,
    want: &str,
) {
    let c = run(f, ins, attrs, t1).unwrap_or_else(|e| panic!("{ins}: {e}"));
    check_outputs(&c, want).unwrap_or_else(|e| panic!("{ins}: {e}"));
}

#[test]
fn broadcasting() {
    let f = broadcast_binary_op_shape;
    ok(f, "[2,3];[3]", &[], None, "[d0_0,d0_1|d1_0]");
    ok(f, "[2,1];[1,3]", &[], None, "[d0_0,d1_1]");
    ok(f, "?;[3]", &[], None, "?");
    ok(f, "[?,3];[2,?]", &[], None, "[d1_0,d0_1]");
    ok(f, "[?];[?]", &[], None, "[?]");
    ok(f, "[1];[?]", &[], None, "[d1_0]");
    let e = run(f, "[2,3];[4]", &[], None).unwrap_err();
    assert_eq!(e.message(), "Dimensions must be equal, but are 3 and 4");
}

#[test]
fn matmuls() {
    let f = matmul_shape;
    let no = [("transpose_a", false), ("transpose_b", false)];
    ok(f, "[2,3];[3,4]", &no, None, "[d0_0,d1_1]");
    ok(
        f,
        "[3,2];[4,3]",
        &[("transpose_a", true), ("transpose_b", true)],
        None,
        "[d0_1,d1_0]",
    );
    ok(f, "?;[3,4]", &no, None, "[?,d1_1]");
    assert_eq!(
        run(f, "[2,3];[4,5]", &no, None).unwrap_err().message(),
        "Dimensions must be equal, but are 3 and 4"
    );
    assert!(run(f, "[2];[2,2]", &no, None)
        .unwrap_err()
        .message()
        .contains("Shape must be rank 2 but is rank 1"));
    let b = batch_matmul_v2_shape;
    let no = [("adj_x", false), ("adj_y", false)];
    ok(b, "[5,1,2,3];[4,3,6]", &no, None, "[d0_0,d1_0,d0_2,d1_2]");
    ok(b, "[2,3];[3,4]", &no, None, "[d0_0,d1_1]");
}

#[test]
fn reductions() {
    let f = reduction_shape;
    let axes = Tensor::from_vec(&[2], vec![0i32, -1]).unwrap();
    ok(
        f,
        "[2,3,4];[2]",
        &[("keep_dims", false)],
        Some(axes.clone()),
        "[d0_1]",
    );
    ok(
        f,
        "[2,3,4];[2]",
        &[("keep_dims", true)],
        Some(axes.clone()),
        "[1,d0_1,1]",
    );
    ok(f, "[2,3,4];[2]", &[("keep_dims", true)], None, "[?,?,?]");
    ok(f, "?;[2]", &[("keep_dims", false)], Some(axes), "?");
    let bad = Tensor::from_vec(&[1], vec![3i64]).unwrap();
    assert_eq!(
        run(f, "[2,3,4];[1]", &[("keep_dims", false)], Some(bad))
            .unwrap_err()
            .message(),
        "Invalid reduction dimension 3 for input with 3 dimensions."
    );
}
