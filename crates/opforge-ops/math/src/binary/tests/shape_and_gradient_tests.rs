//! Shape functions and gradients of the binary math ops.

use opforge_core::autodiff::{
    compute_gradient, compute_gradient_error, gradients, Gradient, GradientFn, GradientTape, Ops,
    OpsExt, Sym, SymArg,
};
use opforge_core::graph::{Graph, NodeSpec, Output, Session};
use opforge_core::shape_inference::{InferenceContext, ShapeAndType};
use opforge_core::{DataType, Registry, Result, Tensor, TensorShape};
use opforge_testing::shape::{check_outputs, parse_shapes, ShapeTestOp};
use opforge_testing::util::{assert_close, ctx, t};
use opforge_testing::{infer_error, infer_ok};

const BROADCASTING: &[&str] = &[
    "Add",
    "AddV2",
    "Sub",
    "Mul",
    "Div",
    "RealDiv",
    "FloorDiv",
    "FloorMod",
    "Maximum",
    "Minimum",
    "Pow",
    "SquaredDifference",
    "Less",
    "LessEqual",
    "Greater",
    "GreaterEqual",
    "LogicalAnd",
    "LogicalOr",
];

/// Runs `op`'s shape function with handle data for some inputs
/// (`(input, [(shape, dtype)])`, shapes in the test grammar).
fn infer_with_handles(
    op: &ShapeTestOp,
    ins: &str,
    handles: &[(usize, &[(&str, DataType)])],
) -> Result<InferenceContext> {
    let data = Registry::global().lookup(&op.op)?;
    let shapes = parse_shapes(ins).unwrap();
    let mut c = InferenceContext::new(&data.op_def, "", &op.attrs, &shapes, 1);
    for (i, list) in handles {
        let mut v = Vec::new();
        for (shape, dtype) in list.iter() {
            let dims = parse_shapes(shape).unwrap().pop().unwrap();
            let shape = c.make_partial_shape(dims.as_deref());
            v.push(ShapeAndType {
                shape,
                dtype: *dtype,
            });
        }
        c.set_input_handle_shapes_and_types(*i, v);
    }
    (opforge_core::registry::Registry::global()
        .attr::<opforge_core::shape_inference::ShapeFn>(&data.op_def.name)
        .unwrap())(&mut c)?;
    Ok(c)
}

fn handle_dims(c: &InferenceContext) -> Vec<(Option<Vec<i64>>, DataType)> {
    c.output_handle_shapes_and_types(0)
        .unwrap()
        .iter()
        .map(|st| (c.shape_values(st.shape), st.dtype))
        .collect()
}

#[test]
fn broadcasting_shape_functions() {
    for op in BROADCASTING {
        let o = ShapeTestOp::new(op);
        infer_ok!(o, "[2,3];[2,3]", "[d0_0,d0_1]");
        infer_ok!(o, "[2,3];[3]", "[d0_0,d0_1]");
        infer_ok!(o, "[3];[2,3]", "[d1_0,d0_0]");
        infer_ok!(o, "[2,1];[1,3]", "[d0_0,d1_1]");
        infer_ok!(o, "[];[2,3]", "[d1_0,d1_1]");
        infer_ok!(o, "[2,3];[]", "[d0_0,d0_1]");
        infer_ok!(o, "[];[]", "[]");
        infer_ok!(o, "?;[3]", "?");
        infer_ok!(o, "[3];?", "?");
        infer_ok!(o, "[?,3];[2,?]", "[d1_0,d0_1]");
        infer_ok!(o, "[?];[?]", "[?]");
        infer_ok!(o, "[1];[?]", "[d1_0]");
        infer_ok!(o, "[?];[1]", "[d0_0]");
        infer_ok!(o, "[?,1];[4]", "[d0_0,d1_0]");
        infer_ok!(o, "[0,3];[1,3]", "[d0_0,d0_1]");
        infer_ok!(o, "[5,1,4];[3,1]", "[d0_0,d1_0,d0_2]");
        infer_error!(o, "[2,3];[4]", "Dimensions must be equal, but are 3 and 4");
        infer_error!(
            o,
            "[2,3];[3,3]",
            "Dimensions must be equal, but are 2 and 3"
        );
    }
}

