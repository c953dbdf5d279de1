//! Tests of the unary math ops and `Cast`.

use super::*;
use half::{bf16, f16};
use opforge_core::{Code, Tensor};
use opforge_testing::util::{assert_close, ctx, t};

fn run1(op: &str, x: Tensor) -> Result<Tensor> {
    ctx().op(op).input(x).run1()
}

fn f32s(t: &Tensor) -> Vec<f32> {
    t.flat::<f32>().unwrap().to_vec()
}

#[test]
fn ops_are_registered_with_kernels() {
    opforge_testing::util::assert_one_cpu_kernel_each("crates/opforge-ops/math-unary/src/unary/");
}

#[test]
fn neg_abs_sign_square() {
    let x = t(&[4], vec![-2.5f32, 0.0, 3.0, -0.0]);
    assert_eq!(
        f32s(&run1("Neg", x.clone()).unwrap()),
        [2.5, -0.0, -3.0, 0.0]
    );
    assert_eq!(f32s(&run1("Abs", x.clone()).unwrap()), [2.5, 0.0, 3.0, 0.0]);
    assert_eq!(
        f32s(&run1("Sign", x.clone()).unwrap()),
        [-1.0, 0.0, 1.0, 0.0]
    );
    assert_eq!(f32s(&run1("Square", x).unwrap()), [6.25, 0.0, 9.0, 0.0]);
    let s = run1("Sign", t(&[1], vec![f64::NAN])).unwrap();
    assert!(s.flat::<f64>().unwrap()[0].is_nan());

    // Integers wrap instead of overflowing.
    let i = t(&[4], vec![i32::MIN, -7, 0, 5]);
    let got = run1("Neg", i.clone()).unwrap();
    assert_eq!(got.flat::<i32>().unwrap(), &[i32::MIN, 7, 0, -5]);
    let got = run1("Abs", i.clone()).unwrap();
    assert_eq!(got.flat::<i32>().unwrap(), &[i32::MIN, 7, 0, 5]);
    let got = run1("Sign", i).unwrap();
    assert_eq!(got.flat::<i32>().unwrap(), &[-1, -1, 0, 1]);
    let got = run1("Square", t(&[3], vec![3i64, -4, 1 << 32])).unwrap();
    assert_eq!(got.flat::<i64>().unwrap(), &[9, 16, 0]);
    let got = run1("Square", t(&[2], vec![16u8, 3])).unwrap();
    assert_eq!(got.flat::<u8>().unwrap(), &[0, 9]);

    // Complex: sign(3+4i) = 0.6+0.8i, square(1+2i) = -3+4i.
    let c = t(
        &[2],
        vec![Complex::new(3.0f64, 4.0), Complex::new(0.0, 0.0)],
    );
    let got = run1("Sign", c).unwrap();
    let v = got.flat::<Complex<f64>>().unwrap();
    assert!((v[0].re - 0.6).abs() < 1e-12 && (v[0].im - 0.8).abs() < 1e-12);
    assert_eq!(v[1], Complex::new(0.0, 0.0));
    let got = run1("Square", t(&[1], vec![Complex::new(1.0f32, 2.0)])).unwrap();
    assert_eq!(
        got.flat::<Complex<f32>>().unwrap(),
        &[Complex::new(-3.0, 4.0)]
    );
    let got = run1("Neg", t(&[1], vec![Complex::new(1.0f32, -2.0)])).unwrap();
    assert_eq!(
        got.flat::<Complex<f32>>().unwrap(),
        &[Complex::new(-1.0, 2.0)]
    );
}

#[test]
fn reciprocal_float_and_int() {
    let got = run1("Reciprocal", t(&[3], vec![2.0f64, -0.25, 0.0])).unwrap();
    assert_eq!(got.flat::<f64>().unwrap(), &[0.5, -4.0, f64::INFINITY]);
    let got = run1("Reciprocal", t(&[4], vec![1i32, -1, 2, -3])).unwrap();
    assert_eq!(got.flat::<i32>().unwrap(), &[1, -1, 0, 0]);
    let err = run1("Reciprocal", t(&[2], vec![1i64, 0])).unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument);
    assert!(err.message().contains("Integer division by zero"), "{err}");
    let got = run1("Reciprocal", t(&[1], vec![Complex::new(0.0f64, 2.0)])).unwrap();
    assert_eq!(
        got.flat::<Complex<f64>>().unwrap(),
        &[Complex::new(0.0, -0.5)]
    );
}

