//! Gradient checks of the joining, splitting, slicing and padding ops.

use opforge_core::attrs::{AttrMap, IntoAttrValue};
use opforge_core::autodiff::{GradientTape, Ops, OpsExt, Sym, SymArg};
use opforge_core::{Result, Tensor};
use opforge_testing::util::{assert_close, ctx, t};
use opforge_testing::util::{check, weighted, X};

fn xs(n: usize, off: f64) -> Vec<f64> {
    (0..n).map(|i| (i as f64) * 0.37 - off).collect()
}

fn concat(o: &mut dyn Ops, xs: &[Sym], axis: i32) -> Result<Sym> {
    let a = o.constant(Tensor::scalar(axis))?;
    let r = o.call(
        "ConcatV2",
        &[SymArg::List(xs.to_vec()), SymArg::One(a)],
        &AttrMap::new(),
    )?;
    Ok(r[0])
}

#[test]
fn concat_v2_grad() {
    for axis in [0, 1, -1] {
        check(
            "ConcatV2",
            &move |o, x| {
                let y = concat(o, x, axis)?;
                weighted(o, y)
            },
            &if axis == 0 {
                vec![
                    (vec![1, 3], xs(3, 1.0)),
                    (vec![2, 3], xs(6, 2.0)),
                    (vec![1, 3], xs(3, 0.5)),
                ]
            } else {
                vec![
                    (vec![2, 1], xs(2, 1.0)),
                    (vec![2, 3], xs(6, 2.0)),
                    (vec![2, 2], xs(4, 0.5)),
                ]
            },
        );
    }
}

/// In a graph with inputs of unknown shape: the offsets come from run-time shapes.
#[test]
fn concat_v2_grad_in_a_graph_with_unknown_shapes() {
    use opforge_core::autodiff::gradients;
    use opforge_core::graph::{Graph, NodeSpec, Output, Session};
    use opforge_core::DataType;
    let mut g = Graph::new();
    let add = |g: &mut Graph, spec: NodeSpec| Output::new(g.add(spec).unwrap(), 0);
    let a = add(
        &mut g,
        NodeSpec::new("Placeholder", "a").attr("dtype", DataType::Double),
    );
    let b = add(
        &mut g,
        NodeSpec::new("Placeholder", "b").attr("dtype", DataType::Double),
    );
    let axis = add(
        &mut g,
        NodeSpec::new("Const", "axis")
            .attr("value", &Tensor::scalar(-1i32))
            .attr("dtype", DataType::Int32),
    );
    let c = add(
        &mut g,
        NodeSpec::new("ConcatV2", "c")
            .input_list(vec![a, b])
            .input(axis),
    );
    let y = add(&mut g, NodeSpec::new("Mul", "y").input(c).input(c));
    let gr = gradients(&mut g, &[y], &[a, b], None).unwrap();
    let (ga, gb) = (gr[0].unwrap(), gr[1].unwrap());
    let sess = Session::new(g).unwrap();
    let out = sess
        .run(
            vec![
                (a, t(&[2, 1], vec![1.0f64, 2.0])),
                (b, t(&[2, 2], vec![3.0f64, 4.0, 5.0, 6.0])),
            ],
            &[ga, gb],
            &[],
        )
        .unwrap();
    assert_close(&out[0], &[2, 1], &[2.0, 4.0], 0.0);
    assert_close(&out[1], &[2, 2], &[6.0, 8.0, 10.0, 12.0], 0.0);
}

