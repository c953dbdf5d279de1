//! Kernel tests of the indexing ops.

use super::gather::slice_debug_string;
use super::transpose::simplify_transpose;
use super::*;
use half::f16;
use num_complex::Complex;
use opforge_core::{Code, Element, Registry};
use opforge_testing::util::{assert_close, ctx, t};

#[track_caller]
pub(super) fn assert_err(r: Result<Tensor>, code: Code, text: &str) {
    let e = r.expect_err("the op must fail");
    assert_eq!(e.code(), code, "{e}");
    assert!(e.message().contains(text), "{e} does not contain {text:?}");
}

pub(super) fn strs(v: &[&str]) -> Vec<Vec<u8>> {
    v.iter().map(|s| s.as_bytes().to_vec()).collect()
}

/// Row-major multi-index of flat position `flat` in `dims`.
fn unravel(mut flat: usize, dims: &[usize]) -> Vec<usize> {
    let mut idx = vec![0; dims.len()];
    for k in (0..dims.len()).rev() {
        idx[k] = flat % dims[k];
        flat /= dims[k];
    }
    idx
}

fn ravel(idx: &[usize], dims: &[usize]) -> usize {
    idx.iter().zip(dims).fold(0, |acc, (&i, &d)| acc * d + i)
}

/// `y[i_0..i_n] = x[j]` with `j[perm[k]] = i[k]`, by the definition.
fn naive_transpose<T: Copy>(x: &[T], dims: &[usize], perm: &[usize]) -> Vec<T> {
    let out_dims: Vec<usize> = perm.iter().map(|&p| dims[p]).collect();
    (0..x.len())
        .map(|o| {
            let i = unravel(o, &out_dims);
            let mut j = vec![0; dims.len()];
            for (k, &p) in perm.iter().enumerate() {
                j[p] = i[k];
            }
            x[ravel(&j, dims)]
        })
        .collect()
}

fn transpose_op(x: &Tensor, perm: Vec<i32>) -> Result<Tensor> {
    let n = perm.len() as i64;
    ctx()
        .op("Transpose")
        .input(x.clone())
        .input(t(&[n], perm))
        .run1()
}

fn permutations(n: usize) -> Vec<Vec<usize>> {
    if n == 0 {
        return vec![vec![]];
    }
    let mut out = Vec::new();
    for p in permutations(n - 1) {
        for pos in 0..n {
            let mut q = p.clone();
            q.insert(pos, n - 1);
            out.push(q);
        }
    }
    out
}

#[test]
fn every_op_is_registered_with_a_cpu_kernel() {
    opforge_testing::util::assert_one_cpu_kernel_each("crates/opforge-ops/array/src/index/");
    let k = &Registry::global().kernels_for("Transpose")[0];
    assert_eq!(k.def.host_memory_args, vec!["perm".to_string()]);
}

#[test]
fn simplify_merges_and_drops_dims() {
    assert_eq!(
        simplify_transpose(&[2, 3, 4], &[0, 2, 1]),
        (vec![2, 3, 4], vec![0, 2, 1])
    );
    // [2,3] stay together: a 2-D transpose of [6, 4].
    assert_eq!(
        simplify_transpose(&[2, 3, 4], &[2, 0, 1]),
        (vec![6, 4], vec![1, 0])
    );
    assert_eq!(
        simplify_transpose(&[1, 5, 1, 7], &[3, 2, 1, 0]),
        (vec![5, 7], vec![1, 0])
    );
    assert_eq!(
        simplify_transpose(&[1, 5, 1], &[2, 1, 0]),
        (vec![5], vec![0])
    );
}

#[test]
fn transpose_2d_by_hand() {
    let x = t(&[2, 3], vec![1i32, 2, 3, 4, 5, 6]);
    let y = transpose_op(&x, vec![1, 0]).unwrap();
    assert_eq!(y.dims(), &[3, 2]);
    assert_eq!(y.flat::<i32>().unwrap(), &[1, 4, 2, 5, 3, 6]);
    let y = ctx()
        .op("Transpose")
        .input(x.clone())
        .input(t(&[2], vec![-1i64, 0]))
        .run1()
        .unwrap();
    assert_eq!(y.flat::<i32>().unwrap(), &[1, 4, 2, 5, 3, 6]);
}

