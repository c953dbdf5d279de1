//! Tests of the binary math ops.

use super::select::Broadcast3;
use super::*;
use half::{bf16, f16};
use num_complex::Complex;
use opforge_core::Code;
use opforge_testing::util::{assert_close, ctx, t};

fn bin(op: &str, x: Tensor, y: Tensor) -> Result<Tensor> {
    ctx().op(op).input(x).input(y).run1()
}

fn strs(v: &[&str]) -> Vec<Vec<u8>> {
    v.iter().map(|s| s.as_bytes().to_vec()).collect()
}

#[test]
fn ops_are_registered_with_kernels() {
    opforge_testing::util::assert_one_cpu_kernel_each("crates/opforge-ops/math/src/binary/");
}

#[test]
fn broadcasting_shapes() {
    // [2,3] + [3]
    let got = bin(
        "AddV2",
        t(&[2, 3], vec![1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0]),
        t(&[3], vec![10.0f32, 20.0, 30.0]),
    )
    .unwrap();
    assert_close(&got, &[2, 3], &[11.0, 22.0, 33.0, 14.0, 25.0, 36.0], 0.0);
    // [2,1] * [1,3]
    let got = bin(
        "Mul",
        t(&[2, 1], vec![2i32, 3]),
        t(&[1, 3], vec![1i32, 10, 100]),
    )
    .unwrap();
    assert_eq!(got.dims(), &[2, 3]);
    assert_eq!(got.flat::<i32>().unwrap(), &[2, 20, 200, 3, 30, 300]);
    // scalar - tensor, tensor - scalar
    let got = bin("Sub", Tensor::scalar(10i64), t(&[3], vec![1i64, 2, 3])).unwrap();
    assert_eq!(got.flat::<i64>().unwrap(), &[9, 8, 7]);
    let got = bin(
        "Sub",
        t(&[3], vec![1.0f64, 2.0, 3.0]),
        Tensor::scalar(0.5f64),
    )
    .unwrap();
    assert_close(&got, &[3], &[0.5, 1.5, 2.5], 0.0);
    // [3,1,2] + [4,1]
    let a: Vec<f64> = (0..6).map(f64::from).collect();
    let got = bin(
        "Add",
        t(&[3, 1, 2], a),
        t(&[4, 1], vec![0.0, 10.0, 20.0, 30.0]),
    )
    .unwrap();
    assert_eq!(got.dims(), &[3, 4, 2]);
    let v = got.flat::<f64>().unwrap();
    // out[i,j,k] = a[i,0,k] + b[j,0] = (2i + k) + 10j
    for i in 0..3 {
        for j in 0..4 {
            for k in 0..2 {
                assert_eq!(v[i * 8 + j * 2 + k], (2 * i + k) as f64 + 10.0 * j as f64);
            }
        }
    }
    let err = bin("Add", t(&[2, 3], vec![0f32; 6]), t(&[4], vec![0f32; 4])).unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument);
    assert!(
        err.message().contains("Incompatible shapes: [2,3] vs. [4]"),
        "{err}"
    );
}

#[test]
fn empty_tensors() {
    let got = bin(
        "AddV2",
        t(&[0, 3], Vec::<f32>::new()),
        t(&[3], vec![1f32, 2.0, 3.0]),
    )
    .unwrap();
    assert_eq!(got.dims(), &[0, 3]);
    let got = bin("Mul", t(&[0], Vec::<i32>::new()), Tensor::scalar(2i32)).unwrap();
    assert_eq!(got.dims(), &[0]);
    // No element is computed, so a zero divisor is no error.
    let got = bin("Div", t(&[0], Vec::<i32>::new()), Tensor::scalar(0i32)).unwrap();
    assert_eq!(got.dims(), &[0]);
    let got = bin("Less", t(&[2, 0], Vec::<f64>::new()), t(&[1], vec![1.0f64])).unwrap();
    assert_eq!(got.dims(), &[2, 0]);
    assert_eq!(got.dtype(), DataType::Bool);
    let got = bin("Pow", t(&[0], Vec::<i64>::new()), Tensor::scalar(-1i64)).unwrap();
    assert_eq!(got.dims(), &[0]);
}

