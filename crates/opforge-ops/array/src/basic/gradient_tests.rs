//! Gradient checks of the basic array ops.

use opforge_testing::util::{check, ctx, t, weighted, X};

use opforge_core::autodiff::{GradientTape, Ops, OpsExt};
use opforge_core::Tensor;

fn x23() -> Vec<(Vec<i64>, Vec<f64>)> {
    vec![(vec![2, 3], X.to_vec())]
}

#[test]
fn identity_family() {
    check("Identity", &|o, x| o.op1("Identity", &[x[0]], &[]), &x23());
    check(
        "IdentityN",
        &|o, x| {
            let outs = o.call(
                "IdentityN",
                &[opforge_core::autodiff::SymArg::List(vec![x[0], x[1]])],
                &opforge_core::attrs::AttrMap::new(),
            )?;
            let a = weighted(o, outs[0])?;
            o.mul(a, outs[1])
        },
        &[
            (vec![2, 3], X.to_vec()),
            (vec![2, 3], X.iter().map(|v| v + 0.5).collect()),
        ],
    );
}

#[test]
fn stop_gradient_blocks() {
    let mut tape = GradientTape::new(ctx(), false);
    let x = tape.watch(t(&[2], vec![1.0f64, 2.0]));
    let s = tape.op1("StopGradient", &[x], &[]).unwrap();
    let y = tape.mul(s, x).unwrap();
    let g = tape.gradient(y, &[x]).unwrap()[0].unwrap();
    // d(stop(x) * x)/dx = stop(x) = x.
    opforge_testing::util::assert_close(tape.value(g).unwrap(), &[2], &[1.0, 2.0], 0.0);
}

#[test]
fn reshape_expand_squeeze() {
    check(
        "Reshape",
        &|o, x| {
            let s = o.int_vector(&[3, 2])?;
            let y = o.reshape(x[0], s)?;
            weighted(o, y)
        },
        &x23(),
    );
    check(
        "ExpandDims",
        &|o, x| {
            let a = o.constant(Tensor::scalar(1i32))?;
            let y = o.op1("ExpandDims", &[x[0], a], &[])?;
            weighted(o, y)
        },
        &x23(),
    );
    check(
        "Squeeze",
        &|o, x| {
            let y = o.op1("Squeeze", &[x[0]], &[])?;
            weighted(o, y)
        },
        &[(vec![2, 1, 3], X.to_vec())],
    );
}

#[test]
fn fill_and_broadcast_to() {
    check(
        "Fill",
        &|o, x| {
            let d = o.int_vector(&[2, 3])?;
            let y = o.op1("Fill", &[d, x[0]], &[])?;
            weighted(o, y)
        },
        &[(vec![], vec![0.7])],
    );
    for (dims, vals) in [
        (vec![3], X[..3].to_vec()),
        (vec![2, 1], X[..2].to_vec()),
        (vec![1, 3], X[..3].to_vec()),
        (vec![2, 3], X.to_vec()),
    ] {
        check(
            "BroadcastTo",
            &|o, x| {
                let d = o.int_vector(&[2, 2, 3])?;
                let y = o.op1("BroadcastTo", &[x[0], d], &[])?;
                weighted(o, y)
            },
            &[(dims, vals)],
        );
    }
}

#[test]
fn broadcast_to_hand_checked() {
    let mut tape = GradientTape::new(ctx(), false);
    let x = tape.watch(t(&[2, 1], vec![1.0f64, 2.0]));
    let d = tape
        .constant(Tensor::from_slice(&[2], &[2i64, 3]).unwrap())
        .unwrap();
    let y = tape.op1("BroadcastTo", &[x, d], &[]).unwrap();
    let g = tape.gradient(y, &[x, d]).unwrap();
    opforge_testing::util::assert_close(
        tape.value(g[0].unwrap()).unwrap(),
        &[2, 1],
        &[3.0, 3.0],
        0.0,
    );
    assert!(g[1].is_none());
}
