//! Tests of the matrix products.

use super::*;
use opforge_core::Code;
use opforge_testing::util::{assert_close, ctx, t};

fn mm(a: Tensor, b: Tensor, ta: bool, tb: bool) -> Result<Tensor> {
    ctx()
        .op("MatMul")
        .input(a)
        .input(b)
        .attr("transpose_a", ta)
        .attr("transpose_b", tb)
        .run1()
}

fn bmm(x: Tensor, y: Tensor, adj_x: bool, adj_y: bool) -> Result<Tensor> {
    ctx()
        .op("BatchMatMulV2")
        .input(x)
        .input(y)
        .attr("adj_x", adj_x)
        .attr("adj_y", adj_y)
        .run1()
}

/// Row-major transpose of an `r x c` matrix (test-side reference).
fn tr<T: Copy>(x: &[T], r: usize, c: usize) -> Vec<T> {
    (0..c * r).map(|i| x[(i % r) * c + i / r]).collect()
}

/// The naive triple loop, in f64.
fn naive(a: &[f64], b: &[f64], m: usize, k: usize, n: usize) -> Vec<f64> {
    let mut out = vec![0.0; m * n];
    for i in 0..m {
        for j in 0..n {
            for p in 0..k {
                out[i * n + j] += a[i * k + p] * b[p * n + j];
            }
        }
    }
    out
}

#[test]
fn opdefs_finalize() {
    for b in [mat_mul(), batch_mat_mul_v2()] {
        let op = b.finalize().unwrap();
        assert_eq!(
            opforge_core::Registry::global().op_def(&op.name).unwrap(),
            op
        );
    }
}

#[test]
fn mat_mul_all_transpose_combinations_on_non_square_matrices() {
    // a = [[1, 2, 3], [4, 5, 6]] (2x3), b = [[1, 2], [3, 4], [5, 6]] (3x2).
    // a @ b = [[22, 28], [49, 64]].
    let a = vec![1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0];
    let b = vec![1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0];
    let want = [22.0, 28.0, 49.0, 64.0];
    let (at, bt) = (tr(&a, 2, 3), tr(&b, 3, 2));
    for (ta, tb) in [(false, false), (true, false), (false, true), (true, true)] {
        let av = if ta {
            t(&[3, 2], at.clone())
        } else {
            t(&[2, 3], a.clone())
        };
        let bv = if tb {
            t(&[2, 3], bt.clone())
        } else {
            t(&[3, 2], b.clone())
        };
        let p = mm(av, bv, ta, tb).unwrap();
        assert_close(&p, &[2, 2], &want, 0.0);
    }
    // b @ a = [[9, 12, 15], [19, 26, 33], [29, 40, 51]].
    let p = mm(t(&[3, 2], b.clone()), t(&[2, 3], a.clone()), false, false).unwrap();
    assert_close(
        &p,
        &[3, 3],
        &[9.0, 12.0, 15.0, 19.0, 26.0, 33.0, 29.0, 40.0, 51.0],
        0.0,
    );
}

