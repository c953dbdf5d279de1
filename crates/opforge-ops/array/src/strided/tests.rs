//! Kernel tests of `StridedSlice`.

use super::*;
use opforge_core::num_complex::Complex;
use opforge_core::{Code, Element};
use opforge_testing::util::{ctx, t};
use proptest::prelude::*;

fn v<T: Element>(x: &Tensor) -> Vec<T> {
    x.flat::<T>().unwrap().to_vec()
}

fn iota(dims: &[i64]) -> Tensor {
    let n: i64 = dims.iter().product();
    t(dims, (0..n as i32).collect())
}

#[track_caller]
fn assert_err<T: std::fmt::Debug>(r: Result<T>, code: Code, msg: &str) {
    let e = r.unwrap_err();
    assert_eq!(e.code(), code, "{e}");
    assert!(e.message().contains(msg), "{e}\nexpected to contain: {msg}");
}

/// One item of a Python subscript.
#[derive(Clone, Debug)]
enum Spec {
    /// `start:stop:step`, each optional.
    S(Option<i64>, Option<i64>, Option<i64>),
    /// A single index.
    I(i64),
    /// `tf.newaxis`.
    New,
    /// `...`.
    Ell,
}
use Spec::{Ell, New, I, S};

fn s(a: Option<i64>, b: Option<i64>, c: Option<i64>) -> Spec {
    S(a, b, c)
}

/// The StridedSlice call TensorFlow's Python `__getitem__` makes for a subscript.
fn encode(specs: &[Spec]) -> (Vec<i64>, Vec<i64>, Vec<i64>, StridedSliceMasks) {
    let (mut b, mut e, mut st) = (Vec::new(), Vec::new(), Vec::new());
    let mut m = StridedSliceMasks::default();
    for (i, spec) in specs.iter().enumerate() {
        let bit = 1 << i;
        match *spec {
            S(start, stop, step) => {
                b.push(start.unwrap_or(0));
                e.push(stop.unwrap_or(0));
                st.push(step.unwrap_or(1));
                if start.is_none() {
                    m.begin |= bit;
                }
                if stop.is_none() {
                    m.end |= bit;
                }
            }
            I(k) => {
                b.push(k);
                e.push(k + 1);
                st.push(1);
                m.shrink_axis |= bit;
            }
            New => {
                b.push(0);
                e.push(0);
                st.push(1);
                m.new_axis |= bit;
            }
            Ell => {
                b.push(0);
                e.push(0);
                st.push(1);
                m.ellipsis |= bit;
            }
        }
    }
    (b, e, st, m)
}

fn run_raw(
    x: Tensor,
    b: &[i64],
    e: &[i64],
    st: &[i64],
    m: StridedSliceMasks,
    index: DataType,
) -> Result<Tensor> {
    let idx = |v: &[i64]| -> Tensor {
        let n = v.len() as i64;
        match index {
            DataType::Int16 => t(&[n], v.iter().map(|&x| x as i16).collect()),
            DataType::Int32 => t(&[n], v.iter().map(|&x| x as i32).collect()),
            _ => t(&[n], v.to_vec()),
        }
    };
    ctx()
        .op("StridedSlice")
        .input(x)
        .input(idx(b))
        .input(idx(e))
        .input(idx(st))
        .attr("begin_mask", m.begin as i64)
        .attr("end_mask", m.end as i64)
        .attr("ellipsis_mask", m.ellipsis as i64)
        .attr("new_axis_mask", m.new_axis as i64)
        .attr("shrink_axis_mask", m.shrink_axis as i64)
        .run1()
}

/// `x[specs]` through StridedSlice, as TensorFlow's Python front end calls it.
fn sl(x: &Tensor, specs: &[Spec]) -> Result<Tensor> {
    let (b, e, st, m) = encode(specs);
    run_raw(x.clone(), &b, &e, &st, m, DataType::Int32)
}

