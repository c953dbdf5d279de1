//! Tests of the `Dequantize`, `QuantizeAndDequantizeV2`, `QuantizedConcat`
//! and `QuantizedReshape` kernels: outputs bit for bit against TensorFlow
//! 2.21 (vectors.rs), every check, empty inputs.

use super::fake_quant_tests::{assert_bits, run};
use super::vectors::*;
use opforge_core::attrs::IntoAttrValue;
use opforge_core::autodiff::{GradientTape, Ops, OpsExt};
use opforge_core::proto::AttrValue;
use opforge_core::{Code, DataType, Result, Tensor};
use opforge_testing::util::{ctx, t};

fn q<T: opforge_core::Element>(dt: DataType, dims: &[i64], v: Vec<T>) -> Tensor {
    t(dims, v).bitcast(dt).unwrap()
}

fn dq_input(dt: DataType) -> Tensor {
    match dt {
        DataType::QUInt8 => q(dt, &[8], DQ_QUINT8.to_vec()),
        DataType::QInt8 => q(dt, &[8], DQ_QINT8.to_vec()),
        DataType::QUInt16 => q(dt, &[8], DQ_QUINT16.to_vec()),
        DataType::QInt16 => q(dt, &[8], DQ_QINT16.to_vec()),
        _ => q(dt, &[8], DQ_QINT32.to_vec()),
    }
}

fn assert_invalid(r: Result<Vec<Tensor>>, code: Code, msg: &str) {
    let e = r.unwrap_err();
    assert_eq!(e.code(), code, "{e}");
    assert!(
        e.message().starts_with(msg),
        "{:?} does not start with {msg:?}",
        e.message()
    );
}

#[test]
fn dequantize_matches_tensorflow() {
    for (dt, mode, narrow, min, max, want) in DQ {
        let attrs = [
            ("mode", mode.into_attr_value()),
            ("narrow_range", narrow.into_attr_value()),
        ];
        let y = run(
            "Dequantize",
            vec![dq_input(dt), Tensor::scalar(min), Tensor::scalar(max)],
            &attrs,
        )
        .unwrap();
        assert_bits(
            &y[0],
            &want,
            &format!("{dt} {mode} {narrow} [{min}, {max}]"),
        );
    }
    for (dt, mode, want) in DQ_BF16 {
        let attrs = [
            ("mode", mode.into_attr_value()),
            ("dtype", DataType::BFloat16.into_attr_value()),
        ];
        let y = run(
            "Dequantize",
            vec![
                dq_input(dt),
                Tensor::scalar(-3.5f32),
                Tensor::scalar(17.25f32),
            ],
            &attrs,
        )
        .unwrap();
        let got: Vec<u16> = y[0]
            .flat::<half::bf16>()
            .unwrap()
            .iter()
            .map(|v| v.to_bits())
            .collect();
        assert_eq!(got, want, "{dt} {mode}");
    }
    let x = q(DataType::QInt8, &[2, 3, 2], DQ_AXIS_IN.to_vec());
    for (mode, narrow, want) in DQ_AXIS {
        let attrs = [
            ("mode", mode.into_attr_value()),
            ("narrow_range", narrow.into_attr_value()),
            ("axis", 1i64.into_attr_value()),
        ];
        let y = run(
            "Dequantize",
            vec![
                x.clone(),
                t(&[3], DQ_AXIS_MIN.to_vec()),
                t(&[3], DQ_AXIS_MAX.to_vec()),
            ],
            &attrs,
        )
        .unwrap();
        assert_eq!(y[0].dims(), &[2, 3, 2]);
        assert_bits(&y[0], &want, mode);
    }
}

