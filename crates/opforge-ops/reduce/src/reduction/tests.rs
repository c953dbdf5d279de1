//! Tests of the reductions.

use super::*;
use half::{bf16, f16};
use num_complex::Complex;
use opforge_core::Code;
use opforge_testing::util::{assert_close, ctx, t};

fn reduce(op: &str, x: Tensor, axes: Tensor, keep_dims: bool) -> Result<Tensor> {
    ctx()
        .op(op)
        .input(x)
        .input(axes)
        .attr("keep_dims", keep_dims)
        .run1()
}

fn axes(v: &[i32]) -> Tensor {
    t(&[v.len() as i64], v.to_vec())
}

fn m23() -> Tensor {
    t(&[2, 3], vec![1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0])
}

#[test]
fn opdefs_finalize() {
    for b in [
        sum(),
        mean(),
        max(),
        min(),
        prod(),
        all(),
        any(),
        arg_max(),
        arg_min(),
    ] {
        let op = b.finalize().unwrap();
        assert_eq!(
            opforge_core::Registry::global().op_def(&op.name).unwrap(),
            op
        );
    }
}

#[test]
fn sum_over_each_axis_with_and_without_keep_dims() {
    let s = reduce("Sum", m23(), Tensor::scalar(0i32), false).unwrap();
    assert_close(&s, &[3], &[5.0, 7.0, 9.0], 0.0);
    let s = reduce("Sum", m23(), Tensor::scalar(1i32), false).unwrap();
    assert_close(&s, &[2], &[6.0, 15.0], 0.0);
    let s = reduce("Sum", m23(), Tensor::scalar(-1i64), true).unwrap();
    assert_close(&s, &[2, 1], &[6.0, 15.0], 0.0);
    let s = reduce("Sum", m23(), axes(&[0, 1]), false).unwrap();
    assert_close(&s, &[], &[21.0], 0.0);
    let s = reduce("Sum", m23(), axes(&[1, -2]), true).unwrap();
    assert_close(&s, &[1, 1], &[21.0], 0.0);
    // No axes: the input itself.
    let s = reduce("Sum", m23(), axes(&[]), false).unwrap();
    assert_close(&s, &[2, 3], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], 0.0);
    // A scalar input with no axes.
    let s = reduce("Sum", Tensor::scalar(2.5f64), axes(&[]), false).unwrap();
    assert_close(&s, &[], &[2.5], 0.0);
    // Size-1 dimensions are reduced for free.
    let x = t(&[1, 3, 1], vec![1i32, 2, 3]);
    let s = reduce("Sum", x.clone(), axes(&[0, 2]), false).unwrap();
    assert_eq!(
        (s.dims(), s.flat::<i32>().unwrap()),
        (&[3i64][..], &[1, 2, 3][..])
    );
    let s = reduce("Sum", x, axes(&[1]), true).unwrap();
    assert_eq!(
        (s.dims(), s.flat::<i32>().unwrap()),
        (&[1i64, 1, 1][..], &[6][..])
    );
}

#[test]
fn every_reducer_on_small_values() {
    let x = t(&[2, 3], vec![3i32, -1, 4, -1, 5, -9]);
    let run = |op: &str, axis: i32| -> Vec<i32> {
        reduce(op, x.clone(), Tensor::scalar(axis), false)
            .unwrap()
            .flat::<i32>()
            .unwrap()
            .to_vec()
    };
    assert_eq!(run("Sum", 1), [6, -5]);
    assert_eq!(run("Prod", 1), [-12, 45]);
    assert_eq!(run("Max", 1), [4, 5]);
    assert_eq!(run("Min", 1), [-1, -9]);
    assert_eq!(run("Max", 0), [3, 5, 4]);
    assert_eq!(run("Min", 0), [-1, -1, -9]);
    // Integer means truncate toward zero: 6/3 = 2, -5/3 = -1; 2/2, 4/2, -5/2 = -2.
    assert_eq!(run("Mean", 1), [2, -1]);
    assert_eq!(run("Mean", 0), [1, 2, -2]);
    let f = t(&[4], vec![1.0f64, 2.0, 4.0, 8.0]);
    let m = reduce("Mean", f.clone(), Tensor::scalar(0i32), false).unwrap();
    assert_close(&m, &[], &[3.75], 0.0);
    let p = reduce("Prod", f, Tensor::scalar(0i32), false).unwrap();
    assert_close(&p, &[], &[64.0], 0.0);
}

#[test]
fn integer_sums_wrap_and_means_do_not_overflow() {
    let x = t(&[3], vec![200u8, 100, 250]);
    let s = reduce("Sum", x.clone(), Tensor::scalar(0i32), false).unwrap();
    assert_eq!(
        s.flat::<u8>().unwrap(),
        &[((200u32 + 100 + 250) % 256) as u8]
    );
    // The mean accumulates in 64 bits: (200 + 100 + 250) / 3 = 183.
    let m = reduce("Mean", x, Tensor::scalar(0i32), false).unwrap();
    assert_eq!(m.flat::<u8>().unwrap(), &[183]);
    let x = t(&[2], vec![i8::MAX, i8::MAX]);
    let m = reduce("Mean", x, Tensor::scalar(0i32), false).unwrap();
    assert_eq!(m.flat::<i8>().unwrap(), &[i8::MAX]);
}