#[test]
fn mat_mul_every_dtype_family() {
    let want = [22.0, 28.0, 49.0, 64.0];
    let a = [1.0f64, 2.0, 3.0, 4.0, 5.0, 6.0];
    let p = mm(t(&[2, 3], a.to_vec()), t(&[3, 2], a.to_vec()), false, false).unwrap();
    assert_close(&p, &[2, 2], &want, 0.0);
    for (x, y) in [
        (
            t(&[2, 3], a.map(|v| v as i32).to_vec()),
            t(&[3, 2], a.map(|v| v as i32).to_vec()),
        ),
        (
            t(&[2, 3], a.map(|v| v as i64).to_vec()),
            t(&[3, 2], a.map(|v| v as i64).to_vec()),
        ),
        (
            t(&[2, 3], a.map(|v| v as u8).to_vec()),
            t(&[3, 2], a.map(|v| v as u8).to_vec()),
        ),
        (
            t(&[2, 3], a.map(|v| v as u64).to_vec()),
            t(&[3, 2], a.map(|v| v as u64).to_vec()),
        ),
        (
            t(&[2, 3], a.map(f16::from_f64).to_vec()),
            t(&[3, 2], a.map(f16::from_f64).to_vec()),
        ),
        (
            t(&[2, 3], a.map(bf16::from_f64).to_vec()),
            t(&[3, 2], a.map(bf16::from_f64).to_vec()),
        ),
    ] {
        let dt = x.dtype();
        let p = mm(x, y, false, false).unwrap();
        assert_eq!(p.dtype(), dt);
        assert_close(&p, &[2, 2], &want, 0.0);
    }
    // Integer products wrap: 200 * 2 = 400 = 144 (mod 256).
    let p = mm(t(&[1, 1], vec![200u8]), t(&[1, 1], vec![2u8]), false, false).unwrap();
    assert_eq!(p.flat::<u8>().unwrap(), &[144]);
    // Complex: MatMul's transpose does not conjugate.
    let i = Complex::new(0.0f32, 1.0);
    let one = Complex::new(1.0f32, 0.0);
    // [1, i] @ [[i], [1]] = i + i = 2i; with transpose_a on the column [1, i]^T too.
    let p = mm(
        t(&[1, 2], vec![one, i]),
        t(&[2, 1], vec![i, one]),
        false,
        false,
    )
    .unwrap();
    assert_eq!(p.flat::<Complex<f32>>().unwrap(), &[Complex::new(0.0, 2.0)]);
    let p = mm(
        t(&[2, 1], vec![one, i]),
        t(&[2, 1], vec![i, one]),
        true,
        false,
    )
    .unwrap();
    assert_eq!(p.flat::<Complex<f32>>().unwrap(), &[Complex::new(0.0, 2.0)]);
    let c = |re: f64, im: f64| Complex::new(re, im);
    let p = mm(
        t(&[1, 1], vec![c(1.0, 2.0)]),
        t(&[1, 1], vec![c(3.0, -1.0)]),
        false,
        true,
    )
    .unwrap();
    assert_eq!(p.flat::<Complex<f64>>().unwrap(), &[c(5.0, 5.0)]);
}

#[test]
fn large_mat_mul_matches_a_naive_triple_loop() {
    let (m, k, n) = (200usize, 300usize, 150usize);
    let a: Vec<f64> = (0..m * k)
        .map(|i| ((i * 37) % 19) as f64 / 7.0 - 1.0)
        .collect();
    let b: Vec<f64> = (0..k * n)
        .map(|i| ((i * 11) % 23) as f64 / 5.0 - 2.0)
        .collect();
    let want = naive(&a, &b, m, k, n);
    let (mi, ki, ni) = (m as i64, k as i64, n as i64);
    let a32: Vec<f32> = a.iter().map(|&v| v as f32).collect();
    let b32: Vec<f32> = b.iter().map(|&v| v as f32).collect();
    for (ta, tb) in [(false, false), (true, false), (false, true), (true, true)] {
        let av = if ta {
            t(&[ki, mi], tr(&a32, m, k))
        } else {
            t(&[mi, ki], a32.clone())
        };
        let bv = if tb {
            t(&[ni, ki], tr(&b32, k, n))
        } else {
            t(&[ki, ni], b32.clone())
        };
        let p = mm(av, bv, ta, tb).unwrap();
        assert_close(&p, &[mi, ni], &want, 1e-4);
    }
    let p = mm(
        t(&[mi, ki], a.clone()),
        t(&[ki, ni], b.clone()),
        false,
        false,
    )
    .unwrap();
    assert_close(&p, &[mi, ni], &want, 1e-12);
    // Integers through the blocked loop (exact).
    let ai: Vec<i64> = (0..m * k).map(|i| ((i * 37) % 19) as i64 - 9).collect();
    let bi: Vec<i64> = (0..k * n).map(|i| ((i * 11) % 23) as i64 - 11).collect();
    let wi = naive(
        &ai.iter().map(|&v| v as f64).collect::<Vec<_>>(),
        &bi.iter().map(|&v| v as f64).collect::<Vec<_>>(),
        m,
        k,
        n,
    );
    for (ta, tb) in [(false, false), (true, true)] {
        let av = if ta {
            t(&[ki, mi], tr(&ai, m, k))
        } else {
            t(&[mi, ki], ai.clone())
        };
        let bv = if tb {
            t(&[ni, ki], tr(&bi, k, n))
        } else {
            t(&[ki, ni], bi.clone())
        };
        let p = mm(av, bv, ta, tb).unwrap();
        assert_close(&p, &[mi, ni], &wi, 0.0);
    }
    let a32i: Vec<i32> = ai.iter().map(|&v| v as i32).collect();
    let b32i: Vec<i32> = bi.iter().map(|&v| v as i32).collect();
    let p = mm(
        t(&[ki, mi], tr(&a32i, m, k)),
        t(&[ki, ni], b32i),
        true,
        false,
    )
    .unwrap();
    assert_close(&p, &[mi, ni], &wi, 0.0);
}

