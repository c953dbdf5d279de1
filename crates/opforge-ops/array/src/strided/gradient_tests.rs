//! Gradient checks of `StridedSlice`.

use opforge_core::attrs::{AttrMap, IntoAttrValue};
use opforge_core::autodiff::{GradientTape, Ops, OpsExt, Sym, SymArg};
use opforge_core::{Result, Tensor};
use opforge_testing::util::{assert_close, ctx, t};
use opforge_testing::util::{check, weighted};

fn ss(o: &mut dyn Ops, x: Sym, b: &[i32], e: &[i32], s: &[i32], m: [i64; 5]) -> Result<Sym> {
    let (b, e, s) = (o.int_vector(b)?, o.int_vector(e)?, o.int_vector(s)?);
    let mut attrs = AttrMap::new();
    for (k, v) in [
        "begin_mask",
        "end_mask",
        "ellipsis_mask",
        "new_axis_mask",
        "shrink_axis_mask",
    ]
    .iter()
    .zip(m)
    {
        attrs.insert(k.to_string(), v.into_attr_value());
    }
    let args = [x, b, e, s].map(SymArg::One);
    Ok(o.call("StridedSlice", &args, &attrs)?[0])
}

#[test]
fn strided_slice_grad() {
    let x: Vec<f64> = (0..24).map(|i| (i as f64) * 0.37 - 4.0).collect();
    type Case = (&'static [i32], &'static [i32], &'static [i32], [i64; 5]);
    let cases: [Case; 4] = [
        // x[:, ::-2, 1:3]
        (&[0, 0, 1], &[0, 0, 3], &[1, -2, 1], [1 | 2, 1 | 2, 0, 0, 0]),
        // x[1, ..., ::2]
        (&[1, 0, 0], &[2, 0, 0], &[1, 1, 2], [4, 4, 2, 0, 1]),
        // x[tf.newaxis, 0:2, 2]
        (&[0, 0, 2], &[0, 2, 3], &[1, 1, 1], [0, 0, 0, 1, 4]),
        // x[-1:0:-1, 1:]
        (&[-1, 1], &[0, 0], &[-1, 1], [0, 2, 0, 0, 0]),
    ];
    for (b, e, s, m) in cases {
        check(
            "StridedSlice",
            &move |o, xs| {
                let y = ss(o, xs[0], b, e, s, m)?;
                weighted(o, y)
            },
            &[(vec![2, 3, 4], x.clone())],
        );
    }
    // Hand-checked: x[1::2] of [5].
    let mut tape = GradientTape::new(ctx(), false);
    let xv = tape.watch(t(&[5], vec![1.0f64, 2.0, 3.0, 4.0, 5.0]));
    let y = ss(&mut tape, xv, &[1], &[5], &[2], [0; 5]).unwrap();
    let g = tape.gradient(y, &[xv]).unwrap()[0].unwrap();
    assert_close(
        tape.value(g).unwrap(),
        &[5],
        &[0.0, 1.0, 0.0, 1.0, 0.0],
        0.0,
    );
}

#[test]
fn strided_slice_grad_kernel_and_its_gradient() {
    let c = ctx();
    let shape = Tensor::from_slice(&[2], &[2i64, 3]).unwrap();
    let b = Tensor::from_slice(&[2], &[0i64, 2]).unwrap();
    let e = Tensor::from_slice(&[2], &[2i64, 0]).unwrap();
    let s = Tensor::from_slice(&[2], &[1i64, -2]).unwrap();
    let dy = t(&[2, 1], vec![5.0f32, 7.0]);
    let out = c
        .op("StridedSliceGrad")
        .input(shape.clone())
        .input(b.clone())
        .input(e.clone())
        .input(s.clone())
        .input(dy)
        .run1()
        .unwrap();
    assert_close(&out, &[2, 3], &[0.0, 0.0, 5.0, 0.0, 0.0, 7.0], 0.0);
    let bad = c
        .op("StridedSliceGrad")
        .input(shape)
        .input(b)
        .input(e)
        .input(s)
        .input(t(&[3], vec![1.0f32, 2.0, 3.0]))
        .run1()
        .unwrap_err();
    assert!(
        bad.message()
            .contains("shape of dy was [3] instead of [2,1]"),
        "{bad}"
    );
    // Second order: the gradient of StridedSliceGrad w.r.t. dy.
    check(
        "StridedSliceGrad",
        &|o, xs| {
            let shape = o.int_vector(&[2, 3])?;
            let (b, e, s) = (
                o.int_vector(&[0, 2])?,
                o.int_vector(&[2, 0])?,
                o.int_vector(&[1, -2])?,
            );
            let y = o.op1("StridedSliceGrad", &[shape, b, e, s, xs[0]], &[])?;
            weighted(o, y)
        },
        &[(vec![2, 1], vec![0.3, -1.2])],
    );
}