#[test]
fn pack_unpack_grad() {
    for axis in [0i64, 1, -1] {
        check(
            "Pack",
            &move |o, x| {
                let mut attrs = AttrMap::new();
                attrs.insert("axis".into(), axis.into_attr_value());
                let y = o.call("Pack", &[SymArg::List(x.to_vec())], &attrs)?[0];
                weighted(o, y)
            },
            &[(vec![2, 3], xs(6, 1.0)), (vec![2, 3], xs(6, 2.5))],
        );
        check(
            "Unpack",
            &move |o, x| {
                let mut attrs = AttrMap::new();
                attrs.insert("axis".into(), axis.into_attr_value());
                attrs.insert("num".into(), 2i64.into_attr_value());
                let ys = o.call("Unpack", &[SymArg::One(x[0])], &attrs)?;
                // Only output 0 is used: output 1's gradient is zeros.
                let a = weighted(o, ys[0])?;
                let b = o.mul(ys[1], ys[1])?;
                let y = o.add(a, b)?;
                weighted(o, y)
            },
            &[(vec![2, 2, 2], xs(8, 1.3))],
        );
    }
    // Unpack with an unused output: zeros for it.
    let mut tape = GradientTape::new(ctx(), false);
    let x = tape.watch(t(&[2, 2], vec![1.0f64, 2.0, 3.0, 4.0]));
    let mut attrs = AttrMap::new();
    attrs.insert("axis".into(), 0i64.into_attr_value());
    attrs.insert("num".into(), 2i64.into_attr_value());
    let ys = tape.call("Unpack", &[SymArg::One(x)], &attrs).unwrap();
    let g = tape.gradient(ys[1], &[x]).unwrap()[0].unwrap();
    assert_close(tape.value(g).unwrap(), &[2, 2], &[0.0, 0.0, 1.0, 1.0], 0.0);
}

#[test]
fn split_grad() {
    for axis in [0i32, 1] {
        check(
            "Split",
            &move |o, x| {
                let a = o.constant(Tensor::scalar(axis))?;
                let mut attrs = AttrMap::new();
                attrs.insert("num_split".into(), 2i64.into_attr_value());
                let ys = o.call("Split", &[SymArg::One(a), SymArg::One(x[0])], &attrs)?;
                let y = o.mul(ys[0], ys[1])?;
                weighted(o, y)
            },
            &[(vec![2, 4], xs(8, 1.4))],
        );
    }
    // Only one output used.
    let mut tape = GradientTape::new(ctx(), false);
    let x = tape.watch(t(&[4], vec![1.0f64, 2.0, 3.0, 4.0]));
    let a = tape.constant(Tensor::scalar(0i32)).unwrap();
    let mut attrs = AttrMap::new();
    attrs.insert("num_split".into(), 2i64.into_attr_value());
    let ys = tape
        .call("Split", &[SymArg::One(a), SymArg::One(x)], &attrs)
        .unwrap();
    let g = tape.gradient(ys[0], &[x]).unwrap()[0].unwrap();
    assert_close(tape.value(g).unwrap(), &[4], &[1.0, 1.0, 0.0, 0.0], 0.0);
}

#[test]
fn slice_grad() {
    check(
        "Slice",
        &|o, x| {
            let b = o.int_vector(&[1, 0, 1])?;
            let s = o.int_vector(&[1, -1, 2])?;
            let y = o.op1("Slice", &[x[0], b, s], &[])?;
            weighted(o, y)
        },
        &[(vec![2, 3, 4], xs(24, 4.0))],
    );
    let mut tape = GradientTape::new(ctx(), false);
    let x = tape.watch(t(&[4], vec![1.0f64, 2.0, 3.0, 4.0]));
    let b = tape
        .constant(Tensor::from_slice(&[1], &[1i64]).unwrap())
        .unwrap();
    let s = tape
        .constant(Tensor::from_slice(&[1], &[2i64]).unwrap())
        .unwrap();
    let y = tape.op1("Slice", &[x, b, s], &[]).unwrap();
    let g = tape.gradient(y, &[x, b, s]).unwrap();
    assert_close(
        tape.value(g[0].unwrap()).unwrap(),
        &[4],
        &[0.0, 1.0, 1.0, 0.0],
        0.0,
    );
    assert!(g[1].is_none() && g[2].is_none());
}