#[test]
fn half_bfloat16_and_complex() {
    let h = t(
        &[2, 2],
        [1.5f32, 2.0, -3.0, 0.25].map(f16::from_f32).to_vec(),
    );
    let s = reduce("Sum", h.clone(), Tensor::scalar(1i32), false).unwrap();
    assert_close(&s, &[2], &[3.5, -2.75], 0.0);
    let m = reduce("Mean", h.clone(), Tensor::scalar(0i32), false).unwrap();
    assert_close(&m, &[2], &[-0.75, 1.125], 0.0);
    let mx = reduce("Max", h, Tensor::scalar(0i32), false).unwrap();
    assert_close(&mx, &[2], &[1.5, 2.0], 0.0);
    let b = t(&[3], [1.0f32, 2.0, 4.0].map(bf16::from_f32).to_vec());
    let p = reduce("Prod", b.clone(), Tensor::scalar(0i32), false).unwrap();
    assert_close(&p, &[], &[8.0], 0.0);
    let mn = reduce("Min", b, Tensor::scalar(0i32), false).unwrap();
    assert_close(&mn, &[], &[1.0], 0.0);
    let c = t(
        &[2],
        vec![Complex::new(1.0f32, 2.0), Complex::new(3.0f32, -1.0)],
    );
    let s = reduce("Sum", c.clone(), Tensor::scalar(0i32), false).unwrap();
    assert_eq!(s.flat::<Complex<f32>>().unwrap(), &[Complex::new(4.0, 1.0)]);
    // (1 + 2i)(3 - i) = 3 - i + 6i - 2i^2 = 5 + 5i.
    let p = reduce("Prod", c.clone(), Tensor::scalar(0i32), false).unwrap();
    assert_eq!(p.flat::<Complex<f32>>().unwrap(), &[Complex::new(5.0, 5.0)]);
    let m = reduce("Mean", c, Tensor::scalar(0i32), false).unwrap();
    assert_eq!(m.flat::<Complex<f32>>().unwrap(), &[Complex::new(2.0, 0.5)]);
    let c = t(&[1], vec![Complex::new(1.0f64, 1.0)]);
    let s = reduce("Sum", c, axes(&[]), false).unwrap();
    assert_eq!(s.flat::<Complex<f64>>().unwrap(), &[Complex::new(1.0, 1.0)]);
}

#[test]
fn max_and_min_propagate_nan() {
    let x = t(&[2, 2], vec![1.0f32, f32::NAN, 2.0, 3.0]);
    let mx = reduce("Max", x.clone(), Tensor::scalar(1i32), false).unwrap();
    let v = mx.flat::<f32>().unwrap();
    assert!(v[0].is_nan() && v[1] == 3.0, "{v:?}");
    let mn = reduce("Min", x, Tensor::scalar(0i32), false).unwrap();
    let v = mn.flat::<f32>().unwrap();
    assert!(v[0] == 1.0 && v[1].is_nan(), "{v:?}");
}

#[test]
fn all_and_any() {
    let x = t(&[2, 3], vec![true, true, false, true, true, true]);
    let a = reduce("All", x.clone(), Tensor::scalar(1i32), false).unwrap();
    assert_eq!(a.flat::<bool>().unwrap(), &[false, true]);
    let a = reduce("All", x.clone(), Tensor::scalar(0i64), true).unwrap();
    assert_eq!(a.dims(), &[1, 3]);
    assert_eq!(a.flat::<bool>().unwrap(), &[true, true, false]);
    let x = t(&[2, 2], vec![false, false, false, true]);
    let a = reduce("Any", x.clone(), Tensor::scalar(1i32), false).unwrap();
    assert_eq!(a.flat::<bool>().unwrap(), &[false, true]);
    let a = reduce("Any", x, axes(&[0, 1]), false).unwrap();
    assert_eq!(a.flat::<bool>().unwrap(), &[true]);
}

