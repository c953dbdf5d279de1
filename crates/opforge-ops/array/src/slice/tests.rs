//! Kernel tests of the joining, splitting, slicing and padding ops.

use super::*;
use opforge_core::half::{bf16, f16};
use opforge_core::num_complex::Complex;
use opforge_core::DataType;
use opforge_core::{Code, Element};
use opforge_testing::util::{assert_close, ctx, t};

pub(super) fn v<T: Element>(x: &Tensor) -> Vec<T> {
    x.flat::<T>().unwrap().to_vec()
}

pub(super) fn strs(dims: &[i64], s: &[&str]) -> Tensor {
    Tensor::from_strings(dims, s.iter().map(|x| x.as_bytes().to_vec()).collect()).unwrap()
}

pub(super) fn sv(x: &Tensor) -> Vec<String> {
    x.strings()
        .unwrap()
        .iter()
        .map(|b| String::from_utf8(b.clone()).unwrap())
        .collect()
}

pub(super) fn iota(dims: &[i64]) -> Tensor {
    let n: i64 = dims.iter().product();
    t(dims, (0..n as i32).collect())
}

#[track_caller]
pub(super) fn assert_err<T: std::fmt::Debug>(r: Result<T>, code: Code, msg: &str) {
    let e = r.unwrap_err();
    assert_eq!(e.code(), code, "{e}");
    assert!(e.message().contains(msg), "{e}\nexpected to contain: {msg}");
}

pub(super) fn concat(values: Vec<Tensor>, axis: Tensor) -> Result<Tensor> {
    ctx().op("ConcatV2").input_list(values).input(axis).run1()
}

fn pack(values: Vec<Tensor>, axis: i64) -> Result<Tensor> {
    ctx()
        .op("Pack")
        .input_list(values)
        .attr("axis", axis)
        .run1()
}

fn unpack(value: Tensor, num: i64, axis: i64) -> Result<Vec<Tensor>> {
    ctx()
        .op("Unpack")
        .input(value)
        .attr("num", num)
        .attr("axis", axis)
        .run()
}

fn split(dim: i32, value: Tensor, num: i64) -> Result<Vec<Tensor>> {
    ctx()
        .op("Split")
        .input(Tensor::scalar(dim))
        .input(value)
        .attr("num_split", num)
        .run()
}

/// Fuzz finding (kernel, cargo-fuzz): splitting an empty tensor whose other
/// dims multiply past i64 (`[2, 0, 2^62, 4]`) overflowed the
/// row-major strides of the slice view (a panic in debug builds). The parts
/// are empty tensors of the split shape.
#[test]
fn split_of_an_empty_tensor_with_huge_dims() {
    let x = Tensor::zeros(DataType::Float, &[2, 0, 1 << 62, 4]).unwrap();
    for (axis, want) in [
        (0, [1, 0, 1 << 62, 4]),
        (2, [2, 0, 1 << 61, 4]),
        (3, [2, 0, 1 << 62, 2]),
    ] {
        let parts = split(axis, x.clone(), 2).unwrap();
        assert_eq!(parts.len(), 2);
        for p in parts {
            assert_eq!(p.dims(), &want, "axis {axis}");
            assert_eq!(p.num_elements(), 0);
        }
    }
}

fn slice(x: Tensor, begin: Vec<i32>, size: Vec<i32>) -> Result<Tensor> {
    let (b, s) = (begin.len() as i64, size.len() as i64);
    ctx()
        .op("Slice")
        .input(x)
        .input(t(&[b], begin))
        .input(t(&[s], size))
        .run1()
}

fn tile(x: Tensor, m: Vec<i32>) -> Result<Tensor> {
    let n = m.len() as i64;
    ctx().op("Tile").input(x).input(t(&[n], m)).run1()
}

fn pad(x: Tensor, p: Vec<i32>) -> Result<Tensor> {
    let n = p.len() as i64 / 2;
    ctx().op("Pad").input(x).input(t(&[n, 2], p)).run1()
}

fn pad_v2(x: Tensor, p: Vec<i32>, c: Tensor) -> Result<Tensor> {
    let n = p.len() as i64 / 2;
    ctx()
        .op("PadV2")
        .input(x)
        .input(t(&[n, 2], p))
        .input(c)
        .run1()
}

// ---- ConcatV2