#[test]
fn equality_shape_functions_honour_incompatible_shape_error() {
    for op in ["Equal", "NotEqual"] {
        let strict = ShapeTestOp::new(op)
            .attr("T", DataType::Float)
            .attr("incompatible_shape_error", true);
        infer_ok!(strict, "[2,3];[3]", "[d0_0,d0_1]");
        infer_ok!(strict, "[2,?];[3]", "[d0_0,d1_0]");
        infer_ok!(strict, "?;[3]", "?");
        infer_error!(
            strict,
            "[2,3];[4]",
            "Dimensions must be equal, but are 3 and 4"
        );
        let lenient = ShapeTestOp::new(op)
            .attr("T", DataType::Float)
            .attr("incompatible_shape_error", false);
        infer_ok!(lenient, "[2,3];[3]", "[d0_0,d0_1]");
        infer_ok!(lenient, "[2,3];[1]", "[d0_0,d0_1]");
        // Known and different: a scalar (the kernel's scalar result).
        infer_ok!(lenient, "[2,3];[4]", "[]");
        // A known dim > 1 against an unknown one: maybe incompatible.
        infer_ok!(lenient, "[2,?];[3]", "?");
        infer_ok!(lenient, "[?];[?]", "[?]");
        infer_ok!(lenient, "?;[4]", "?");
        // TensorFlow reads the attr without a default: a bare node fails.
        infer_error!(
            ShapeTestOp::new(op),
            "[2];[2]",
            "No attr named 'incompatible_shape_error' in NodeDef"
        );
    }
}

#[test]
fn add_n_shape_function() {
    let op = |n: i64| {
        ShapeTestOp::new("AddN")
            .attr("N", n)
            .attr("T", DataType::Float)
    };
    infer_ok!(op(1), "[2,?]", "in0");
    infer_ok!(op(1), "?", "in0");
    infer_ok!(op(2), "[1,?];[?,2]", "[d0_0,d1_1]");
    infer_ok!(op(2), "?;[2]", "in1");
    infer_ok!(op(2), "[2];?", "in0");
    infer_ok!(op(2), "?;?", "in0"); // TF: Merge(s0, s1) keeps s0 when both ranks are unknown
    infer_ok!(op(3), "[2,?];?;[?,3]", "[d0_0,d2_1]");
    infer_ok!(op(3), "?;[?,3];[2,?]", "[d2_0,d1_1]");
    infer_ok!(op(2), "[2,3];[2,3]", "in0");
    infer_error!(
        op(2),
        "[1];[2]",
        "Dimension 0 in both shapes must be equal, but are 1 and 2"
    );
    infer_error!(
        op(3),
        "[1];[?];[1,2]",
        "From merging shape 1 with other shapes."
    );
    infer_error!(
        op(3),
        "[?,?];[1];?",
        "Shapes must be equal rank, but are 2 and 1"
    );
    infer_error!(
        op(2),
        "[?,?];[1]",
        "From merging shape 0 with other shapes."
    );
    // TensorFlow reads T: a bare node fails.
    infer_error!(
        ShapeTestOp::new("AddN"),
        "[1];[1]",
        "No attr named 'T' in NodeDef"
    );
}

#[test]
fn add_n_merges_variant_handle_data() {
    let op = ShapeTestOp::new("AddN")
        .attr("N", 2i64)
        .attr("T", DataType::Variant);
    let c = infer_with_handles(
        &op,
        "[];[]",
        &[
            (0, &[("[2,?]", DataType::Float)]),
            (1, &[("[?,3]", DataType::Float)]),
        ],
    )
    .unwrap();
    assert_eq!(handle_dims(&c), vec![(Some(vec![2, 3]), DataType::Float)]);
    check_outputs(&c, "in0").unwrap();
    let e = infer_with_handles(
        &op,
        "[];[]",
        &[
            (0, &[("[2]", DataType::Float)]),
            (1, &[("[2]", DataType::Int32)]),
        ],
    )
    .unwrap_err();
    assert_eq!(
        e.message(),
        "shapes_and_types[0][0].dtype() == float != shapes_and_types[0][0].dtype == int32"
    );
    let e = infer_with_handles(
        &op,
        "[];[]",
        &[
            (0, &[("[2]", DataType::Float), ("[]", DataType::Float)]),
            (1, &[("[2]", DataType::Float)]),
        ],
    )
    .unwrap_err();
    assert_eq!(
        e.message(),
        "shapes_and_types[0].size() == 2 != shapes_and_types[0].size() == 1"
    );
    let e = infer_with_handles(
        &op,
        "[];[]",
        &[
            (0, &[("[2]", DataType::Float)]),
            (1, &[("[3]", DataType::Float)]),
        ],
    )
    .unwrap_err();
    assert!(
        e.message()
            .contains("Dimension 0 in both shapes must be equal, but are 2 and 3"),
        "{e}"
    );
    assert!(
        e.message().contains(
            "From merging shapes_and_types[0][0].shape with shapes_and_types[0][0].shape"
        ),
        "{e}"
    );
    // Only the last input's data seeds the result (TensorFlow's
    // order): earlier data alone gives an empty list.
    let c = infer_with_handles(&op, "[];[]", &[(0, &[("[2]", DataType::Float)])]).unwrap();
    assert_eq!(handle_dims(&c), vec![]);
    // Not variant: handle data is ignored.
    let op = ShapeTestOp::new("AddN")
        .attr("N", 2i64)
        .attr("T", DataType::Float);
    let c = infer_with_handles(&op, "[2];[2]", &[(1, &[("[2]", DataType::Float)])]).unwrap();
    assert!(c.output_handle_shapes_and_types(0).is_none());
}