#[test]
fn empty_reductions_give_the_identity() {
    let e = || Tensor::zeros(DataType::Float, &[0, 3]).unwrap();
    let s = reduce("Sum", e(), Tensor::scalar(0i32), false).unwrap();
    assert_close(&s, &[3], &[0.0; 3], 0.0);
    let p = reduce("Prod", e(), Tensor::scalar(0i32), false).unwrap();
    assert_close(&p, &[3], &[1.0; 3], 0.0);
    let m = reduce("Max", e(), Tensor::scalar(0i32), true).unwrap();
    assert_eq!(m.dims(), &[1, 3]);
    assert!(m
        .flat::<f32>()
        .unwrap()
        .iter()
        .all(|&v| v == f32::NEG_INFINITY));
    let m = reduce("Min", e(), Tensor::scalar(0i32), false).unwrap();
    assert!(m.flat::<f32>().unwrap().iter().all(|&v| v == f32::INFINITY));
    let m = reduce("Mean", e(), Tensor::scalar(0i32), false).unwrap();
    assert!(m.flat::<f32>().unwrap().iter().all(|v| v.is_nan()));
    // Reducing the non-empty axis of an empty tensor gives an empty output.
    let s = reduce("Sum", e(), Tensor::scalar(1i32), false).unwrap();
    assert_eq!(s.dims(), &[0]);
    let ei = Tensor::zeros(DataType::Int32, &[2, 0]).unwrap();
    let m = reduce("Max", ei.clone(), Tensor::scalar(1i32), false).unwrap();
    assert_eq!(m.flat::<i32>().unwrap(), &[i32::MIN, i32::MIN]);
    let m = reduce("Min", ei.clone(), Tensor::scalar(1i32), false).unwrap();
    assert_eq!(m.flat::<i32>().unwrap(), &[i32::MAX, i32::MAX]);
    let m = reduce("Mean", ei, Tensor::scalar(1i32), false).unwrap();
    assert_eq!(m.flat::<i32>().unwrap(), &[0, 0]);
    let b = Tensor::zeros(DataType::Bool, &[0]).unwrap();
    let a = reduce("All", b.clone(), Tensor::scalar(0i32), false).unwrap();
    assert_eq!(a.flat::<bool>().unwrap(), &[true]);
    let a = reduce("Any", b, Tensor::scalar(0i32), false).unwrap();
    assert_eq!(a.flat::<bool>().unwrap(), &[false]);
}

#[test]
fn bad_axes_are_invalid_arguments() {
    let err = reduce("Sum", m23(), Tensor::scalar(3i32), false).unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument);
    assert!(
        err.message()
            .contains("Invalid reduction dimension 3 for input with 2 dimensions."),
        "{err}"
    );
    let err = reduce("Max", m23(), axes(&[0, -3]), false).unwrap_err();
    assert!(
        err.message().contains("Invalid reduction dimension -3"),
        "{err}"
    );
    // TensorFlow's kernel rejects duplicate axes (also when spelled differently).
    let err = reduce("Sum", m23(), axes(&[1, -1]), false).unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument);
    assert!(
        err.message()
            .contains("Axes contains duplicate dimension: 1"),
        "{err}"
    );
    let err = reduce("All", t(&[1], vec![true]), axes(&[0, 0]), false).unwrap_err();
    assert!(err.message().contains("duplicate dimension: 0"), "{err}");
    let err = reduce("Sum", Tensor::scalar(1.0f32), Tensor::scalar(0i32), false).unwrap_err();
    assert!(
        err.message()
            .contains("Invalid reduction dimension 0 for input with 0 dimensions."),
        "{err}"
    );
    // Axes must be int32 or int64; strings are not a numeric type.
    let err = ctx()
        .op("Sum")
        .input(m23())
        .input(Tensor::scalar(0.0f32))
        .run1()
        .unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument);
    let err = ctx()
        .op("Max")
        .input(t(&[1], vec![Complex::new(1.0f32, 0.0)]))
        .input(Tensor::scalar(0i32))
        .run1()
        .unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument);
}

/// A naive reference: reduce `x` of shape `dims` over `red` with `f`.
fn naive(
    x: &[f64],
    dims: &[usize],
    red: &[bool],
    init: f64,
    f: impl Fn(f64, f64) -> f64,
) -> Vec<f64> {
    let out_len: usize = dims
        .iter()
        .zip(red)
        .filter(|(_, &r)| !r)
        .map(|(&d, _)| d)
        .product();
    let mut out = vec![init; out_len];
    for (lin, &v) in x.iter().enumerate() {
        let mut rem = lin;
        let mut coord = vec![0; dims.len()];
        for k in (0..dims.len()).rev() {
            coord[k] = rem % dims[k];
            rem /= dims[k];
        }
        let mut o = 0;
        for k in 0..dims.len() {
            if !red[k] {
                o = o * dims[k] + coord[k];
            }
        }
        out[o] = f(out[o], v);
    }
    out
}

