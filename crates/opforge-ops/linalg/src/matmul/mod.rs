//! Matrix products with TensorFlow 2.21's OpDefs and CPU kernel semantics:
//! `MatMul` (with `transpose_a`/`transpose_b`) and `BatchMatMulV2` (NumPy
//! broadcasting of the batch dimensions, `adj_x`/`adj_y` taking the
//! conjugate transpose of complex matrices).
//!
//! `float`, `double`, `complex64` and `complex128` use `faer`'s GEMM,
//! parallel over the op's intra-op pool; `half` and `bfloat16` are
//! converted to `float`, multiplied with `faer`, and rounded back; the
//! integer types use a cache-blocked loop with wrapping arithmetic.
//! The `grad_a`/`grad_b` (`grad_x`/`grad_y`) attrs are hints for TensorFlow's
//! GPU kernels and are ignored.

use faer::linalg::matmul::matmul;
use faer::traits::ComplexField;
use faer::{Accum, MatMut, MatRef, Par};
use half::{bf16, f16};
use num_complex::Complex;
use num_traits::{WrappingAdd, WrappingMul, Zero};
use opforge_core::device::ThreadPool;
use opforge_core::kernel::{
    CreateKernel, KernelDefBuilder, OpKernel, OpKernelConstruction, OpKernelContext, OutputRequest,
    RequestSupport,
};
use opforge_core::shape_inference::common;
use opforge_core::{
    dispatch, ensure, register_kernel, register_op, DataType, Element, OpDefBuilder, Result,
    Status, Tensor, TensorShape,
};
use opforge_ops_base::args::fmt_shape;
use opforge_ops_base::cpu::par::{for_each_index, par_chunks};
use std::sync::{Mutex, PoisonError};

opforge_ops_base::dtype_table! {
    /// `MatMul`'s types: its OpDef's (in TensorFlow's order) and its kernel's.
    MATMUL_TYPES, MATMUL_SPEC => [
        BFloat16, Half, Float, Double, Int32, Int64, UInt8, UInt16, UInt32, UInt64, Complex64,
        Complex128
    ]
}

opforge_ops_base::dtype_table! {
    /// `BatchMatMulV2`'s types: its OpDef's (in TensorFlow's order) and its
    /// kernel's.
    BATCH_MATMUL_TYPES, BATCH_MATMUL_SPEC => [
        BFloat16, Half, Float, Double, Int16, Int32, Int64, UInt8, UInt16, UInt32, UInt64,
        Complex64, Complex128
    ]
}

/// `MatMul`.
pub fn mat_mul() -> OpDefBuilder {
    OpDefBuilder::new("MatMul")
        .input("a: T")
        .input("b: T")
        .output("product: T")
        .attr("transpose_a: bool = false")
        .attr("transpose_b: bool = false")
        .attr(format!("T: {{{MATMUL_SPEC}}}"))
        .attr("grad_a: bool = false")
        .attr("grad_b: bool = false")
        .set_shape_fn(common::matmul_shape)
        .doc(
            "Multiply the matrix \"a\" by the matrix \"b\".\n\n\
             The inputs must be two-dimensional matrices and the inner dimension of\n\
             \"a\" (after being transposed if transpose_a is true) must match the\n\
             outer dimension of \"b\" (after being transposed if transposed_b is\n\
             true).",
        )
}

/// `BatchMatMulV2`.
pub fn batch_mat_mul_v2() -> OpDefBuilder {
    OpDefBuilder::new("BatchMatMulV2")
        .input("x: T")
        .input("y: T")
        .output("output: T")
        .attr(format!("T: {{{BATCH_MATMUL_SPEC}}}"))
        .attr("adj_x: bool = false")
        .attr("adj_y: bool = false")
        .attr("grad_x: bool = false")
        .attr("grad_y: bool = false")
        .set_shape_fn(common::batch_matmul_v2_shape)
        .doc(
            "Multiplies slices of two tensors in batches.\n\n\
             Multiplies all slices of `Tensor` `x` and `y` (each slice can be viewed as\n\
             an element of a batch), and arranges the individual results in a single\n\
             output tensor of the same batch size. Each of the individual slices can\n\
             optionally be adjointed (to adjoint a matrix means to transpose and\n\
             conjugate it) before multiplication by setting the `adj_x` or `adj_y` flag\n\
             to `True`. The batch dimensions of `x` and `y` broadcast (NumPy rules);\n\
             the output has shape `broadcast(batch) + [rows(x), cols(y)]`.",
        )
}

register_op!(mat_mul());
register_op!(batch_mat_mul_v2());