#[test]
fn select_shape_function() {
    let op = ShapeTestOp::new("Select").attr("T", DataType::Float);
    // Unknown condition rank: the merge of t and e.
    infer_ok!(op, "?;[2,3];[2,3]", "in1");
    infer_ok!(op, "?;[2,?];[?,3]", "[d1_0,d2_1]");
    infer_ok!(op, "?;?;[2,3]", "in2");
    infer_ok!(op, "[2];?;?", "in1"); // TF: Merge(t, e) keeps t when both ranks are unknown
                                     // Scalar condition: anything goes.
    infer_ok!(op, "[];[2,3];[2,3]", "in1");
    infer_ok!(op, "[];[];[]", "in1");
    // Vector condition: t's first dim.
    infer_ok!(op, "[2];[2,3];[2,3]", "in1");
    infer_ok!(op, "[?];[2,3];[2,3]", "in1");
    infer_ok!(op, "[2];[?,3];[?,3]", "in1");
    infer_error!(
        op,
        "[3];[2,3];[2,3]",
        "Dimension 0 in both shapes must be equal, but are 3 and 2"
    );
    // Same shape otherwise.
    infer_ok!(op, "[2,3];[2,3];[2,3]", "in1");
    infer_ok!(op, "[2,?];[?,3];[?,3]", "[d0_0,d1_1]");
    infer_ok!(op, "[2];[2];[2]", "in1");
    infer_ok!(op, "[2];[?];[?]", "in1");
    infer_ok!(op, "[3];[?];[3]", "in2");
    infer_error!(
        op,
        "[2,3];[2,4];[2,4]",
        "Dimension 1 in both shapes must be equal, but are 4 and 3"
    );
    infer_error!(
        op,
        "[2,3];[];[]",
        "Shapes must be equal rank, but are 0 and 2"
    );
    infer_error!(
        op,
        "[2];[];[]",
        "Shapes must be equal rank, but are 0 and 1"
    );
    infer_error!(
        op,
        "[2,3,4];[2,3];[2,3]",
        "Shapes must be equal rank, but are 2 and 3"
    );
    // t and e must agree.
    infer_error!(
        op,
        "[];[2];[3]",
        "Dimension 0 in both shapes must be equal, but are 2 and 3"
    );
    infer_error!(
        op,
        "?;[2];[2,1]",
        "Shapes must be equal rank, but are 1 and 2"
    );
}

#[test]
fn select_v2_shape_function() {
    let op = ShapeTestOp::new("SelectV2").attr("T", DataType::Float);
    infer_ok!(op, "[2,1];[1,3];[]", "[d0_0,d1_1]");
    infer_ok!(op, "[];[2,3];[2,3]", "[d1_0,d1_1]");
    infer_ok!(op, "[2,3];[3];[1]", "[d0_0,d0_1]");
    infer_ok!(op, "[4,1,1];[2,1];[3]", "[d0_0,d1_0,d2_0]");
    infer_ok!(op, "?;[2];[2]", "?");
    infer_ok!(op, "[2];?;[2]", "?");
    infer_ok!(op, "[?];[?];[?]", "[?]");
    infer_error!(
        op,
        "[2];[3];[2]",
        "Dimensions must be equal, but are 3 and 2"
    );
    infer_error!(
        op,
        "[4];[3];[3]",
        "Dimensions must be equal, but are 4 and 3"
    );
}