fn check_pattern(dims: &[usize], red: &[bool]) {
    let n: usize = dims.iter().product();
    // Small integers in f32 keep every partial sum exact.
    let x: Vec<f32> = (0..n).map(|i| ((i * 7919) % 23) as f32 - 11.0).collect();
    let xd: Vec<f64> = x.iter().map(|&v| v as f64).collect();
    let dims_i: Vec<i64> = dims.iter().map(|&d| d as i64).collect();
    let ax: Vec<i32> = (0..dims.len() as i32)
        .filter(|&i| red[i as usize])
        .collect();
    let input = t(&dims_i, x);
    let want = naive(&xd, dims, red, 0.0, |a, b| a + b);
    let got = reduce("Sum", input.clone(), axes(&ax), false).unwrap();
    let out_dims: Vec<i64> = dims_i
        .iter()
        .zip(red)
        .filter(|(_, &r)| !r)
        .map(|(&d, _)| d)
        .collect();
    assert_close(&got, &out_dims, &want, 0.0);
    let want = naive(&xd, dims, red, f64::NEG_INFINITY, f64::max);
    let got = reduce("Max", input.clone(), axes(&ax), false).unwrap();
    assert_close(&got, &out_dims, &want, 0.0);
    let count: usize = dims
        .iter()
        .zip(red)
        .filter(|(_, &r)| r)
        .map(|(&d, _)| d)
        .product();
    let want: Vec<f64> = naive(&xd, dims, red, 0.0, |a, b| a + b)
        .iter()
        .map(|s| s / count as f64)
        .collect();
    let got = reduce("Mean", input, axes(&ax), true).unwrap();
    let keep: Vec<i64> = dims_i
        .iter()
        .zip(red)
        .map(|(&d, &r)| if r { 1 } else { d })
        .collect();
    assert_close(&got, &keep, &want, 1e-6);
}

#[test]
fn every_collapse_pattern_matches_a_naive_loop() {
    // Small (sequential) and large (sharded) versions of each pattern.
    let cases: &[(&[usize], &[bool])] = &[
        (&[2, 3, 4], &[true, false, true]),
        (&[3, 5, 4, 7], &[false, true, false, true]),
        (&[3, 5, 4, 7], &[true, false, true, false]),
        (&[2, 1, 3, 1, 5], &[false, true, true, false, true]),
        (&[5, 7], &[true, false]),
        (&[5, 7], &[false, true]),
        (&[4, 6, 5], &[false, true, false]),
        (&[300, 257], &[true, false]),
        (&[300, 257], &[false, true]),
        (&[3, 40_000], &[false, true]),
        (&[40_000, 3], &[true, false]),
        (&[2, 20_000, 3], &[false, true, false]),
        (&[64, 50, 3, 20], &[true, false, true, false]),
        (&[20, 3, 40, 50], &[false, true, false, true]),
        (&[7, 3000, 5], &[true, true, false]),
        (&[100_001], &[true]),
        (&[2, 9000], &[true, false]),
        (&[3, 20_000], &[true, false]),
        (&[5, 3, 9000], &[false, true, false]),
    ];
    for (dims, red) in cases {
        check_pattern(dims, red);
    }
}

#[test]
fn large_f32_sums_are_accurate() {
    // 2^22 values of 0.1: a naive f32 running sum drifts by percents.
    let n = 1 << 22;
    let x = t(&[n as i64], vec![0.1f32; n]);
    let s = reduce("Sum", x.clone(), Tensor::scalar(0i32), false).unwrap();
    let want = 0.1f32 as f64 * n as f64;
    assert_close(&s, &[], &[want], 1e-6);
    let m = reduce("Mean", x, Tensor::scalar(0i32), false).unwrap();
    assert_close(&m, &[], &[0.1f32 as f64], 1e-6);
    // Column sums over many rows, and row sums of long rows.
    let (rows, cols) = (1 << 16, 8);
    let x = t(&[rows, cols], vec![0.1f32; (rows * cols) as usize]);
    let s = reduce("Sum", x.clone(), Tensor::scalar(0i32), false).unwrap();
    assert_close(
        &s,
        &[cols],
        &vec![0.1f32 as f64 * rows as f64; cols as usize],
        1e-6,
    );
    let x = x.reshaped(&[cols, rows]).unwrap();
    let s = reduce("Sum", x, Tensor::scalar(1i32), false).unwrap();
    assert_close(
        &s,
        &[cols],
        &vec![0.1f32 as f64 * rows as f64; cols as usize],
        1e-6,
    );
}

#[test]
fn int64_and_unsigned_large_reductions() {
    let n = 70_000i64;
    let x = t(&[n], (0..n).collect::<Vec<i64>>());
    let s = reduce("Sum", x.clone(), Tensor::scalar(0i32), false).unwrap();
    assert_eq!(s.flat::<i64>().unwrap(), &[n * (n - 1) / 2]);
    let m = reduce("Max", x.clone(), Tensor::scalar(0i32), false).unwrap();
    assert_eq!(m.flat::<i64>().unwrap(), &[n - 1]);
    let m = reduce("Mean", x, Tensor::scalar(0i32), false).unwrap();
    assert_eq!(m.flat::<i64>().unwrap(), &[(n - 1) / 2]);
    let x = t(&[2, 40_000], vec![true; 80_000]);
    let a = reduce("All", x.clone(), Tensor::scalar(1i32), false).unwrap();
    assert_eq!(a.flat::<bool>().unwrap(), &[true, true]);
    let a = reduce("Any", x, Tensor::scalar(0i32), false).unwrap();
    assert!(a.flat::<bool>().unwrap().iter().all(|&v| v));
}