#[test]
fn dequantize_checks() {
    let x = q(DataType::QUInt8, &[2, 3], vec![1u8, 2, 3, 4, 5, 6]);
    let s = Tensor::scalar;
    let v = |n: usize| t(&[n as i64], vec![0.5f32; n]);
    let axis = |a: i64| ("axis", a.into_attr_value());
    assert_invalid(
        run("Dequantize", vec![x.clone(), s(0f32), s(1f32)], &[axis(2)]),
        Code::InvalidArgument,
        "Axis must be less than input dimension(2), got 2",
    );
    assert_invalid(
        run("Dequantize", vec![x.clone(), v(2), s(1f32)], &[]),
        Code::InvalidArgument,
        "input_min_tensor must have as many elements as input on the dequantization axis (-1), got 2, expected 1",
    );
    assert_invalid(
        run("Dequantize", vec![x.clone(), v(3), v(2)], &[axis(1)]),
        Code::InvalidArgument,
        "input_max_tensor must have as many elements as input on the dequantization axis (1), got 2, expected 3",
    );
    assert_invalid(
        run(
            "Dequantize",
            vec![x.clone(), v(3), v(3)],
            &[axis(1), ("mode", "MIN_FIRST".into_attr_value())],
        ),
        Code::Unimplemented,
        "MIN_FIRST mode is not implemented for Dequantize with axis != -1.",
    );
    // TensorFlow aborts on a rank-2 range here.
    assert_invalid(
        run(
            "Dequantize",
            vec![x.clone(), t(&[1, 3], vec![0f32; 3]), v(3)],
            &[axis(1)],
        ),
        Code::InvalidArgument,
        "min_range must be rank 1 when axis is 1, but is rank 2",
    );
    for mode in ["MIN_FIRST", "SCALED"] {
        assert_invalid(
            run(
                "Dequantize",
                vec![x.clone(), s(0f32), s(1f32)],
                &[
                    ("mode", mode.into_attr_value()),
                    ("dtype", DataType::BFloat16.into_attr_value()),
                ],
            ),
            Code::InvalidArgument,
            &format!(
                "When output type is bfloat16, Mode string must be 'MIN_COMBINED', is '{mode}'"
            ),
        );
    }
    // An axis below -1 dequantizes per tensor (TensorFlow's kernel), one
    // slice of an axis also (MIN_FIRST allowed); empty inputs.
    let y = run("Dequantize", vec![x.clone(), s(0f32), s(1f32)], &[axis(-2)]).unwrap();
    assert_eq!(y[0].dims(), &[2, 3]);
    let one = q(DataType::QUInt8, &[2, 1], vec![1u8, 200]);
    let y = run(
        "Dequantize",
        vec![one, v(1), t(&[1], vec![1f32])],
        &[axis(1), ("mode", "MIN_FIRST".into_attr_value())],
    )
    .unwrap();
    assert_eq!(y[0].dims(), &[2, 1]);
    let e = q(DataType::QUInt8, &[0, 3], Vec::<u8>::new());
    let y = run("Dequantize", vec![e.clone(), v(3), v(3)], &[axis(1)]).unwrap();
    assert_eq!(y[0].dims(), &[0, 3]);
    let y = run("Dequantize", vec![e, v(0), v(0)], &[axis(0)]).unwrap();
    assert_eq!(y[0].dims(), &[0, 3]);
    // No kernel for quint8 -> half, nor for non-quantized inputs.
    let r = run(
        "Dequantize",
        vec![t(&[1], vec![1u8]), s(0f32), s(1f32)],
        &[],
    );
    assert!(r.is_err());
}

fn qdq_attrs(
    signed: bool,
    bits: i64,
    range: bool,
    mode: &str,
    narrow: bool,
) -> Vec<(&'static str, AttrValue)> {
    vec![
        ("signed_input", signed.into_attr_value()),
        ("num_bits", bits.into_attr_value()),
        ("range_given", range.into_attr_value()),
        ("round_mode", mode.into_attr_value()),
        ("narrow_range", narrow.into_attr_value()),
        ("axis", (-1i64).into_attr_value()),
    ]
}