#[test]
fn dtype_families_for_add_sub_mul() {
    let h = |v: &[f32]| {
        t(
            &[v.len() as i64],
            v.iter().map(|&x| f16::from_f32(x)).collect(),
        )
    };
    assert_close(
        &bin("AddV2", h(&[1.5, -2.0]), h(&[0.25, 4.0])).unwrap(),
        &[2],
        &[1.75, 2.0],
        0.0,
    );
    let b = |v: &[f32]| {
        t(
            &[v.len() as i64],
            v.iter().map(|&x| bf16::from_f32(x)).collect(),
        )
    };
    assert_close(
        &bin("Mul", b(&[3.0, -0.5]), b(&[2.0, 8.0])).unwrap(),
        &[2],
        &[6.0, -4.0],
        0.0,
    );
    // Unsigned and signed integers wrap.
    let got = bin("Sub", t(&[2], vec![1u8, 200]), t(&[2], vec![2u8, 100])).unwrap();
    assert_eq!(got.flat::<u8>().unwrap(), &[255, 100]);
    let got = bin("AddV2", t(&[1], vec![i32::MAX]), t(&[1], vec![1i32])).unwrap();
    assert_eq!(got.flat::<i32>().unwrap(), &[i32::MIN]);
    let got = bin("Mul", t(&[1], vec![u64::MAX]), t(&[1], vec![2u64])).unwrap();
    assert_eq!(got.flat::<u64>().unwrap(), &[u64::MAX - 1]);
    // Complex: (1+2i)(3-i) = 5+5i.
    let got = bin(
        "Mul",
        t(&[1], vec![Complex::new(1.0f64, 2.0)]),
        t(&[1], vec![Complex::new(3.0f64, -1.0)]),
    )
    .unwrap();
    assert_eq!(
        got.flat::<Complex<f64>>().unwrap(),
        &[Complex::new(5.0, 5.0)]
    );
    let got = bin(
        "Add",
        t(&[1], vec![Complex::new(1.0f32, 2.0)]),
        Tensor::scalar(Complex::new(0.5f32, -2.0)),
    )
    .unwrap();
    assert_eq!(
        got.flat::<Complex<f32>>().unwrap(),
        &[Complex::new(1.5, 0.0)]
    );
}

#[test]
fn string_add_concatenates_with_broadcasting() {
    let a = Tensor::from_strings(&[2, 1], strs(&["a", "bc"])).unwrap();
    let b = Tensor::from_strings(&[3], strs(&["x", "", "yz"])).unwrap();
    let got = bin("Add", a, b).unwrap();
    assert_eq!(got.dims(), &[2, 3]);
    assert_eq!(
        got.strings().unwrap(),
        &strs(&["ax", "a", "ayz", "bcx", "bc", "bcyz"])[..]
    );
    let got = bin(
        "Add",
        Tensor::from_strings(&[], strs(&["pre-"])).unwrap(),
        Tensor::from_strings(&[0], vec![]).unwrap(),
    )
    .unwrap();
    assert_eq!(got.dims(), &[0]);
    // AddV2 has no string kernel (TensorFlow's OpDef excludes strings).
    let s = Tensor::from_strings(&[1], strs(&["a"])).unwrap();
    assert!(bin("AddV2", s.clone(), s).is_err());
}