#[test]
fn concat_hand_checked() {
    let a = t(&[2, 3], vec![1f32, 2., 3., 4., 5., 6.]);
    let b = t(&[2, 3], vec![7f32, 8., 9., 10., 11., 12.]);
    let r = concat(vec![a.clone(), b.clone()], Tensor::scalar(0i32)).unwrap();
    assert_eq!(r.dims(), &[4, 3]);
    assert_eq!(v::<f32>(&r), (1..=12).map(|x| x as f32).collect::<Vec<_>>());
    let want1 = vec![1f32, 2., 3., 7., 8., 9., 4., 5., 6., 10., 11., 12.];
    let r = concat(vec![a.clone(), b.clone()], Tensor::scalar(1i32)).unwrap();
    assert_eq!((r.dims(), v::<f32>(&r)), (&[2i64, 6][..], want1.clone()));
    // Negative axes, and an int64 axis.
    let r = concat(vec![a.clone(), b.clone()], Tensor::scalar(-1i64)).unwrap();
    assert_eq!((r.dims(), v::<f32>(&r)), (&[2i64, 6][..], want1));
    let r = concat(vec![a.clone(), b.clone()], Tensor::scalar(-2i32)).unwrap();
    assert_eq!(r.dims(), &[4, 3]);
    // An axis given as a 1-element vector.
    let r = concat(vec![a, b], t(&[1], vec![1i32])).unwrap();
    assert_eq!(r.dims(), &[2, 6]);
    // Inputs of different widths, three of them.
    let x = t(&[2, 1], vec![1i32, 2]);
    let y = t(&[2, 2], vec![3i32, 4, 5, 6]);
    let z = t(&[2, 1], vec![7i32, 8]);
    let r = concat(vec![x, y, z], Tensor::scalar(1i32)).unwrap();
    assert_eq!(r.dims(), &[2, 4]);
    assert_eq!(v::<i32>(&r), vec![1, 3, 4, 7, 2, 5, 6, 8]);
    // The middle axis of a rank-3 tensor.
    let p = iota(&[2, 1, 2]);
    let q = t(&[2, 2, 2], vec![10i32, 11, 12, 13, 14, 15, 16, 17]);
    let r = concat(vec![p, q], Tensor::scalar(1i32)).unwrap();
    assert_eq!(r.dims(), &[2, 3, 2]);
    assert_eq!(
        v::<i32>(&r),
        vec![0, 1, 10, 11, 12, 13, 2, 3, 14, 15, 16, 17]
    );
}

#[test]
fn concat_empty_inputs() {
    let b = t(&[2, 3], vec![1i64, 2, 3, 4, 5, 6]);
    let e = Tensor::zeros(DataType::Int64, &[2, 0]).unwrap();
    let r = concat(vec![e.clone(), b.clone()], Tensor::scalar(1i32)).unwrap();
    assert_eq!((r.dims(), v::<i64>(&r)), (&[2i64, 3][..], v::<i64>(&b)));
    let r = concat(vec![b.clone(), e], Tensor::scalar(1i32)).unwrap();
    assert_eq!(v::<i64>(&r), v::<i64>(&b));
    let e0 = Tensor::zeros(DataType::Int64, &[0, 3]).unwrap();
    let r = concat(
        vec![e0.clone(), b.clone(), e0.clone()],
        Tensor::scalar(0i32),
    )
    .unwrap();
    assert_eq!((r.dims(), v::<i64>(&r)), (&[2i64, 3][..], v::<i64>(&b)));
    let r = concat(vec![e0.clone(), e0], Tensor::scalar(0i32)).unwrap();
    assert_eq!(r.dims(), &[0, 3]);
    let a = Tensor::zeros(DataType::Float, &[2, 0]).unwrap();
    let c = Tensor::zeros(DataType::Float, &[1, 0]).unwrap();
    assert_eq!(
        concat(vec![a, c], Tensor::scalar(0i32)).unwrap().dims(),
        &[3, 0]
    );
}

#[test]
fn concat_every_dtype_family() {
    let r = concat(
        vec![t(&[2], vec![1.5f64, 2.5]), t(&[1], vec![3.5f64])],
        Tensor::scalar(0i32),
    )
    .unwrap();
    assert_eq!(v::<f64>(&r), vec![1.5, 2.5, 3.5]);
    let r = concat(
        vec![t(&[1, 2], vec![true, false]), t(&[1, 1], vec![true])],
        Tensor::scalar(1i32),
    )
    .unwrap();
    assert_eq!(v::<bool>(&r), vec![true, false, true]);
    let c = |re: f32| Complex::new(re, -re);
    let r = concat(
        vec![t(&[1], vec![c(1.0)]), t(&[2], vec![c(2.0), c(3.0)])],
        Tensor::scalar(0i32),
    )
    .unwrap();
    assert_eq!(v::<Complex<f32>>(&r), vec![c(1.0), c(2.0), c(3.0)]);
    let r = concat(
        vec![
            t(&[1], vec![Complex::new(1.0f64, 2.0)]),
            t(&[1], vec![Complex::new(3.0f64, 4.0)]),
        ],
        Tensor::scalar(0i32),
    )
    .unwrap();
    assert_eq!(
        v::<Complex<f64>>(&r),
        vec![Complex::new(1.0, 2.0), Complex::new(3.0, 4.0)]
    );
    let h = |x: f32| f16::from_f32(x);
    let r = concat(
        vec![t(&[1], vec![h(1.0)]), t(&[1], vec![h(-2.0)])],
        Tensor::scalar(0i32),
    )
    .unwrap();
    assert_eq!(v::<f16>(&r), vec![h(1.0), h(-2.0)]);
    let b = |x: f32| bf16::from_f32(x);
    let r = concat(
        vec![t(&[1], vec![b(0.5)]), t(&[1], vec![b(8.0)])],
        Tensor::scalar(0i32),
    )
    .unwrap();
    assert_eq!(v::<bf16>(&r), vec![b(0.5), b(8.0)]);
    let r = concat(
        vec![t(&[1], vec![-1i8]), t(&[1], vec![7i8])],
        Tensor::scalar(0i32),
    )
    .unwrap();
    assert_eq!(v::<i8>(&r), vec![-1, 7]);
    let r = concat(
        vec![t(&[1], vec![u64::MAX]), t(&[1], vec![1u64])],
        Tensor::scalar(0i32),
    )
    .unwrap();
    assert_eq!(v::<u64>(&r), vec![u64::MAX, 1]);
    // A quantized dtype, which only has a byte representation.
    let q = |x: Vec<u8>| t(&[x.len() as i64], x).bitcast(DataType::QInt8).unwrap();
    let r = concat(vec![q(vec![1, 2]), q(vec![200])], Tensor::scalar(0i32)).unwrap();
    assert_eq!(r.dtype(), DataType::QInt8);
    assert_eq!(
        v::<u8>(&r.bitcast(DataType::UInt8).unwrap()),
        vec![1, 2, 200]
    );
    // Strings.
    let r = concat(
        vec![
            strs(&[2, 1], &["a", "b"]),
            strs(&[2, 2], &["c", "d", "e", "f"]),
        ],
        Tensor::scalar(-1i32),
    )
    .unwrap();
    assert_eq!(r.dims(), &[2, 3]);
    assert_eq!(sv(&r), ["a", "c", "d", "b", "e", "f"]);
}