/// One matrix product to compute: which matrices of the (flattened) batch
/// of `a` and `b` make output matrix `i`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Gemm {
    pub(crate) m: usize,
    pub(crate) k: usize,
    pub(crate) n: usize,
    /// `a` is stored as `[k, m]` (transposed).
    ta: bool,
    /// `b` is stored as `[n, k]` (transposed).
    tb: bool,
    /// Conjugate `a` / `b` (complex adjoints).
    ca: bool,
    cb: bool,
    /// Add the product into `dst` (faer's `Accum::Add`; the faer types
    /// only: an output requested with `Add`).
    add: bool,
}

/// Products below this many multiply-adds run on one thread.
const PARALLEL_FLOPS: usize = 1 << 18;

/// A parallel product is split into blocks of at least this many
/// multiply-adds (about 10 µs of work), each computed by faer on one
/// thread.
const BLOCK_FLOPS: usize = 1 << 20;

/// What runs on each block of a product right after the block is
/// computed, on the thread that computed it, while the block is still in
/// cache (a fused update, see `sgd.rs`).
pub(crate) struct Epilogue<'a, T> {
    /// A matrix of the product's shape, split into blocks as the product
    /// is: `row` gets each block's rows of the product and of this matrix.
    companion: MatMut<'a, T>,
    row: &'a (dyn Fn(&[T], &mut [T]) + Sync),
    /// The caller holds a lock another kernel may take: shard with
    /// `ThreadPool::shard_isolated` (whose waiting thread runs nothing else).
    isolated: bool,
}

/// `dst = op(a) * op(b)` with faer, for row-major `a`, `b`, `dst`; with
/// `pool`, split into blocks over its threads (see [`split_product`]).
/// With an [`Epilogue`], each block is handed to it once computed.
fn faer_one<T: ComplexField + Copy + Send + Sync>(
    g: &Gemm,
    a: &[T],
    b: &[T],
    dst: &mut [T],
    pool: Option<&ThreadPool>,
    epilogue: Option<Epilogue<'_, T>>,
) {
    let a = if g.ta {
        MatRef::from_row_major_slice(a, g.k, g.m).transpose()
    } else {
        MatRef::from_row_major_slice(a, g.m, g.k)
    };
    let b = if g.tb {
        MatRef::from_row_major_slice(b, g.n, g.k).transpose()
    } else {
        MatRef::from_row_major_slice(b, g.k, g.n)
    };
    let dst = MatMut::from_row_major_slice_mut(dst, g.m, g.n);
    let (companion, row, isolated) = match epilogue {
        Some(e) => (Some(e.companion), Some(e.row), e.isolated),
        None => (None, None, false),
    };
    let run = |(mut dst, companion, a, b): Block<'_, T>| {
        block_product(g, dst.as_mut(), a, b);
        if let (Some(companion), Some(row)) = (companion, row) {
            each_row(dst.as_ref(), companion, row);
        }
    };
    match pool {
        Some(pool) => {
            // Twice the threads: when another node holds a thread at first,
            // the blocks still even out once it is free.
            let blocks = 2 * pool.num_threads().next_power_of_two();
            let mut cells = Vec::new();
            split_product(dst, companion, a, b, blocks, &mut cells);
            let cells: Vec<Mutex<Option<Block<'_, T>>>> =
                cells.into_iter().map(|c| Mutex::new(Some(c))).collect();
            let one = |i: usize| {
                let cell = cells[i]
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .take();
                if let Some(block) = cell {
                    run(block);
                }
            };
            if isolated {
                pool.shard_isolated_dyn(cells.len(), usize::MAX, &|start, end| {
                    (start..end).for_each(one)
                });
            } else {
                for_each_index(pool, cells.len(), &one);
            }
        }
        None => run((dst, companion, a, b)),
    }
}

/// `row(product row, companion row)` for each row of a block.
fn each_row<T: Copy>(
    product: MatRef<'_, T>,
    mut companion: MatMut<'_, T>,
    row: &(dyn Fn(&[T], &mut [T]) + Sync),
) {
    for i in 0..product.nrows() {
        let c = companion.as_mut().row_mut(i);
        if let (Some(p), Some(c)) = (product.row(i).try_as_row_major(), c.try_as_row_major_mut()) {
            row(p.as_slice(), c.as_slice_mut());
            continue;
        }
        // Row-major blocks always have contiguous rows; this is the
        // general case only.
        let p: Vec<T> = product.row(i).iter().copied().collect();
        let mut buf: Vec<T> = companion.as_ref().row(i).iter().copied().collect();
        row(&p, &mut buf);
        for (j, v) in buf.into_iter().enumerate() {
            companion[(i, j)] = v;
        }
    }
}