#[test]
fn transpose_2d_large_matches_the_definition() {
    for (r, c) in [(1, 7), (33, 65), (100, 70), (300, 257), (513, 64)] {
        let x: Vec<f32> = (0..r * c).map(|v| v as f32).collect();
        let y = transpose_op(&t(&[r as i64, c as i64], x.clone()), vec![1, 0]).unwrap();
        assert_eq!(y.dims(), &[c as i64, r as i64]);
        assert_eq!(
            y.flat::<f32>().unwrap(),
            naive_transpose(&x, &[r, c], &[1, 0]).as_slice(),
            "{r}x{c}"
        );
    }
}

#[test]
fn transpose_4d_every_permutation_matches_the_definition() {
    let dims = [2usize, 3, 4, 5];
    let x: Vec<i64> = (0..120).collect();
    let xt = t(&[2, 3, 4, 5], x.clone());
    for perm in permutations(4) {
        let y = transpose_op(&xt, perm.iter().map(|&p| p as i32).collect()).unwrap();
        let want_dims: Vec<i64> = perm.iter().map(|&p| dims[p] as i64).collect();
        assert_eq!(y.dims(), want_dims.as_slice(), "{perm:?}");
        assert_eq!(
            y.flat::<i64>().unwrap(),
            naive_transpose(&x, &dims, &perm).as_slice(),
            "{perm:?}"
        );
    }
    // Large enough to shard, in tile and in run mode.
    let dims = [4usize, 37, 3, 129];
    let n: usize = dims.iter().product();
    let x: Vec<u16> = (0..n).map(|v| v as u16).collect();
    let xt = t(&[4, 37, 3, 129], x.clone());
    for perm in [[0, 3, 1, 2], [2, 1, 0, 3], [3, 2, 1, 0]] {
        let y = transpose_op(&xt, perm.iter().map(|&p| p as i32).collect()).unwrap();
        assert_eq!(
            y.flat::<u16>().unwrap(),
            naive_transpose(&x, &dims, &perm).as_slice(),
            "{perm:?}"
        );
    }
}

#[test]
fn transpose_is_zero_copy_when_data_order_is_unchanged() {
    let x = t(&[2, 3], vec![1.0f64; 6]);
    let y = transpose_op(&x, vec![0, 1]).unwrap();
    assert!(y.shares_storage_with(&x));
    let x = t(&[1, 3, 1, 2], vec![1u8, 2, 3, 4, 5, 6]);
    let y = transpose_op(&x, vec![2, 1, 0, 3]).unwrap();
    assert_eq!(y.dims(), &[1, 3, 1, 2]);
    assert!(y.shares_storage_with(&x), "only size-1 dims move");
    let y = transpose_op(&x, vec![1, 3, 0, 2]).unwrap();
    assert_eq!(y.dims(), &[3, 2, 1, 1]);
    assert!(y.shares_storage_with(&x));
    let s = t(&[], vec![5i32]);
    assert!(transpose_op(&s, vec![]).unwrap().shares_storage_with(&s));
}