fn masks(
    begin: i32,
    end: i32,
    ellipsis: i32,
    new_axis: i32,
    shrink_axis: i32,
) -> StridedSliceMasks {
    StridedSliceMasks {
        begin,
        end,
        ellipsis,
        new_axis,
        shrink_axis,
    }
}

#[track_caller]
fn check(r: Result<Tensor>, dims: &[i64], want: &[i32]) {
    let r = r.unwrap();
    assert_eq!(r.dims(), dims, "{r:?}");
    assert_eq!(v::<i32>(&r), want);
}

#[test]
fn python_subscripts_hand_checked() {
    let x = iota(&[3, 4]); // [[0 1 2 3] [4 5 6 7] [8 9 10 11]]
                           // x[1:] is rows 1 and 2, a view of the input.
    let r = sl(&x, &[s(Some(1), None, None)]).unwrap();
    assert_eq!(
        (r.dims(), v::<i32>(&r)),
        (&[2i64, 4][..], (4..12).collect())
    );
    assert!(r.shares_storage_with(&x));
    // x[::-1]
    check(
        sl(&x, &[s(None, None, Some(-1))]),
        &[3, 4],
        &[8, 9, 10, 11, 4, 5, 6, 7, 0, 1, 2, 3],
    );
    // x[..., 0]
    check(sl(&x, &[Ell, I(0)]), &[3], &[0, 4, 8]);
    // x[:, tf.newaxis]
    check(
        sl(&x, &[s(None, None, None), New]),
        &[3, 1, 4],
        &(0..12).collect::<Vec<_>>(),
    );
    // x[-2:-1]
    check(
        sl(&x, &[s(Some(-2), Some(-1), None)]),
        &[1, 4],
        &[4, 5, 6, 7],
    );
    // x[1, ::-2]
    check(sl(&x, &[I(1), s(None, None, Some(-2))]), &[2], &[7, 5]);
    // x[1, 2], x[-1], x[-1, -1]
    check(sl(&x, &[I(1), I(2)]), &[], &[6]);
    check(sl(&x, &[I(-1)]), &[4], &[8, 9, 10, 11]);
    check(sl(&x, &[I(-1), I(-1)]), &[], &[11]);
    // Shrink and new axis combined: x[tf.newaxis, 1, tf.newaxis, 2:]
    check(
        sl(&x, &[New, I(1), New, s(Some(2), None, None)]),
        &[1, 1, 2],
        &[6, 7],
    );
    // x[..., tf.newaxis], x[tf.newaxis, ..., 1]
    check(
        sl(&x, &[Ell, New]),
        &[3, 4, 1],
        &(0..12).collect::<Vec<_>>(),
    );
    check(sl(&x, &[New, Ell, I(1)]), &[1, 3], &[1, 5, 9]);
    // x[:, 1:3], x[1:, ::3], x[::2, 1]
    check(
        sl(&x, &[s(None, None, None), s(Some(1), Some(3), None)]),
        &[3, 2],
        &[1, 2, 5, 6, 9, 10],
    );
    check(
        sl(&x, &[s(Some(1), None, None), s(None, None, Some(3))]),
        &[2, 2],
        &[4, 7, 8, 11],
    );
    check(sl(&x, &[s(None, None, Some(2)), I(1)]), &[2], &[1, 9]);
    // Whole input: the input itself.
    for spec in [vec![s(None, None, None)], vec![Ell], vec![]] {
        let r = sl(&x, &spec).unwrap();
        assert!(r.shares_storage_with(&x));
        assert_eq!(r.dims(), &[3, 4]);
    }
    let r = sl(&x, &[I(0)]).unwrap(); // a whole row: a view
    assert!(r.shares_storage_with(&x));

    let y = iota(&[2, 3, 4]);
    // y[1, ..., ::2]
    check(
        sl(&y, &[I(1), Ell, s(None, None, Some(2))]),
        &[3, 2],
        &[12, 14, 16, 18, 20, 22],
    );
    // y[..., 1, :]
    check(
        sl(&y, &[Ell, I(1), s(None, None, None)]),
        &[2, 4],
        &[4, 5, 6, 7, 16, 17, 18, 19],
    );
    // y[:, tf.newaxis, ..., tf.newaxis, 0]
    check(
        sl(&y, &[s(None, None, None), New, Ell, New, I(0)]),
        &[2, 1, 3, 1],
        &[0, 4, 8, 12, 16, 20],
    );
    // y[::-1, 2, 3:0:-2]
    check(
        sl(
            &y,
            &[s(None, None, Some(-1)), I(2), s(Some(3), Some(0), Some(-2))],
        ),
        &[2, 2],
        &[23, 21, 11, 9],
    );
    // y[-1:, :, -1]
    check(
        sl(&y, &[s(Some(-1), None, None), s(None, None, None), I(-1)]),
        &[1, 3],
        &[15, 19, 23],
    );
}