#[test]
fn quantize_and_dequantize_v2_matches_tensorflow() {
    let n = QDQ_X.len() as i64;
    for (signed, bits, range, mode, narrow, min, max, want32, want64) in QDQ {
        let attrs = qdq_attrs(signed, bits, range, mode, narrow);
        let what = format!("{signed} {bits} {range} {mode} {narrow} [{min}, {max}]");
        let x = t(&[n], QDQ_X.to_vec());
        let y = run(
            "QuantizeAndDequantizeV2",
            vec![x, Tensor::scalar(min), Tensor::scalar(max)],
            &attrs,
        )
        .unwrap();
        assert_bits(&y[0], &want32, &what);
        let x = t(&[n], QDQ_X.iter().map(|&v| f64::from(v)).collect());
        let y = run(
            "QuantizeAndDequantizeV2",
            vec![
                x,
                Tensor::scalar(f64::from(min)),
                Tensor::scalar(f64::from(max)),
            ],
            &attrs,
        )
        .unwrap();
        let got: Vec<u64> = y[0]
            .flat::<f64>()
            .unwrap()
            .iter()
            .map(|v| v.to_bits())
            .collect();
        assert_eq!(got, want64, "{what}");
    }
    let x = t(&[3, 2, 2], QDQ_AXIS_X.to_vec());
    for (axis, narrow, want) in QDQ_AXIS {
        let mut attrs = qdq_attrs(true, 3, false, "HALF_TO_EVEN", narrow);
        attrs[5] = ("axis", axis.into_attr_value());
        let d = if axis == 0 { 3 } else { 2 };
        let z = t(&[d], vec![0f32; d as usize]);
        let y = run(
            "QuantizeAndDequantizeV2",
            vec![x.clone(), z.clone(), z],
            &attrs,
        )
        .unwrap();
        assert_bits(&y[0], &want, &format!("axis {axis}"));
    }
}

#[test]
fn quantize_and_dequantize_v2_checks() {
    let x = t(&[2, 3], vec![1f32, 2., 3., 4., 5., 6.]);
    let s = Tensor::scalar;
    let with = |k: &'static str, v: AttrValue| {
        let mut a = qdq_attrs(true, 8, false, "HALF_TO_EVEN", false);
        a.retain(|(n, _)| *n != k);
        a.push((k, v));
        a
    };
    let op = "QuantizeAndDequantizeV2";
    assert_invalid(
        run(
            op,
            vec![x.clone(), s(0f32), s(1f32)],
            &with("axis", (-2i64).into_attr_value()),
        ),
        Code::InvalidArgument,
        "Axis must be at least -1. Found -2",
    );
    assert_invalid(
        run(
            op,
            vec![x.clone(), s(0f32), s(1f32)],
            &with("axis", 2i64.into_attr_value()),
        ),
        Code::InvalidArgument,
        "Shape must be at least rank 3 but is rank 2",
    );
    assert_invalid(
        run(
            op,
            vec![x.clone(), s(0f32), s(1f32)],
            &with("num_bits", 0i64.into_attr_value()),
        ),
        Code::InvalidArgument,
        "num_bits is out of range: 0 with signed_input_ 1",
    );
    assert_invalid(
        run(
            op,
            vec![x.clone(), s(0f32), s(1f32)],
            &with("num_bits", 62i64.into_attr_value()),
        ),
        Code::InvalidArgument,
        "num_bits is out of range: 62 with signed_input_ 1",
    );
    let mut given = with("range_given", true.into_attr_value());
    assert_invalid(
        run(op, vec![x.clone(), s(2f32), s(1f32)], &given),
        Code::InvalidArgument,
        "Invalid range: input_min 2 > input_max 1",
    );
    assert_invalid(
        run(op, vec![x.clone(), s(0f32), s(f32::NAN)], &given),
        Code::InvalidArgument,
        "Invalid range: input_min 0 > input_max nan",
    );
    assert_invalid(
        run(op, vec![x.clone(), t(&[1], vec![0f32]), s(1f32)], &given),
        Code::InvalidArgument,
        "input_min must be a scalar.",
    );
    assert_invalid(
        run(op, vec![x.clone(), s(0f32), t(&[1], vec![1f32])], &given),
        Code::InvalidArgument,
        "input_max must be a scalar.",
    );
    // TensorFlow 2.21 rejects a given range with an axis, whatever its shape.
    given.retain(|(n, _)| *n != "axis");
    given.push(("axis", 1i64.into_attr_value()));
    assert_invalid(
        run(
            op,
            vec![x.clone(), t(&[3], vec![0f32; 3]), t(&[3], vec![1f32; 3])],
            &given,
        ),
        Code::InvalidArgument,
        "input_min must be a scalar.",
    );
    assert_invalid(
        run(op, vec![x.clone(), s(0f32), s(1f32)], &given),
        Code::InvalidArgument,
        "Shape must be rank 1 for input_min_tensor when the axis is specified",
    );
    // Ranges not given are not read; empty inputs; no half kernel.
    let y = run(
        op,
        vec![x.clone(), t(&[2], vec![0f32; 2]), s(1f32)],
        &with("axis", 1i64.into_attr_value()),
    )
    .unwrap();
    assert_eq!(y[0].dims(), &[2, 3]);
    let e = t(&[0, 3], Vec::<f32>::new());
    let y = run(
        op,
        vec![e.clone(), s(0f32), s(1f32)],
        &with("axis", 1i64.into_attr_value()),
    )
    .unwrap();
    assert_eq!(y[0].dims(), &[0, 3]);
    let y = run(
        op,
        vec![e, s(0f32), s(1f32)],
        &with("axis", (-1i64).into_attr_value()),
    )
    .unwrap();
    assert_eq!(y[0].dims(), &[0, 3]);
    let h = t(&[1], vec![half::f16::ONE]);
    let r = run(
        op,
        vec![
            h,
            Tensor::scalar(half::f16::ZERO),
            Tensor::scalar(half::f16::ONE),
        ],
        &[],
    );
    assert_eq!(r.unwrap_err().code(), Code::NotFound);
}

