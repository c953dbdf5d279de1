//! Gradient checks of the indexing ops.

use opforge_core::attrs::IntoAttrValue;
use opforge_core::autodiff::{GradientTape, Ops, OpsExt};
use opforge_core::Tensor;
use opforge_testing::util::{assert_close, ctx, t};
use opforge_testing::util::{check, weighted, X};

#[test]
fn transpose_grad() {
    let x: Vec<f64> = (0..24).map(|i| (i as f64) * 0.37 - 4.0).collect();
    check(
        "Transpose",
        &|o, x| {
            let p = o.int_vector(&[2, 0, 1])?;
            let y = o.op1("Transpose", &[x[0], p], &[])?;
            weighted(o, y)
        },
        &[(vec![2, 3, 4], x)],
    );
}

#[test]
fn reverse_grads() {
    check(
        "ReverseV2",
        &|o, x| {
            let a = o.int_vector(&[-1])?;
            let y = o.op1("ReverseV2", &[x[0], a], &[])?;
            weighted(o, y)
        },
        &[(vec![2, 3], X.to_vec())],
    );
    check(
        "Reverse",
        &|o, x| {
            let d = o.constant(Tensor::from_slice(&[2], &[true, false]).unwrap())?;
            let y = o.op1("Reverse", &[x[0], d], &[])?;
            weighted(o, y)
        },
        &[(vec![2, 3], X.to_vec())],
    );
}

#[test]
fn gather_v2_grad() {
    let x: Vec<f64> = (0..24).map(|i| (i as f64) * 0.37 - 4.0).collect();
    for axis in [0i32, 1, 2, -1] {
        check(
            "GatherV2",
            &move |o, xs| {
                let idx = o.constant(Tensor::from_slice(&[2, 2], &[1i64, 0, 1, 1]).unwrap())?;
                let a = o.constant(Tensor::scalar(axis))?;
                let y = o.op1("GatherV2", &[xs[0], idx, a], &[])?;
                weighted(o, y)
            },
            &[(vec![2, 2, 3], x[..12].to_vec())],
        );
    }
    // Hand-checked: duplicates sum, unused rows get zeros, indices get None.
    let mut tape = GradientTape::new(ctx(), false);
    let p = tape.watch(t(&[3, 2], vec![1.0f64, 2.0, 3.0, 4.0, 5.0, 6.0]));
    let idx = tape
        .constant(Tensor::from_slice(&[3], &[2i32, 0, 2]).unwrap())
        .unwrap();
    let a = tape.constant(Tensor::scalar(0i32)).unwrap();
    let y = tape.op1("GatherV2", &[p, idx, a], &[]).unwrap();
    let g = tape.gradient(y, &[p, idx]).unwrap();
    assert_close(
        tape.value(g[0].unwrap()).unwrap(),
        &[3, 2],
        &[1.0, 1.0, 0.0, 0.0, 2.0, 2.0],
        0.0,
    );
    assert!(g[1].is_none());
}

#[test]
fn gather_grad() {
    let x: Vec<f64> = (0..12).map(|i| (i as f64) * 0.37 - 2.0).collect();
    check(
        "Gather",
        &|o, xs| {
            let idx = o.constant(Tensor::from_slice(&[2, 2], &[2i64, 0, 2, 1]).unwrap())?;
            let y = o.op1("Gather", &[xs[0], idx], &[])?;
            weighted(o, y)
        },
        &[(vec![3, 2, 2], x)],
    );
    // Duplicates sum, unused rows get zeros, indices get None.
    let mut tape = GradientTape::new(ctx(), false);
    let p = tape.watch(t(&[3, 2], vec![1.0f64, 2.0, 3.0, 4.0, 5.0, 6.0]));
    let idx = tape
        .constant(Tensor::from_slice(&[3], &[2i32, 0, 2]).unwrap())
        .unwrap();
    let y = tape.op1("Gather", &[p, idx], &[]).unwrap();
    let g = tape.gradient(y, &[p, idx]).unwrap();
    assert_close(
        tape.value(g[0].unwrap()).unwrap(),
        &[3, 2],
        &[1.0, 1.0, 0.0, 0.0, 2.0, 2.0],
        0.0,
    );
    assert!(g[1].is_none());
}

#[test]
fn reverse_sequence_grad() {
    let x: Vec<f64> = (0..24).map(|i| (i as f64) * 0.41 - 3.0).collect();
    for (seq_dim, batch_dim, lens) in [(1i64, 0i64, vec![3i64, 1]), (0, 2, vec![2, 0, 1, 2])] {
        check(
            "ReverseSequence",
            &move |o, xs| {
                let n = lens.len() as i64;
                let l = o.constant(Tensor::from_slice(&[n], &lens).unwrap())?;
                let y = o.op1(
                    "ReverseSequence",
                    &[xs[0], l],
                    &[
                        ("seq_dim", seq_dim.into_attr_value()),
                        ("batch_dim", batch_dim.into_attr_value()),
                    ],
                )?;
                weighted(o, y)
            },
            &[(vec![2, 3, 4], x.clone())],
        );
    }
}