#[test]
fn division_semantics() {
    let x = t(&[4], vec![7i32, -7, 7, -7]);
    let y = t(&[4], vec![2i32, 2, -2, -2]);
    let got = bin("Div", x.clone(), y.clone()).unwrap();
    assert_eq!(got.flat::<i32>().unwrap(), &[3, -3, -3, 3]);
    let got = bin("RealDiv", x.clone(), y.clone()).unwrap();
    assert_eq!(got.flat::<i32>().unwrap(), &[3, -3, -3, 3]);
    let got = bin("FloorDiv", x.clone(), y.clone()).unwrap();
    assert_eq!(got.flat::<i32>().unwrap(), &[3, -4, -4, 3]);
    let got = bin("FloorDiv", t(&[2], vec![6i64, -6]), Tensor::scalar(3i64)).unwrap();
    assert_eq!(got.flat::<i64>().unwrap(), &[2, -2]);
    let got = bin("FloorDiv", t(&[1], vec![7u8]), t(&[1], vec![2u8])).unwrap();
    assert_eq!(got.flat::<u8>().unwrap(), &[3]);
    // MIN / -1 wraps to MIN (TensorFlow avoids the trap the same way).
    let got = bin("Div", t(&[1], vec![i32::MIN]), t(&[1], vec![-1i32])).unwrap();
    assert_eq!(got.flat::<i32>().unwrap(), &[i32::MIN]);
    let got = bin("FloorMod", t(&[1], vec![i64::MIN]), t(&[1], vec![-1i64])).unwrap();
    assert_eq!(got.flat::<i64>().unwrap(), &[0]);
    // Floats.
    let got = bin(
        "Div",
        t(&[3], vec![1.0f32, -3.0, 1.0]),
        t(&[3], vec![4.0f32, 2.0, 0.0]),
    )
    .unwrap();
    assert_eq!(got.flat::<f32>().unwrap(), &[0.25, -1.5, f32::INFINITY]);
    let got = bin("RealDiv", t(&[1], vec![1.0f64]), t(&[1], vec![3.0f64])).unwrap();
    assert_eq!(got.flat::<f64>().unwrap(), &[1.0 / 3.0]);
    let got = bin(
        "FloorDiv",
        t(&[2], vec![7.0f64, -7.0]),
        t(&[2], vec![2.0f64, 2.0]),
    )
    .unwrap();
    assert_eq!(got.flat::<f64>().unwrap(), &[3.0, -4.0]);
    // Complex: (1+i) / (1-i) = i.
    let got = bin(
        "Div",
        t(&[1], vec![Complex::new(1.0f64, 1.0)]),
        t(&[1], vec![Complex::new(1.0f64, -1.0)]),
    )
    .unwrap();
    assert_eq!(
        got.flat::<Complex<f64>>().unwrap(),
        &[Complex::new(0.0, 1.0)]
    );
}

#[test]
fn integer_division_by_zero_is_an_error() {
    for op in ["Div", "RealDiv", "FloorDiv", "FloorMod"] {
        let err = bin(op, t(&[3], vec![1i32, 2, 3]), t(&[3], vec![1i32, 0, 1])).unwrap_err();
        assert_eq!(err.code(), Code::InvalidArgument, "{op}");
        assert!(
            err.message().contains("Integer division by zero"),
            "{op}: {err}"
        );
    }
    let err = bin("Div", t(&[2], vec![1u16, 2]), Tensor::scalar(0u16)).unwrap_err();
    assert!(err.message().contains("Integer division by zero"), "{err}");
}

#[test]
fn floor_mod_takes_the_sign_of_the_divisor() {
    let x = t(&[6], vec![7i32, -7, 7, -7, 6, -6]);
    let y = t(&[6], vec![3i32, 3, -3, -3, 3, -3]);
    let got = bin("FloorMod", x, y).unwrap();
    assert_eq!(got.flat::<i32>().unwrap(), &[1, 2, -2, -1, 0, 0]);
    let got = bin("FloorMod", t(&[1], vec![7u32]), t(&[1], vec![3u32])).unwrap();
    assert_eq!(got.flat::<u32>().unwrap(), &[1]);
    let x = t(&[5], vec![7.5f64, -7.5, 7.5, -7.5, 1.0]);
    let y = t(&[5], vec![2.0f64, 2.0, -2.0, -2.0, 0.0]);
    let got = bin("FloorMod", x, y).unwrap();
    let v = got.flat::<f64>().unwrap();
    assert_eq!(v[..4], [1.5, 0.5, -0.5, -1.5]);
    assert!(v[4].is_nan());
    let got = bin(
        "FloorMod",
        t(&[1], vec![f16::from_f32(-1.0)]),
        t(&[1], vec![f16::from_f32(3.0)]),
    )
    .unwrap();
    assert_close(&got, &[1], &[2.0], 0.0);
}