/// One block on the calling thread.
fn block_product<T: ComplexField + Copy>(g: &Gemm, dst: MatMut<T>, a: MatRef<T>, b: MatRef<T>) {
    let one = T::one_impl();
    let par = Par::Seq;
    let acc = if g.add { Accum::Add } else { Accum::Replace };
    match (g.ca, g.cb) {
        (false, false) => matmul(dst, acc, a, b, one, par),
        (true, false) => matmul(dst, acc, a.conjugate(), b, one, par),
        (false, true) => matmul(dst, acc, a, b.conjugate(), one, par),
        (true, true) => matmul(dst, acc, a.conjugate(), b.conjugate(), one, par),
    }
}

/// One block of a product: its part of the output, of the epilogue's
/// companion matrix, and the operands' parts.
type Block<'a, T> = (
    MatMut<'a, T>,
    Option<MatMut<'a, T>>,
    MatRef<'a, T>,
    MatRef<'a, T>,
);

/// Splits `dst` (and `companion` alike) in halves (the longer side, at a
/// multiple of 16) until there are `blocks` blocks or a block would fall
/// below [`BLOCK_FLOPS`], and pushes the blocks to `out`. The caller runs
/// them on the pool with [`for_each_index`], so blocks go to threads as
/// they come free and, when the other threads are busy with other nodes,
/// simply run one after the other on the calling thread. (faer's own
/// `Par::rayon` starts a second pool of spinning threads, which costs more
/// than it gains on small matrices and fights the executor for the cores.)
fn split_product<'a, T: ComplexField + Copy>(
    dst: MatMut<'a, T>,
    companion: Option<MatMut<'a, T>>,
    a: MatRef<'a, T>,
    b: MatRef<'a, T>,
    blocks: usize,
    out: &mut Vec<Block<'a, T>>,
) {
    let (m, n, k) = (dst.nrows(), dst.ncols(), a.ncols());
    let half = |len: usize| (len / 2).next_multiple_of(16);
    if blocks < 2 || m * n * k < 2 * BLOCK_FLOPS || m.max(n) < 32 {
        return out.push((dst, companion, a, b));
    }
    if n >= m {
        let (d0, d1) = dst.split_at_col_mut(half(n));
        let (c0, c1) = match companion {
            Some(c) => {
                let (c0, c1) = c.split_at_col_mut(half(n));
                (Some(c0), Some(c1))
            }
            None => (None, None),
        };
        let (b0, b1) = b.split_at_col(half(n));
        split_product(d0, c0, a, b0, blocks / 2, out);
        split_product(d1, c1, a, b1, blocks / 2, out);
    } else {
        let (d0, d1) = dst.split_at_row_mut(half(m));
        let (c0, c1) = match companion {
            Some(c) => {
                let (c0, c1) = c.split_at_row_mut(half(m));
                (Some(c0), Some(c1))
            }
            None => (None, None),
        };
        let (a0, a1) = a.split_at_row(half(m));
        split_product(d0, c0, a0, b, blocks / 2, out);
        split_product(d1, c1, a1, b, blocks / 2, out);
    }
}

/// Runs `one(a, b, dst, pool)` for every output matrix: in parallel over
/// matrices when there are enough of them, else one after the other with
/// each product split over the pool (`Some(pool)`) when it is large.
fn for_each_product<T: Send + Sync>(
    pool: &ThreadPool,
    g: &Gemm,
    a: &[T],
    b: &[T],
    pairs: &[(usize, usize)],
    out: &mut [T],
    one: impl Fn(&[T], &[T], &mut [T], Option<&ThreadPool>) + Sync,
) {
    let (sa, sb, so) = (g.m * g.k, g.k * g.n, g.m * g.n);
    if so == 0 {
        return;
    }
    let threads = pool.num_threads();
    let flops = g.m * g.k * g.n;
    let total = flops.saturating_mul(pairs.len());
    let mat = |&(ia, ib): &(usize, usize)| (&a[ia * sa..(ia + 1) * sa], &b[ib * sb..(ib + 1) * sb]);
    if threads <= 1 || total < PARALLEL_FLOPS {
        for (o, p) in out.chunks_mut(so).zip(pairs) {
            let (x, y) = mat(p);
            one(x, y, o, None);
        }
    } else if pairs.len() >= threads && flops < (1 << 24) {
        par_chunks(pool, out, so, &|i, o| {
            let (x, y) = mat(&pairs[i]);
            one(x, y, o, None)
        });
    } else {
        for (o, p) in out.chunks_mut(so).zip(pairs) {
            let (x, y) = mat(p);
            one(x, y, o, (flops >= PARALLEL_FLOPS).then_some(pool));
        }
    }
}