#[test]
fn transpose_dtypes_and_empty() {
    let s = Tensor::from_strings(&[2, 3], strs(&["a", "b", "c", "d", "e", "f"])).unwrap();
    let y = transpose_op(&s, vec![1, 0]).unwrap();
    assert_eq!(y.dims(), &[3, 2]);
    assert_eq!(
        y.strings().unwrap(),
        &strs(&["a", "d", "b", "e", "c", "f"])[..]
    );
    let b = t(&[2, 2], vec![true, false, false, false]);
    assert_eq!(
        transpose_op(&b, vec![1, 0])
            .unwrap()
            .flat::<bool>()
            .unwrap(),
        &[true, false, false, false]
    );
    let b = transpose_op(&t(&[2, 2], vec![false, true, false, false]), vec![1, 0]).unwrap();
    assert_eq!(b.flat::<bool>().unwrap(), &[false, false, true, false]);
    let c: Vec<Complex<f64>> = (0..6)
        .map(|v| Complex::new(v as f64, -(v as f64)))
        .collect();
    let y = transpose_op(&t(&[3, 2], c.clone()), vec![1, 0]).unwrap();
    assert_eq!(
        y.flat::<Complex<f64>>().unwrap(),
        naive_transpose(&c, &[3, 2], &[1, 0]).as_slice()
    );
    let h: Vec<f16> = (0..6).map(|v| f16::from_f32(v as f32)).collect();
    let y = transpose_op(&t(&[2, 3], h.clone()), vec![1, 0]).unwrap();
    assert_eq!(
        y.flat::<f16>().unwrap(),
        naive_transpose(&h, &[2, 3], &[1, 0]).as_slice()
    );
    let e = Tensor::zeros(DataType::Float, &[0, 3]).unwrap();
    let y = transpose_op(&e, vec![1, 0]).unwrap();
    assert_eq!(y.dims(), &[3, 0]);
    let e = Tensor::from_strings(&[2, 0, 3], vec![]).unwrap();
    assert_eq!(transpose_op(&e, vec![2, 0, 1]).unwrap().dims(), &[3, 2, 0]);
}

#[test]
fn transpose_errors() {
    let x = t(&[2, 3], vec![0i32; 6]);
    assert_err(
        transpose_op(&x, vec![0, 1, 2]),
        Code::InvalidArgument,
        "transpose expects a vector of size 2. But input(1) is a vector of size 3",
    );
    assert_err(
        transpose_op(&x, vec![0, 0]),
        Code::InvalidArgument,
        "1 is missing from {0,0}.",
    );
    assert_err(
        transpose_op(&x, vec![2, 0]),
        Code::InvalidArgument,
        "2 is out of range [0 .. 2)",
    );
    assert_err(
        ctx()
            .op("Transpose")
            .input(x)
            .input(t(&[1, 2], vec![1i32, 0]))
            .run1(),
        Code::InvalidArgument,
        "perm must be rank 1, got shape [1,2]",
    );
}

fn gather(params: &Tensor, indices: Tensor, axis: i32, batch_dims: i64) -> Result<Tensor> {
    ctx()
        .op("GatherV2")
        .input(params.clone())
        .input(indices)
        .input(t(&[], vec![axis]))
        .attr("batch_dims", batch_dims)
        .run1()
}

#[test]
fn gather_axis_0_and_1() {
    let p = t(&[3, 2], vec![1i32, 2, 3, 4, 5, 6]);
    let y = gather(&p, t(&[2], vec![2i32, 0]), 0, 0).unwrap();
    assert_eq!(y.dims(), &[2, 2]);
    assert_eq!(y.flat::<i32>().unwrap(), &[5, 6, 1, 2]);
    let y = gather(&p, t(&[2, 2], vec![1i64, 1, 0, 2]), 0, 0).unwrap();
    assert_eq!(y.dims(), &[2, 2, 2]);
    assert_eq!(y.flat::<i32>().unwrap(), &[3, 4, 3, 4, 1, 2, 5, 6]);
    let y = gather(&p, t(&[], vec![1i32]), 0, 0).unwrap();
    assert_eq!(y.dims(), &[2]);
    assert_eq!(y.flat::<i32>().unwrap(), &[3, 4]);

    let q = t(&[2, 3], vec![1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0]);
    let y = gather(&q, t(&[3], vec![2i32, 0, 2]), 1, 0).unwrap();
    assert_close(&y, &[2, 3], &[3.0, 1.0, 3.0, 6.0, 4.0, 6.0], 0.0);
    let y2 = gather(&q, t(&[3], vec![2i32, 0, 2]), -1, 0).unwrap();
    assert_eq!(y2, y, "axis -1 is axis 1");
    let y = ctx()
        .op("GatherV2")
        .input(q.clone())
        .input(t(&[1], vec![1i16]))
        .input(t(&[], vec![1i64]))
        .run1()
        .unwrap();
    assert_close(&y, &[2, 1], &[2.0, 5.0], 0.0);
}