#[test]
fn out_of_range_begins_and_ends_clamp_like_python() {
    let x = iota(&[3, 4]);
    // x[0:100:50]: only row 0.
    check(
        sl(&x, &[s(Some(0), Some(100), Some(50))]),
        &[1, 4],
        &[0, 1, 2, 3],
    );
    // x[10:] and x[5:2:-1]: empty.
    assert_eq!(sl(&x, &[s(Some(10), None, None)]).unwrap().dims(), &[0, 4]);
    assert_eq!(
        sl(&x, &[s(Some(5), Some(2), Some(-1))]).unwrap().dims(),
        &[0, 4]
    );
    // x[5::-1] starts at the last row; x[-100:2] is rows 0 and 1.
    check(
        sl(&x, &[s(Some(5), None, Some(-1))]),
        &[3, 4],
        &[8, 9, 10, 11, 4, 5, 6, 7, 0, 1, 2, 3],
    );
    check(
        sl(&x, &[s(Some(-100), Some(2), None)]),
        &[2, 4],
        &(0..8).collect::<Vec<_>>(),
    );
    // x[::-5]: only the last row; x[:, 3:-100:-1]: every column, reversed.
    check(sl(&x, &[s(None, None, Some(-5))]), &[1, 4], &[8, 9, 10, 11]);
    check(
        sl(&x, &[s(None, None, None), s(Some(3), Some(-100), Some(-1))]),
        &[3, 4],
        &[3, 2, 1, 0, 7, 6, 5, 4, 11, 10, 9, 8],
    );
    // x[:, -100:100:1000], x[:, 100:-100:-1000]
    check(
        sl(
            &x,
            &[s(None, None, None), s(Some(-100), Some(100), Some(1000))],
        ),
        &[3, 1],
        &[0, 4, 8],
    );
    check(
        sl(
            &x,
            &[s(None, None, None), s(Some(100), Some(-100), Some(-1000))],
        ),
        &[3, 1],
        &[3, 7, 11],
    );
    // Huge values do not overflow.
    let (b, e, st, m) = encode(&[s(Some(i64::MIN), Some(i64::MAX), Some(i64::MAX))]);
    check(
        run_raw(x.clone(), &b, &e, &st, m, DataType::Int64),
        &[1, 4],
        &[0, 1, 2, 3],
    );
    let r = run_raw(
        x.clone(),
        &[i64::MAX, 0],
        &[i64::MIN, 0],
        &[i64::MIN, 1],
        masks(0, 0, 0, 0, 0),
        DataType::Int64,
    );
    check(r, &[1, 0], &[]);
    // begin > end with stride 1 on dimension 0: empty.
    assert_eq!(
        sl(&x, &[s(Some(2), Some(1), None)]).unwrap().dims(),
        &[0, 4]
    );
}