#[test]
fn empty_products() {
    // k = 0: a zero matrix of shape [m, n].
    let p = mm(
        Tensor::zeros(DataType::Float, &[2, 0]).unwrap(),
        Tensor::zeros(DataType::Float, &[0, 3]).unwrap(),
        false,
        false,
    )
    .unwrap();
    assert_close(&p, &[2, 3], &[0.0; 6], 0.0);
    let p = mm(
        Tensor::zeros(DataType::Int32, &[0, 4]).unwrap(),
        Tensor::zeros(DataType::Int32, &[4, 3]).unwrap(),
        false,
        false,
    )
    .unwrap();
    assert_eq!(p.dims(), &[0, 3]);
    let p = bmm(
        Tensor::zeros(DataType::Double, &[0, 2, 3]).unwrap(),
        Tensor::zeros(DataType::Double, &[3, 4]).unwrap(),
        false,
        false,
    )
    .unwrap();
    assert_eq!(p.dims(), &[0, 2, 4]);
    let p = bmm(
        Tensor::zeros(DataType::Half, &[2, 2, 0]).unwrap(),
        Tensor::zeros(DataType::Half, &[1, 0, 2]).unwrap(),
        false,
        false,
    )
    .unwrap();
    assert_close(&p, &[2, 2, 2], &[0.0; 8], 0.0);
}

#[test]
fn mat_mul_shape_errors() {
    let err = mm(
        t(&[2, 3], vec![0f32; 6]),
        t(&[4, 5], vec![0f32; 20]),
        false,
        false,
    )
    .unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument);
    assert!(
        err.message()
            .contains("Matrix size-incompatible: In[0]: [2,3], In[1]: [4,5]"),
        "{err}"
    );
    let err = mm(
        t(&[2, 3], vec![0f32; 6]),
        t(&[2, 3], vec![0f32; 6]),
        false,
        true,
    )
    .unwrap();
    assert_eq!(err.dims(), &[2, 2]);
    let err = mm(
        t(&[2, 3], vec![0f32; 6]),
        t(&[2, 3], vec![0f32; 6]),
        true,
        true,
    )
    .unwrap_err();
    assert!(err.message().contains("Matrix size-incompatible"), "{err}");
    let err = mm(
        t(&[3], vec![0f32; 3]),
        t(&[3, 1], vec![0f32; 3]),
        false,
        false,
    )
    .unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument);
    assert!(
        err.message()
            .contains("In[0] and In[1] has different ndims: [3] vs. [3,1]"),
        "{err}"
    );
    let err = mm(
        t(&[1, 2, 2], vec![0f32; 4]),
        t(&[1, 2, 2], vec![0f32; 4]),
        false,
        false,
    )
    .unwrap_err();
    assert!(
        err.message()
            .contains("In[0] is not a matrix. Instead it has shape [1,2,2]"),
        "{err}"
    );
    let err = ctx()
        .op("MatMul")
        .input(t(&[1, 1], vec![1i8]))
        .input(t(&[1, 1], vec![1i8]))
        .run1()
        .unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument);
}