#[test]
fn concat_errors() {
    let a = Tensor::zeros(DataType::Float, &[2, 3]).unwrap();
    let b = Tensor::zeros(DataType::Float, &[2, 4]).unwrap();
    assert_err(
        concat(vec![a.clone(), b], Tensor::scalar(0i32)),
        Code::InvalidArgument,
        "ConcatOp : Dimension 1 in both shapes must be equal: shape[0] = [2,3] vs. shape[1] = [2,4]",
    );
    assert_err(
        concat(
            vec![a.clone(), Tensor::zeros(DataType::Float, &[3]).unwrap()],
            Tensor::scalar(0i32),
        ),
        Code::InvalidArgument,
        "ConcatOp : Ranks of all input tensors should match: shape[0] = [2,3] vs. shape[1] = [3]",
    );
    assert_err(
        concat(vec![a.clone(), a.clone()], Tensor::scalar(2i32)),
        Code::InvalidArgument,
        "ConcatOp : Expected concatenating dimensions in the range [-2, 2), but got 2",
    );
    assert_err(
        concat(vec![a.clone(), a.clone()], Tensor::scalar(-3i64)),
        Code::InvalidArgument,
        "in the range [-2, 2), but got -3",
    );
    assert_err(
        concat(vec![a.clone(), a], t(&[2], vec![0i32, 1])),
        Code::InvalidArgument,
        "axis tensor should be a scalar integer, but got shape [2]",
    );
    assert_err(
        concat(
            vec![Tensor::scalar(1f32), Tensor::scalar(2f32)],
            Tensor::scalar(0i32),
        ),
        Code::InvalidArgument,
        "in the range [0, 0), but got 0",
    );
}

#[test]
fn concat_large_inputs_shard_correctly() {
    let (rows, cols) = (300i64, 257i64);
    let a = t(&[rows, cols], (0..rows * cols).map(|x| x as i32).collect());
    let b = t(&[rows, 2], (0..rows * 2).map(|x| -(x as i32)).collect());
    // Along axis 1: many rows.
    let r = concat(vec![a.clone(), b.clone()], Tensor::scalar(1i32)).unwrap();
    assert_eq!(r.dims(), &[rows, cols + 2]);
    let got = v::<i32>(&r);
    for i in [0, 1, 150, 299] {
        for j in [0, 1, 256, 257, 258] {
            let want = if j < cols {
                (i * cols + j) as i32
            } else {
                -((i * 2 + j - cols) as i32)
            };
            assert_eq!(got[(i * (cols + 2) + j) as usize], want, "({i}, {j})");
        }
    }
    // Along axis 0: one long row per input.
    let c = t(
        &[rows, cols],
        (0..rows * cols).map(|x| x as i32 + 1).collect(),
    );
    let r = concat(vec![a.clone(), c], Tensor::scalar(0i32)).unwrap();
    let got = v::<i32>(&r);
    let n = (rows * cols) as usize;
    assert_eq!(got.len(), 2 * n);
    assert!((0..n).all(|k| got[k] == k as i32 && got[n + k] == k as i32 + 1));
    // Strings, sharded.
    let s = Tensor::from_strings(
        &[40000],
        (0..40000).map(|k| format!("{k}").into_bytes()).collect(),
    )
    .unwrap();
    let r = concat(vec![s.clone(), s], Tensor::scalar(0i32)).unwrap();
    assert_eq!(r.strings().unwrap()[40001], b"1".to_vec());
}

// ---- Pack