/// Fuzz finding (kernel): an int64 axis of i64::MAX overflowed `axis + 1`
/// (a panic in debug builds); it is out of range like any axis past the rank.
#[test]
fn gather_axis_at_the_i64_limits_is_out_of_range() {
    let p = t(&[2], vec![1.0f32, 2.0]);
    for axis in [i64::MAX, i64::MIN] {
        let e = ctx()
            .op("GatherV2")
            .input(p.clone())
            .input(t(&[1], vec![0i32]))
            .input(t(&[], vec![axis]))
            .run1()
            .unwrap_err();
        assert_eq!(e.code(), Code::InvalidArgument, "{axis}: {e}");
        assert!(
            e.message()
                .contains("Shape must be at least rank 9223372036854775807 but is rank 1"),
            "{e}"
        );
    }
}

#[test]
fn gather_with_batch_dims() {
    // Row b of the output gathers from row b of params.
    let p = t(&[2, 3], vec![10i64, 11, 12, 20, 21, 22]);
    let idx = t(&[2, 2], vec![0i32, 2, 1, 1]);
    let y = gather(&p, idx.clone(), 1, 1).unwrap();
    assert_eq!(y.dims(), &[2, 2]);
    assert_eq!(y.flat::<i64>().unwrap(), &[10, 12, 21, 21]);
    let y = gather(&p, idx, 1, -1).unwrap();
    assert_eq!(
        y.flat::<i64>().unwrap(),
        &[10, 12, 21, 21],
        "batch_dims -1 of rank 2"
    );
    // params [2, 2, 3] gathered on axis 2 with batch_dims 1: outer dim 2.
    let p: Vec<i32> = (0..12).collect();
    let p = t(&[2, 2, 3], p);
    let y = gather(&p, t(&[2, 1], vec![2i32, 0]), 2, 1).unwrap();
    assert_eq!(y.dims(), &[2, 2, 1]);
    // batch 0 takes element 2 of rows [0,1,2] and [3,4,5]; batch 1 element 0
    // of [6,7,8] and [9,10,11].
    assert_eq!(y.flat::<i32>().unwrap(), &[2, 5, 6, 9]);
    // Axis 1 with an inner dim: rows of params[b].
    let y = gather(&p, t(&[2, 1], vec![1i32, 0]), 1, 1).unwrap();
    assert_eq!(y.dims(), &[2, 1, 3]);
    assert_eq!(y.flat::<i32>().unwrap(), &[3, 4, 5, 6, 7, 8]);
}

#[test]
fn gather_dtypes_empty_and_large() {
    let s = Tensor::from_strings(&[3], strs(&["x", "y", "z"])).unwrap();
    let y = gather(&s, t(&[4], vec![2i32, 2, 0, 1]), 0, 0).unwrap();
    assert_eq!(y.strings().unwrap(), &strs(&["z", "z", "x", "y"])[..]);
    let b = t(&[2, 2], vec![true, false, false, true]);
    let y = gather(&b, t(&[1], vec![1i32]), 1, 0).unwrap();
    assert_eq!(y.flat::<bool>().unwrap(), &[false, true]);
    let c = t(
        &[2],
        vec![Complex::new(1.0f32, 2.0), Complex::new(3.0, 4.0)],
    );
    let y = gather(&c, t(&[1], vec![1i32]), 0, 0).unwrap();
    assert_eq!(y.flat::<Complex<f32>>().unwrap(), &[Complex::new(3.0, 4.0)]);
    let p = t(&[3, 2], vec![1u8; 6]);
    let y = gather(&p, t(&[0], Vec::<i32>::new()), 0, 0).unwrap();
    assert_eq!(y.dims(), &[0, 2]);
    // Empty indices are not checked even against an empty axis.
    let e = Tensor::zeros(DataType::Float, &[0, 2]).unwrap();
    assert_eq!(
        gather(&e, t(&[0], Vec::<i32>::new()), 0, 0).unwrap().dims(),
        &[0, 2]
    );
    // Large: sharded copies.
    let rows = 2000;
    let p: Vec<f64> = (0..rows * 40).map(|v| v as f64).collect();
    let idx: Vec<i32> = (0..rows as i32).rev().collect();
    let y = gather(
        &t(&[rows as i64, 40], p.clone()),
        t(&[rows as i64], idx),
        0,
        0,
    )
    .unwrap();
    let flat = y.flat::<f64>().unwrap();
    for r in [0, 999, 1999] {
        let src = rows - 1 - r;
        assert_eq!(&flat[r * 40..(r + 1) * 40], &p[src * 40..(src + 1) * 40]);
    }
}