/// `MatMul`'s products for the faer types (see [`for_each_product`]).
pub(crate) fn faer_products<T: ComplexField + Copy + Send + Sync>(
    pool: &ThreadPool,
    g: &Gemm,
    a: &[T],
    b: &[T],
    pairs: &[(usize, usize)],
    out: &mut [T],
) {
    if g.k == 0 {
        // An empty sum: zero (added to an accumulator: nothing).
        if !g.add {
            out.fill(T::zero_impl());
        }
        return;
    }
    for_each_product(pool, g, a, b, pairs, out, |x, y, o, pool| {
        faer_one(g, x, y, o, pool, None)
    });
}

/// `out = op(a) * op(b)` for one pair of matrices with `MatMul`'s exact
/// arithmetic (the same blocks and kernel calls), handing each block and
/// the matching rows of `companion` (a matrix of the product's shape) to
/// `row` right after the block is computed, on the thread that computed
/// it. `isolated`: the caller holds a lock another kernel may take (see
/// [`Epilogue`]).
#[allow(clippy::too_many_arguments)]
pub(crate) fn product_then<T: ComplexField + Copy + Send + Sync>(
    pool: &ThreadPool,
    g: &Gemm,
    a: &[T],
    b: &[T],
    out: &mut [T],
    companion: &mut [T],
    row: &(dyn Fn(&[T], &mut [T]) + Sync),
    isolated: bool,
) {
    if g.m * g.n == 0 {
        return;
    }
    if g.k == 0 {
        out.fill(T::zero_impl());
        for (p, c) in out.chunks(g.n).zip(companion.chunks_mut(g.n)) {
            row(p, c);
        }
        return;
    }
    let companion = Mutex::new(Some(MatMut::from_row_major_slice_mut(companion, g.m, g.n)));
    for_each_product(pool, g, a, b, &[(0, 0)], out, |x, y, o, pool| {
        let companion = companion
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        let epilogue = companion.map(|companion| Epilogue {
            companion,
            row,
            isolated,
        });
        faer_one(g, x, y, o, pool, epilogue)
    });
}

/// `half`/`bfloat16`: through `f32`.
#[allow(clippy::too_many_arguments)]
fn f32_products<T: Element>(
    pool: &ThreadPool,
    g: &Gemm,
    a: &[T],
    b: &[T],
    pairs: &[(usize, usize)],
    out: &mut [T],
    to: impl Fn(T) -> f32 + Sync,
    from: impl Fn(f32) -> T + Sync,
) {
    let a32: Vec<f32> = a.iter().map(|&v| to(v)).collect();
    let b32: Vec<f32> = b.iter().map(|&v| to(v)).collect();
    let mut o32 = vec![0f32; out.len()];
    faer_products(pool, g, &a32, &b32, pairs, &mut o32);
    for (o, v) in out.iter_mut().zip(o32) {
        *o = from(v);
    }
}

/// Integers: a cache-blocked loop (rows of `b` stream through the
/// accumulating row of the output, which vectorizes), wrapping like
/// TensorFlow's Eigen kernels.
fn int_one<T: Copy + Zero + WrappingAdd + WrappingMul>(g: &Gemm, a: &[T], b: &[T], dst: &mut [T]) {
    const KB: usize = 256;
    let (m, k, n) = (g.m, g.k, g.n);
    // Row-major [m, k] and [k, n] copies when stored transposed.
    let transpose = |x: &[T], rows: usize, cols: usize| -> Vec<T> {
        let mut t = vec![T::zero(); x.len()];
        for r in 0..rows {
            for c in 0..cols {
                t[c * rows + r] = x[r * cols + c];
            }
        }
        t
    };
    let at;
    let a = if g.ta {
        at = transpose(a, k, m);
        &at[..]
    } else {
        a
    };
    let bt;
    let b = if g.tb {
        bt = transpose(b, n, k);
        &bt[..]
    } else {
        b
    };
    dst.fill(T::zero());
    for p0 in (0..k).step_by(KB) {
        let p1 = (p0 + KB).min(k);
        for i in 0..m {
            let crow = &mut dst[i * n..(i + 1) * n];
            for p in p0..p1 {
                let av = a[i * k + p];
                let brow = &b[p * n..(p + 1) * n];
                for (c, bv) in crow.iter_mut().zip(brow) {
                    *c = c.wrapping_add(&av.wrapping_mul(bv));
                }
            }
        }
    }
}