#[test]
fn pack_hand_checked() {
    let x = t(&[2], vec![1i32, 4]);
    let y = t(&[2], vec![2i32, 5]);
    let z = t(&[2], vec![3i32, 6]);
    let r = pack(vec![x.clone(), y.clone(), z.clone()], 0).unwrap();
    assert_eq!(
        (r.dims(), v::<i32>(&r)),
        (&[3i64, 2][..], vec![1, 4, 2, 5, 3, 6])
    );
    let r = pack(vec![x.clone(), y.clone(), z.clone()], 1).unwrap();
    assert_eq!(
        (r.dims(), v::<i32>(&r)),
        (&[2i64, 3][..], vec![1, 2, 3, 4, 5, 6])
    );
    let r = pack(vec![x.clone(), y.clone(), z], -1).unwrap();
    assert_eq!(
        (r.dims(), v::<i32>(&r)),
        (&[2i64, 3][..], vec![1, 2, 3, 4, 5, 6])
    );
    let r = pack(vec![x.clone(), y], -2).unwrap();
    assert_eq!((r.dims(), v::<i32>(&r)), (&[2i64, 2][..], vec![1, 4, 2, 5]));
    // Rank 2 along the middle axis.
    let a = iota(&[2, 3]);
    let b = t(&[2, 3], vec![10i32, 11, 12, 13, 14, 15]);
    let r = pack(vec![a, b], 1).unwrap();
    assert_eq!(r.dims(), &[2, 2, 3]);
    assert_eq!(v::<i32>(&r), vec![0, 1, 2, 10, 11, 12, 3, 4, 5, 13, 14, 15]);
    // Scalars, a single input (a view), empty inputs.
    let r = pack(vec![Tensor::scalar(1.5f32), Tensor::scalar(2.5f32)], 0).unwrap();
    assert_eq!((r.dims(), v::<f32>(&r)), (&[2i64][..], vec![1.5, 2.5]));
    let r = pack(vec![x.clone()], 1).unwrap();
    assert_eq!((r.dims(), v::<i32>(&r)), (&[2i64, 1][..], vec![1, 4]));
    assert!(r.shares_storage_with(&x));
    let e = Tensor::zeros(DataType::Bool, &[0, 2]).unwrap();
    assert_eq!(pack(vec![e.clone(), e], 2).unwrap().dims(), &[0, 2, 2]);
    // Strings and bools.
    let r = pack(vec![strs(&[2], &["a", "b"]), strs(&[2], &["c", "d"])], 1).unwrap();
    assert_eq!(
        (r.dims(), sv(&r)),
        (
            &[2i64, 2][..],
            vec!["a", "c", "b", "d"]
                .into_iter()
                .map(String::from)
                .collect()
        )
    );
    let r = pack(vec![t(&[1], vec![true]), t(&[1], vec![false])], 0).unwrap();
    assert_eq!(v::<bool>(&r), vec![true, false]);
}

#[test]
fn pack_errors() {
    assert_err(
        pack(vec![t(&[2], vec![1i32, 2]), t(&[3], vec![1i32, 2, 3])], 0),
        Code::InvalidArgument,
        "Shapes of all inputs must match: values[0].shape = [2] != values[1].shape = [3]",
    );
    assert_err(
        pack(vec![t(&[2], vec![1i32, 2]), t(&[2], vec![1i32, 2])], 2),
        Code::InvalidArgument,
        "axis = 2 not in [-2, 2)",
    );
    assert_err(
        pack(vec![t(&[2], vec![1i32, 2])], -3),
        Code::InvalidArgument,
        "axis = -3 not in [-2, 2)",
    );
}

// ---- Unpack

#[test]
fn unpack_hand_checked() {
    let x = iota(&[3, 2]);
    let r = unpack(x.clone(), 3, 0).unwrap();
    assert_eq!(r.len(), 3);
    for (i, o) in r.iter().enumerate() {
        assert_eq!(o.dims(), &[2]);
        assert_eq!(v::<i32>(o), vec![2 * i as i32, 2 * i as i32 + 1]);
        assert!(o.shares_storage_with(&x), "axis 0 outputs are views");
    }
    let y = iota(&[2, 3]);
    for axis in [1, -1] {
        let r = unpack(y.clone(), 3, axis).unwrap();
        let got: Vec<Vec<i32>> = r.iter().map(v::<i32>).collect();
        assert_eq!(got, vec![vec![0, 3], vec![1, 4], vec![2, 5]]);
    }
    let z = iota(&[2, 3, 2]);
    let r = unpack(z, 3, 1).unwrap();
    assert_eq!(r[1].dims(), &[2, 2]);
    assert_eq!(v::<i32>(&r[1]), vec![2, 3, 8, 9]);
    // Zero outputs, and empty outputs.
    let e = Tensor::zeros(DataType::Float, &[0, 2]).unwrap();
    assert!(unpack(e, 0, 0).unwrap().is_empty());
    let e = Tensor::zeros(DataType::Float, &[2, 0]).unwrap();
    let r = unpack(e, 2, 0).unwrap();
    assert_eq!(r[1].dims(), &[0]);
    // Strings along axis 1, complex along axis 0.
    let s = strs(&[2, 2], &["a", "b", "c", "d"]);
    let r = unpack(s, 2, 1).unwrap();
    assert_eq!(sv(&r[0]), ["a", "c"]);
    assert_eq!(sv(&r[1]), ["b", "d"]);
    let c = t(
        &[2],
        vec![Complex::new(1.0f64, 1.0), Complex::new(2.0, 2.0)],
    );
    let r = unpack(c, 2, 0).unwrap();
    assert_eq!(r[1].dims(), &[] as &[i64]);
    assert_eq!(v::<Complex<f64>>(&r[1]), vec![Complex::new(2.0, 2.0)]);
}