#[test]
fn raw_masks_follow_tensorflow() {
    let x = iota(&[3, 4]);
    // begin_mask / end_mask: x[:2, 1:] from begin [2, 1], end [2, 3].
    let r = run_raw(
        x.clone(),
        &[2, 1],
        &[2, 3],
        &[1, 1],
        masks(1, 2, 0, 0, 0),
        DataType::Int32,
    );
    check(r, &[2, 3], &[1, 2, 3, 5, 6, 7]);
    // Masks on a negative stride: x[::-1, ::-1] from zeros.
    let r = run_raw(
        x.clone(),
        &[0, 0],
        &[0, 0],
        &[-1, -1],
        masks(3, 3, 0, 0, 0),
        DataType::Int32,
    );
    check(r, &[3, 4], &[11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0]);
    // A shrink ignores begin_mask: begin 2 is used.
    let r = run_raw(
        x.clone(),
        &[2],
        &[0],
        &[1],
        masks(1, 1, 0, 0, 1),
        DataType::Int32,
    );
    check(r, &[4], &[8, 9, 10, 11]);
    // new_axis wins over shrink on the same bit.
    let r = run_raw(
        x.clone(),
        &[1],
        &[2],
        &[1],
        masks(0, 0, 0, 1, 1),
        DataType::Int32,
    );
    check(r, &[1, 3, 4], &(0..12).collect::<Vec<_>>());
    // Bits past the spec are ignored (an ellipsis bit there too).
    let r = run_raw(
        x.clone(),
        &[1],
        &[2],
        &[1],
        masks(4, 4, 4, 8, 16),
        DataType::Int32,
    );
    check(r, &[1, 4], &[4, 5, 6, 7]);
    // An ellipsis ignores its begin, end and stride.
    let r = run_raw(
        x.clone(),
        &[5, 1],
        &[-5, 3],
        &[0, 1],
        masks(0, 0, 1, 0, 0),
        DataType::Int32,
    );
    check(r, &[3, 2], &[1, 2, 5, 6, 9, 10]);
    // int16 and int64 index tensors.
    for dt in [DataType::Int16, DataType::Int64] {
        let r = run_raw(
            x.clone(),
            &[1, -1],
            &[3, 0],
            &[1, -2],
            masks(0, 0, 0, 0, 0),
            dt,
        );
        check(r, &[2, 2], &[7, 5, 11, 9]);
    }
}