#[test]
fn batch_mat_mul_broadcasts_batch_dimensions() {
    // x: [2, 1, 2, 3], y: [3, 3, 4] -> [2, 3, 2, 4].
    let (xb, yb) = ([2usize, 1], [3usize]);
    let x: Vec<f64> = (0..2 * 2 * 3).map(|v| v as f64 - 5.0).collect();
    let y: Vec<f64> = (0..3 * 3 * 4).map(|v| (v % 7) as f64).collect();
    let out = bmm(
        t(&[2, 1, 2, 3], x.clone()),
        t(&[3, 3, 4], y.clone()),
        false,
        false,
    )
    .unwrap();
    let mut want = Vec::new();
    for i in 0..xb[0] {
        for j in 0..yb[0] {
            let xs = &x[i * 6..(i + 1) * 6];
            let ys = &y[j * 12..(j + 1) * 12];
            want.extend(naive(xs, ys, 2, 3, 4));
        }
    }
    assert_close(&out, &[2, 3, 2, 4], &want, 0.0);
    // The same with the broadcasting on the other side and adjoints.
    let out = bmm(
        t(&[3, 4, 3], {
            let mut v = Vec::new();
            for j in 0..3 {
                v.extend(tr(&y[j * 12..(j + 1) * 12], 3, 4));
            }
            v
        }),
        t(&[2, 1, 3, 2], {
            let mut v = Vec::new();
            for i in 0..2 {
                v.extend(tr(&x[i * 6..(i + 1) * 6], 2, 3));
            }
            v
        }),
        false,
        false,
    )
    .unwrap();
    // (x_i y_j)^T = y_j^T x_i^T: out[i, j] = transpose of want block (i, j).
    let mut want_t = Vec::new();
    for blk in want.chunks(8) {
        want_t.extend(tr(blk, 2, 4));
    }
    assert_close(&out, &[2, 3, 4, 2], &want_t, 0.0);
    let out = bmm(
        t(&[2, 1, 3, 2], {
            let mut v = Vec::new();
            for i in 0..2 {
                v.extend(tr(&x[i * 6..(i + 1) * 6], 2, 3));
            }
            v
        }),
        t(&[3, 4, 3], {
            let mut v = Vec::new();
            for j in 0..3 {
                v.extend(tr(&y[j * 12..(j + 1) * 12], 3, 4));
            }
            v
        }),
        true,
        true,
    )
    .unwrap();
    assert_close(&out, &[2, 3, 2, 4], &want, 0.0);
    // Rank-2 operands broadcast against batches; int16 via the loop.
    let out = bmm(
        t(&[2, 2], vec![1i16, 2, 3, 4]),
        t(&[2, 2, 1], vec![1i16, 1, 2, -1]),
        false,
        false,
    )
    .unwrap();
    assert_eq!(out.dims(), &[2, 2, 1]);
    assert_eq!(out.flat::<i16>().unwrap(), &[3, 7, 0, 2]);
}

#[test]
fn batch_mat_mul_adjoint_conjugates_complex() {
    let c = |re: f32, im: f32| Complex::new(re, im);
    // x = [[1 + i], [2]] (2x1): adj(x) = [[1 - i, 2]]; y = [[i], [1]].
    // adj(x) @ y = (1 - i) i + 2 = i + 1 + 2 = 3 + i.
    let out = bmm(
        t(&[2, 1], vec![c(1.0, 1.0), c(2.0, 0.0)]),
        t(&[2, 1], vec![c(0.0, 1.0), c(1.0, 0.0)]),
        true,
        false,
    )
    .unwrap();
    assert_eq!(out.flat::<Complex<f32>>().unwrap(), &[c(3.0, 1.0)]);
    // x @ adj(y) with y = [[i, 1]]: x (2x1) @ [[-i], [1]]^T... y is 1x2, adj(y) is 2x1.
    // [[1 + i, 2]] (1x2) @ adj([[i, 1]]) = (1 + i)(-i) + 2 = -i + 1 + 2 = 3 - i.
    let out = bmm(
        t(&[1, 1, 2], vec![c(1.0, 1.0), c(2.0, 0.0)]),
        t(&[1, 2], vec![c(0.0, 1.0), c(1.0, 0.0)]),
        false,
        true,
    )
    .unwrap();
    assert_eq!(out.dims(), &[1, 1, 1]);
    assert_eq!(out.flat::<Complex<f32>>().unwrap(), &[c(3.0, -1.0)]);
    // adj on real types is a transpose.
    let out = bmm(
        t(&[2, 1], vec![1.0f32, 2.0]),
        t(&[1, 2], vec![3.0f32, 4.0]),
        true,
        true,
    )
    .unwrap();
    assert_close(&out, &[1, 1], &[11.0], 0.0);
}