fn int_products<T: Element + Zero + WrappingAdd + WrappingMul>(
    pool: &ThreadPool,
    g: &Gemm,
    a: &[T],
    b: &[T],
    pairs: &[(usize, usize)],
    out: &mut [T],
) {
    let so = g.m * g.n;
    if so == 0 {
        return;
    }
    let threads = pool.num_threads();
    let flops = g.m * g.k * g.n;
    let (sa, sb) = (g.m * g.k, g.k * g.n);
    let job = |o: &mut [T], &(ia, ib): &(usize, usize)| {
        int_one(g, &a[ia * sa..(ia + 1) * sa], &b[ib * sb..(ib + 1) * sb], o)
    };
    if threads <= 1 || flops.saturating_mul(pairs.len()) < PARALLEL_FLOPS {
        out.chunks_mut(so).zip(pairs).for_each(|(o, p)| job(o, p));
    } else if pairs.len() >= threads {
        par_chunks(pool, out, so, &|i, o| job(o, &pairs[i]));
    } else {
        // Few large products: split each over blocks of output rows.
        let rows = g.m.div_ceil(threads * 4).max(1);
        for (o, &(ia, ib)) in out.chunks_mut(so).zip(pairs) {
            let a = &a[ia * sa..(ia + 1) * sa];
            let b = &b[ib * sb..(ib + 1) * sb];
            par_chunks(pool, o, rows * g.n, &|c, o| {
                let r0 = c * rows;
                let mr = o.len() / g.n;
                // The block's rows of op(a) as a row-major [mr, k] matrix.
                let sub: Vec<T> = if g.ta {
                    let mut s = vec![T::zero(); mr * g.k];
                    for r in 0..mr {
                        for p in 0..g.k {
                            s[r * g.k + p] = a[p * g.m + r0 + r];
                        }
                    }
                    s
                } else {
                    a[r0 * g.k..(r0 + mr) * g.k].to_vec()
                };
                let sg = Gemm {
                    m: mr,
                    ta: false,
                    ..*g
                };
                int_one(&sg, &sub, b, o);
            });
        }
    }
}

/// Computes every product of `pairs` into `out` for the element type `dt`.
fn products(
    pool: &ThreadPool,
    dt: DataType,
    g: &Gemm,
    a: &Tensor,
    b: &Tensor,
    pairs: &[(usize, usize)],
    out: &mut Tensor,
) -> Result<()> {
    match dt {
        DataType::Float => {
            faer_products(pool, g, a.flat::<f32>()?, b.flat()?, pairs, out.flat_mut()?)
        }
        DataType::Double => {
            faer_products(pool, g, a.flat::<f64>()?, b.flat()?, pairs, out.flat_mut()?)
        }
        DataType::Complex64 => faer_products(
            pool,
            g,
            a.flat::<Complex<f32>>()?,
            b.flat()?,
            pairs,
            out.flat_mut()?,
        ),
        DataType::Complex128 => faer_products(
            pool,
            g,
            a.flat::<Complex<f64>>()?,
            b.flat()?,
            pairs,
            out.flat_mut()?,
        ),
        DataType::Half => f32_products(
            pool,
            g,
            a.flat::<f16>()?,
            b.flat()?,
            pairs,
            out.flat_mut()?,
            f16::to_f32,
            f16::from_f32,
        ),
        DataType::BFloat16 => f32_products(
            pool,
            g,
            a.flat::<bf16>()?,
            b.flat()?,
            pairs,
            out.flat_mut()?,
            bf16::to_f32,
            bf16::from_f32,
        ),
        _ => {
            dispatch!(dt, T => int_products(pool, g, a.flat::<T>()?, b.flat()?, pairs, out.flat_mut()?),
            [Int16, Int32, Int64, UInt8, UInt16, UInt32, UInt64],
            return Err(Status::unimplemented(format!("no CPU matrix product for {dt}"))))
        }
    }
    Ok(())
}