#[test]
fn unpack_errors() {
    assert_err(
        unpack(iota(&[2, 3]), 3, 0),
        Code::InvalidArgument,
        "Input shape axis 0 must equal 3, got shape [2,3]",
    );
    assert_err(
        unpack(iota(&[2, 3]), 2, 2),
        Code::InvalidArgument,
        "axis = 2 not in [-2, 2)",
    );
    assert_err(
        unpack(Tensor::scalar(1i32), 1, 0),
        Code::InvalidArgument,
        "axis = 0 not in [0, 0)",
    );
}

// ---- Split

#[test]
fn split_hand_checked() {
    let x = iota(&[4, 2]);
    let r = split(0, x.clone(), 2).unwrap();
    assert_eq!(
        (r[0].dims(), v::<i32>(&r[0])),
        (&[2i64, 2][..], vec![0, 1, 2, 3])
    );
    assert_eq!(v::<i32>(&r[1]), vec![4, 5, 6, 7]);
    assert!(r[1].shares_storage_with(&x));
    let y = iota(&[2, 4]);
    for dim in [1, -1] {
        let r = split(dim, y.clone(), 2).unwrap();
        assert_eq!(r[0].dims(), &[2, 2]);
        assert_eq!(v::<i32>(&r[0]), vec![0, 1, 4, 5]);
        assert_eq!(v::<i32>(&r[1]), vec![2, 3, 6, 7]);
    }
    let r = split(1, y.clone(), 4).unwrap();
    assert_eq!(v::<i32>(&r[3]), vec![3, 7]);
    let r = split(-2, y.clone(), 1).unwrap();
    assert!(r[0].shares_storage_with(&y));
    // Empty.
    let e = Tensor::zeros(DataType::Double, &[0, 4]).unwrap();
    let r = split(1, e, 2).unwrap();
    assert_eq!(r[1].dims(), &[0, 2]);
    let e = Tensor::zeros(DataType::Double, &[2, 0]).unwrap();
    let r = split(1, e, 3).unwrap();
    assert_eq!(r[2].dims(), &[2, 0]);
    // Strings and half.
    let s = strs(&[1, 4], &["a", "b", "c", "d"]);
    let r = split(1, s, 2).unwrap();
    assert_eq!(sv(&r[1]), ["c", "d"]);
    let h = t(&[2, 2], [1.0f32, 2.0, 3.0, 4.0].map(f16::from_f32).to_vec());
    let r = split(1, h, 2).unwrap();
    assert_eq!(v::<f16>(&r[1]), [2.0f32, 4.0].map(f16::from_f32).to_vec());
}

#[test]
fn split_errors() {
    assert_err(
        split(0, iota(&[5]), 2),
        Code::InvalidArgument,
        "Number of ways to split should evenly divide the split dimension, but got split_dim 0 (size = 5) and num_split 2",
    );
    assert_err(
        split(2, iota(&[2, 2]), 2),
        Code::InvalidArgument,
        "-input rank(-2) <= split_dim < input rank (2), but got 2",
    );
    assert_err(
        split(-3, iota(&[2, 2]), 2),
        Code::InvalidArgument,
        "but got -3",
    );
    let r = ctx()
        .op("Split")
        .input(t(&[1], vec![0i32]))
        .input(iota(&[2]))
        .attr("num_split", 2i64)
        .run();
    assert_err(
        r,
        Code::InvalidArgument,
        "split_dim must be a scalar but has rank 1",
    );
}

// ---- Slice

#[test]
fn slice_hand_checked() {
    let x = iota(&[3, 4]);
    let r = slice(x.clone(), vec![1, 1], vec![2, 2]).unwrap();
    assert_eq!(
        (r.dims(), v::<i32>(&r)),
        (&[2i64, 2][..], vec![5, 6, 9, 10])
    );
    let r = slice(x.clone(), vec![1, 2], vec![-1, -1]).unwrap();
    assert_eq!(
        (r.dims(), v::<i32>(&r)),
        (&[2i64, 2][..], vec![6, 7, 10, 11])
    );
    let r = slice(x.clone(), vec![0, 3], vec![3, 1]).unwrap();
    assert_eq!(v::<i32>(&r), vec![3, 7, 11]);
    // Whole rows: a view.
    let r = slice(x.clone(), vec![1, 0], vec![2, -1]).unwrap();
    assert_eq!(
        (r.dims(), v::<i32>(&r)),
        (&[2i64, 4][..], (4..12).collect::<Vec<_>>())
    );
    assert!(r.shares_storage_with(&x));
    // Everything: the input itself.
    let r = slice(x.clone(), vec![0, 0], vec![-1, 4]).unwrap();
    assert!(r.shares_storage_with(&x));
    // Size 0.
    let r = slice(x.clone(), vec![1, 1], vec![0, 2]).unwrap();
    assert_eq!(r.dims(), &[0, 2]);
    let r = slice(x.clone(), vec![3, 4], vec![-1, -1]).unwrap();
    assert_eq!(r.dims(), &[0, 0]);
    // Rank 3, int64 indices.
    let y = iota(&[2, 3, 4]);
    let r = ctx()
        .op("Slice")
        .input(y)
        .input(t(&[3], vec![1i64, 0, 1]))
        .input(t(&[3], vec![1i64, 2, 2]))
        .run1()
        .unwrap();
    assert_eq!(
        (r.dims(), v::<i32>(&r)),
        (&[1i64, 2, 2][..], vec![13, 14, 17, 18])
    );
    // Strings, bools, an empty input.
    let s = strs(&[2, 3], &["a", "b", "c", "d", "e", "f"]);
    let r = slice(s, vec![0, 1], vec![2, 1]).unwrap();
    assert_eq!(sv(&r), ["b", "e"]);
    let b = t(&[4], vec![true, false, false, true]);
    assert_eq!(
        v::<bool>(&slice(b, vec![2], vec![2]).unwrap()),
        vec![false, true]
    );
    let e = Tensor::zeros(DataType::Float, &[0, 3]).unwrap();
    assert_eq!(slice(e, vec![0, 1], vec![0, 2]).unwrap().dims(), &[0, 2]);
    // A scalar.
    let r = slice(Tensor::scalar(7i32), vec![], vec![]).unwrap();
    assert_eq!(v::<i32>(&r), vec![7]);
}