/// A product large enough to be split over the pool (rows and columns),
/// with every adjoint combination, against a naive complex loop.
#[test]
fn large_complex_adjoint_products_split_over_the_pool() {
    let (m, k, n) = (150usize, 170usize, 140usize);
    assert!(m * k * n >= 2 * BLOCK_FLOPS);
    let c = |i: usize, s: usize| {
        Complex::new(
            ((i * s) % 13) as f64 / 3.0 - 2.0,
            ((i * 7 + s) % 11) as f64 / 4.0 - 1.0,
        )
    };
    let a: Vec<Complex<f64>> = (0..m * k).map(|i| c(i, 5)).collect();
    let b: Vec<Complex<f64>> = (0..k * n).map(|i| c(i, 3)).collect();
    let mut want = vec![Complex::new(0.0, 0.0); m * n];
    for i in 0..m {
        for j in 0..n {
            want[i * n + j] = (0..k).map(|l| a[i * k + l] * b[l * n + j]).sum();
        }
    }
    let adj = |x: &[Complex<f64>], r: usize, cols: usize| -> Vec<Complex<f64>> {
        tr(x, r, cols).iter().map(|v| v.conj()).collect()
    };
    let (mi, ki, ni) = (m as i64, k as i64, n as i64);
    for (ax, ay) in [(false, false), (true, false), (false, true), (true, true)] {
        let x = if ax {
            t(&[ki, mi], adj(&a, m, k))
        } else {
            t(&[mi, ki], a.clone())
        };
        let y = if ay {
            t(&[ni, ki], adj(&b, k, n))
        } else {
            t(&[ki, ni], b.clone())
        };
        let out = bmm(x, y, ax, ay).unwrap();
        assert_eq!(out.dims(), &[mi, ni]);
        for (g, w) in out.flat::<Complex<f64>>().unwrap().iter().zip(&want) {
            assert!((g - w).norm() < 1e-9, "adj ({ax}, {ay}): {g} vs {w}");
        }
    }
}

#[test]
fn many_small_and_few_large_batches() {
    // 64 products of 8x8 (parallel over the batch) and 2 of 96x96 (parallel inside).
    for (batch, s) in [(64usize, 8usize), (2, 96)] {
        let x: Vec<f32> = (0..batch * s * s)
            .map(|v| ((v * 13) % 17) as f32 - 8.0)
            .collect();
        let y: Vec<f32> = (0..s * s).map(|v| ((v * 7) % 11) as f32 - 5.0).collect();
        let yd: Vec<f64> = y.iter().map(|&v| v as f64).collect();
        let mut want = Vec::new();
        for b in 0..batch {
            let xs: Vec<f64> = x[b * s * s..(b + 1) * s * s]
                .iter()
                .map(|&v| v as f64)
                .collect();
            want.extend(naive(&xs, &yd, s, s, s));
        }
        let (bi, si) = (batch as i64, s as i64);
        let out = bmm(
            t(&[bi, si, si], x.clone()),
            t(&[si, si], y.clone()),
            false,
            false,
        )
        .unwrap();
        assert_close(&out, &[bi, si, si], &want, 0.0);
        let xi: Vec<i32> = x.iter().map(|&v| v as i32).collect();
        let yi: Vec<i32> = y.iter().map(|&v| v as i32).collect();
        let out = bmm(t(&[bi, si, si], xi), t(&[1, si, si], yi), false, false).unwrap();
        assert_close(&out, &[bi, si, si], &want, 0.0);
    }
}

#[test]
fn batch_mat_mul_errors() {
    let err = bmm(
        t(&[3], vec![0f32; 3]),
        t(&[3, 1], vec![0f32; 3]),
        false,
        false,
    )
    .unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument);
    assert!(
        err.message().contains("In[0] ndims must be >= 2: 1"),
        "{err}"
    );
    let err = bmm(
        t(&[1, 3], vec![0f32; 3]),
        Tensor::scalar(1f32),
        false,
        false,
    )
    .unwrap_err();
    assert!(
        err.message().contains("In[1] ndims must be >= 2: 0"),
        "{err}"
    );
    let err = bmm(
        t(&[2, 1, 3], vec![0f32; 6]),
        t(&[3, 3, 1], vec![0f32; 9]),
        false,
        false,
    )
    .unwrap_err();
    assert!(
        err.message()
            .contains("In[0] and In[1] must have compatible batch dimensions: [2,1,3] vs. [3,3,1]"),
        "{err}"
    );
    let err = bmm(
        t(&[2, 2, 3], vec![0f32; 12]),
        t(&[2, 2, 3], vec![0f32; 12]),
        false,
        false,
    )
    .unwrap_err();
    assert!(
        err.message()
            .contains("Matrix size-incompatible: In[0]: [2,2,3], In[1]: [2,2,3]"),
        "{err}"
    );
}

// ---- Shape functions ----

mod shapes {
    use opforge_testing::shape::ShapeTestOp;
    use opforge_testing::{infer_error, infer_ok};

    fn mm(ta: bool, tb: bool) -> ShapeTestOp {
        ShapeTestOp::new("MatMul")
            .attr("transpose_a", ta)
            .attr("transpose_b", tb)
    }

    fn bmm(ax: bool, ay: bool) -> ShapeTestOp {
        ShapeTestOp::new("BatchMatMulV2")
            .attr("adj_x", ax)
            .attr("adj_y", ay)
    }