/// The product `MatMul` computes of `a` and `b` (with `transpose_a`
/// `ta`, `transpose_b` `tb`), or TensorFlow's error for operands that are
/// not matrices or whose inner dimensions differ.
pub(crate) fn matrix_product(a: &Tensor, b: &Tensor, ta: bool, tb: bool) -> Result<Gemm> {
    ensure!(
        a.rank() == b.rank(),
        InvalidArgument,
        "In[0] and In[1] has different ndims: {} vs. {}",
        fmt_shape(a.dims()),
        fmt_shape(b.dims())
    );
    ensure!(
        a.rank() == 2,
        InvalidArgument,
        "In[0] is not a matrix. Instead it has shape {}",
        fmt_shape(a.dims())
    );
    ensure!(
        b.rank() == 2,
        InvalidArgument,
        "In[1] is not a matrix. Instead it has shape {}",
        fmt_shape(b.dims())
    );
    let (ad, bd) = (a.dims(), b.dims());
    let (m, k) = if ta { (ad[1], ad[0]) } else { (ad[0], ad[1]) };
    let (k2, n) = if tb { (bd[1], bd[0]) } else { (bd[0], bd[1]) };
    ensure!(
        k == k2,
        InvalidArgument,
        "Matrix size-incompatible: In[0]: {}, In[1]: {}",
        fmt_shape(ad),
        fmt_shape(bd)
    );
    Ok(Gemm {
        m: m as usize,
        k: k as usize,
        n: n as usize,
        ta,
        tb,
        ca: false,
        cb: false,
        add: false,
    })
}

struct MatMulKernel {
    transpose_a: bool,
    transpose_b: bool,
    /// Handles `Add` (faer's GEMM accumulates: `float`, `double`,
    /// `complex64`, `complex128`).
    add: bool,
}

impl CreateKernel for MatMulKernel {
    fn create(ctx: &OpKernelConstruction<'_>) -> Result<Self> {
        Ok(MatMulKernel {
            transpose_a: ctx.get_attr("transpose_a")?,
            transpose_b: ctx.get_attr("transpose_b")?,
            add: matches!(
                ctx.input_types().first(),
                Some(
                    DataType::Float | DataType::Double | DataType::Complex64 | DataType::Complex128
                )
            ),
        })
    }
}

impl OpKernel for MatMulKernel {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let (a, b) = (ctx.input(0).clone(), ctx.input(1).clone());
        let mut g = matrix_product(&a, &b, self.transpose_a, self.transpose_b)?;
        let (m, n) = (g.m as i64, g.n as i64);
        let pool = ctx.thread_pool();
        let dt = a.dtype();
        let out = if ctx.output_request(0) == OutputRequest::Add {
            // The accumulator is output 0; the product is added into it.
            let out = ctx.output_mut(0)?;
            ensure!(
                out.dims() == [m, n],
                InvalidArgument,
                "MatMul: output 0 is requested with Add into an accumulator of shape {}, but \
                 the product has shape [{m},{n}]",
                fmt_shape(out.dims())
            );
            g.add = true;
            out
        } else {
            ctx.allocate_output(0, TensorShape::new(&[m, n])?)?
        };
        products(pool, dt, &g, &a, &b, &[(0, 0)], out)
    }

    fn supported_requests(&self) -> RequestSupport {
        match self.add {
            true => RequestSupport::ADD,
            false => RequestSupport::WRITE_ONLY,
        }
    }
}

struct BatchMatMulKernel {
    adj_x: bool,
    adj_y: bool,
}

impl CreateKernel for BatchMatMulKernel {
    fn create(ctx: &OpKernelConstruction<'_>) -> Result<Self> {
        Ok(BatchMatMulKernel {
            adj_x: ctx.get_attr("adj_x")?,
            adj_y: ctx.get_attr("adj_y")?,
        })
    }
}

/// A broadcast batch shape and the `(x, y)` batch indices of each output matrix.
/// The broadcast batch shape of two batch shapes; `None` if they do not
/// broadcast.
fn batch_shape(x: &[i64], y: &[i64]) -> Option<Vec<i64>> {
    let rank = x.len().max(y.len());
    let (px, py) = (pad_batch(x, rank), pad_batch(y, rank));
    px.iter()
        .zip(&py)
        .map(|(&a, &b)| {
            if a == b || b == 1 {
                Some(a)
            } else if a == 1 {
                Some(b)
            } else {
                None
            }
        })
        .collect()
}

/// `s` with leading 1s up to `rank` dims.
fn pad_batch(s: &[i64], rank: usize) -> Vec<i64> {
    let mut v = vec![1; rank - s.len()];
    v.extend_from_slice(s);
    v
}

