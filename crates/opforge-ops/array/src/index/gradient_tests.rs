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
fn gather_nd_and_unravel_index_gradients() {
    use opforge_core::autodiff::GradientFn;
    use opforge_core::Registry;
    // UnravelIndex: declared not differentiable.
    let reg = Registry::global();
    let g = reg.attr::<opforge_core::autodiff::Gradient>("UnravelIndex");
    assert!(matches!(g.as_deref(), Some(GradientFn::NotDifferentiable)));
    // GatherNd: TensorFlow's gradient needs ScatterNd, which is not
    // registered, so asking for it fails clearly.
    let mut tape = GradientTape::new(ctx(), false);
    let p = tape.watch(t(&[2, 2], vec![1.0f64, 2.0, 3.0, 4.0]));
    let idx = tape
        .constant(Tensor::from_slice(&[1, 2], &[1i32, 0]).unwrap())
        .unwrap();
    let y = tape.op1("GatherNd", &[p, idx], &[]).unwrap();
    let e = tape.gradient(y, &[p]).unwrap_err();
    assert!(
        e.message()
            .contains("No gradient defined for op 'GatherNd'"),
        "{e}"
    );
}