    #[test]
    fn mat_mul() {
        infer_ok!(mm(false, false), "?;?", "[?,?]");
        infer_ok!(mm(false, false), "[2,3];[3,4]", "[d0_0,d1_1]");
        infer_ok!(mm(false, false), "[2,?];[?,4]", "[d0_0,d1_1]");
        infer_ok!(mm(false, false), "?;[3,4]", "[?,d1_1]");
        infer_ok!(mm(false, false), "[2,3];?", "[d0_0,?]");
        infer_ok!(mm(true, false), "[3,2];[3,4]", "[d0_1,d1_1]");
        infer_ok!(mm(false, true), "[2,3];[4,3]", "[d0_0,d1_0]");
        infer_ok!(mm(true, true), "[3,2];[4,3]", "[d0_1,d1_0]");
        infer_error!(
            mm(false, false),
            "[2,3];[4,5]",
            "Dimensions must be equal, but are 3 and 4"
        );
        infer_error!(
            mm(true, false),
            "[2,3];[3,4]",
            "Dimensions must be equal, but are 2 and 3"
        );
        infer_error!(
            mm(false, false),
            "[2,3,4];[4,5]",
            "Shape must be rank 2 but is rank 3"
        );
        infer_error!(
            mm(false, false),
            "[2,3];[3]",
            "Shape must be rank 2 but is rank 1"
        );
        infer_error!(
            ShapeTestOp::new("MatMul"),
            "[2,3];[3,4]",
            "No attr named 'transpose_a'"
        );
    }

    #[test]
    fn batch_mat_mul_v2() {
        infer_ok!(bmm(false, false), "?;?", "?");
        infer_ok!(bmm(false, false), "[2,3];?", "?");
        infer_ok!(bmm(false, false), "[2,3];[3,4]", "[d0_0,d1_1]");
        infer_ok!(bmm(false, false), "[5,2,3];[3,4]", "[d0_0,d0_1,d1_1]");
        infer_ok!(bmm(false, false), "[2,3];[5,3,4]", "[d1_0,d0_0,d1_2]");
        infer_ok!(bmm(false, false), "[1,2,3];[6,3,4]", "[d1_0,d0_1,d1_2]");
        infer_ok!(bmm(false, false), "[6,2,3];[1,3,4]", "[d0_0,d0_1,d1_2]");
        infer_ok!(bmm(false, false), "[?,2,3];[6,3,4]", "[d1_0,d0_1,d1_2]");
        infer_ok!(bmm(false, false), "[?,2,3];[?,3,4]", "[?,d0_1,d1_2]");
        infer_ok!(
            bmm(false, false),
            "[2,1,2,3];[5,3,4]",
            "[d0_0,d1_0,d0_2,d1_2]"
        );
        infer_ok!(bmm(true, false), "[7,3,2];[7,3,4]", "[d0_0,d0_2,d1_2]");
        infer_ok!(bmm(false, true), "[7,2,3];[7,4,3]", "[d0_0,d0_1,d1_1]");
        infer_ok!(bmm(true, true), "[7,3,2];[7,4,3]", "[d0_0,d0_2,d1_1]");
        infer_error!(
            bmm(false, false),
            "[2];[2,2]",
            "Shape must be at least rank 2 but is rank 1"
        );
        infer_error!(
            bmm(false, false),
            "[2,2,3];[2,4,5]",
            "Dimensions must be equal, but are 3 and 4"
        );
        infer_error!(
            bmm(false, false),
            "[2,2,3];[4,3,5]",
            "Dimensions must be equal, but are 2 and 4"
        );
        infer_error!(
            ShapeTestOp::new("BatchMatMulV2"),
            "[2,3];[3,4]",
            "No attr named 'adj_x'"
        );
    }
}

// ---- Gradients ----

mod grads {
    use opforge_core::attrs::IntoAttrValue;
    use opforge_core::autodiff::{backprop, GradientTape, Ops, OpsExt, Sym};
    use opforge_testing::util::{assert_close, ctx, t};

    use opforge_testing::util::{check_gradients as check, distinct_values as vals};