#[test]
fn transcendental_float_values() {
    let x = t(&[3], vec![0.0f64, 1.0, 4.0]);
    let e = std::f64::consts::E;
    assert_close(
        &run1("Sqrt", x.clone()).unwrap(),
        &[3],
        &[0.0, 1.0, 2.0],
        1e-15,
    );
    assert_close(
        &run1("Rsqrt", t(&[2], vec![4.0f64, 0.25])).unwrap(),
        &[2],
        &[0.5, 2.0],
        1e-15,
    );
    assert_close(
        &run1("Exp", x.clone()).unwrap(),
        &[3],
        &[1.0, e, 54.598150033144236],
        1e-14,
    );
    assert_close(
        &run1("Log", t(&[3], vec![1.0f64, e, 0.0])).unwrap(),
        &[3],
        &[0.0, 1.0, f64::NEG_INFINITY],
        1e-15,
    );
    // log1p(1e-10) = 1e-10 - 5e-21 (accurate near 0).
    let got = run1("Log1p", t(&[2], vec![1e-10f64, e - 1.0])).unwrap();
    assert!((got.flat::<f64>().unwrap()[0] - (1e-10 - 5e-21)).abs() < 1e-25);
    assert!((got.flat::<f64>().unwrap()[1] - 1.0).abs() < 1e-15);
    // tanh(0.5) = (e - 1) / (e + 1); sigmoid(0) = 0.5, sigmoid(-1000) = 0.
    assert_close(
        &run1("Tanh", t(&[3], vec![0.0f64, 0.5, -30.0])).unwrap(),
        &[3],
        &[0.0, (e - 1.0) / (e + 1.0), -1.0],
        1e-15,
    );
    assert_close(
        &run1("Sigmoid", t(&[3], vec![0.0f32, -1000.0, 2.0])).unwrap(),
        &[3],
        &[0.5, 0.0, 1.0 / (1.0 + (-2.0f64).exp())],
        1e-6,
    );
    let pi = std::f64::consts::PI;
    assert_close(
        &run1("Sin", t(&[3], vec![0.0f64, pi / 2.0, pi / 6.0])).unwrap(),
        &[3],
        &[0.0, 1.0, 0.5],
        1e-15,
    );
    assert_close(
        &run1("Cos", t(&[3], vec![0.0f64, pi, pi / 3.0])).unwrap(),
        &[3],
        &[1.0, -1.0, 0.5],
        1e-15,
    );
    let got = run1("Sqrt", t(&[1], vec![-1.0f32])).unwrap();
    assert!(got.flat::<f32>().unwrap()[0].is_nan());
}

#[test]
fn half_and_bfloat16_compute_in_f32() {
    let x = t(
        &[3],
        vec![f16::from_f32(4.0), f16::from_f32(0.0), f16::from_f32(-2.0)],
    );
    let got = run1("Sqrt", x.clone()).unwrap();
    let v: Vec<f32> = got
        .flat::<f16>()
        .unwrap()
        .iter()
        .map(|h| h.to_f32())
        .collect();
    assert_eq!(v[..2], [2.0, 0.0]);
    assert!(v[2].is_nan());
    assert_close(
        &run1("Exp", x.clone()).unwrap(),
        &[3],
        &[54.598150033144236, 1.0, 0.1353352832366127],
        1e-3,
    );
    assert_close(&run1("Neg", x).unwrap(), &[3], &[-4.0, 0.0, 2.0], 0.0);
    let b = t(
        &[3],
        vec![
            bf16::from_f32(1.5),
            bf16::from_f32(-2.5),
            bf16::from_f32(0.0),
        ],
    );
    assert_close(
        &run1("Floor", b.clone()).unwrap(),
        &[3],
        &[1.0, -3.0, 0.0],
        0.0,
    );
    assert_close(
        &run1("Ceil", b.clone()).unwrap(),
        &[3],
        &[2.0, -2.0, 0.0],
        0.0,
    );
    assert_close(
        &run1("Round", b.clone()).unwrap(),
        &[3],
        &[2.0, -2.0, 0.0],
        0.0,
    );
    assert_close(
        &run1("Abs", b.clone()).unwrap(),
        &[3],
        &[1.5, 2.5, 0.0],
        0.0,
    );
    assert_close(
        &run1("Tanh", b).unwrap(),
        &[3],
        &[0.9051482536448664, -0.9866142981514303, 0.0],
        1e-2,
    );
}

#[test]
fn complex_transcendental() {
    let pi = std::f64::consts::PI;
    // exp(i pi) = -1; log(-1) = i pi; sqrt(-4) = 2i; log1p(-2) = log(-1) = i pi.
    let got = run1("Exp", t(&[1], vec![Complex::new(0.0f64, pi)])).unwrap();
    let v = got.flat::<Complex<f64>>().unwrap()[0];
    assert!((v.re + 1.0).abs() < 1e-15 && v.im.abs() < 1e-15, "{v}");
    let got = run1("Log", t(&[1], vec![Complex::new(-1.0f64, 0.0)])).unwrap();
    assert_eq!(
        got.flat::<Complex<f64>>().unwrap()[0],
        Complex::new(0.0, pi)
    );
    let got = run1("Sqrt", t(&[1], vec![Complex::new(-4.0f32, 0.0)])).unwrap();
    assert_eq!(
        got.flat::<Complex<f32>>().unwrap()[0],
        Complex::new(0.0, 2.0)
    );
    let got = run1("Log1p", t(&[1], vec![Complex::new(-2.0f64, 0.0)])).unwrap();
    let v = got.flat::<Complex<f64>>().unwrap()[0];
    assert!(v.re.abs() < 1e-15 && (v.im - pi).abs() < 1e-15, "{v}");
    // sigmoid(0) = 0.5; tanh(i pi/4) = i tan(pi/4) = i.
    let got = run1("Sigmoid", t(&[1], vec![Complex::new(0.0f64, 0.0)])).unwrap();
    assert_eq!(
        got.flat::<Complex<f64>>().unwrap()[0],
        Complex::new(0.5, 0.0)
    );
    let got = run1("Tanh", t(&[1], vec![Complex::new(0.0f64, pi / 4.0)])).unwrap();
    let v = got.flat::<Complex<f64>>().unwrap()[0];
    assert!(v.re.abs() < 1e-15 && (v.im - 1.0).abs() < 1e-15, "{v}");
    // sin(i) = i sinh(1); cos(i) = cosh(1); rsqrt(-4) = 1/(2i) = -0.5i.
    let got = run1("Sin", t(&[1], vec![Complex::new(0.0f64, 1.0)])).unwrap();
    let v = got.flat::<Complex<f64>>().unwrap()[0];
    assert!(v.re.abs() < 1e-15 && (v.im - 1f64.sinh()).abs() < 1e-15);
    let got = run1("Cos", t(&[1], vec![Complex::new(0.0f64, 1.0)])).unwrap();
    let v = got.flat::<Complex<f64>>().unwrap()[0];
    assert!((v.re - 1f64.cosh()).abs() < 1e-15 && v.im.abs() < 1e-15);
    let got = run1("Rsqrt", t(&[1], vec![Complex::new(-4.0f64, 0.0)])).unwrap();
    assert_eq!(
        got.flat::<Complex<f64>>().unwrap()[0],
        Complex::new(0.0, -0.5)
    );
}