#[test]
fn gather_errors() {
    let p = t(&[5], vec![0.0f32; 5]);
    assert_err(
        gather(&p, t(&[2], vec![0i32, 7]), 0, 0),
        Code::InvalidArgument,
        "indices[1] = 7 is not in [0, 5)",
    );
    assert_err(
        gather(&p, t(&[2, 2], vec![0i64, 1, -1, 2]), 0, 0),
        Code::InvalidArgument,
        "indices[1,0] = -1 is not in [0, 5)",
    );
    assert_err(
        gather(&p, t(&[], vec![5i32]), 0, 0),
        Code::InvalidArgument,
        "indices = 5 is not in [0, 5)",
    );
    assert_err(
        gather(&t(&[], vec![1.0f32]), t(&[1], vec![0i32]), 0, 0),
        Code::InvalidArgument,
        "params must be at least 1 dimensional",
    );
    let q = t(&[2, 3], vec![0i32; 6]);
    assert_err(
        gather(&q, t(&[1], vec![0i32]), 2, 0),
        Code::InvalidArgument,
        "Shape must be at least rank 3 but is rank 2",
    );
    assert_err(
        gather(&q, t(&[1], vec![0i32]), -3, 0),
        Code::InvalidArgument,
        "Shape must be at least rank 3 but is rank 2",
    );
    assert_err(
        gather(&q, t(&[2, 1], vec![0i32, 0]), 0, 1),
        Code::InvalidArgument,
        "batch_dims (1) must be less than or equal to axis (0).",
    );
    assert_err(
        gather(&q, t(&[3, 1], vec![0i32; 3]), 1, 1),
        Code::InvalidArgument,
        "params.shape[0]: 2 should be equal to indices.shape[0]: 3",
    );
    assert_err(
        gather(&q, t(&[2], vec![0i32; 2]), 1, 2),
        Code::InvalidArgument,
        "Expected batch_dims in the range [-1, 1], but got 2",
    );
}

fn one_hot<T: Element>(indices: Tensor, depth: i32, on: T, off: T, axis: i64) -> Result<Tensor> {
    ctx()
        .op("OneHot")
        .input(indices)
        .input(t(&[], vec![depth]))
        .input(t(&[], vec![on]))
        .input(t(&[], vec![off]))
        .attr("axis", axis)
        .run1()
}

#[test]
fn one_hot_last_and_first_axis() {
    let idx = t(&[4], vec![0i64, 2, -1, 1]);
    let y = one_hot(idx.clone(), 3, 5.0f32, 0.0, -1).unwrap();
    assert_close(
        &y,
        &[4, 3],
        &[5.0, 0.0, 0.0, 0.0, 0.0, 5.0, 0.0, 0.0, 0.0, 0.0, 5.0, 0.0],
        0.0,
    );
    let y = one_hot(idx, 3, 5.0f32, 0.0, 0).unwrap();
    assert_close(
        &y,
        &[3, 4],
        &[5.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 5.0, 0.0, 5.0, 0.0, 0.0],
        0.0,
    );
    // 2-D indices, one-hot axis in the middle: output[i, d, j].
    let idx = t(&[2, 2], vec![0i32, 2, 1, 3]);
    let y = one_hot(idx, 3, 1i32, -1, 1).unwrap();
    assert_eq!(y.dims(), &[2, 3, 2]);
    assert_eq!(
        y.flat::<i32>().unwrap(),
        &[1, -1, -1, -1, -1, 1, -1, -1, 1, -1, -1, -1]
    );
}