#[test]
fn selects_merge_handle_data() {
    for name in ["Select", "SelectV2"] {
        let op = ShapeTestOp::new(name).attr("T", DataType::Resource);
        let c = infer_with_handles(
            &op,
            "[];[];[]",
            &[
                (1, &[("[2,?]", DataType::Float)]),
                (2, &[("[?,3]", DataType::Float)]),
            ],
        )
        .unwrap();
        assert_eq!(handle_dims(&c), vec![(Some(vec![2, 3]), DataType::Float)]);
        // Only one side known: nothing is set.
        let c = infer_with_handles(&op, "[];[];[]", &[(1, &[("[2]", DataType::Float)])]).unwrap();
        assert!(c.output_handle_shapes_and_types(0).is_none());
        let e = infer_with_handles(
            &op,
            "[];[];[]",
            &[
                (1, &[("[2]", DataType::Float)]),
                (2, &[("[2]", DataType::Double)]),
            ],
        )
        .unwrap_err();
        assert_eq!(
            e.message(),
            "Trying to merge handles pointing to different dtypes."
        );
        let e = infer_with_handles(
            &op,
            "[];[];[]",
            &[(1, &[("[2]", DataType::Float)]), (2, &[])],
        )
        .unwrap_err();
        assert_eq!(
            e.message(),
            "Trying to merge handles pointing to different numbers of tensors."
        );
        let e = infer_with_handles(
            &op,
            "[];[];[]",
            &[
                (1, &[("[2]", DataType::Float)]),
                (2, &[("[3]", DataType::Float)]),
            ],
        )
        .unwrap_err();
        assert!(
            e.message()
                .contains("Dimension 0 in both shapes must be equal"),
            "{e}"
        );
    }
}

// ---- gradients ----

type Builder = dyn Fn(&mut dyn Ops, &[Sym]) -> Result<Sym>;

/// Checks `f`'s gradient (every input gets one) on the CPU and the fake device.
fn assert_gradient_ok(name: &str, f: &Builder, xs: &[(Vec<i64>, Vec<f64>)]) {
    opforge_testing::util::check(name, f, xs);
}

const X: [f64; 6] = [1.3, 2.7, -0.6, 4.1, -3.2, 0.45];
const Y: [f64; 6] = [0.7, -1.1, 1.9, 0.8, 1.45, -2.3];

/// `(x, y)` pairs of shapes (and values) that broadcast: equal shapes,
/// a vector against rows, a column, and a scalar `x`. The values keep
/// away from ties (Maximum), zeros (Div) and integer ratios (FloorMod).
fn shape_pairs(positive_x: bool) -> Vec<[(Vec<i64>, Vec<f64>); 2]> {
    let x: Vec<f64> = if positive_x {
        X.iter().map(|v| v.abs() + 0.2).collect()
    } else {
        X.to_vec()
    };
    vec![
        [(vec![2, 3], x.clone()), (vec![2, 3], Y.to_vec())],
        [(vec![2, 3], x.clone()), (vec![3], Y[..3].to_vec())],
        [(vec![2, 3], x.clone()), (vec![2, 1], vec![Y[0], Y[2]])],
        [(vec![], vec![x[0]]), (vec![2, 3], Y.to_vec())],
        [
            (vec![2, 1], vec![x[0], x[1]]),
            (vec![1, 3], Y[..3].to_vec()),
        ],
    ]
}

#[test]
fn binary_gradients_match_numerical_ones() {
    for op in [
        "Add",
        "AddV2",
        "Sub",
        "Mul",
        "Div",
        "RealDiv",
        "Maximum",
        "Minimum",
        "Pow",
        "SquaredDifference",
        "FloorMod",
    ] {
        let f = move |o: &mut dyn Ops, xs: &[Sym]| o.op1(op, &[xs[0], xs[1]], &[]);
        for (k, pair) in shape_pairs(op == "Pow").iter().enumerate() {
            assert_gradient_ok(&format!("{op} case {k}"), &f, pair);
        }
    }
}