    #[test]
    fn mat_mul_every_transpose() {
        for ta in [false, true] {
            for tb in [false, true] {
                let f = move |o: &mut dyn Ops, xs: &[Sym]| {
                    o.op1(
                        "MatMul",
                        &[xs[0], xs[1]],
                        &[
                            ("transpose_a", ta.into_attr_value()),
                            ("transpose_b", tb.into_attr_value()),
                        ],
                    )
                };
                let a = if ta { [3, 2] } else { [2, 3] };
                let b = if tb { [4, 3] } else { [3, 4] };
                check(&f, &[t(&a, vals(6, 0.5)), t(&b, vals(12, -0.4))]);
            }
        }
    }

    #[test]
    fn batch_mat_mul_v2_every_adjoint_and_broadcast() {
        for ax in [false, true] {
            for ay in [false, true] {
                let f = move |o: &mut dyn Ops, xs: &[Sym]| {
                    o.op1(
                        "BatchMatMulV2",
                        &[xs[0], xs[1]],
                        &[
                            ("adj_x", ax.into_attr_value()),
                            ("adj_y", ay.into_attr_value()),
                        ],
                    )
                };
                let m = |adj: bool, r: i64, c: i64| if adj { [c, r] } else { [r, c] };
                let [a0, a1] = m(ax, 2, 3);
                let [b0, b1] = m(ay, 3, 2);
                // Equal batch dims.
                check(
                    &f,
                    &[
                        t(&[2, a0, a1], vals(12, 0.5)),
                        t(&[2, b0, b1], vals(12, -0.3)),
                    ],
                );
                // Broadcast batch dims on both sides, and a plain matrix.
                check(
                    &f,
                    &[
                        t(&[2, 1, a0, a1], vals(12, 0.5)),
                        t(&[3, b0, b1], vals(18, 0.2)),
                    ],
                );
                check(
                    &f,
                    &[t(&[a0, a1], vals(6, 0.5)), t(&[2, b0, b1], vals(12, 0.2))],
                );
                check(
                    &f,
                    &[t(&[a0, a1], vals(6, 0.5)), t(&[b0, b1], vals(6, 0.2))],
                );
            }
        }
    }

    #[test]
    fn mat_mul_gradient_by_hand() {
        // y = a b; seed g: da = g bᵀ, db = aᵀ g.
        let mut tape = GradientTape::new(ctx(), false);
        let a = tape.watch(t(&[1, 2], vec![1.0f64, 2.0]));
        let b = tape.watch(t(&[2, 2], vec![3.0f64, 4.0, 5.0, 6.0]));
        let y = tape.op1("MatMul", &[a, b], &[]).unwrap();
        let g = tape.gradient_tensors(y, &[a, b]).unwrap();
        assert_close(g[0].as_ref().unwrap(), &[1, 2], &[7.0, 11.0], 0.0);
        assert_close(g[1].as_ref().unwrap(), &[2, 2], &[1.0, 1.0, 2.0, 2.0], 0.0);
    }

    /// `MatMul` of plain (untransposed) matrices, for closed forms.
    fn mm(a: &[f64], b: &[f64], m: usize, k: usize, n: usize) -> Vec<f64> {
        let mut out = vec![0.0; m * n];
        for i in 0..m {
            for j in 0..n {
                out[i * n + j] = (0..k).map(|l| a[i * k + l] * b[l * n + j]).sum();
            }
        }
        out
    }

    fn transpose(a: &[f64], r: usize, c: usize) -> Vec<f64> {
        (0..c * r).map(|i| a[(i % r) * c + i / r]).collect()
    }