#[test]
fn maximum_minimum_propagate_nan() {
    let nan = f32::NAN;
    let x = t(&[4], vec![1.0f32, nan, 3.0, -1.0]);
    let y = t(&[4], vec![2.0f32, 0.0, nan, -2.0]);
    let got = bin("Maximum", x.clone(), y.clone()).unwrap();
    let v = got.flat::<f32>().unwrap();
    assert_eq!((v[0], v[3]), (2.0, -1.0));
    assert!(v[1].is_nan() && v[2].is_nan());
    let got = bin("Minimum", x, y).unwrap();
    let v = got.flat::<f32>().unwrap();
    assert_eq!((v[0], v[3]), (1.0, -2.0));
    assert!(v[1].is_nan() && v[2].is_nan());
    let got = bin("Maximum", t(&[3], vec![1i64, -5, 9]), Tensor::scalar(0i64)).unwrap();
    assert_eq!(got.flat::<i64>().unwrap(), &[1, 0, 9]);
    let got = bin("Minimum", t(&[2], vec![1u8, 200]), t(&[2], vec![5u8, 100])).unwrap();
    assert_eq!(got.flat::<u8>().unwrap(), &[1, 100]);
}

#[test]
fn pow_semantics() {
    let got = bin(
        "Pow",
        t(&[3], vec![2.0f64, 4.0, 0.0]),
        t(&[3], vec![10.0f64, 0.5, 0.0]),
    )
    .unwrap();
    assert_eq!(got.flat::<f64>().unwrap(), &[1024.0, 2.0, 1.0]);
    let got = bin(
        "Pow",
        t(&[4], vec![3i32, -2, 0, 5]),
        t(&[4], vec![4i32, 3, 0, 1]),
    )
    .unwrap();
    assert_eq!(got.flat::<i32>().unwrap(), &[81, -8, 1, 5]);
    let got = bin("Pow", t(&[1], vec![2i64]), t(&[1], vec![62i64])).unwrap();
    assert_eq!(got.flat::<i64>().unwrap(), &[1 << 62]);
    let err = bin("Pow", t(&[2], vec![2i32, 2]), t(&[2], vec![1i32, -1])).unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument);
    assert!(
        err.message()
            .contains("Integers to negative integer powers are not allowed"),
        "{err}"
    );
    // Complex: i^2 = -1.
    let got = bin(
        "Pow",
        t(&[1], vec![Complex::new(0.0f64, 1.0)]),
        t(&[1], vec![Complex::new(2.0f64, 0.0)]),
    )
    .unwrap();
    let v = got.flat::<Complex<f64>>().unwrap()[0];
    assert!((v.re + 1.0).abs() < 1e-15 && v.im.abs() < 1e-15, "{v}");
    let got = bin(
        "Pow",
        t(&[1], vec![f16::from_f32(3.0)]),
        Tensor::scalar(f16::from_f32(2.0)),
    )
    .unwrap();
    assert_close(&got, &[1], &[9.0], 0.0);
}

#[test]
fn squared_difference() {
    let got = bin(
        "SquaredDifference",
        t(&[2], vec![3.0f32, -1.0]),
        Tensor::scalar(5.0f32),
    )
    .unwrap();
    assert_close(&got, &[2], &[4.0, 36.0], 0.0);
    let got = bin(
        "SquaredDifference",
        t(&[1], vec![2i32]),
        t(&[1], vec![7i32]),
    )
    .unwrap();
    assert_eq!(got.flat::<i32>().unwrap(), &[25]);
    // Complex: |(1+2i) - 0|^2 = 5.
    let got = bin(
        "SquaredDifference",
        t(&[1], vec![Complex::new(1.0f32, 2.0)]),
        t(&[1], vec![Complex::new(0.0f32, 0.0)]),
    )
    .unwrap();
    assert_eq!(
        got.flat::<Complex<f32>>().unwrap(),
        &[Complex::new(5.0, 0.0)]
    );
}