fn grads2(op: &str, x: Tensor, y: Tensor) -> Vec<Option<Tensor>> {
    let mut tape = GradientTape::new(ctx(), false);
    let (xs, ys) = (tape.watch(x), tape.watch(y));
    let z = tape.op1(op, &[xs, ys], &[]).unwrap();
    tape.gradient_tensors(z, &[xs, ys]).unwrap()
}

#[test]
fn binary_gradients_against_hand_values() {
    // Mul broadcast over rows: gy sums x over the rows.
    let x = t(&[2, 3], vec![1.0f64, 2.0, 3.0, 4.0, 5.0, 6.0]);
    let y = t(&[3], vec![10.0f64, 20.0, 30.0]);
    let g = grads2("Mul", x.clone(), y.clone());
    assert_close(
        g[0].as_ref().unwrap(),
        &[2, 3],
        &[10.0, 20.0, 30.0, 10.0, 20.0, 30.0],
        0.0,
    );
    assert_close(g[1].as_ref().unwrap(), &[3], &[5.0, 7.0, 9.0], 0.0);
    let g = grads2("Sub", x.clone(), y.clone());
    assert_close(g[0].as_ref().unwrap(), &[2, 3], &[1.0; 6], 0.0);
    assert_close(g[1].as_ref().unwrap(), &[3], &[-2.0, -2.0, -2.0], 0.0);
    // RealDiv: 1/y and -x/y^2.
    let g = grads2(
        "RealDiv",
        t(&[2], vec![3.0f64, -1.0]),
        t(&[2], vec![2.0f64, 4.0]),
    );
    assert_close(g[0].as_ref().unwrap(), &[2], &[0.5, 0.25], 1e-15);
    assert_close(g[1].as_ref().unwrap(), &[2], &[-0.75, 0.0625], 1e-15);
    // Maximum: ties go to x; Minimum likewise.
    let (a, b) = (
        t(&[3], vec![1.0f64, 2.0, 5.0]),
        t(&[3], vec![1.0f64, 3.0, 4.0]),
    );
    let g = grads2("Maximum", a.clone(), b.clone());
    assert_close(g[0].as_ref().unwrap(), &[3], &[1.0, 0.0, 1.0], 0.0);
    assert_close(g[1].as_ref().unwrap(), &[3], &[0.0, 1.0, 0.0], 0.0);
    let g = grads2("Minimum", a, b);
    assert_close(g[0].as_ref().unwrap(), &[3], &[1.0, 1.0, 0.0], 0.0);
    assert_close(g[1].as_ref().unwrap(), &[3], &[0.0, 0.0, 1.0], 0.0);
    // Pow: no false singularity at x = 0, and 0 for log(x) where x < 0.
    let g = grads2(
        "Pow",
        t(&[3], vec![0.0f64, 2.0, -2.0]),
        t(&[3], vec![2.0f64, 3.0, 2.0]),
    );
    assert_close(g[0].as_ref().unwrap(), &[3], &[0.0, 12.0, -4.0], 1e-12);
    assert_close(
        g[1].as_ref().unwrap(),
        &[3],
        &[0.0, 8.0 * 2f64.ln(), 0.0],
        1e-12,
    );
    // SquaredDifference: 2 (x - y) and -2 (x - y), y's reduced.
    let g = grads2("SquaredDifference", x.clone(), t(&[], vec![2.0f64]));
    assert_close(
        g[0].as_ref().unwrap(),
        &[2, 3],
        &[-2.0, 0.0, 2.0, 4.0, 6.0, 8.0],
        0.0,
    );
    assert_close(g[1].as_ref().unwrap(), &[], &[-18.0], 0.0);
    // FloorMod: 1 and -floor(x / y).
    let g = grads2(
        "FloorMod",
        t(&[2], vec![7.5f64, -7.5]),
        t(&[2], vec![2.0f64, 2.0]),
    );
    assert_close(g[0].as_ref().unwrap(), &[2], &[1.0, 1.0], 0.0);
    assert_close(g[1].as_ref().unwrap(), &[2], &[-3.0, 4.0], 0.0);
    // FloorDiv: no gradient (TensorFlow's None, None).
    let g = grads2(
        "FloorDiv",
        t(&[2], vec![7.5f64, -7.5]),
        t(&[2], vec![2.0f64, 2.0]),
    );
    assert!(g[0].is_none() && g[1].is_none());
    // float32 through Add with broadcasting.
    let g = grads2(
        "AddV2",
        t(&[2, 2], vec![1.0f32; 4]),
        t(&[2, 1], vec![1.0f32; 2]),
    );
    assert_close(g[1].as_ref().unwrap(), &[2, 1], &[2.0, 2.0], 0.0);
}