#[test]
fn floor_ceil_round_half_to_even() {
    let x = t(
        &[10],
        vec![0.5f32, 1.5, 2.5, -0.5, -1.5, -2.5, 2.4, 2.6, -2.6, 3.0],
    );
    let got = run1("Round", x.clone()).unwrap();
    assert_eq!(
        f32s(&got),
        [0.0, 2.0, 2.0, -0.0, -2.0, -2.0, 2.0, 3.0, -3.0, 3.0]
    );
    let got = run1("Floor", x.clone()).unwrap();
    assert_eq!(
        f32s(&got),
        [0.0, 1.0, 2.0, -1.0, -2.0, -3.0, 2.0, 2.0, -3.0, 3.0]
    );
    let got = run1("Ceil", x).unwrap();
    assert_eq!(
        f32s(&got),
        [1.0, 2.0, 3.0, -0.0, -1.0, -2.0, 3.0, 3.0, -2.0, 3.0]
    );
    let got = run1("Round", t(&[2], vec![4.5f64, 5.5])).unwrap();
    assert_eq!(got.flat::<f64>().unwrap(), &[4.0, 6.0]);
    let got = run1("Round", t(&[2], vec![-3i64, 7])).unwrap();
    assert_eq!(got.flat::<i64>().unwrap(), &[-3, 7]);
}

#[test]
fn logical_not_and_unsupported_dtypes() {
    let got = run1("LogicalNot", t(&[3], vec![true, false, true])).unwrap();
    assert_eq!(got.flat::<bool>().unwrap(), &[false, true, false]);
    // No kernel for ints in Sqrt: the OpDef rejects them.
    let err = run1("Sqrt", t(&[1], vec![4i32])).unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument, "{err}");
    // Round on complex is allowed by the OpDef but has no CPU kernel (as TensorFlow).
    let err = run1("Round", t(&[1], vec![Complex::new(1.5f32, 0.0)])).unwrap_err();
    assert_eq!(err.code(), Code::NotFound, "{err}");
}

#[test]
fn empty_and_scalar_tensors() {
    for op in ["Neg", "Exp", "Floor", "Round", "Sigmoid", "Square"] {
        let got = run1(op, t(&[0, 3], Vec::<f32>::new())).unwrap();
        assert_eq!(got.dims(), &[0, 3], "{op}");
    }
    let got = run1("Reciprocal", t(&[0], Vec::<i32>::new())).unwrap();
    assert_eq!(got.dims(), &[0]);
    let got = run1("Neg", Tensor::scalar(2.0f64)).unwrap();
    assert_eq!(got.dims(), &[] as &[i64]);
    assert_eq!(got.scalar_value::<f64>().unwrap(), -2.0);
}

#[test]
fn unary_forwards_a_uniquely_owned_input() {
    let x = t(&[3], vec![1.0f32, 2.0, 3.0]);
    let ptr = x.bytes().unwrap().as_ptr();
    let got = run1("Neg", x).unwrap();
    assert_eq!(got.bytes().unwrap().as_ptr(), ptr);
    assert_eq!(f32s(&got), [-1.0, -2.0, -3.0]);
    // A shared input is not overwritten.
    let x = t(&[2], vec![1.0f32, 2.0]);
    let got = run1("Neg", x.clone()).unwrap();
    assert_eq!(f32s(&x), [1.0, 2.0]);
    assert_eq!(f32s(&got), [-1.0, -2.0]);
}

#[test]
fn large_inputs_are_sharded_correctly() {
    let n = 100_003;
    let x: Vec<f64> = (0..n).map(|i| i as f64 * 0.001).collect();
    let got = run1("Exp", t(&[n as i64], x.clone())).unwrap();
    let v = got.flat::<f64>().unwrap();
    for i in [0, 1, 50_000, n - 1] {
        assert_eq!(v[i], (i as f64 * 0.001).exp());
    }
}

fn grad(op: &str, y: Tensor, dy: Tensor) -> Result<Tensor> {
    ctx().op(op).input(y).input(dy).run1()
}