#[test]
fn one_hot_dtypes_and_empty() {
    let y = one_hot(t(&[2], vec![1u8, 0]), 2, true, false, -1).unwrap();
    assert_eq!(y.flat::<bool>().unwrap(), &[false, true, true, false]);
    let y = ctx()
        .op("OneHot")
        .input(t(&[2], vec![1i8, 5]))
        .input(t(&[], vec![2i32]))
        .input(Tensor::from_strings(&[], strs(&["on"])).unwrap())
        .input(Tensor::from_strings(&[], strs(&["off"])).unwrap())
        .run1()
        .unwrap();
    assert_eq!(
        y.strings().unwrap(),
        &strs(&["off", "on", "off", "off"])[..]
    );
    let y = one_hot(t(&[3], vec![0i64, 1, 2]), 0, 1.0f64, 0.0, -1).unwrap();
    assert_eq!(y.dims(), &[3, 0]);
    let y = one_hot(t(&[0], Vec::<i64>::new()), 4, 1.0f64, 0.0, -1).unwrap();
    assert_eq!(y.dims(), &[0, 4]);
    let y = one_hot(t(&[], vec![2i64]), 4, 1i64, 0, -1).unwrap();
    assert_eq!(y.flat::<i64>().unwrap(), &[0, 0, 1, 0]);
}

#[test]
fn one_hot_errors() {
    let idx = t(&[2], vec![0i64, 1]);
    assert_err(
        one_hot(idx.clone(), -1, 1.0f32, 0.0, -1),
        Code::InvalidArgument,
        "depth must be non-negative, got: -1",
    );
    assert_err(
        one_hot(idx.clone(), 2, 1.0f32, 0.0, 2),
        Code::InvalidArgument,
        "Expected axis to be -1 or between [0, 2).  But received: 2",
    );
    assert_err(
        ctx()
            .op("OneHot")
            .input(idx)
            .input(t(&[], vec![2i32]))
            .input(t(&[1], vec![1.0f32]))
            .input(t(&[], vec![0.0f32]))
            .run1(),
        Code::InvalidArgument,
        "on_value must be a scalar, but got: [1]",
    );
}

/// Reverses the flagged axes, by the definition.
fn naive_reverse<T: Copy>(x: &[T], dims: &[usize], flags: &[bool]) -> Vec<T> {
    (0..x.len())
        .map(|o| {
            let mut i = unravel(o, dims);
            for k in 0..dims.len() {
                if flags[k] {
                    i[k] = dims[k] - 1 - i[k];
                }
            }
            x[ravel(&i, dims)]
        })
        .collect()
}

fn reverse_v2(x: &Tensor, axes: Vec<i32>) -> Result<Tensor> {
    let n = axes.len() as i64;
    ctx()
        .op("ReverseV2")
        .input(x.clone())
        .input(t(&[n], axes))
        .run1()
}

#[test]
fn reverse_v2_by_hand_and_by_definition() {
    let x = t(&[2, 3], vec![1i32, 2, 3, 4, 5, 6]);
    assert_eq!(
        reverse_v2(&x, vec![1]).unwrap().flat::<i32>().unwrap(),
        &[3, 2, 1, 6, 5, 4]
    );
    assert_eq!(
        reverse_v2(&x, vec![0]).unwrap().flat::<i32>().unwrap(),
        &[4, 5, 6, 1, 2, 3]
    );
    assert_eq!(
        reverse_v2(&x, vec![-1, 0]).unwrap().flat::<i32>().unwrap(),
        &[6, 5, 4, 3, 2, 1]
    );
    let y = reverse_v2(&x, vec![]).unwrap();
    assert_eq!(y, x);
    let dims = [2usize, 3, 1, 4];
    let v: Vec<i64> = (0..24).collect();
    let xt = t(&[2, 3, 1, 4], v.clone());
    for mask in 0..16u32 {
        let flags: Vec<bool> = (0..4).map(|k| mask & (1 << k) != 0).collect();
        let axes: Vec<i32> = (0..4).filter(|&k| flags[k as usize]).collect();
        let y = reverse_v2(&xt, axes).unwrap();
        assert_eq!(
            y.flat::<i64>().unwrap(),
            naive_reverse(&v, &dims, &flags).as_slice(),
            "{flags:?}"
        );
    }
    // Large, sharded.
    let v: Vec<u32> = (0..300 * 257).collect();
    let y = reverse_v2(&t(&[300, 257], v.clone()), vec![0, 1]).unwrap();
    assert_eq!(
        y.flat::<u32>().unwrap(),
        naive_reverse(&v, &[300, 257], &[true, true]).as_slice()
    );
    let y = ctx()
        .op("ReverseV2")
        .input(x.clone())
        .input(t(&[1], vec![1i64]))
        .run1()
        .unwrap();
    assert_eq!(y.flat::<i32>().unwrap(), &[3, 2, 1, 6, 5, 4]);
}