#[test]
fn quantize_and_dequantize_v2_gradient_passes_through() {
    // The op is piecewise constant (a numeric check sees 0): the gradient
    // is the incoming one for the input, none for the range.
    let mut tape = GradientTape::new(ctx(), false);
    let x = tape.watch(t(&[4], vec![0.3f64, -1.2, 2.5, 0.0]));
    let (a, b) = (
        tape.watch(Tensor::scalar(-1f64)),
        tape.watch(Tensor::scalar(1f64)),
    );
    let y = tape
        .op1("QuantizeAndDequantizeV2", &[x, a, b], &[])
        .unwrap();
    let w = tape
        .constant(t(&[4], vec![1.0f64, -2.0, 0.5, 3.0]))
        .unwrap();
    let z = tape.mul(y, w).unwrap();
    let g = tape.gradient(z, &[x, a, b]).unwrap();
    assert_eq!(
        tape.value(g[0].unwrap()).unwrap().flat::<f64>().unwrap(),
        &[1.0, -2.0, 0.5, 3.0]
    );
    assert!(g[1].is_none() && g[2].is_none());
}

fn qconcat(dim: i32, values: Vec<Tensor>, ranges: &[(f32, f32)]) -> Result<Vec<Tensor>> {
    ctx()
        .op("QuantizedConcat")
        .input(Tensor::scalar(dim))
        .input_list(values)
        .input_list(ranges.iter().map(|r| Tensor::scalar(r.0)).collect())
        .input_list(ranges.iter().map(|r| Tensor::scalar(r.1)).collect())
        .run()
}