#[test]
fn comparisons() {
    let x = t(&[2, 2], vec![1.0f32, 2.0, 3.0, f32::NAN]);
    let y = t(&[2], vec![2.0f32, 2.0]);
    let b = |op: &str| {
        bin(op, x.clone(), y.clone())
            .unwrap()
            .flat::<bool>()
            .unwrap()
            .to_vec()
    };
    assert_eq!(b("Less"), [true, false, false, false]);
    assert_eq!(b("LessEqual"), [true, true, false, false]);
    assert_eq!(b("Greater"), [false, false, true, false]);
    assert_eq!(b("GreaterEqual"), [false, true, true, false]);
    assert_eq!(b("Equal"), [false, true, false, false]);
    assert_eq!(b("NotEqual"), [true, false, true, true]);
    let got = bin(
        "Less",
        t(&[3], vec![0u64, 5, u64::MAX]),
        Tensor::scalar(5u64),
    )
    .unwrap();
    assert_eq!(got.flat::<bool>().unwrap(), &[true, false, false]);
    let got = bin("Equal", t(&[2], vec![true, false]), Tensor::scalar(true)).unwrap();
    assert_eq!(got.flat::<bool>().unwrap(), &[true, false]);
    let got = bin(
        "Equal",
        t(
            &[2],
            vec![Complex::new(1.0f64, 2.0), Complex::new(1.0, 0.0)],
        ),
        Tensor::scalar(Complex::new(1.0f64, 2.0)),
    )
    .unwrap();
    assert_eq!(got.flat::<bool>().unwrap(), &[true, false]);
    let s = |v: &[&str]| Tensor::from_strings(&[v.len() as i64], strs(v)).unwrap();
    let got = bin("NotEqual", s(&["a", "b", "c"]), s(&["a", "x", "c"])).unwrap();
    assert_eq!(got.flat::<bool>().unwrap(), &[false, true, false]);
    let got = bin(
        "Equal",
        s(&["a", "b"]),
        Tensor::from_strings(&[], strs(&["b"])).unwrap(),
    )
    .unwrap();
    assert_eq!(got.flat::<bool>().unwrap(), &[false, true]);
}

#[test]
fn equal_with_incompatible_shapes() {
    let x = t(&[2], vec![1i32, 2]);
    let y = t(&[3], vec![1i32, 2, 3]);
    for (op, want) in [("Equal", false), ("NotEqual", true)] {
        let got = ctx()
            .op(op)
            .input(x.clone())
            .input(y.clone())
            .attr("incompatible_shape_error", false)
            .run1()
            .unwrap();
        assert_eq!(got.dims(), &[] as &[i64], "{op}");
        assert_eq!(got.scalar_value::<bool>().unwrap(), want, "{op}");
        let err = bin(op, x.clone(), y.clone()).unwrap_err();
        assert_eq!(err.code(), Code::InvalidArgument);
        assert!(
            err.message().contains("Incompatible shapes: [2] vs. [3]"),
            "{err}"
        );
    }
    // Compatible shapes still compare elementwise with the attr false.
    let got = ctx()
        .op("Equal")
        .input(x)
        .input(Tensor::scalar(2i32))
        .attr("incompatible_shape_error", false)
        .run1()
        .unwrap();
    assert_eq!(got.flat::<bool>().unwrap(), &[false, true]);
}

#[test]
fn logical_and_or() {
    let x = t(&[2, 1], vec![true, false]);
    let y = t(&[2], vec![true, false]);
    let got = bin("LogicalAnd", x.clone(), y.clone()).unwrap();
    assert_eq!(got.dims(), &[2, 2]);
    assert_eq!(got.flat::<bool>().unwrap(), &[true, false, false, false]);
    let got = bin("LogicalOr", x, y).unwrap();
    assert_eq!(got.flat::<bool>().unwrap(), &[true, true, true, false]);
}