#[test]
fn gradient_helpers() {
    let y = t(&[3], vec![0.5f64, -0.25, 2.0]);
    let dy = t(&[3], vec![2.0f64, 4.0, 0.0]);
    // dy * (1 - y^2)
    assert_close(
        &grad("TanhGrad", y.clone(), dy.clone()).unwrap(),
        &[3],
        &[1.5, 3.75, 0.0],
        1e-15,
    );
    // dy * y * (1 - y)
    assert_close(
        &grad("SigmoidGrad", y.clone(), dy.clone()).unwrap(),
        &[3],
        &[0.5, -1.25, 0.0],
        1e-15,
    );
    // dy * 0.5 / y
    assert_close(
        &grad("SqrtGrad", y.clone(), dy.clone()).unwrap(),
        &[3],
        &[2.0, -8.0, 0.0],
        1e-15,
    );
    // dy * -0.5 * y^3
    assert_close(
        &grad("RsqrtGrad", y.clone(), dy.clone()).unwrap(),
        &[3],
        &[-0.125, 0.03125, 0.0],
        1e-15,
    );
    // -dy * y^2
    assert_close(
        &grad("ReciprocalGrad", y, dy).unwrap(),
        &[3],
        &[-0.5, -0.25, 0.0],
        1e-15,
    );
    // TensorFlow's convention: dy == 0 gives 0 even where y == 0.
    let got = grad("SqrtGrad", t(&[1], vec![0.0f32]), t(&[1], vec![0.0f32])).unwrap();
    assert_eq!(f32s(&got), [0.0]);
    let got = grad("SqrtGrad", t(&[1], vec![0.0f32]), t(&[1], vec![1.0f32])).unwrap();
    assert_eq!(f32s(&got), [f32::INFINITY]);
}

#[test]
fn gradient_helpers_complex_half_and_shapes() {
    // SqrtGrad on complex divides by conj(y): 0.5 * 1 / conj(i) = 0.5 / -i = 0.5i.
    let got = grad(
        "SqrtGrad",
        t(&[1], vec![Complex::new(0.0f64, 1.0)]),
        t(&[1], vec![Complex::new(1.0f64, 0.0)]),
    )
    .unwrap();
    assert_eq!(
        got.flat::<Complex<f64>>().unwrap(),
        &[Complex::new(0.0, 0.5)]
    );
    // ReciprocalGrad: -conj(y)^2 * dy = -(-i)^2 = 1.
    let got = grad(
        "ReciprocalGrad",
        t(&[1], vec![Complex::new(0.0f32, 1.0)]),
        t(&[1], vec![Complex::new(1.0f32, 0.0)]),
    )
    .unwrap();
    assert_eq!(
        got.flat::<Complex<f32>>().unwrap(),
        &[Complex::new(1.0, 0.0)]
    );
    let h = |v: &[f32]| {
        t(
            &[v.len() as i64],
            v.iter().map(|&x| f16::from_f32(x)).collect(),
        )
    };
    assert_close(
        &grad("TanhGrad", h(&[0.5]), h(&[2.0])).unwrap(),
        &[1],
        &[1.5],
        0.0,
    );
    // Same number of elements but another shape: computed flat, y's shape.
    let got = grad(
        "TanhGrad",
        t(&[2, 2], vec![0.0f32; 4]),
        t(&[4], vec![1.0f32, 2.0, 3.0, 4.0]),
    )
    .unwrap();
    assert_eq!(got.dims(), &[2, 2]);
    assert_eq!(f32s(&got), [1.0, 2.0, 3.0, 4.0]);
    let err = grad(
        "TanhGrad",
        t(&[2], vec![0.0f32; 2]),
        t(&[3], vec![0.0f32; 3]),
    )
    .unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument);
    assert!(
        err.message()
            .contains("must have same number of elements, got 2 and 3"),
        "{err}"
    );
    let got = grad(
        "SigmoidGrad",
        t(&[0], Vec::<f64>::new()),
        t(&[0], Vec::<f64>::new()),
    )
    .unwrap();
    assert_eq!(got.dims(), &[0]);
}

fn cast(x: Tensor, dst: DataType) -> Result<Tensor> {
    ctx().op("Cast").input(x).attr("DstT", dst).run1()
}

#[test]
fn cast_float_to_int_truncates_and_saturates() {
    let x = t(&[7], vec![1.9f32, -1.9, 0.5, -0.5, 3e9, -3e9, f32::NAN]);
    let got = cast(x.clone(), DataType::Int32).unwrap();
    assert_eq!(
        got.flat::<i32>().unwrap(),
        &[1, -1, 0, 0, i32::MAX, i32::MIN, 0]
    );
    let got = cast(x, DataType::UInt8).unwrap();
    assert_eq!(got.flat::<u8>().unwrap(), &[1, 0, 0, 0, 255, 0, 0]);
    let got = cast(t(&[2], vec![2.75f64, -7.5]), DataType::Int64).unwrap();
    assert_eq!(got.flat::<i64>().unwrap(), &[2, -7]);
}