#[test]
fn reverse_v2_dtypes_empty_and_errors() {
    let s = Tensor::from_strings(&[3], strs(&["a", "b", "c"])).unwrap();
    assert_eq!(
        reverse_v2(&s, vec![0]).unwrap().strings().unwrap(),
        &strs(&["c", "b", "a"])[..]
    );
    let b = t(&[3], vec![true, false, false]);
    assert_eq!(
        reverse_v2(&b, vec![0]).unwrap().flat::<bool>().unwrap(),
        &[false, false, true]
    );
    let c = t(
        &[2],
        vec![Complex::new(1.0f64, 1.0), Complex::new(2.0, 2.0)],
    );
    assert_eq!(
        reverse_v2(&c, vec![0])
            .unwrap()
            .flat::<Complex<f64>>()
            .unwrap(),
        &[Complex::new(2.0, 2.0), Complex::new(1.0, 1.0)]
    );
    let e = Tensor::zeros(DataType::Float, &[0, 3]).unwrap();
    assert_eq!(
        reverse_v2(&e, vec![7]).unwrap().dims(),
        &[0, 3],
        "empty: passed through"
    );
    let x = t(&[2, 2], vec![0i8; 4]);
    assert_err(
        reverse_v2(&x, vec![1, -1]),
        Code::InvalidArgument,
        "axis 1 specified more than once.",
    );
    assert_err(
        reverse_v2(&x, vec![2]),
        Code::InvalidArgument,
        "'axis'[0] = 2 is out of valid range [0, 1",
    );
    let big = Tensor::zeros(DataType::Float, &[1; 9]).unwrap();
    assert_err(reverse_v2(&big, vec![0]), Code::Unimplemented, "rank > 8");
}

fn reverse(x: &Tensor, dims: Vec<bool>) -> Result<Tensor> {
    let n = dims.len() as i64;
    ctx()
        .op("Reverse")
        .input(x.clone())
        .input(t(&[n], dims))
        .run1()
}

#[test]
fn reverse_with_bool_dims() {
    let x = t(&[2, 3], vec![1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0]);
    let y = reverse(&x, vec![true, false]).unwrap();
    assert_close(&y, &[2, 3], &[4.0, 5.0, 6.0, 1.0, 2.0, 3.0], 0.0);
    let y = reverse(&x, vec![false, true]).unwrap();
    assert_close(&y, &[2, 3], &[3.0, 2.0, 1.0, 6.0, 5.0, 4.0], 0.0);
    let s = t(&[], vec![3u16]);
    assert_eq!(reverse(&s, vec![]).unwrap(), s);
    let h = t(&[2, 0], Vec::<f16>::new());
    assert_eq!(reverse(&h, vec![true, true]).unwrap().dims(), &[2, 0]);
    assert_err(
        reverse(&x, vec![true]),
        Code::InvalidArgument,
        "'dims' must have the same number of values as 'input' has dimensions. 'input' has 2'dims' has 1 values",
    );
    let e = Tensor::zeros(DataType::Float, &[0, 3]).unwrap();
    assert_err(
        reverse(&e, vec![true, false]),
        Code::InvalidArgument,
        "Invalid input first dimension. Found 0.",
    );
}

#[test]
fn slice_debug_strings() {
    assert_eq!(slice_debug_string(&[], 0), "");
    assert_eq!(slice_debug_string(&[5], 3), "[3]");
    assert_eq!(slice_debug_string(&[2, 3], 4), "[1,1]");
    assert_eq!(slice_debug_string(&[2, 3, 4], 23), "[1,2,3]");
}