#[test]
fn slice_errors() {
    let x = iota(&[3]);
    assert_err(
        slice(x.clone(), vec![4], vec![0]),
        Code::InvalidArgument,
        "Expected begin[0] in [0, 3], but got 4",
    );
    assert_err(
        slice(x.clone(), vec![-1], vec![1]),
        Code::InvalidArgument,
        "Expected begin[0] in [0, 3], but got -1",
    );
    assert_err(
        slice(x.clone(), vec![0], vec![5]),
        Code::InvalidArgument,
        "Expected size[0] in [0, 3], but got 5",
    );
    assert_err(
        slice(x.clone(), vec![1], vec![-2]),
        Code::InvalidArgument,
        "Expected size[0] in [0, 2], but got -2",
    );
    assert_err(
        slice(iota(&[2, 2]), vec![0], vec![1, 1]),
        Code::InvalidArgument,
        "Expected begin and size arguments to be 1-D tensors of size 2, but got shapes [1] and [2] instead.",
    );
    let e = Tensor::zeros(DataType::Float, &[0, 3]).unwrap();
    assert_err(
        slice(e, vec![1, 0], vec![0, 1]),
        Code::InvalidArgument,
        "Expected begin[0] == 0 (got 1) and size[0] == 0 (got 0) when input.dim_size(0) == 0",
    );
}

// ---- Tile

#[test]
fn tile_hand_checked() {
    let x = t(&[2, 3], vec![1i32, 2, 3, 4, 5, 6]);
    let r = tile(x.clone(), vec![2, 1]).unwrap();
    assert_eq!(r.dims(), &[4, 3]);
    assert_eq!(v::<i32>(&r), vec![1, 2, 3, 4, 5, 6, 1, 2, 3, 4, 5, 6]);
    let r = tile(x.clone(), vec![1, 2]).unwrap();
    assert_eq!(r.dims(), &[2, 6]);
    assert_eq!(v::<i32>(&r), vec![1, 2, 3, 1, 2, 3, 4, 5, 6, 4, 5, 6]);
    let r = tile(x.clone(), vec![2, 2]).unwrap();
    assert_eq!(r.dims(), &[4, 6]);
    assert_eq!(
        v::<i32>(&r),
        vec![1, 2, 3, 1, 2, 3, 4, 5, 6, 4, 5, 6, 1, 2, 3, 1, 2, 3, 4, 5, 6, 4, 5, 6]
    );
    let r = tile(x.clone(), vec![1, 1]).unwrap();
    assert!(r.shares_storage_with(&x));
    assert_eq!(tile(x.clone(), vec![0, 2]).unwrap().dims(), &[0, 6]);
    let r = tile(Tensor::scalar(3.5f64), vec![]).unwrap();
    assert_eq!((r.dims(), v::<f64>(&r)), (&[] as &[i64], vec![3.5]));
    // A rank-3 tile checked against out[i][j][k] = in[i % 2][j % 1][k % 2].
    let y = t(&[2, 1, 2], vec![1i64, 2, 3, 4]);
    let r = ctx()
        .op("Tile")
        .input(y.clone())
        .input(t(&[3], vec![2i64, 3, 2]))
        .run1()
        .unwrap();
    assert_eq!(r.dims(), &[4, 3, 4]);
    let got = v::<i64>(&r);
    let yv = v::<i64>(&y);
    for i in 0..4 {
        for j in 0..3 {
            for k in 0..4 {
                assert_eq!(got[i * 12 + j * 4 + k], yv[(i % 2) * 2 + k % 2]);
            }
        }
    }
    // Strings, bools.
    let r = tile(strs(&[2], &["a", "b"]), vec![3]).unwrap();
    assert_eq!(sv(&r), ["a", "b", "a", "b", "a", "b"]);
    let r = tile(t(&[1, 2], vec![true, false]), vec![2, 1]).unwrap();
    assert_eq!(v::<bool>(&r), vec![true, false, true, false]);
}