#[test]
fn cast_bool_int_and_wrapping() {
    let got = cast(t(&[4], vec![0i32, 5, -1, 0]), DataType::Bool).unwrap();
    assert_eq!(got.flat::<bool>().unwrap(), &[false, true, true, false]);
    let got = cast(t(&[3], vec![0.0f32, -0.0, f32::NAN]), DataType::Bool).unwrap();
    assert_eq!(got.flat::<bool>().unwrap(), &[false, false, true]);
    let got = cast(t(&[2], vec![true, false]), DataType::Float).unwrap();
    assert_eq!(f32s(&got), [1.0, 0.0]);
    let got = cast(t(&[2], vec![true, false]), DataType::Int64).unwrap();
    assert_eq!(got.flat::<i64>().unwrap(), &[1, 0]);
    // Integer narrowing wraps like static_cast.
    let got = cast(t(&[3], vec![300i32, -1, 128]), DataType::Int8).unwrap();
    assert_eq!(got.flat::<i8>().unwrap(), &[44, -1, -128]);
    let got = cast(t(&[2], vec![-1i64, 1 << 40]), DataType::UInt32).unwrap();
    assert_eq!(got.flat::<u32>().unwrap(), &[u32::MAX, 0]);
    let got = cast(t(&[1], vec![u64::MAX]), DataType::Int64).unwrap();
    assert_eq!(got.flat::<i64>().unwrap(), &[-1]);
    // Large ints to float round to nearest.
    let got = cast(t(&[1], vec![16_777_217i32]), DataType::Float).unwrap();
    assert_eq!(f32s(&got), [16_777_216.0]);
}

#[test]
fn cast_half_bfloat16_and_complex() {
    let got = cast(t(&[3], vec![1.0f32, 65504.0, 1e6]), DataType::Half).unwrap();
    let v: Vec<f32> = got
        .flat::<f16>()
        .unwrap()
        .iter()
        .map(|h| h.to_f32())
        .collect();
    assert_eq!(v, [1.0, 65504.0, f32::INFINITY]);
    let got = cast(t(&[2], vec![3i32, -2]), DataType::BFloat16).unwrap();
    assert_close(&got, &[2], &[3.0, -2.0], 0.0);
    let got = cast(t(&[1], vec![bf16::from_f32(2.5)]), DataType::Int32).unwrap();
    assert_eq!(got.flat::<i32>().unwrap(), &[2]);
    // Complex to real keeps the real part; real to complex has a zero imaginary part.
    let got = cast(
        t(
            &[2],
            vec![Complex::new(1.5f64, 2.0), Complex::new(-3.0, 9.0)],
        ),
        DataType::Float,
    )
    .unwrap();
    assert_eq!(f32s(&got), [1.5, -3.0]);
    let got = cast(t(&[1], vec![Complex::new(-3.7f32, 9.0)]), DataType::Int32).unwrap();
    assert_eq!(got.flat::<i32>().unwrap(), &[-3]);
    let got = cast(t(&[1], vec![Complex::new(0.0f32, 9.0)]), DataType::Bool).unwrap();
    assert_eq!(got.flat::<bool>().unwrap(), &[false]);
    let got = cast(t(&[2], vec![2i32, -1]), DataType::Complex128).unwrap();
    assert_eq!(
        got.flat::<Complex<f64>>().unwrap(),
        &[Complex::new(2.0, 0.0), Complex::new(-1.0, 0.0)]
    );
    let got = cast(
        t(&[1], vec![Complex::new(0.1f64, -0.2)]),
        DataType::Complex64,
    )
    .unwrap();
    assert_eq!(
        got.flat::<Complex<f32>>().unwrap(),
        &[Complex::new(0.1f32, -0.2f32)]
    );
}

#[test]
fn cast_truncate_attr() {
    // 1 + 2^-8 + 2^-9 rounds up to 1 + 2^-7 in bfloat16, truncates to 1.
    let v = 1.0f32 + 2f32.powi(-8) + 2f32.powi(-9);
    let x = t(&[1], vec![v]);
    let got = cast(x.clone(), DataType::BFloat16).unwrap();
    assert_eq!(got.flat::<bf16>().unwrap()[0].to_f32(), 1.0 + 2f32.powi(-7));
    let got = ctx()
        .op("Cast")
        .input(x)
        .attr("DstT", DataType::BFloat16)
        .attr("Truncate", true)
        .run1()
        .unwrap();
    assert_eq!(got.flat::<bf16>().unwrap()[0].to_f32(), 1.0);
    // double -> float: 1 + 2^-24 + 2^-30 rounds up, truncates down.
    let d = 1.0f64 + 2f64.powi(-24) + 2f64.powi(-30);
    let got = ctx()
        .op("Cast")
        .input(t(&[1], vec![d]))
        .attr("DstT", DataType::Float)
        .attr("Truncate", true)
        .run1()
        .unwrap();
    assert_eq!(f32s(&got), [1.0]);
    assert_eq!(
        f32s(&cast(t(&[1], vec![d]), DataType::Float).unwrap()),
        [1.0 + 2f32.powi(-23)]
    );
}

#[test]
fn cast_identity_strings_and_unsupported() {
    let x = t(&[2], vec![1.5f32, 2.5]);
    let ptr = x.bytes().unwrap().as_ptr();
    let got = cast(x, DataType::Float).unwrap();
    assert_eq!(
        got.bytes().unwrap().as_ptr(),
        ptr,
        "a same-type cast passes through"
    );
    let s = Tensor::from_strings(&[1], vec![b"a".to_vec()]).unwrap();
    assert_eq!(cast(s.clone(), DataType::String).unwrap(), s);
    let err = cast(s, DataType::Float).unwrap_err();
    assert_eq!(err.code(), Code::Unimplemented);
    assert!(
        err.message()
            .contains("Cast string to float is not supported"),
        "{err}"
    );
    let got = cast(t(&[0, 2], Vec::<i32>::new()), DataType::Double).unwrap();
    assert_eq!(got.dims(), &[0, 2]);
    assert_eq!(got.dtype(), DataType::Double);
}