#[test]
fn addv2_forwards_a_uniquely_owned_input() {
    let a = t(&[2, 3], vec![1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0]);
    let ptr = a.bytes().unwrap().as_ptr();
    let got = bin("AddV2", a, t(&[3], vec![1.0f32, 1.0, 1.0])).unwrap();
    assert_eq!(
        got.bytes().unwrap().as_ptr(),
        ptr,
        "the output reuses x's buffer"
    );
    assert_close(&got, &[2, 3], &[2.0, 3.0, 4.0, 5.0, 6.0, 7.0], 0.0);
    // The second input may be forwarded too (order kept: x - y).
    let b = t(&[2], vec![1i32, 2]);
    let ptr = b.bytes().unwrap().as_ptr();
    let got = bin("Sub", Tensor::scalar(10i32), b).unwrap();
    assert_eq!(got.bytes().unwrap().as_ptr(), ptr);
    assert_eq!(got.flat::<i32>().unwrap(), &[9, 8]);
    // A shared input is left alone.
    let a = t(&[2], vec![1.0f64, 2.0]);
    let got = bin("AddV2", a.clone(), a.clone()).unwrap();
    assert_eq!(a.flat::<f64>().unwrap(), &[1.0, 2.0]);
    assert_eq!(got.flat::<f64>().unwrap(), &[2.0, 4.0]);
}

#[test]
fn large_broadcasts_are_sharded_correctly() {
    let (rows, cols) = (400usize, 301usize);
    let a: Vec<i64> = (0..(rows * cols) as i64).collect();
    let b: Vec<i64> = (0..rows as i64).map(|r| r * 1000).collect();
    let got = bin(
        "AddV2",
        t(&[rows as i64, cols as i64], a),
        t(&[rows as i64, 1], b),
    )
    .unwrap();
    let v = got.flat::<i64>().unwrap();
    for (r, c) in [(0, 0), (1, 300), (200, 7), (399, 300)] {
        assert_eq!(v[r * cols + c], (r * cols + c) as i64 + r as i64 * 1000);
    }
    let cond: Vec<bool> = (0..rows).map(|r| r % 3 == 0).collect();
    let then: Vec<i32> = (0..(rows * cols) as i32).collect();
    let got = ctx()
        .op("SelectV2")
        .input(t(&[rows as i64, 1], cond))
        .input(t(&[rows as i64, cols as i64], then))
        .input(Tensor::scalar(-1i32))
        .run1()
        .unwrap();
    let v = got.flat::<i32>().unwrap();
    for (r, c) in [(0, 0), (1, 5), (3, 300), (398, 2), (399, 299)] {
        let want = if r % 3 == 0 {
            (r * cols + c) as i32
        } else {
            -1
        };
        assert_eq!(v[r * cols + c], want, "({r}, {c})");
    }
}

mod add_n_select;
mod requests;
mod sign_agnostic;

#[test]
fn broadcast3_plan() {
    assert!(Broadcast3::new([&[2], &[3], &[]]).is_none());
    let p = Broadcast3::new([&[4, 1], &[1, 5], &[4, 5]]).unwrap();
    assert_eq!(p.out_shape, vec![4, 5]);
    assert_eq!(p.rows(), 4);
    assert_eq!(p.inner(), (5, [0, 1, 1]));
    assert_eq!(p.row_offsets(2), [2, 0, 10]);
    let p = Broadcast3::new([&[], &[], &[]]).unwrap();
    assert_eq!((p.rows(), p.inner()), (1, (1, [0; 3])));
    // Same-pattern dims collapse.
    let p = Broadcast3::new([&[2, 3, 4], &[2, 3, 4], &[1, 1, 1]]).unwrap();
    assert_eq!(p.inner(), (24, [1, 1, 0]));
}

/// Shape functions and gradients.
mod shape_and_gradient_tests;
