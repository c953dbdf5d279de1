//! Tests of the `QuantizeAndDequantize` (V1) kernel: expected values
//! worked out by hand from TensorFlow's one-scale algorithm.

use opforge_core::attrs::IntoAttrValue;
use opforge_core::autodiff::{GradientTape, Ops, OpsExt};
use opforge_core::{Code, Tensor};
use opforge_testing::util::{assert_close, ctx, t};

fn qdq(
    x: Tensor,
    attrs: &[(&str, opforge_core::proto::AttrValue)],
) -> opforge_core::Result<Tensor> {
    let mut call = ctx().op("QuantizeAndDequantize").input(x);
    for (k, v) in attrs {
        call = call.attr(k, v.clone());
    }
    call.run1()
}

#[test]
fn signed_8_bits_from_the_input_range() {
    // Range [-1, 1]: scale min(128/1, 127/1) = 127, so round(127 x) / 127
    // (half to even: -63.5 -> -64).
    let x = t(&[5], vec![-1.0f32, -0.5, 0.0, 0.3, 1.0]);
    let y = qdq(x, &[]).unwrap();
    let want: Vec<f64> = [-127.0, -64.0, 0.0, 38.0, 127.0]
        .iter()
        .map(|v| v / 127.0)
        .collect();
    assert_close(&y, &[5], &want, 1e-6);
    // The negative side decides: range [-2, 1] gives scale 64 (128 / 2 <
    // 127 / 1), so round(64 x) / 64.
    let x = t(&[4], vec![-2.0f64, 1.0, 0.01, 0.5]);
    let y = qdq(x, &[]).unwrap();
    assert_close(&y, &[4], &[-2.0, 1.0, 1.0 / 64.0, 0.5], 1e-12);
}

#[test]
fn unsigned_and_given_range() {
    // [0, 2] unsigned 8 bits: scale 255 / 2 = 127.5; 127.5 -> 128 (even).
    let x = t(&[4], vec![0.0f32, 0.5, 1.0, 2.0]);
    let y = qdq(x, &[("signed_input", false.into_attr_value())]).unwrap();
    let s = 2.0 / 255.0;
    assert_close(&y, &[4], &[0.0, 64.0 * s, 128.0 * s, 2.0], 1e-6);
    // Given range [-1, 1], 4 bits signed: [-8, 7], scale 7, clamped to
    // [-8/7, 1].
    let attrs = [
        ("num_bits", 4i64.into_attr_value()),
        ("range_given", true.into_attr_value()),
        ("input_min", (-1.0f32).into_attr_value()),
        ("input_max", 1.0f32.into_attr_value()),
    ];
    let x = t(&[4], vec![-3.0f64, 3.0, 0.5, -0.2]);
    let y = qdq(x, &attrs).unwrap();
    assert_close(&y, &[4], &[-8.0 / 7.0, 1.0, 4.0 / 7.0, -1.0 / 7.0], 1e-12);
}

#[test]
fn empty_zero_and_errors() {
    let y = qdq(t(&[0, 2], Vec::<f32>::new()), &[]).unwrap();
    assert_eq!(y.dims(), &[0, 2]);
    let y = qdq(t(&[3], vec![0.0f64; 3]), &[]).unwrap();
    assert_close(&y, &[3], &[0.0; 3], 0.0);
    let e = qdq(t(&[1], vec![1f32]), &[("num_bits", 0i64.into_attr_value())]).unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument);
    assert!(
        e.message()
            .starts_with("num_bits is out of range: 0 with signed_input_ 1"),
        "{e}"
    );
    let e = qdq(
        t(&[1], vec![1f32]),
        &[
            ("num_bits", 63i64.into_attr_value()),
            ("signed_input", false.into_attr_value()),
        ],
    )
    .unwrap_err();
    assert!(
        e.message()
            .starts_with("num_bits is out of range: 63 with signed_input_ 0"),
        "{e}"
    );
    let e = qdq(
        t(&[1], vec![1f32]),
        &[
            ("range_given", true.into_attr_value()),
            ("input_min", 1.0f32.into_attr_value()),
            ("input_max", (-1.0f32).into_attr_value()),
        ],
    )
    .unwrap_err();
    assert!(
        e.message()
            .starts_with("Invalid range: input_min 1 > input_max -1"),
        "{e}"
    );
    // TensorFlow's CPU kernel takes float and double only.
    let h = t(&[1], vec![half::f16::ONE]);
    assert_eq!(qdq(h, &[]).unwrap_err().code(), Code::NotFound);
}

#[test]
fn gradient_passes_through() {
    // A straight-through gradient (the op is piecewise constant, so a
    // numeric check cannot see it): d(sum(w * qdq(x)))/dx = w.
    for x in [
        t(&[2, 2], vec![1.3f32, -0.6, 4.1, 0.45]),
        t(&[2, 2], vec![1.3f64, -0.6, 4.1, 0.45]),
    ] {
        let mut tape = GradientTape::new(ctx(), false);
        let x = tape.watch(x);
        let y = tape.op1("QuantizeAndDequantize", &[x], &[]).unwrap();
        let w = tape
            .constant(t(&[2, 2], vec![1.0f64, -2.0, 0.5, 3.0]))
            .unwrap();
        let dt = tape.dtype(y);
        let w = tape
            .op1("Cast", &[w], &[("DstT", dt.into_attr_value())])
            .unwrap();
        let z = tape.mul(y, w).unwrap();
        let g = tape.gradient(z, &[x]).unwrap()[0].unwrap();
        assert_close(tape.value(g).unwrap(), &[2, 2], &[1.0, -2.0, 0.5, 3.0], 0.0);
    }
}