#[test]
fn element_trait_edge_cases() {
    assert_eq!(2i32.int_pow(10), 1024);
    assert_eq!(3i8.int_pow(5), 3i8.wrapping_mul(81)); // 243 wraps to -13
    assert_eq!((-2i64).int_pow(0), 1);
    assert_eq!(5i32.int_pow(-1), 0);
    assert_eq!(i32::MIN.trunc_div(-1), i32::MIN);
    assert_eq!(i32::MIN.trunc_rem(-1), 0);
    assert_eq!(7u8.trunc_div(0), 0);
    assert_eq!(RealFloat::abs(f16::from_f32(-0.0)).to_bits(), 0);
    assert!(!Complex::<f64>::ZERO.pow(Complex::new(2.0, 0.0)).re.is_nan());
}

/// Shape functions and gradients.
mod shape_and_gradient_tests {
    use opforge_core::attrs::IntoAttrValue;
    use opforge_core::autodiff::{
        compute_gradient, compute_gradient_error, Gradient, GradientFn, GradientTape, Ops, OpsExt,
        Sym,
    };
    use opforge_core::{DataType, Result, Tensor};
    use opforge_testing::infer_ok;
    use opforge_testing::shape::ShapeTestOp;
    use opforge_testing::util::{assert_close, ctx, t};

    type Builder = dyn Fn(&mut dyn Ops, &[Sym]) -> Result<Sym>;

    /// The differentiable unary ops.
    const DIFFERENTIABLE: &[&str] = &[
        "Neg",
        "Abs",
        "Sign",
        "Reciprocal",
        "Square",
        "Sqrt",
        "Rsqrt",
        "Exp",
        "Log",
        "Log1p",
        "Tanh",
        "Sigmoid",
        "Sin",
        "Cos",
    ];

    /// As TensorFlow's array_grad.py registers them (the array ops'
    /// module registers them too; registered here when missing, so that
    /// second derivatives through the default seed `OnesLike(y)` work).
    pub(crate) fn seed_ops_not_differentiable() {
        let r = opforge_core::registry::Registry::global();
        for op in ["OnesLike", "ZerosLike"] {
            if r.attr::<Gradient>(op).as_deref().is_none() {
                r.set_attr::<Gradient>(op, std::sync::Arc::new(GradientFn::NotDifferentiable))
                    .unwrap();
            }
        }
    }

    #[test]
    fn unary_shape_functions_keep_the_input_handle() {
        let ops =
            opforge_testing::util::ops_registered_under("crates/opforge-ops/math-unary/src/unary/");
        for op in &ops {
            let test_op = ShapeTestOp::new(op);
            if op.ends_with("Grad") {
                // TensorFlow's UnchangedShape: input 0, `dy` not merged in.
                infer_ok!(test_op, "[2,?];[2,3]", "in0");
                infer_ok!(test_op, "?;[2,3]", "in0");
                infer_ok!(test_op, "[2,3];?", "in0");
                infer_ok!(test_op, "[2,3];[4]", "in0");
            } else {
                infer_ok!(test_op, "?", "in0");
                infer_ok!(test_op, "[]", "in0");
                infer_ok!(test_op, "[1,?,3]", "in0");
                infer_ok!(test_op, "[0]", "in0");
            }
        }
        let cast = ShapeTestOp::new("Cast")
            .attr("SrcT", DataType::Int32)
            .attr("DstT", DataType::Float);
        infer_ok!(cast, "[?,2]", "in0");
    }

    fn unary(op: &'static str) -> impl Fn(&mut dyn Ops, &[Sym]) -> Result<Sym> {
        move |o: &mut dyn Ops, xs: &[Sym]| o.op1(op, &[xs[0]], &[])
    }

    /// Checks `f`'s gradient on the CPU and the fake device.
    fn assert_gradient_ok(name: &str, f: &Builder, xs: &[(Vec<i64>, Vec<f64>)]) {
        opforge_testing::util::check_with(name, f, xs, false);
    }

    #[test]
    fn unary_gradients_match_numerical_ones() {
        // Away from kinks (Abs, Sign at 0) and in the domains (Sqrt, Log, ...).
        let positive = vec![0.3, 0.7, 1.2, 2.5, 0.9, 1.7];
        let mixed = vec![-1.3, -0.4, 0.2, 0.6, 1.1, -2.0];
        for op in DIFFERENTIABLE {
            let xs = match *op {
                "Sqrt" | "Rsqrt" | "Log" | "Reciprocal" => positive.clone(),
                _ => mixed.clone(),
            };
            assert_gradient_ok(op, &unary(op), &[(vec![2, 3], xs)]);
        }
    }

    /// The helpers' own gradients (`TanhGrad`, ...), with respect to both inputs.
    #[test]
    fn gradient_helper_gradients_match_numerical_ones() {
        for op in [
            "TanhGrad",
            "SigmoidGrad",
            "SqrtGrad",
            "RsqrtGrad",
            "ReciprocalGrad",
        ] {
            let f = move |o: &mut dyn Ops, xs: &[Sym]| o.op1(op, &[xs[0], xs[1]], &[]);
            let y = vec![0.3, 0.7, 1.2, 0.5, 0.9, 1.7];
            let dy = vec![-1.3, -0.4, 0.2, 0.6, 1.1, -2.0];
            assert_gradient_ok(op, &f, &[(vec![2, 3], y), (vec![2, 3], dy)]);
        }
    }