#[test]
fn unravel_index_is_not_differentiable() {
    use opforge_core::autodiff::GradientFn;
    use opforge_core::Registry;
    let g = Registry::global().attr::<opforge_core::autodiff::Gradient>("UnravelIndex");
    assert!(matches!(g.as_deref(), Some(GradientFn::NotDifferentiable)));
}

#[test]
fn gather_nd_grad() {
    let x: Vec<f64> = (0..24).map(|i| (i as f64) * 0.37 - 4.0).collect();
    // Full index tuples, partial ones (slices), duplicates, a batch of
    // tuples, and int16/int64 indices.
    let cases: Vec<(Vec<i64>, Tensor)> = vec![
        (
            vec![2, 3, 4],
            Tensor::from_slice(&[2, 3], &[1i32, 2, 3, 0, 1, 1]).unwrap(),
        ),
        (
            vec![2, 3, 4],
            Tensor::from_slice(&[3, 2], &[1i64, 2, 0, 0, 1, 2]).unwrap(),
        ),
        (
            vec![2, 3, 4],
            Tensor::from_slice(&[2, 2, 1], &[1i16, 0, 1, 1]).unwrap(),
        ),
        (vec![6, 4], Tensor::from_slice(&[2], &[5i32, 3]).unwrap()),
    ];
    for (dims, idx) in cases {
        let n: i64 = dims.iter().product();
        check(
            "GatherNd",
            &move |o, xs| {
                let i = o.constant(idx.clone())?;
                let y = o.op1("GatherNd", &[xs[0], i], &[])?;
                weighted(o, y)
            },
            &[(dims, x[..n as usize].to_vec())],
        );
    }
    // Duplicates sum, unused elements get zeros, indices get None; an
    // ignored bad index contributes nothing.
    let mut tape = GradientTape::new(ctx(), false);
    let p = tape.watch(t(&[2, 2], vec![1.0f64, 2.0, 3.0, 4.0]));
    let idx = tape
        .constant(Tensor::from_slice(&[4, 2], &[1i32, 0, 0, 1, 1, 0, 5, 5]).unwrap())
        .unwrap();
    let y = tape
        .op1(
            "GatherNd",
            &[p, idx],
            &[("bad_indices_policy", "IGNORE".into_attr_value())],
        )
        .unwrap();
    let g = tape.gradient(y, &[p, idx]).unwrap();
    assert_close(
        tape.value(g[0].unwrap()).unwrap(),
        &[2, 2],
        &[0.0, 1.0, 2.0, 0.0],
        0.0,
    );
    assert!(g[1].is_none());
}

#[test]
fn scatter_nd_grad() {
    let u: Vec<f64> = (0..12).map(|i| (i as f64) * 0.41 - 2.0).collect();
    let cases: Vec<(Vec<i64>, Tensor, Vec<i64>)> = vec![
        // Elements, with a duplicate.
        (
            vec![3],
            Tensor::from_slice(&[3, 2], &[1i32, 2, 0, 0, 1, 2]).unwrap(),
            vec![2, 3],
        ),
        // Rows of a matrix, a batch of [2, 2] tuples of one index.
        (
            vec![2, 2, 3],
            Tensor::from_slice(&[2, 2, 1], &[3i64, 1, 1, 0]).unwrap(),
            vec![4, 3],
        ),
    ];
    for (udims, idx, shape) in cases {
        let n: i64 = udims.iter().product();
        check(
            "ScatterNd",
            &move |o, xs| {
                let i = o.constant(idx.clone())?;
                let s = if idx.dtype() == opforge_core::DataType::Int32 {
                    o.int_vector(&shape.iter().map(|&d| d as i32).collect::<Vec<_>>())?
                } else {
                    o.constant(Tensor::from_slice(&[shape.len() as i64], &shape).unwrap())?
                };
                let y = o.op1("ScatterNd", &[i, xs[0], s], &[])?;
                weighted(o, y)
            },
            &[(udims, u[..n as usize].to_vec())],
        );
    }
    // Indices and shape get None.
    let mut tape = GradientTape::new(ctx(), false);
    let up = tape.watch(t(&[2], vec![1.0f64, 2.0]));
    let idx = tape
        .constant(Tensor::from_slice(&[2, 1], &[1i32, 1]).unwrap())
        .unwrap();
    let shape = tape.int_vector(&[3]).unwrap();
    let y = tape.op1("ScatterNd", &[idx, up, shape], &[]).unwrap();
    let y = tape.op1("Square", &[y], &[]).unwrap();
    let g = tape.gradient(y, &[idx, up, shape]).unwrap();
    // y = [0, 9, 0]: d(sum y^2)/du = 2 * 3 for both updates.
    assert!(g[0].is_none() && g[2].is_none());
    assert_close(tape.value(g[1].unwrap()).unwrap(), &[2], &[6.0, 6.0], 0.0);
}