/// For every index of the broadcast batch shape `out` (row-major), the flat
/// batch indices of `x` and `y`. Called only for a non-empty output, whose
/// allocation bounds the number of batches; the list itself is allocated
/// with a clean ResourceExhausted should it still not fit.
fn batch_pairs(x: &[i64], y: &[i64], out: &[i64]) -> Result<Vec<(usize, usize)>> {
    let rank = out.len();
    let (px, py) = (pad_batch(x, rank), pad_batch(y, rank));
    let total: usize = out.iter().map(|&d| d as usize).product();
    let strides = |s: &[i64]| -> Vec<usize> {
        let mut st = vec![0usize; rank];
        let mut acc = 1usize;
        for i in (0..rank).rev() {
            st[i] = if s[i] == 1 { 0 } else { acc };
            acc *= s[i] as usize;
        }
        st
    };
    let (sx, sy) = (strides(&px), strides(&py));
    let mut pairs = Vec::new();
    pairs.try_reserve_exact(total).map_err(|_| {
        Status::resource_exhausted(format!(
            "cannot allocate the batch index list of {total} matrix products"
        ))
    })?;
    for lin in 0..total {
        let (mut rem, mut ix, mut iy) = (lin, 0, 0);
        for d in (0..rank).rev() {
            let c = rem % out[d] as usize;
            rem /= out[d] as usize;
            ix += c * sx[d];
            iy += c * sy[d];
        }
        pairs.push((ix, iy));
    }
    Ok(pairs)
}

impl OpKernel for BatchMatMulKernel {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let (x, y) = (ctx.input(0).clone(), ctx.input(1).clone());
        ensure!(
            x.rank() >= 2,
            InvalidArgument,
            "In[0] ndims must be >= 2: {}",
            x.rank()
        );
        ensure!(
            y.rank() >= 2,
            InvalidArgument,
            "In[1] ndims must be >= 2: {}",
            y.rank()
        );
        let (xd, yd) = (x.dims(), y.dims());
        let (xr, yr) = (xd.len(), yd.len());
        let batch = batch_shape(&xd[..xr - 2], &yd[..yr - 2]).ok_or_else(|| {
            Status::invalid_argument(format!(
                "In[0] and In[1] must have compatible batch dimensions: {} vs. {}",
                fmt_shape(xd),
                fmt_shape(yd)
            ))
        })?;
        let (mut d0, mut d1) = (xd[xr - 2], xd[xr - 1]);
        let (mut d2, mut d3) = (yd[yr - 2], yd[yr - 1]);
        if self.adj_x {
            std::mem::swap(&mut d0, &mut d1);
        }
        if self.adj_y {
            std::mem::swap(&mut d2, &mut d3);
        }
        ensure!(
            d1 == d2,
            InvalidArgument,
            "Matrix size-incompatible: In[0]: {}, In[1]: {}",
            fmt_shape(xd),
            fmt_shape(yd)
        );
        let mut out_dims = batch.clone();
        out_dims.extend_from_slice(&[d0, d3]);
        let dt = x.dtype();
        let complex = matches!(dt, DataType::Complex64 | DataType::Complex128);
        let g = Gemm {
            m: d0 as usize,
            k: d1 as usize,
            n: d3 as usize,
            ta: self.adj_x,
            tb: self.adj_y,
            ca: self.adj_x && complex,
            cb: self.adj_y && complex,
            add: false,
        };
        let pool = ctx.thread_pool();
        let out = ctx.allocate_output(0, TensorShape::new(&out_dims)?)?;
        // An empty output needs no products (and a zero-size operand must
        // not make a list of its huge batch).
        if out.num_elements() == 0 {
            return Ok(());
        }
        let pairs = batch_pairs(&xd[..xr - 2], &yd[..yr - 2], &batch)?;
        products(pool, dt, &g, &x, &y, &pairs, out)
    }
}

register_kernel!(
    KernelDefBuilder::new("MatMul").type_constraint_list("T", MATMUL_TYPES),
    MatMulKernel
);
register_kernel!(
    KernelDefBuilder::new("BatchMatMulV2").type_constraint_list("T", BATCH_MATMUL_TYPES),
    BatchMatMulKernel
);

// ---- Gradients ----

use opforge_core::attrs::IntoAttrValue;
use opforge_core::autodiff::{GradientContext, Ops, OpsExt, Sym, SymArg};
use opforge_core::register_gradient;
use opforge_ops_base::grad::{attr_or, reduce_sum, slice_vector};