    fn grad1(op: &str, x: Tensor) -> Option<Tensor> {
        let mut tape = GradientTape::new(ctx(), false);
        let xs = tape.watch(x);
        let y = tape.op1(op, &[xs], &[]).unwrap();
        tape.gradient_tensors(y, &[xs]).unwrap().pop().unwrap()
    }

    #[test]
    fn unary_gradients_against_hand_values() {
        let x = t(&[3], vec![1.0f64, -2.0, 0.5]);
        assert_close(
            &grad1("Square", x.clone()).unwrap(),
            &[3],
            &[2.0, -4.0, 1.0],
            1e-12,
        );
        assert_close(
            &grad1("Neg", x.clone()).unwrap(),
            &[3],
            &[-1.0, -1.0, -1.0],
            0.0,
        );
        assert_close(
            &grad1("Abs", x.clone()).unwrap(),
            &[3],
            &[1.0, -1.0, 1.0],
            0.0,
        );
        assert_close(
            &grad1("Sign", x.clone()).unwrap(),
            &[3],
            &[0.0, 0.0, 0.0],
            0.0,
        );
        assert_close(
            &grad1("Reciprocal", x.clone()).unwrap(),
            &[3],
            &[-1.0, -0.25, -4.0],
            1e-12,
        );
        assert_close(
            &grad1("Exp", x.clone()).unwrap(),
            &[3],
            &[1f64.exp(), (-2f64).exp(), 0.5f64.exp()],
            1e-12,
        );
        assert_close(
            &grad1("Sin", x.clone()).unwrap(),
            &[3],
            &[1f64.cos(), (-2f64).cos(), 0.5f64.cos()],
            1e-12,
        );
        assert_close(
            &grad1("Cos", x.clone()).unwrap(),
            &[3],
            &[-(1f64.sin()), 2f64.sin(), -(0.5f64.sin())],
            1e-12,
        );
        let p = t(&[3], vec![4.0f64, 0.25, 1.0]);
        assert_close(
            &grad1("Sqrt", p.clone()).unwrap(),
            &[3],
            &[0.25, 1.0, 0.5],
            1e-12,
        );
        // d/dx x^-1/2 = -1/2 x^-3/2
        assert_close(
            &grad1("Rsqrt", p.clone()).unwrap(),
            &[3],
            &[-0.0625, -4.0, -0.5],
            1e-12,
        );
        assert_close(
            &grad1("Log", p.clone()).unwrap(),
            &[3],
            &[0.25, 4.0, 1.0],
            1e-12,
        );
        assert_close(&grad1("Log1p", p).unwrap(), &[3], &[0.2, 0.8, 0.5], 1e-12);
        let z = t(&[2], vec![0.0f64, 1.0]);
        let th = 1f64.tanh();
        assert_close(
            &grad1("Tanh", z.clone()).unwrap(),
            &[2],
            &[1.0, 1.0 - th * th],
            1e-12,
        );
        let sg = 1.0 / (1.0 + (-1f64).exp());
        assert_close(
            &grad1("Sigmoid", z).unwrap(),
            &[2],
            &[0.25, sg * (1.0 - sg)],
            1e-12,
        );
        // float32 too.
        let x32 = t(&[2], vec![3.0f32, -1.5]);
        assert_close(&grad1("Square", x32).unwrap(), &[2], &[6.0, -3.0], 1e-6);
    }

    #[test]
    fn floor_ceil_round_have_no_gradient() {
        for op in ["Floor", "Ceil", "Round"] {
            assert!(grad1(op, t(&[2], vec![0.3f64, 1.6])).is_none(), "{op}");
        }
        // Nor do ops that feed only through them.
        let mut tape = GradientTape::new(ctx(), false);
        let x = tape.watch(t(&[2], vec![0.3f32, 1.6]));
        let y = tape.op1("Floor", &[x], &[]).unwrap();
        let z = tape.mul(y, x).unwrap();
        let g = tape
            .gradient_tensors(z, &[x])
            .unwrap()
            .pop()
            .unwrap()
            .unwrap();
        // d(floor(x) * x)/dx = floor(x) (+ 0 through floor).
        assert_close(&g, &[2], &[0.0, 1.0], 0.0);
    }