#[test]
fn quantized_concat_matches_tensorflow() {
    let a = q(DataType::QUInt8, &[2, 3], QC_A.to_vec());
    let b = q(DataType::QUInt8, &[2, 2], QC_B.to_vec());
    for (ra, rb, want, min, max) in QC {
        let y = qconcat(1, vec![a.clone(), b.clone()], &[ra, rb]).unwrap();
        assert_eq!(y[0].dtype(), DataType::QUInt8);
        assert_eq!(y[0].dims(), &[2, 5]);
        assert_eq!(
            y[0].bitcast(DataType::UInt8).unwrap().flat::<u8>().unwrap(),
            &want,
            "{ra:?} {rb:?}"
        );
        assert_eq!(
            (
                y[1].scalar_value::<f32>().unwrap(),
                y[2].scalar_value::<f32>().unwrap()
            ),
            (min, max)
        );
    }
    let a = q(DataType::QInt32, &[3, 2], QC32_A.to_vec());
    let b = q(DataType::QInt32, &[1, 2], QC32_B.to_vec());
    for (ra, rb, want, min, max) in QC32 {
        let y = qconcat(0, vec![a.clone(), b.clone()], &[ra, rb]).unwrap();
        assert_eq!(y[0].dims(), &[4, 2]);
        assert_eq!(
            y[0].bitcast(DataType::Int32)
                .unwrap()
                .flat::<i32>()
                .unwrap(),
            &want,
            "{ra:?} {rb:?}"
        );
        assert_eq!(
            (
                y[1].scalar_value::<f32>().unwrap(),
                y[2].scalar_value::<f32>().unwrap()
            ),
            (min, max)
        );
    }
    // Empty inputs.
    let e = q(DataType::QUInt8, &[2, 0], Vec::<u8>::new());
    let y = qconcat(1, vec![e.clone(), e], &[(0.0, 1.0), (-1.0, 2.0)]).unwrap();
    assert_eq!(y[0].dims(), &[2, 0]);
    assert_eq!(y[1].scalar_value::<f32>().unwrap(), -1.0);
}

#[test]
fn quantized_concat_checks() {
    let a = q(DataType::QUInt8, &[2, 2], vec![1u8, 2, 3, 4]);
    let r = [(0.0, 1.0), (-1.0, 2.0)];
    let inv = Code::InvalidArgument;
    let call = ctx()
        .op("QuantizedConcat")
        .input(t(&[1], vec![0i32]))
        .input_list(vec![a.clone(), a.clone()])
        .input_list(vec![Tensor::scalar(0f32); 2])
        .input_list(vec![Tensor::scalar(1f32); 2]);
    assert_invalid(
        call.run(),
        inv,
        "Concat dim tensor should be a scalar integer, but got shape [1]",
    );
    for d in [-1, 2] {
        assert_invalid(
            qconcat(d, vec![a.clone(), a.clone()], &r),
            inv,
            &format!(
                "ConcatOp : Expected concatenating dimensions in the range [0, 2), but got {d}"
            ),
        );
    }
    let s = |v: u8| q(DataType::QUInt8, &[], vec![v]);
    assert_invalid(
        qconcat(0, vec![s(1), s(2)], &r),
        inv,
        "ConcatOp : Expected concatenating dimensions in the range [0, 0), but got 0",
    );
    assert_invalid(
        qconcat(0, vec![a.clone(), q(DataType::QUInt8, &[1], vec![1u8])], &r),
        inv,
        "ConcatOp : Ranks of all input tensors should match: shape[0] = [2,2] vs. shape[1] = [1]",
    );
    assert_invalid(
        qconcat(
            0,
            vec![a.clone(), q(DataType::QUInt8, &[2, 3], vec![0u8; 6])],
            &r,
        ),
        inv,
        "ConcatOp : Dimensions of inputs should match: shape[0] = [2,2] vs. shape[1] = [2,3]",
    );
    let call = ctx()
        .op("QuantizedConcat")
        .input(Tensor::scalar(0i32))
        .input_list(vec![a.clone(), a.clone()])
        .input_list(vec![t(&[0], Vec::<f32>::new()), Tensor::scalar(0f32)])
        .input_list(vec![Tensor::scalar(1f32); 2]);
    assert_invalid(
        call.run(),
        inv,
        "input_mins each tensor's num elements must be 1, given num elements 0 in index 0",
    );
    // quint8 and qint32 only.
    let i8s = q(DataType::QInt8, &[1], vec![1i8]);
    assert_eq!(
        qconcat(0, vec![i8s.clone(), i8s], &r).unwrap_err().code(),
        Code::NotFound
    );
}