/// The attr names of a product op of the matmul family: its two transpose
/// attrs, then the gradient hints of its two inputs.
struct ProductAttrs {
    op: &'static str,
    transpose: [&'static str; 2],
    hint: [&'static str; 2],
}

const MAT_MUL: ProductAttrs = ProductAttrs {
    op: "MatMul",
    transpose: ["transpose_a", "transpose_b"],
    hint: ["grad_a", "grad_b"],
};

const BATCH_MAT_MUL_V2: ProductAttrs = ProductAttrs {
    op: "BatchMatMulV2",
    transpose: ["adj_x", "adj_y"],
    hint: ["grad_x", "grad_y"],
};

/// TensorFlow's gradients of a product `a·b` (each side transposed or not)
/// for the output gradient `g`: the gradient of `a`, then of `b`, each a
/// product of the same op marked with its hint. (Real types; TensorFlow
/// conjugates the inputs of complex products.)
fn product_grads(
    o: &mut dyn Ops,
    p: &ProductAttrs,
    (a, b, g): (Sym, Sym, Sym),
    (ta, tb): (bool, bool),
) -> Result<(Sym, Sym)> {
    let mm = |o: &mut dyn Ops, x: Sym, y: Sym, tx: bool, ty: bool, side: usize| {
        o.op1(
            p.op,
            &[x, y],
            &[
                (p.transpose[0], tx.into_attr_value()),
                (p.transpose[1], ty.into_attr_value()),
                (p.hint[side], true.into_attr_value()),
            ],
        )
    };
    Ok(match (ta, tb) {
        (false, false) => (mm(o, g, b, false, true, 0)?, mm(o, a, g, true, false, 1)?),
        (false, true) => (mm(o, g, b, false, false, 0)?, mm(o, g, a, true, false, 1)?),
        (true, false) => (mm(o, b, g, false, true, 0)?, mm(o, a, g, false, false, 1)?),
        (true, true) => (mm(o, b, g, true, true, 0)?, mm(o, g, a, true, true, 1)?),
    })
}

/// TensorFlow's `_MatMulGrad`.
fn mat_mul_grad(ctx: &mut GradientContext<'_>) -> Result<()> {
    let (g, a, b) = (ctx.grad()?, ctx.input(0), ctx.input(1));
    let ta = attr_or(ctx, "transpose_a", false)?;
    let tb = attr_or(ctx, "transpose_b", false)?;
    let (ga, gb) = product_grads(ctx, &MAT_MUL, (a, b, g), (ta, tb))?;
    ctx.set_input_grad(0, ga)?;
    ctx.set_input_grad(1, gb)
}

/// TensorFlow's `_BatchMatMulV2` gradient: the `MatMul` formulas on the
/// matrices, then, where the batch dims broadcast, a `Sum` over the
/// `BroadcastGradientArgs` of the batch shapes and a `Reshape` back.
fn batch_mat_mul_v2_grad(ctx: &mut GradientContext<'_>) -> Result<()> {
    let (g, x, y) = (ctx.grad()?, ctx.input(0), ctx.input(1));
    let adj_x = attr_or(ctx, "adj_x", false)?;
    let adj_y = attr_or(ctx, "adj_y", false)?;
    let (gx, gy) = product_grads(ctx, &BATCH_MAT_MUL_V2, (x, y, g), (adj_x, adj_y))?;
    let (sx, sy) = (ctx.shape(x), ctx.shape(y));
    let may_have_batch =
        sx.as_ref().is_none_or(|s| s.len() > 2) || sy.as_ref().is_none_or(|s| s.len() > 2);
    let batch_shapes_match = match (&sx, &sy) {
        (Some(a), Some(b)) if a.len() >= 2 && b.len() >= 2 => {
            let (ba, bb) = (&a[..a.len() - 2], &b[..b.len() - 2]);
            ba == bb && ba.iter().all(|&d| d >= 0)
        }
        _ => false,
    };
    if !may_have_batch || batch_shapes_match {
        ctx.set_input_grad(0, gx)?;
        return ctx.set_input_grad(1, gy);
    }
    let (shape_x, shape_y) = (ctx.shape_of(x)?, ctx.shape_of(y)?);
    let bx = slice_vector(ctx, shape_x, 0, Some(-2))?;
    let by = slice_vector(ctx, shape_y, 0, Some(-2))?;
    let r = ctx.call(
        "BroadcastGradientArgs",
        &[SymArg::One(bx), SymArg::One(by)],
        &Default::default(),
    )?;
    let gx = reduce_sum(ctx, gx, r[0], false)?;
    let gx = ctx.reshape(gx, shape_x)?;
    let gy = reduce_sum(ctx, gy, r[1], false)?;
    let gy = ctx.reshape(gy, shape_y)?;
    ctx.set_input_grad(0, gx)?;
    ctx.set_input_grad(1, gy)
}

register_gradient!("MatMul", mat_mul_grad);
register_gradient!("BatchMatMulV2", batch_mat_mul_v2_grad);

#[cfg(test)]
mod tests;