#[test]
fn add_n_gradients() {
    let f = |o: &mut dyn Ops, xs: &[Sym]| {
        let out = o.call(
            "AddN",
            &[SymArg::List(vec![xs[0], xs[1], xs[0]])],
            &Default::default(),
        )?;
        o.mul(out[0], xs[1])
    };
    assert_gradient_ok(
        "AddN",
        &f,
        &[(vec![2, 3], X.to_vec()), (vec![2, 3], Y.to_vec())],
    );
    let mut tape = GradientTape::new(ctx(), false);
    let (a, b) = (
        tape.watch(t(&[2], vec![1.0f64, 2.0])),
        tape.watch(t(&[2], vec![3.0f64, 4.0])),
    );
    let s = tape.add_n(&[a, b, a]).unwrap();
    let g = tape.gradient_tensors(s, &[a, b]).unwrap();
    assert_close(g[0].as_ref().unwrap(), &[2], &[2.0, 2.0], 0.0);
    assert_close(g[1].as_ref().unwrap(), &[2], &[1.0, 1.0], 0.0);
}

#[test]
fn select_gradients() {
    // Select with a condition of t's shape, and with a vector of rows.
    for (cond_dims, cond) in [
        (vec![2, 3], vec![true, false, true, false, false, true]),
        (vec![2], vec![false, true]),
        (vec![], vec![true]),
    ] {
        let c = t(&cond_dims, cond.clone());
        let f = move |o: &mut dyn Ops, xs: &[Sym]| {
            let c = o.constant(c.clone())?;
            o.op1("Select", &[c, xs[0], xs[1]], &[])
        };
        let pair = [(vec![2, 3], X.to_vec()), (vec![2, 3], Y.to_vec())];
        if cond.iter().all(|&b| b) {
            // e gets no gradient at all: check t only.
            let jac =
                compute_gradient(ctx(), &f, &[t(&[2, 3], X.to_vec()), t(&[2, 3], Y.to_vec())])
                    .unwrap();
            assert!(compute_gradient_error(&jac) < 1e-6);
            assert!(jac[1].theoretical.iter().all(|&v| v == 0.0));
        } else {
            assert_gradient_ok("Select", &f, &pair);
        }
    }
    // SelectV2 with broadcasting among all three.
    let c = t(&[2, 1], vec![true, false]);
    let f = move |o: &mut dyn Ops, xs: &[Sym]| {
        let c = o.constant(c.clone())?;
        o.op1("SelectV2", &[c, xs[0], xs[1]], &[])
    };
    assert_gradient_ok(
        "SelectV2 [2,1] [3] []",
        &f,
        &[(vec![3], X[..3].to_vec()), (vec![], vec![Y[0]])],
    );
    assert_gradient_ok(
        "SelectV2 [2,1] [2,3] [1,3]",
        &f,
        &[(vec![2, 3], X.to_vec()), (vec![1, 3], Y[..3].to_vec())],
    );
    // Hand values: t [3] gets the rows where the condition holds.
    let mut tape = GradientTape::new(ctx(), false);
    let cond = tape.constant(t(&[2, 1], vec![true, false])).unwrap();
    let (a, b) = (
        tape.watch(t(&[3], vec![1.0f64, 2.0, 3.0])),
        tape.watch(t(&[], vec![5.0f64])),
    );
    let z = tape.op1("SelectV2", &[cond, a, b], &[]).unwrap();
    let g = tape.gradient_tensors(z, &[cond, a, b]).unwrap();
    assert!(g[0].is_none());
    assert_close(g[1].as_ref().unwrap(), &[3], &[1.0, 1.0, 1.0], 0.0);
    assert_close(g[2].as_ref().unwrap(), &[], &[3.0], 0.0);
}