#[test]
fn tile_large_shards_correctly() {
    let x = t(&[3, 300], (0..900).map(|k| k as f32).collect());
    let r = tile(x, vec![40, 3]).unwrap();
    assert_eq!(r.dims(), &[120, 900]);
    let got = v::<f32>(&r);
    for i in [0usize, 1, 2, 3, 59, 119] {
        for j in [0usize, 299, 300, 899] {
            assert_eq!(
                got[i * 900 + j],
                ((i % 3) * 300 + j % 300) as f32,
                "({i}, {j})"
            );
        }
    }
}

#[test]
fn tile_errors() {
    assert_err(
        tile(iota(&[2, 2]), vec![1, -1]),
        Code::InvalidArgument,
        "Expected multiples argument to be non-negative, but got -1",
    );
    assert_err(
        tile(iota(&[2, 2]), vec![1, 2, 3]),
        Code::InvalidArgument,
        "Expected multiples argument to be a vector of length 2 but got length 3",
    );
    let r = ctx()
        .op("Tile")
        .input(iota(&[2]))
        .input(Tensor::scalar(2i32))
        .run1();
    assert_err(
        r,
        Code::InvalidArgument,
        "Expected multiples argument to be a vector of length 1",
    );
    assert_err(
        tile(iota(&[2, 2]), vec![i32::MAX, i32::MAX]).map(|_| ()),
        Code::InvalidArgument,
        "",
    );
}

// ---- Pad / PadV2

#[test]
fn pad_hand_checked() {
    let x = t(&[2, 3], vec![1f32, 2., 3., 4., 5., 6.]);
    let r = pad(x.clone(), vec![1, 0, 0, 2]).unwrap();
    assert_eq!(r.dims(), &[3, 5]);
    assert_eq!(
        v::<f32>(&r),
        vec![0., 0., 0., 0., 0., 1., 2., 3., 0., 0., 4., 5., 6., 0., 0.]
    );
    let r = pad_v2(x.clone(), vec![0, 1, 1, 1], Tensor::scalar(9f32)).unwrap();
    assert_close(
        &r,
        &[3, 5],
        &[9., 1., 2., 3., 9., 9., 4., 5., 6., 9., 9., 9., 9., 9., 9.],
        0.0,
    );
    let h = |x: f32| f16::from_f32(x);
    let r = pad_v2(t(&[1], vec![h(0.5)]), vec![1, 0], Tensor::scalar(h(-1.0))).unwrap();
    assert_close(&r, &[2], &[-1.0, 0.5], 0.0);
    // int64 paddings.
    let r = ctx()
        .op("Pad")
        .input(t(&[2], vec![7i32, 8]))
        .input(t(&[1, 2], vec![2i64, 1]))
        .run1()
        .unwrap();
    assert_eq!(v::<i32>(&r), vec![0, 0, 7, 8, 0]);
    // No padding: the input itself.
    let r = pad(x.clone(), vec![0, 0, 0, 0]).unwrap();
    assert!(r.shares_storage_with(&x));
    // Empty input, scalar input.
    let e = Tensor::zeros(DataType::Int32, &[0, 2]).unwrap();
    let r = pad_v2(e.clone(), vec![1, 1, 0, 0], Tensor::scalar(5i32)).unwrap();
    assert_eq!((r.dims(), v::<i32>(&r)), (&[2i64, 2][..], vec![5; 4]));
    let r = pad(e, vec![0, 0, 1, 1]).unwrap();
    assert_eq!(r.dims(), &[0, 4]);
    let r = ctx()
        .op("Pad")
        .input(Tensor::scalar(3u8))
        .input(Tensor::zeros(DataType::Int32, &[0, 2]).unwrap())
        .run1()
        .unwrap();
    assert_eq!((r.dims(), v::<u8>(&r)), (&[] as &[i64], vec![3]));
    // Strings, bools, complex.
    let r = pad_v2(
        strs(&[1, 2], &["a", "b"]),
        vec![0, 0, 1, 0],
        strs(&[], &["x"]),
    )
    .unwrap();
    assert_eq!(sv(&r), ["x", "a", "b"]);
    let r = pad(strs(&[1], &["a"]), vec![1, 1]).unwrap();
    assert_eq!(sv(&r), ["", "a", ""]);
    let r = pad(t(&[1], vec![true]), vec![1, 1]).unwrap();
    assert_eq!(v::<bool>(&r), vec![false, true, false]);
    let r = pad_v2(
        t(&[1], vec![Complex::new(1f32, 2.)]),
        vec![0, 1],
        Tensor::scalar(Complex::new(3f32, 4.)),
    )
    .unwrap();
    assert_eq!(
        v::<Complex<f32>>(&r),
        vec![Complex::new(1., 2.), Complex::new(3., 4.)]
    );
}