    #[test]
    fn cast_gradients() {
        // float32 -> float64: the gradient is cast back to float32.
        let f = |o: &mut dyn Ops, xs: &[Sym]| {
            let y = o.op1(
                "Cast",
                &[xs[0]],
                &[("DstT", DataType::Double.into_attr_value())],
            )?;
            o.op1("Sin", &[y], &[])
        };
        let x = t(&[3], vec![0.5f32, -1.0, 2.0]);
        let e =
            compute_gradient_error(&compute_gradient(ctx(), &f, std::slice::from_ref(&x)).unwrap());
        assert!(e < 1e-3, "{e}");
        let mut tape = GradientTape::new(ctx(), false);
        let xs = tape.watch(x);
        let y = f(&mut tape, &[xs]).unwrap();
        let g = tape
            .gradient_tensors(y, &[xs])
            .unwrap()
            .pop()
            .unwrap()
            .unwrap();
        assert_eq!(g.dtype(), DataType::Float);
        assert_close(&g, &[3], &[0.5f64.cos(), 1f64.cos(), 2f64.cos()], 1e-6);
        // float64 -> float16 -> float64 round trip: gradient 1.
        let f = |o: &mut dyn Ops, xs: &[Sym]| {
            let y = o.op1(
                "Cast",
                &[xs[0]],
                &[("DstT", DataType::Half.into_attr_value())],
            )?;
            o.op1(
                "Cast",
                &[y],
                &[("DstT", DataType::Double.into_attr_value())],
            )
        };
        let mut tape = GradientTape::new(ctx(), false);
        let xs = tape.watch(t(&[2], vec![0.5f64, 3.0]));
        let y = f(&mut tape, &[xs]).unwrap();
        let g = tape
            .gradient_tensors(y, &[xs])
            .unwrap()
            .pop()
            .unwrap()
            .unwrap();
        assert_close(&g, &[2], &[1.0, 1.0], 0.0);
        // To or from a non-float type: no gradient (TensorFlow's None).
        let cast = opforge_core::registry::Registry::global().attr::<Gradient>("Cast");
        let Some(GradientFn::Fn(cast_grad)) = cast.as_deref() else {
            panic!("Cast has a gradient function");
        };
        let mut tape = GradientTape::new(ctx(), false);
        let xi = tape.watch(t(&[2], vec![1i32, 2]));
        let yf = tape
            .op1(
                "Cast",
                &[xi],
                &[("DstT", DataType::Float.into_attr_value())],
            )
            .unwrap();
        let g = tape.ones_like(yf).unwrap();
        let attrs = Default::default();
        let (xs, ys, gs) = ([xi], [yf], [Some(g)]);
        let mut gctx =
            opforge_core::autodiff::GradientContext::new(&mut tape, "Cast", &attrs, &xs, &ys, &gs);
        cast_grad(&mut gctx).unwrap();
        assert_eq!(gctx.into_input_grads().unwrap(), vec![None]);
        // ... and the tape gives None for the integer source.
        let mut tape = GradientTape::new(ctx(), false);
        let xi = tape.watch(t(&[2], vec![1i32, 2]));
        let yf = tape
            .op1(
                "Cast",
                &[xi],
                &[("DstT", DataType::Float.into_attr_value())],
            )
            .unwrap();
        assert_eq!(tape.gradient(yf, &[xi]).unwrap(), vec![None]);
    }

    /// `g(x) = d/dx f(x)` elementwise, then `d/dx g(x)` with a persistent tape.
    fn second_derivative(op: &str, x: &[f64]) -> (Vec<f64>, Vec<f64>) {
        seed_ops_not_differentiable();
        let mut tape = GradientTape::new(ctx(), true);
        let xs = tape.watch(t(&[x.len() as i64], x.to_vec()));
        let y = tape.op1(op, &[xs], &[]).unwrap();
        let g = tape.gradient(y, &[xs]).unwrap()[0].unwrap();
        let gg = tape.gradient(g, &[xs]).unwrap()[0].unwrap();
        let v = |s: Sym| tape.value(s).unwrap().flat::<f64>().unwrap().to_vec();
        (v(g), v(gg))
    }

    #[test]
    fn second_derivatives_of_tanh_and_sigmoid() {
        let x = [-1.5, -0.2, 0.0, 0.7, 2.0];
        let (g, gg) = second_derivative("Tanh", &x);
        for (i, &v) in x.iter().enumerate() {
            let th = v.tanh();
            assert!((g[i] - (1.0 - th * th)).abs() < 1e-12);
            // d2/dx2 tanh = -2 tanh (1 - tanh^2)
            assert!((gg[i] - (-2.0 * th * (1.0 - th * th))).abs() < 1e-12, "{i}");
        }
        let (g, gg) = second_derivative("Sigmoid", &x);
        for (i, &v) in x.iter().enumerate() {
            let s = 1.0 / (1.0 + (-v).exp());
            assert!((g[i] - s * (1.0 - s)).abs() < 1e-12);
            // d2/dx2 sigmoid = s (1 - s) (1 - 2 s)
            assert!(
                (gg[i] - s * (1.0 - s) * (1.0 - 2.0 * s)).abs() < 1e-12,
                "{i}"
            );
        }
        // And of the others whose gradient is a helper op.
        let p = [0.5, 1.0, 2.5];
        let (_, gg) = second_derivative("Sqrt", &p);
        for (i, &v) in p.iter().enumerate() {
            // d2/dx2 sqrt(x) = -1/4 x^-3/2
            assert!((gg[i] + 0.25 * v.powf(-1.5)).abs() < 1e-12, "{i}");
        }
        let (_, gg) = second_derivative("Rsqrt", &p);
        for (i, &v) in p.iter().enumerate() {
            // d2/dx2 x^-1/2 = 3/4 x^-5/2
            assert!((gg[i] - 0.75 * v.powf(-2.5)).abs() < 1e-12, "{i}");
        }
        let (_, gg) = second_derivative("Reciprocal", &p);
        for (i, &v) in p.iter().enumerate() {
            // d2/dx2 1/x = 2 / x^3
            assert!((gg[i] - 2.0 / (v * v * v)).abs() < 1e-12, "{i}");
        }
    }
}