#[test]
fn every_dtype_family_and_empty_tensors() {
    let strs = Tensor::from_strings(
        &[4],
        ["a", "b", "c", "d"].map(|s| s.as_bytes().to_vec()).to_vec(),
    )
    .unwrap();
    let r = sl(&strs, &[s(None, None, Some(-1))]).unwrap();
    assert_eq!(
        r.strings().unwrap(),
        ["d", "c", "b", "a"].map(|s| s.as_bytes().to_vec())
    );
    let r = sl(&strs, &[s(Some(1), Some(3), None)]).unwrap();
    assert_eq!(
        r.strings().unwrap(),
        ["b", "c"].map(|s| s.as_bytes().to_vec())
    );
    let r = sl(&strs, &[I(2)]).unwrap();
    assert_eq!(
        (r.dims(), r.strings().unwrap()),
        (&[] as &[i64], &[b"c".to_vec()][..])
    );
    let b = t(&[2, 2], vec![true, false, false, false]);
    assert_eq!(v::<bool>(&sl(&b, &[Ell, I(0)]).unwrap()), vec![true, false]);
    let c = t(
        &[3],
        vec![
            Complex::new(1.0f64, 0.0),
            Complex::new(2.0, 0.0),
            Complex::new(3.0, 0.0),
        ],
    );
    assert_eq!(
        v::<Complex<f64>>(&sl(&c, &[s(None, None, Some(-2))]).unwrap()),
        vec![Complex::new(3.0, 0.0), Complex::new(1.0, 0.0)]
    );
    let f = t(&[2, 3], vec![1f32, 2., 3., 4., 5., 6.]);
    assert_eq!(
        v::<f32>(&sl(&f, &[s(None, None, None), I(-1)]).unwrap()),
        vec![3., 6.]
    );
    let d = t(&[2, 2], vec![1f64, 2., 3., 4.]);
    assert_eq!(
        v::<f64>(&sl(&d, &[s(None, None, Some(-1)), s(None, None, Some(-1))]).unwrap()),
        vec![4., 3., 2., 1.]
    );
    // Empty tensors.
    let e = Tensor::zeros(DataType::Int32, &[0, 3]).unwrap();
    assert_eq!(sl(&e, &[s(None, None, None), I(1)]).unwrap().dims(), &[0]);
    assert_eq!(
        sl(&e, &[s(None, None, Some(-1)), s(Some(1), None, None)])
            .unwrap()
            .dims(),
        &[0, 2]
    );
    assert_eq!(
        sl(&iota(&[3, 4]), &[s(Some(1), Some(1), None)])
            .unwrap()
            .dims(),
        &[0, 4]
    );
    assert_eq!(
        sl(
            &iota(&[3, 4]),
            &[s(None, None, None), s(Some(2), Some(1), None)]
        )
        .unwrap()
        .dims(),
        &[3, 0]
    );
    // A scalar input.
    check(sl(&Tensor::scalar(5i32), &[New]), &[1], &[5]);
    check(sl(&Tensor::scalar(5i32), &[Ell]), &[], &[5]);
    check(sl(&Tensor::scalar(5i32), &[New, Ell, New]), &[1, 1], &[5]);
}

#[test]
fn large_strided_slices_shard_correctly() {
    let n = 400i64;
    let x = t(&[n, n], (0..n * n).map(|k| k as i32).collect());
    // x[::-1, 1::3]
    let r = sl(&x, &[s(None, None, Some(-1)), s(Some(1), None, Some(3))]).unwrap();
    let cols = (n - 1 + 2) / 3;
    assert_eq!(r.dims(), &[n, cols]);
    let got = v::<i32>(&r);
    for i in [0, 1, 200, 399] {
        for j in [0, 1, cols - 1] {
            assert_eq!(
                got[(i * cols + j) as usize],
                ((n - 1 - i) * n + 1 + 3 * j) as i32
            );
        }
    }
    // x[:, ::-1] (rows reversed element by element)
    let r = sl(&x, &[s(None, None, None), s(None, None, Some(-1))]).unwrap();
    let got = v::<i32>(&r);
    assert!((0..n).all(|i| (0..n).all(|j| got[(i * n + j) as usize] == (i * n + n - 1 - j) as i32)));
}