#[test]
fn pad_rank3_against_a_formula() {
    let (d0, d1, d2) = (2usize, 3usize, 4usize);
    let pads = [(1usize, 2usize), (0, 1), (2, 0)];
    let x = iota(&[d0 as i64, d1 as i64, d2 as i64]);
    let flat: Vec<i32> = pads
        .iter()
        .flat_map(|&(b, a)| [b as i32, a as i32])
        .collect();
    let r = pad_v2(x, flat, Tensor::scalar(-1i32)).unwrap();
    let o = [d0 + 3, d1 + 1, d2 + 2];
    assert_eq!(r.dims(), &[o[0] as i64, o[1] as i64, o[2] as i64]);
    let got = v::<i32>(&r);
    let mut k = 0;
    for i in 0..o[0] {
        for j in 0..o[1] {
            for l in 0..o[2] {
                let inside = (pads[0].0..pads[0].0 + d0).contains(&i)
                    && (pads[1].0..pads[1].0 + d1).contains(&j)
                    && (pads[2].0..pads[2].0 + d2).contains(&l);
                let want = if inside {
                    (((i - pads[0].0) * d1 + (j - pads[1].0)) * d2 + (l - pads[2].0)) as i32
                } else {
                    -1
                };
                assert_eq!(got[k], want, "({i}, {j}, {l})");
                k += 1;
            }
        }
    }
    // Large: sharded.
    let y = t(&[200, 300], vec![1u16; 60000]);
    let r = pad(y, vec![1, 2, 3, 4]).unwrap();
    assert_eq!(r.dims(), &[203, 307]);
    let got = v::<u16>(&r);
    let sum: u64 = got.iter().map(|&x| x as u64).sum();
    assert_eq!(sum, 60000);
    assert_eq!((got[307], got[307 + 3], got[307 + 302]), (0, 1, 1));
}

#[test]
fn pad_errors() {
    let x = iota(&[2, 3]);
    assert_err(
        pad(x.clone(), vec![-1, 0, 0, 0]),
        Code::InvalidArgument,
        "Paddings must be non-negative: -1 0",
    );
    let r = ctx().op("Pad").input(x.clone()).input(iota(&[2, 3])).run1();
    assert_err(
        r,
        Code::InvalidArgument,
        "paddings must be a matrix with 2 columns: [2,3]",
    );
    assert_err(
        pad(x.clone(), vec![0, 0]),
        Code::InvalidArgument,
        "The first dimension of paddings must be the rank of inputs[1,2], [2,3]",
    );
    assert_err(
        pad_v2(x, vec![0, 0, 0, 0], t(&[2], vec![0i32, 1])),
        Code::InvalidArgument,
        "constant_values must be a scalar. Found: [2]",
    );
}

// ---- Helpers

#[test]
fn strided_views_merge_contiguous_dims() {
    // A [2, 3, 4] tensor, rows 0..2, all columns: one contiguous run.
    let v = StridedView::of_slice(&[2, 3, 4], &[0, 0, 0], &[2, 3, 4], &[1, 1, 1]);
    assert_eq!(
        (v.sizes.as_slice(), v.strides.as_slice()),
        (&[24usize][..], &[1i64][..])
    );
    // x[:, 1:3, :] keeps two dims; x[1, :, ::-1] reverses rows of 4.
    let v = StridedView::of_slice(&[2, 3, 4], &[0, 1, 0], &[2, 2, 4], &[1, 1, 1]);
    assert_eq!(
        (v.base, v.sizes.as_slice(), v.strides.as_slice()),
        (4, &[2usize, 8][..], &[12i64, 1][..])
    );
    let v = StridedView::of_slice(&[2, 3, 4], &[1, 0, 3], &[1, 3, 4], &[1, 1, -1]);
    assert_eq!(
        (v.base, v.sizes.as_slice(), v.strides.as_slice()),
        (15, &[3usize, 4][..], &[4i64, -1][..])
    );
    let pool = ThreadPool::new(1).unwrap();
    let src: Vec<u32> = (0..24).collect();
    let mut out = vec![0u32; 12];
    gather(&pool, &src, &v, &mut out);
    assert_eq!(out, vec![15, 14, 13, 12, 19, 18, 17, 16, 23, 22, 21, 20]);
}

#[test]
fn concat_rows_pieces_and_rows_agree() {
    // The same concat computed with the few-long-rows path (2 threads)
    // and the sequential path (1 thread).
    let a: Vec<u64> = (0..50_000).collect();
    let b: Vec<u64> = (0..30_000).map(|x| x + 1_000_000).collect();
    for (rows, pool_threads) in [(1usize, 2usize), (2, 2), (10, 2), (1, 1), (10, 1)] {
        let pool = ThreadPool::new(pool_threads).unwrap();
        let (la, lb) = (a.len() / rows, b.len() / rows);
        let mut out = vec![0u64; a.len() + b.len()];
        concat_rows(&pool, &[&a, &b], &[la, lb], &mut out);
        for r in 0..rows {
            let row = &out[r * (la + lb)..(r + 1) * (la + lb)];
            assert_eq!(&row[..la], &a[r * la..(r + 1) * la]);
            assert_eq!(&row[la..], &b[r * lb..(r + 1) * lb]);
        }
    }
}

#[test]
fn every_op_is_registered_with_kernels() {
    let kernels = opforge_core::Registry::global();
    opforge_testing::util::assert_one_cpu_kernel_each("crates/opforge-ops/array/src/slice/");
    let pad = &kernels.kernels_for("PadV2")[0].def;
    assert_eq!(pad.host_memory_args, ["paddings", "constant_values"]);
    assert!(pad.constraints[0].1.contains(&DataType::String));
    assert!(pad.constraints[0].1.contains(&DataType::QUInt16));
    assert!(!pad.constraints[0].1.contains(&DataType::Resource));
}