fn argop(op: &str, x: Tensor, dim: Tensor, out: Option<DataType>) -> Result<Tensor> {
    let mut b = ctx().op(op).input(x).input(dim);
    if let Some(dt) = out {
        b = b.attr("output_type", dt);
    }
    b.run1()
}

#[test]
fn arg_max_and_arg_min_break_ties_by_the_smallest_index() {
    let x = t(&[2, 3], vec![1.0f32, 5.0, 5.0, 7.0, 2.0, 7.0]);
    let a = argop("ArgMax", x.clone(), Tensor::scalar(1i32), None).unwrap();
    assert_eq!(
        (a.dtype(), a.flat::<i64>().unwrap()),
        (DataType::Int64, &[1, 0][..])
    );
    let a = argop(
        "ArgMax",
        x.clone(),
        Tensor::scalar(0i64),
        Some(DataType::Int32),
    )
    .unwrap();
    assert_eq!(a.flat::<i32>().unwrap(), &[1, 0, 1]);
    let a = argop("ArgMin", x.clone(), Tensor::scalar(-1i32), None).unwrap();
    assert_eq!(a.flat::<i64>().unwrap(), &[0, 1]);
    let a = argop(
        "ArgMin",
        x.clone(),
        Tensor::scalar(0i32),
        Some(DataType::Int32),
    )
    .unwrap();
    assert_eq!(a.flat::<i32>().unwrap(), &[0, 1, 0]);
    let a = argop("ArgMax", x, Tensor::scalar(1i16), Some(DataType::UInt16)).unwrap();
    assert_eq!(a.flat::<u16>().unwrap(), &[1, 0]);
    let b = t(&[4], vec![false, true, false, true]);
    let a = argop("ArgMax", b.clone(), Tensor::scalar(0i32), None).unwrap();
    assert_eq!((a.dims(), a.flat::<i64>().unwrap()), (&[][..], &[1][..]));
    let a = argop("ArgMin", b, Tensor::scalar(0i32), None).unwrap();
    assert_eq!(a.flat::<i64>().unwrap(), &[0]);
    let i = t(&[3, 1], vec![4u8, 9, 9]);
    let a = argop("ArgMax", i, Tensor::scalar(0i32), Some(DataType::Int16)).unwrap();
    assert_eq!(a.flat::<i16>().unwrap(), &[1]);
    let h = t(&[3], [0.5f32, -2.0, 0.25].map(f16::from_f32).to_vec());
    let a = argop("ArgMin", h, Tensor::scalar(0i32), None).unwrap();
    assert_eq!(a.flat::<i64>().unwrap(), &[1]);
    // NaN is never chosen over a number (Eigen's comparison semantics).
    let n = t(&[3], vec![f64::NAN, 1.0, 3.0]);
    let a = argop("ArgMax", n, Tensor::scalar(0i32), None).unwrap();
    assert_eq!(a.flat::<i64>().unwrap(), &[2]);
}

#[test]
fn large_arg_reductions_match_a_naive_scan() {
    let n = 200_003usize;
    let x: Vec<f32> = (0..n).map(|i| ((i * 7919) % 100_003) as f32).collect();
    let want_max = (0..n).fold(0, |b, i| if x[i] > x[b] { i } else { b });
    let want_min = (0..n).fold(0, |b, i| if x[i] < x[b] { i } else { b });
    let v = t(&[n as i64], x.clone());
    let a = argop("ArgMax", v.clone(), Tensor::scalar(0i32), None).unwrap();
    assert_eq!(a.flat::<i64>().unwrap(), &[want_max as i64]);
    let a = argop("ArgMin", v, Tensor::scalar(0i32), None).unwrap();
    assert_eq!(a.flat::<i64>().unwrap(), &[want_min as i64]);
    // Columns and rows of a matrix.
    let (r, c) = (1000usize, 97usize);
    let m = t(&[r as i64, c as i64], x[..r * c].to_vec());
    let a = argop("ArgMax", m.clone(), Tensor::scalar(0i32), None).unwrap();
    let want: Vec<i64> = (0..c)
        .map(|j| (0..r).fold(0, |b, i| if x[i * c + j] > x[b * c + j] { i } else { b }) as i64)
        .collect();
    assert_eq!(a.flat::<i64>().unwrap(), &want[..]);
    let a = argop("ArgMin", m, Tensor::scalar(1i32), None).unwrap();
    let want: Vec<i64> = (0..r)
        .map(|i| (0..c).fold(0, |b, j| if x[i * c + j] < x[i * c + b] { j } else { b }) as i64)
        .collect();
    assert_eq!(a.flat::<i64>().unwrap(), &want[..]);
    // Wide columns (several column tiles), sequential and sharded.
    for (r, c) in [(2usize, 9000usize), (4, 20_000)] {
        let m = t(&[r as i64, c as i64], x[..r * c].to_vec());
        let a = argop("ArgMin", m, Tensor::scalar(0i32), None).unwrap();
        let want: Vec<i64> = (0..c)
            .map(|j| (0..r).fold(0, |b, i| if x[i * c + j] < x[b * c + j] { i } else { b }) as i64)
            .collect();
        assert_eq!(a.flat::<i64>().unwrap(), &want[..]);
    }
}