#[test]
fn tile_grad() {
    check(
        "Tile",
        &|o, x| {
            let m = o.int_vector(&[2, 1, 3])?;
            let y = o.op1("Tile", &[x[0], m], &[])?;
            weighted(o, y)
        },
        &[(vec![2, 3, 1], X.to_vec())],
    );
    let mut tape = GradientTape::new(ctx(), false);
    let x = tape.watch(t(&[2], vec![1.0f64, 2.0]));
    let m = tape
        .constant(Tensor::from_slice(&[1], &[3i64]).unwrap())
        .unwrap();
    let y = tape.op1("Tile", &[x, m], &[]).unwrap();
    let g = tape.gradient(y, &[x]).unwrap()[0].unwrap();
    assert_close(tape.value(g).unwrap(), &[2], &[3.0, 3.0], 0.0);
}

#[test]
fn pad_grads() {
    check(
        "Pad",
        &|o, x| {
            let p = o.constant(Tensor::from_slice(&[2, 2], &[1i32, 0, 2, 1]).unwrap())?;
            let y = o.op1("Pad", &[x[0], p], &[])?;
            weighted(o, y)
        },
        &[(vec![2, 3], X.to_vec())],
    );
    check(
        "PadV2",
        &|o, x| {
            let p = o.constant(Tensor::from_slice(&[2, 2], &[0i64, 1, 1, 1]).unwrap())?;
            let dt = o.dtype(x[0]);
            let c = o.scalar(dt, 0.5)?;
            let y = o.op1("PadV2", &[x[0], p, c], &[])?;
            weighted(o, y)
        },
        &[(vec![2, 3], X.to_vec())],
    );
}

#[test]
fn concat_grad() {
    for dim in [0i32, 1, -1] {
        check(
            "Concat",
            &move |o, x| {
                let d = o.constant(Tensor::scalar(dim))?;
                let r = o.call(
                    "Concat",
                    &[SymArg::One(d), SymArg::List(x.to_vec())],
                    &AttrMap::new(),
                )?;
                weighted(o, r[0])
            },
            &if dim == 0 {
                vec![(vec![1, 3], xs(3, 1.0)), (vec![2, 3], xs(6, 2.0))]
            } else {
                vec![
                    (vec![2, 1], xs(2, 1.0)),
                    (vec![2, 3], xs(6, 2.0)),
                    (vec![2, 2], xs(4, 0.5)),
                ]
            },
        );
    }
}

#[test]
fn mirror_pad_grads() {
    for (name, mode, shape, pads) in [
        ("MirrorPad", "REFLECT", vec![3i64, 4], vec![1i32, 2, 3, 0]),
        ("MirrorPad", "SYMMETRIC", vec![2, 3], vec![2, 1, 0, 3]),
        ("MirrorPadGrad", "REFLECT", vec![7, 6], vec![1, 2, 0, 2]),
        ("MirrorPadGrad", "SYMMETRIC", vec![5, 6], vec![2, 1, 2, 2]),
    ] {
        let n: i64 = shape.iter().product();
        check(
            name,
            &move |o, x| {
                let p = o.constant(Tensor::from_slice(&[2, 2], &pads).unwrap())?;
                let y = o.op1(name, &[x[0], p], &[("mode", mode.into_attr_value())])?;
                weighted(o, y)
            },
            &[(shape.clone(), xs(n as usize, 1.5))],
        );
    }
}

#[test]
fn concat_offset_and_parallel_concat_start_are_not_differentiable() {
    use opforge_core::autodiff::{Gradient, GradientFn};
    let reg = opforge_core::Registry::global();
    for op in ["ConcatOffset", "_ParallelConcatStart"] {
        let g = reg.attr::<Gradient>(op);
        assert!(
            matches!(g.as_deref(), Some(GradientFn::NotDifferentiable)),
            "{op}"
        );
    }
}