#[test]
fn errors() {
    let x = iota(&[3, 4]);
    let r = run_raw(
        x.clone(),
        &[0, 0],
        &[1, 1],
        &[1, 1],
        masks(0, 0, 3, 0, 0),
        DataType::Int32,
    );
    assert_err(
        r,
        Code::InvalidArgument,
        "Multiple ellipses in slice spec not allowed",
    );
    assert_err(
        sl(&x, &[s(None, None, Some(0))]),
        Code::InvalidArgument,
        "strides[0] must be non-zero",
    );
    assert_err(
        sl(&x, &[s(None, None, None), s(None, None, Some(0))]),
        Code::InvalidArgument,
        "strides[1] must be non-zero",
    );
    assert_err(
        sl(&iota(&[3]), &[I(5)]),
        Code::InvalidArgument,
        "slice index 5 of dimension 0 out of bounds.",
    );
    assert_err(
        sl(&x, &[Ell, I(4)]),
        Code::InvalidArgument,
        "slice index 4 of dimension 1 out of bounds.",
    );
    // TensorFlow reports a negative index after adding the dimension.
    assert_err(
        sl(&iota(&[3]), &[I(-4)]),
        Code::InvalidArgument,
        "slice index -1 of dimension 0 out of bounds.",
    );
    assert_err(
        sl(&Tensor::zeros(DataType::Float, &[0]).unwrap(), &[I(0)]),
        Code::InvalidArgument,
        "slice index 0 of dimension 0 out of bounds.",
    );
    assert_err(
        sl(&x, &[I(1), I(2), I(0)]),
        Code::InvalidArgument,
        "Index out of range using input dim 2; input has only 2 dims",
    );
    assert_err(
        sl(&x, &[I(1), Ell, I(2), I(0)]),
        Code::InvalidArgument,
        "Index out of range using input dim 2; input has only 2 dims",
    );
    let r = run_raw(
        x.clone(),
        &[1],
        &[2],
        &[-1],
        masks(0, 0, 0, 0, 1),
        DataType::Int32,
    );
    assert_err(
        r,
        Code::InvalidArgument,
        "only stride 1 allowed on non-range indexing.",
    );
    let r = ctx()
        .op("StridedSlice")
        .input(x.clone())
        .input(t(&[2], vec![0i32, 0]))
        .input(t(&[1], vec![1i32]))
        .input(t(&[2], vec![1i32, 1]))
        .run1();
    assert_err(
        r,
        Code::InvalidArgument,
        "Expected begin, end, and strides to be 1D equal size tensors, but got shapes [2], [1], and [2] instead.",
    );
    let r = run_raw(
        x,
        &[0; 32],
        &[1; 32],
        &[1; 32],
        masks(0, 0, 0, 0, 0),
        DataType::Int32,
    );
    assert_err(
        r,
        Code::InvalidArgument,
        "but got shapes [32], [32], and [32] instead.",
    );
}

// ---- The reference: NumPy's basic indexing, written from Python's rules.

/// Python's `slice(start, stop, step).indices(n)` as a list of indices.
fn py_slice(n: i64, start: Option<i64>, stop: Option<i64>, step: Option<i64>) -> Vec<i64> {
    let step = step.unwrap_or(1);
    let (lower, upper) = if step < 0 { (-1, n - 1) } else { (0, n) };
    let fix = |x: Option<i64>, default: i64| match x {
        None => default,
        Some(mut x) => {
            if x < 0 {
                x = x.saturating_add(n);
            }
            x.clamp(lower, upper)
        }
    };
    let start = fix(start, if step < 0 { upper } else { lower });
    let stop = fix(stop, if step < 0 { lower } else { upper });
    let mut out = Vec::new();
    let mut i = start;
    while (step > 0 && i < stop) || (step < 0 && i > stop) {
        out.push(i);
        i = match i.checked_add(step) {
            Some(j) => j,
            None => break,
        };
    }
    out
}

enum Sel {
    Range(Vec<i64>),
    Index(i64),
    New,
}