#[test]
fn arg_reduction_errors() {
    let e = Tensor::zeros(DataType::Float, &[0]).unwrap();
    let err = argop("ArgMax", e, Tensor::scalar(0i32), None).unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument);
    assert!(
        err.message()
            .contains("Reduction axis 0 is empty in shape [0]"),
        "{err}"
    );
    let e = Tensor::zeros(DataType::Int32, &[2, 0]).unwrap();
    let err = argop("ArgMin", e.clone(), Tensor::scalar(-1i32), None).unwrap_err();
    assert!(
        err.message()
            .contains("Reduction axis -1 is empty in shape [2,0]"),
        "{err}"
    );
    // Reducing the non-empty axis of an empty tensor is fine.
    let a = argop("ArgMin", e, Tensor::scalar(0i32), None).unwrap();
    assert_eq!(a.dims(), &[0]);
    let err = argop("ArgMax", m23(), Tensor::scalar(2i32), None).unwrap_err();
    assert!(
        err.message()
            .contains("Expected dimension in the range [-2, 2), but got 2"),
        "{err}"
    );
    let err = argop("ArgMax", m23(), t(&[1], vec![0i32]), None).unwrap_err();
    assert!(
        err.message()
            .contains("dim must be a scalar, but received tensor of shape: [1]"),
        "{err}"
    );
    let err = argop("ArgMax", Tensor::scalar(1.0f32), Tensor::scalar(0i32), None).unwrap_err();
    assert!(
        err.message()
            .contains("Expected dimension in the range [0, 0), but got 0"),
        "{err}"
    );
}

// ---- Shape functions ----

mod shapes {
    use opforge_core::Tensor;
    use opforge_testing::shape::ShapeTestOp;
    use opforge_testing::{infer_error, infer_ok};

    fn red(op: &str, keep_dims: bool) -> ShapeTestOp {
        ShapeTestOp::new(op).attr("keep_dims", keep_dims)
    }

    #[test]
    fn reductions_without_constant_axes() {
        for op in ["Sum", "Mean", "Max", "Min", "Prod", "All", "Any"] {
            infer_ok!(red(op, false), "?;?", "?");
            infer_ok!(red(op, false), "[2,3];[1]", "?");
            infer_ok!(red(op, true), "[2,?];[1]", "[?,?]");
            infer_ok!(red(op, true), "?;[1]", "?");
            infer_error!(
                red(op, false),
                "[2,3];[1,1]",
                "Shape must be at most rank 1 but is rank 2"
            );
            infer_error!(
                ShapeTestOp::new(op),
                "[2,3];[1]",
                "No attr named 'keep_dims'"
            );
        }
    }

    #[test]
    fn reductions_with_constant_axes() {
        let v = |a: &[i32]| Tensor::from_slice(&[a.len() as i64], a).unwrap();
        for op in ["Sum", "Mean", "Max", "Min", "Prod", "All", "Any"] {
            let o = red(op, false).input_tensor(1, v(&[1]));
            infer_ok!(o, "[2,3,4];[1]", "[d0_0,d0_2]");
            infer_ok!(o, "[2,?,?];[1]", "[d0_0,d0_2]");
            infer_ok!(o, "?;[1]", "?");
            let o = red(op, true).input_tensor(1, v(&[1]));
            infer_ok!(o, "[2,3,4];[1]", "[d0_0,1,d0_2]");
            let o = red(op, false).input_tensor(1, v(&[0, -1, 0]));
            infer_ok!(o, "[2,?,4];[3]", "[d0_1]");
            let o = red(op, false).input_tensor(1, Tensor::scalar(-2i64));
            infer_ok!(o, "[2,3];[]", "[d0_1]");
            let o = red(op, true).input_tensor(1, v(&[]));
            infer_ok!(o, "[2,3];[0]", "[d0_0,d0_1]");
            let o = red(op, false).input_tensor(1, v(&[0, 1]));
            infer_ok!(o, "[2,3];[2]", "[]");
            let o = red(op, false).input_tensor(1, v(&[2]));
            infer_error!(
                o,
                "[2,3];[1]",
                "Invalid reduction dimension 2 for input with 2 dimensions."
            );
            let o = red(op, false).input_tensor(1, Tensor::scalar(-3i64));
            infer_error!(
                o,
                "[2,3];[]",
                "Invalid reduction dimension -3 for input with 2 dimensions."
            );
            let o = red(op, false).input_tensor(1, v(&[0]));
            infer_error!(
                o,
                "[];[1]",
                "Invalid reduction dimension 0 for input with 0 dimensions."
            );
        }
    }