#[test]
fn quantized_reshape() {
    let a = q(DataType::QUInt8, &[2, 2], vec![1u8, 2, 3, 4]);
    let run4 = |x: Tensor, shape: Tensor, min: Tensor, max: Tensor| {
        run("QuantizedReshape", vec![x, shape, min, max], &[])
    };
    let y = run4(
        a.clone(),
        t(&[2], vec![4i64, -1]),
        Tensor::scalar(0.5f32),
        t(&[1], vec![2f32]),
    )
    .unwrap();
    assert_eq!(y[0].dims(), &[4, 1]);
    assert_eq!(y[0].dtype(), DataType::QUInt8);
    assert_eq!(
        y[0].bitcast(DataType::UInt8).unwrap().flat::<u8>().unwrap(),
        &[1, 2, 3, 4]
    );
    assert_eq!(y[1].dims(), &[] as &[i64]);
    assert_eq!(
        (
            y[1].scalar_value::<f32>().unwrap(),
            y[2].scalar_value::<f32>().unwrap()
        ),
        (0.5, 2.0)
    );
    let inv = Code::InvalidArgument;
    assert_invalid(
        run4(
            a.clone(),
            t(&[1], vec![4i32]),
            t(&[2], vec![0f32; 2]),
            Tensor::scalar(1f32),
        ),
        inv,
        "input_min must be a scalar or a vector of 1 element",
    );
    assert_invalid(
        run4(
            a.clone(),
            t(&[1], vec![4i32]),
            Tensor::scalar(0f32),
            t(&[1, 1], vec![1f32]),
        ),
        inv,
        "input_max must be a scalar or a vector of 1 element",
    );
    assert_invalid(
        run4(
            a.clone(),
            t(&[1], vec![3i32]),
            Tensor::scalar(0f32),
            Tensor::scalar(1f32),
        ),
        inv,
        "Input to reshape is a tensor with 4 values, but the requested shape has 3",
    );
    assert_invalid(
        run4(
            a.clone(),
            t(&[1, 1], vec![4i32]),
            Tensor::scalar(0f32),
            Tensor::scalar(1f32),
        ),
        inv,
        "sizes input must be 1-D, not [1,1]",
    );
    let i32s = q(DataType::QInt32, &[3], vec![1i32, -2, 3]);
    let y = run4(
        i32s,
        t(&[2], vec![1i32, 3]),
        Tensor::scalar(0f32),
        Tensor::scalar(1f32),
    )
    .unwrap();
    assert_eq!(y[0].dims(), &[1, 3]);
    let e = q(DataType::QUInt8, &[0, 2], Vec::<u8>::new());
    let y = run4(
        e,
        t(&[1], vec![0i32]),
        Tensor::scalar(0f32),
        Tensor::scalar(1f32),
    )
    .unwrap();
    assert_eq!(y[0].dims(), &[0]);
    let i8s = q(DataType::QInt8, &[1], vec![1i8]);
    assert_eq!(
        run4(
            i8s,
            t(&[1], vec![1i32]),
            Tensor::scalar(0f32),
            Tensor::scalar(1f32)
        )
        .unwrap_err()
        .code(),
        Code::NotFound
    );
}

/// Found by scripts/hostile-cli: an empty input with a huge dimension on
/// `axis` made a range per slice (2^63 - 1 of them: "capacity overflow").
#[test]
fn quantize_and_dequantize_v2_of_an_empty_input_with_a_huge_axis() {
    let mut attrs = qdq_attrs(true, 8, false, "HALF_TO_EVEN", false);
    for (name, v) in attrs.iter_mut() {
        if *name == "axis" {
            *v = 1i64.into_attr_value();
        }
    }
    let x = Tensor::zeros(DataType::Double, &[0, i64::MAX, 3]).unwrap();
    let y = run(
        "QuantizeAndDequantizeV2",
        vec![x, Tensor::scalar(0.0f64), Tensor::scalar(1.0f64)],
        &attrs,
    )
    .unwrap();
    assert_eq!(y[0].dims(), &[0, i64::MAX, 3]);
}