    #[test]
    fn mat_mul_second_derivatives() {
        // f(a, b) = <G, op(a) op(b)>; ∂f/∂a is linear in b, so the
        // derivative of <W, ∂f/∂a> with respect to b is a closed form.
        let (m, k, n) = (2usize, 3usize, 2usize);
        let g_v = vals(m * n, 0.7);
        let w_v = vals(m * k, -0.9);
        for ta in [false, true] {
            for tb in [false, true] {
                let mut tape = GradientTape::new(ctx(), true);
                let a_dims = if ta {
                    [k as i64, m as i64]
                } else {
                    [m as i64, k as i64]
                };
                let b_dims = if tb {
                    [n as i64, k as i64]
                } else {
                    [k as i64, n as i64]
                };
                let a = tape.watch(t(&a_dims, vals(m * k, 0.5)));
                let b = tape.watch(t(&b_dims, vals(k * n, 0.25)));
                let y = tape
                    .op1(
                        "MatMul",
                        &[a, b],
                        &[
                            ("transpose_a", ta.into_attr_value()),
                            ("transpose_b", tb.into_attr_value()),
                        ],
                    )
                    .unwrap();
                let seed = tape
                    .constant(t(&[m as i64, n as i64], g_v.clone()))
                    .unwrap();
                let records = tape.records_snapshot();
                let ga =
                    backprop(&mut tape, &records, &[y], &[Some(seed)], &[a]).unwrap()[0].unwrap();
                // ∂f/∂a = G op(b)ᵀ (in a's layout: its transpose when ta).
                let b_plain = if tb {
                    transpose(&vals(k * n, 0.25), n, k)
                } else {
                    vals(k * n, 0.25)
                };
                let ga_plain = mm(&g_v, &transpose(&b_plain, k, n), m, n, k);
                let ga_want = if ta {
                    transpose(&ga_plain, m, k)
                } else {
                    ga_plain
                };
                assert_close(tape.value(ga).unwrap(), &a_dims, &ga_want, 1e-12);
                // d/db <W, ∂f/∂a> (W in a's layout): with Wp = W in
                // plain [m, k] layout, <Wp, G op(b)ᵀ> has gradient
                // op(b)-wise Wpᵀ G, i.e. [k, n], transposed when tb.
                let w_dims = a_dims;
                let wseed = tape.constant(t(&w_dims, w_v.clone())).unwrap();
                let records = tape.records_snapshot();
                let gb =
                    backprop(&mut tape, &records, &[ga], &[Some(wseed)], &[b]).unwrap()[0].unwrap();
                let wp = if ta {
                    transpose(&w_v, k, m)
                } else {
                    w_v.clone()
                };
                let gb_plain = mm(&transpose(&wp, m, k), &g_v, k, m, n);
                let gb_want = if tb {
                    transpose(&gb_plain, k, n)
                } else {
                    gb_plain
                };
                assert_close(tape.value(gb).unwrap(), &b_dims, &gb_want, 1e-12);
            }
        }
    }
}

/// `MatMul(a, b)` (with `transpose_b`) added into `acc` through an `Add`
/// request: the result and whether it is `acc`'s buffer.
fn mm_into(a: Tensor, b: Tensor, tb: bool, acc: Tensor) -> Result<(Tensor, bool)> {
    use opforge_core::attrs::IntoAttrValue;
    use opforge_core::kernel::OutputBinding;
    let data = acc.host_data().map(|d| d.0);
    let mut bind = [OutputBinding::Add(acc)];
    let attrs = [("transpose_b", tb.into_attr_value())];
    let mut out =
        opforge_testing::util::call_with_requests("MatMul", vec![a, b], &attrs, &mut bind)?;
    let (_, got) = out.pop().expect("one output");
    let same = got.host_data().map(|d| d.0) == data;
    Ok((got, same))
}

#[test]
fn mat_mul_adds_into_an_accumulator() {
    let a = t(&[2, 3], vec![1f32, 2., 3., 4., 5., 6.]);
    let b = t(&[2, 3], vec![1f32, 0., 1., 0., 1., 0.]);
    // a * b^T = [[4, 2], [10, 5]]
    let acc = t(&[2, 2], vec![1f32, 1., 1., 1.]);
    let (got, same) = mm_into(a.clone(), b.clone(), true, acc).unwrap();
    assert_eq!(got.flat::<f32>().unwrap(), &[5., 3., 11., 6.]);
    assert!(same, "faer's GEMM added in the accumulator's buffer");
    let acc = t(&[3, 3], vec![0f32; 9]);
    let e = mm_into(a, b, true, acc).unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument, "{e}");
    assert!(
        e.message()
            .contains("accumulator of shape [3,3], but the product has shape [2,2]"),
        "{e}"
    );
    // An empty inner dimension adds nothing.
    let acc = t(&[2, 2], vec![7f64; 4]);
    let (got, _) = mm_into(
        t(&[2, 0], Vec::<f64>::new()),
        t(&[0, 2], Vec::<f64>::new()),
        false,
        acc,
    )
    .unwrap();
    assert_eq!(got.flat::<f64>().unwrap(), &[7.; 4]);
    // int32 does not declare Add: the runtime adds the product for it.
    let acc = t(&[1, 1], vec![5i32]);
    let (got, same) = mm_into(
        t(&[1, 2], vec![2i32, 3]),
        t(&[2, 1], vec![4i32, 5]),
        false,
        acc,
    )
    .unwrap();
    assert_eq!(got.flat::<i32>().unwrap(), &[28]);
    assert!(
        same,
        "the runtime's add_into also sums into the accumulator"
    );
}