#[test]
fn comparisons_and_logical_ops_are_not_differentiable() {
    let r = opforge_core::registry::Registry::global();
    for op in [
        "Less",
        "LessEqual",
        "Greater",
        "GreaterEqual",
        "Equal",
        "NotEqual",
        "LogicalAnd",
        "LogicalOr",
        "LogicalNot",
    ] {
        assert!(
            matches!(
                r.attr::<Gradient>(op).as_deref(),
                Some(GradientFn::NotDifferentiable)
            ),
            "{op}"
        );
    }
    // Gradients flow around them: d/dx select(x > 0, x, -x) = sign(x).
    let f = |o: &mut dyn Ops, xs: &[Sym]| {
        let zero = o.scalar(o.dtype(xs[0]), 0.0)?;
        let c = o.op1("Greater", &[xs[0], zero], &[])?;
        let minus = o.neg(xs[0])?;
        o.op1("Select", &[c, xs[0], minus], &[])
    };
    let mut tape = GradientTape::new(ctx(), false);
    let x = tape.watch(t(&[3], vec![-2.0f64, 0.5, 3.0]));
    let y = f(&mut tape, &[x]).unwrap();
    let g = tape.gradient_tensors(y, &[x]).unwrap();
    assert_close(g[0].as_ref().unwrap(), &[3], &[-1.0, 1.0, 1.0], 0.0);
}

#[test]
fn second_derivatives_of_mul() {
    // As TensorFlow's array_grad.py (registered here when missing):
    // no gradient flows through the default seed `OnesLike(y)`.
    let r = opforge_core::registry::Registry::global();
    if r.attr::<Gradient>("OnesLike").as_deref().is_none() {
        r.set_attr::<Gradient>(
            "OnesLike",
            std::sync::Arc::new(GradientFn::NotDifferentiable),
        )
        .unwrap();
    }
    // f = x * x * y: df/dx = 2xy, d2f/dx2 = 2y, d2f/dxdy = 2x.
    let (xv, yv) = ([1.5f64, -2.0, 0.25], [3.0f64, 0.5, -4.0]);
    let mut tape = GradientTape::new(ctx(), true);
    let x = tape.watch(t(&[3], xv.to_vec()));
    let y = tape.watch(t(&[3], yv.to_vec()));
    let xx = tape.mul(x, x).unwrap();
    let f = tape.mul(xx, y).unwrap();
    let g = tape.gradient(f, &[x, y]).unwrap();
    let (gx, gy) = (g[0].unwrap(), g[1].unwrap());
    let v =
        |tape: &GradientTape<'_>, s: Sym| tape.value(s).unwrap().flat::<f64>().unwrap().to_vec();
    for i in 0..3 {
        assert_eq!(v(&tape, gx)[i], 2.0 * xv[i] * yv[i]);
        assert_eq!(v(&tape, gy)[i], xv[i] * xv[i]);
    }
    let gg = tape.gradient(gx, &[x, y]).unwrap();
    let (gxx, gxy) = (v(&tape, gg[0].unwrap()), v(&tape, gg[1].unwrap()));
    let gg = tape.gradient(gy, &[x, y]).unwrap();
    let gyx = v(&tape, gg[0].unwrap());
    assert!(
        gg[1].is_none(),
        "d2f/dy2 = 0: y^1 has no second derivative path"
    );
    for i in 0..3 {
        assert_eq!(gxx[i], 2.0 * yv[i]);
        assert_eq!(gxy[i], 2.0 * xv[i]);
        assert_eq!(gyx[i], 2.0 * xv[i]);
    }
}

/// TensorFlow's tape tracks every value computed from a watched one,
/// so intermediate results can be sources ("gradients with respect
/// to intermediate results"). Before the fix in `tape.rs`, only
/// explicitly watched values were, and this gave `None`.
#[test]
fn tape_gradients_with_respect_to_intermediate_values() {
    let mut tape = GradientTape::new(ctx(), true);
    let x = tape.watch(t(&[], vec![3.0f64]));
    let y = tape.mul(x, x).unwrap();
    let z = tape.mul(y, y).unwrap();
    let g = tape.gradient_tensors(z, &[y, x]).unwrap();
    assert_close(g[0].as_ref().unwrap(), &[], &[18.0], 0.0); // dz/dy = 2y
    assert_close(g[1].as_ref().unwrap(), &[], &[108.0], 0.0); // dz/dx = 4x^3
                                                              // Values computed from unwatched ones only are not tracked.
    let c = tape.constant(t(&[], vec![2.0f64])).unwrap();
    let c2 = tape.mul(c, c).unwrap();
    let w = tape.mul(c2, z).unwrap();
    assert_eq!(tape.gradient(w, &[c2, c]).unwrap(), vec![None, None]);
    assert!(tape.gradient(w, &[z]).unwrap()[0].is_some());
}