    #[test]
    fn arg_ops() {
        for op in ["ArgMax", "ArgMin"] {
            let o = ShapeTestOp::new(op);
            infer_ok!(o, "?;?", "?");
            infer_ok!(o, "?;[]", "?");
            infer_ok!(o, "[];[]", "[]");
            infer_ok!(o, "[5];?", "[]");
            infer_ok!(o, "[2,3,4];[]", "[?,?]");
            infer_ok!(o, "[2,3,4];?", "[?,?]");
            infer_error!(o, "[2,3];[1]", "Shape must be rank 0 but is rank 1");
            let c = |v: i32| ShapeTestOp::new(op).input_tensor(1, Tensor::scalar(v));
            infer_ok!(c(1), "[2,3,4];[]", "[d0_0,d0_2]");
            infer_ok!(c(-1), "[2,?,4];[]", "[d0_0,d0_1]");
            infer_ok!(c(0), "[2,?,4];[]", "[d0_1,d0_2]");
            infer_ok!(c(7), "?;[]", "?");
            infer_error!(
                c(3),
                "[2,3,4];[]",
                "Dimension (3) must be in the range [-3, 3), where 3 is the number of dimensions in the input."
            );
            infer_error!(
                c(-4),
                "[2,3,4];[]",
                "Dimension (-4) must be in the range [-3, 3)"
            );
            let o = ShapeTestOp::new(op).input_tensor(1, Tensor::scalar(-3i64));
            infer_ok!(o, "[2,3,4];[]", "[d0_1,d0_2]");
        }
    }
}

// ---- Gradients ----

mod grads {
    use opforge_core::attrs::IntoAttrValue;
    use opforge_core::autodiff::{Gradient, GradientFn, GradientTape, Ops, OpsExt, Sym};
    use opforge_core::{Result, Tensor};
    use opforge_testing::util::{assert_close, ctx, t};

    use opforge_testing::util::{check_gradients as check, distinct_values as vals};

    fn reduce_fn(
        op: &'static str,
        axes: Tensor,
        keep: bool,
    ) -> impl Fn(&mut dyn Ops, &[Sym]) -> Result<Sym> {
        move |o: &mut dyn Ops, xs: &[Sym]| {
            let a = o.constant(axes.clone())?;
            o.op1(op, &[xs[0], a], &[("keep_dims", keep.into_attr_value())])
        }
    }

    fn axes_cases() -> Vec<Tensor> {
        vec![
            t(&[1], vec![1i32]),
            t(&[2], vec![0i32, 2]),
            t(&[2], vec![-1i64, 0]),
            Tensor::scalar(-2i32),
            t(&[3], vec![0i32, 1, 2]),
            t(&[0], Vec::<i32>::new()),
        ]
    }

    #[test]
    fn sum_mean_max_min_prod_gradients() {
        for op in ["Sum", "Mean", "Max", "Min", "Prod"] {
            // Products of values near 1 stay small (the float32 check is absolute).
            let scale = if op == "Prod" { 0.3 } else { 1.0 };
            let x = t(&[2, 3, 2], vals(12, scale));
            for axes in axes_cases() {
                for keep in [false, true] {
                    let f = reduce_fn(op, axes.clone(), keep);
                    check(&f, std::slice::from_ref(&x));
                }
            }
            // Reducing a vector and a scalar.
            let f = reduce_fn(op, Tensor::scalar(0i32), false);
            check(&f, &[t(&[4], vals(4, 1.0))]);
            let f = reduce_fn(op, t(&[0], Vec::<i32>::new()), false);
            check(&f, &[Tensor::scalar(1.5f64)]);
        }
    }

    fn grad_of(op: &'static str, x: Tensor, axes: Tensor, keep: bool) -> Tensor {
        let mut tape = GradientTape::new(ctx(), false);
        let xs = tape.watch(x);
        let a = tape.constant(axes).unwrap();
        let y = tape
            .op1(op, &[xs, a], &[("keep_dims", keep.into_attr_value())])
            .unwrap();
        tape.gradient_tensors(y, &[xs]).unwrap()[0].clone().unwrap()
    }