/// `x[specs]` by NumPy's rules (`None` where NumPy raises).
fn reference(dims: &[i64], data: &[i32], specs: &[Spec]) -> Option<(Vec<i64>, Vec<i32>)> {
    let consuming = specs.iter().filter(|s| matches!(s, S(..) | I(_))).count();
    let ellipses = specs.iter().filter(|s| matches!(s, Ell)).count();
    if ellipses > 1 || consuming > dims.len() {
        return None;
    }
    let mut specs = specs.to_vec();
    if ellipses == 0 {
        specs.push(Ell);
    }
    let mut sels = Vec::new();
    let mut d = 0;
    for spec in &specs {
        match *spec {
            S(a, b, c) => {
                sels.push(Sel::Range(py_slice(dims[d], a, b, c)));
                d += 1;
            }
            I(i) => {
                let j = if i < 0 { i + dims[d] } else { i };
                if j < 0 || j >= dims[d] {
                    return None;
                }
                sels.push(Sel::Index(j));
                d += 1;
            }
            New => sels.push(Sel::New),
            Ell => {
                for _ in 0..dims.len() - consuming {
                    sels.push(Sel::Range((0..dims[d]).collect()));
                    d += 1;
                }
            }
        }
    }
    let shape: Vec<i64> = sels
        .iter()
        .filter_map(|s| match s {
            Sel::Range(r) => Some(r.len() as i64),
            Sel::Index(_) => None,
            Sel::New => Some(1),
        })
        .collect();
    let mut strides = vec![1i64; dims.len()];
    for k in (0..dims.len().saturating_sub(1)).rev() {
        strides[k] = strides[k + 1] * dims[k + 1];
    }
    fn walk(
        sels: &[Sel],
        strides: &[i64],
        d: usize,
        offset: i64,
        data: &[i32],
        out: &mut Vec<i32>,
    ) {
        match sels.first() {
            None => out.push(data[offset as usize]),
            Some(Sel::New) => walk(&sels[1..], strides, d, offset, data, out),
            Some(Sel::Index(i)) => walk(
                &sels[1..],
                strides,
                d + 1,
                offset + i * strides[d],
                data,
                out,
            ),
            Some(Sel::Range(r)) => {
                for &i in r {
                    walk(
                        &sels[1..],
                        strides,
                        d + 1,
                        offset + i * strides[d],
                        data,
                        out,
                    );
                }
            }
        }
    }
    let mut out = Vec::new();
    if shape.iter().all(|&n| n > 0) {
        walk(&sels, &strides, 0, 0, data, &mut out);
    }
    Some((shape, out))
}

#[test]
fn reference_agrees_with_hand_values() {
    let data: Vec<i32> = (0..12).collect();
    assert_eq!(py_slice(5, None, None, Some(-2)), vec![4, 2, 0]);
    assert_eq!(py_slice(5, Some(-100), Some(100), Some(3)), vec![0, 3]);
    assert_eq!(py_slice(5, Some(10), Some(-10), Some(-4)), vec![4, 0]);
    assert_eq!(
        reference(&[3, 4], &data, &[I(1), s(None, None, Some(-2))]),
        Some((vec![2], vec![7, 5]))
    );
    assert_eq!(
        reference(&[3, 4], &data, &[New, Ell, I(-1)]),
        Some((vec![1, 3], vec![3, 7, 11]))
    );
    assert_eq!(reference(&[3, 4], &data, &[I(3)]), None);
}

fn spec_strategy() -> impl Strategy<Value = Spec> {
    let bound = || prop::option::weighted(0.7, -6i64..7);
    prop_oneof![
        5 => (bound(), bound(), prop::option::weighted(0.6, prop_oneof![-4i64..0, 1i64..5]))
            .prop_map(|(a, b, c)| S(a, b, c)),
        2 => (-5i64..5).prop_map(I),
        1 => Just(New),
        1 => Just(Ell),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(600))]
    #[test]
    fn strided_slice_matches_python_indexing(
        dims in prop::collection::vec(0i64..5, 0..5),
        specs in prop::collection::vec(spec_strategy(), 0..6),
        index in prop::sample::select(vec![DataType::Int16, DataType::Int32, DataType::Int64]),
    ) {
        let n: i64 = dims.iter().product();
        let data: Vec<i32> = (0..n as i32).map(|k| k * 7 + 1).collect();
        let x = t(&dims, data.clone());
        let (b, e, st, m) = encode(&specs);
        let got = run_raw(x, &b, &e, &st, m, index);
        match reference(&dims, &data, &specs) {
            None => {
                let err = got.expect_err("NumPy raises, so StridedSlice must fail");
                prop_assert_eq!(err.code(), Code::InvalidArgument);
            }
            Some((shape, want)) => {
                let got = got.map_err(|e| TestCaseError::fail(format!("{e}")))?;
                prop_assert_eq!(got.dims(), &shape[..]);
                prop_assert_eq!(v::<i32>(&got), want);
            }
        }
    }
}