fn placeholder(g: &mut Graph, name: &str, dims: Option<&[i64]>) -> Output {
    let mut spec = NodeSpec::new("Placeholder", name).attr("dtype", DataType::Double);
    if let Some(d) = dims {
        spec = spec.attr("shape", TensorShape::new(d).unwrap().to_proto());
    }
    Output::new(g.add(spec).unwrap(), 0)
}

fn node(g: &mut Graph, op: &str, name: &str, ins: &[Output]) -> Output {
    let mut spec = NodeSpec::new(op, name);
    for &i in ins {
        spec = spec.input(i);
    }
    Output::new(g.add(spec).unwrap(), 0)
}

/// The same computation, as graph ops and through [`Ops`] on a tape.
fn computation(o: &mut dyn Ops, x: Sym, w: Sym, b: Sym) -> Result<Sym> {
    let xw = o.mul(x, w)?;
    let h = o.op1("Tanh", &[xw], &[])?;
    let hb = o.add(h, b)?;
    let k = o.op1("Sigmoid", &[hb], &[])?;
    let kh = o.mul(k, h)?;
    let sd = o.op1("SquaredDifference", &[x, b], &[])?;
    let mx = o.op1("Maximum", &[x, w], &[])?;
    let q = o.div(mx, w)?;
    let out = o.call(
        "AddN",
        &[SymArg::List(vec![kh, sd, q])],
        &Default::default(),
    )?;
    Ok(out[0])
}

#[test]
fn graph_gradients_match_the_gradient_tape() {
    let xv = t(&[2, 3], X.to_vec());
    let wv = t(&[3], Y[..3].to_vec());
    let bv = t(&[2, 1], vec![0.3f64, -0.8]);
    // Graph: x and w with static shapes, b of unknown shape (the
    // reductions then go through BroadcastGradientArgs at run time).
    let mut g = Graph::new();
    let x = placeholder(&mut g, "x", Some(&[2, 3]));
    let w = placeholder(&mut g, "w", Some(&[3]));
    let b = placeholder(&mut g, "b", None);
    let xw = node(&mut g, "Mul", "xw", &[x, w]);
    let h = node(&mut g, "Tanh", "h", &[xw]);
    let hb = node(&mut g, "AddV2", "hb", &[h, b]);
    let k = node(&mut g, "Sigmoid", "k", &[hb]);
    let kh = node(&mut g, "Mul", "kh", &[k, h]);
    let sd = node(&mut g, "SquaredDifference", "sd", &[x, b]);
    let mx = node(&mut g, "Maximum", "mx", &[x, w]);
    let q = node(&mut g, "RealDiv", "q", &[mx, w]);
    let y = Output::new(
        g.add(NodeSpec::new("AddN", "y").input_list(vec![kh, sd, q]))
            .unwrap(),
        0,
    );
    // b's unknown shape makes kh's unknown; AddN merges it with q's.
    assert_eq!(g.output_shape(kh).unwrap(), None);
    assert_eq!(g.output_shape(y).unwrap(), Some(&[2, 3][..]));
    assert_eq!(g.output_shape(q).unwrap(), Some(&[2, 3][..]));
    let grads = gradients(&mut g, &[y], &[x, w, b], None).unwrap();
    let fetch: Vec<Output> = grads.iter().map(|o| o.unwrap()).collect();
    let sess = Session::new(g).unwrap();
    let got = sess
        .run(
            vec![(x, xv.clone()), (w, wv.clone()), (b, bv.clone())],
            &fetch,
            &[],
        )
        .unwrap();
    // Tape.
    let mut tape = GradientTape::new(ctx(), false);
    let (xs, ws, bs) = (tape.watch(xv), tape.watch(wv), tape.watch(bv));
    let ys = computation(&mut tape, xs, ws, bs).unwrap();
    let want = tape.gradient_tensors(ys, &[xs, ws, bs]).unwrap();
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        let w = w.as_ref().unwrap();
        assert_eq!(g.dims(), w.dims(), "gradient {i}");
        let wv: Vec<f64> = w.flat::<f64>().unwrap().to_vec();
        assert_close(g, w.dims(), &wv, 1e-12);
    }
}