    #[test]
    fn hand_checked_reduction_gradients() {
        let x = t(&[2, 3], vec![1.0f64, 3.0, 3.0, -1.0, -2.0, 5.0]);
        // Sum: ones; Mean: 1/3 per row.
        let g = grad_of("Sum", x.clone(), t(&[1], vec![1i32]), false);
        assert_close(&g, &[2, 3], &[1.0; 6], 0.0);
        let g = grad_of("Mean", x.clone(), t(&[1], vec![1i32]), false);
        assert_close(&g, &[2, 3], &[1.0 / 3.0; 6], 1e-15);
        let g = grad_of("Mean", x.clone(), t(&[2], vec![0i32, 1]), true);
        assert_close(&g, &[2, 3], &[1.0 / 6.0; 6], 1e-15);
        // Max: ties share the gradient.
        let g = grad_of("Max", x.clone(), t(&[1], vec![1i32]), false);
        assert_close(&g, &[2, 3], &[0.0, 0.5, 0.5, 0.0, 0.0, 1.0], 0.0);
        let g = grad_of("Min", x.clone(), t(&[1], vec![0i32]), true);
        assert_close(&g, &[2, 3], &[0.0, 0.0, 1.0, 1.0, 1.0, 0.0], 0.0);
        // Prod: the product of the others, zeros included.
        let z = t(
            &[3, 3],
            vec![2.0f64, 0.0, 3.0, 0.0, 0.0, 1.0, 2.0, 4.0, 0.5],
        );
        let g = grad_of("Prod", z, t(&[1], vec![1i32]), false);
        assert_close(
            &g,
            &[3, 3],
            &[0.0, 6.0, 0.0, 0.0, 0.0, 0.0, 2.0, 1.0, 8.0],
            1e-15,
        );
        // float32 Mean.
        let g = grad_of(
            "Mean",
            t(&[4], vec![1.0f32; 4]),
            Tensor::scalar(0i32),
            false,
        );
        assert_close(&g, &[4], &[0.25; 4], 0.0);
    }

    #[test]
    fn axes_get_no_gradient_and_arg_ops_are_not_differentiable() {
        let mut tape = GradientTape::new(ctx(), false);
        let x = tape.watch(t(&[2], vec![1.0f64, 2.0]));
        let a = tape.watch(t(&[1], vec![0i32]));
        let y = tape
            .op1("Sum", &[x, a], &[("keep_dims", false.into_attr_value())])
            .unwrap();
        let g = tape.gradient(y, &[x, a]).unwrap();
        assert!(g[0].is_some() && g[1].is_none());
        for op in ["ArgMax", "ArgMin", "All", "Any"] {
            assert!(matches!(
                opforge_core::registry::Registry::global()
                    .attr::<Gradient>(op)
                    .as_deref(),
                Some(GradientFn::NotDifferentiable)
            ));
        }
    }
}

/// `Sum` and `Prod` compute unsigned integers as the signed integers of
/// their size (`sign_agnostic!`): checked against Rust's wrapping
/// arithmetic over one axis (one step), two non-adjacent axes (several
/// steps, the last finished in a separate pass) and all axes, for every
/// unsigned type.
#[test]
fn unsigned_sums_and_products_wrap_on_every_schedule() {
    macro_rules! check {
        ($($t:ty),*) => {$({
            let dims = [4usize, 5, 6];
            let vals: Vec<$t> = (0..120u32)
                .map(|i| <$t>::MAX.wrapping_sub((i % 7) as $t).wrapping_mul((i % 3 + 1) as $t))
                .collect();
            let x = t(&[4, 5, 6], vals.clone());
            let at = |i: usize, j: usize, k: usize| vals[(i * dims[1] + j) * dims[2] + k];
            let fold = |keep: &dyn Fn(usize, usize, usize) -> usize, n: usize, prod: bool| {
                let mut acc: Vec<$t> = vec![if prod { 1 } else { 0 }; n];
                for i in 0..dims[0] {
                    for j in 0..dims[1] {
                        for k in 0..dims[2] {
                            let a = &mut acc[keep(i, j, k)];
                            *a = if prod { a.wrapping_mul(at(i, j, k)) } else { a.wrapping_add(at(i, j, k)) };
                        }
                    }
                }
                acc
            };
            for (op, prod) in [("Sum", false), ("Prod", true)] {
                let got = reduce(op, x.clone(), axes(&[1]), false).unwrap();
                let want = fold(&|i, _, k| i * dims[2] + k, dims[0] * dims[2], prod);
                assert_eq!(got.flat::<$t>().unwrap(), &want[..], "{op} over axis 1");
                let got = reduce(op, x.clone(), axes(&[0, 2]), false).unwrap();
                let want = fold(&|_, j, _| j, dims[1], prod);
                assert_eq!(got.flat::<$t>().unwrap(), &want[..], "{op} over axes 0, 2");
                let got = reduce(op, x.clone(), axes(&[0, 1, 2]), false).unwrap();
                let want = fold(&|_, _, _| 0, 1, prod);
                assert_eq!(got.flat::<$t>().unwrap(), &want[..], "{op} over all axes");
                assert_eq!(got.dtype(), <$t as opforge_core::Element>::DTYPE);
            }
        })*};
    }
    check!(u8, u16, u32, u64);
}
