//! `MedianPool`: the op TensorFlow's "Create an op" guide gives as the
//! reason to write a custom op (composing existing ops is too slow), as an
//! opforge op library.
//!
//! - `MedianPool(input: T) -> output: T`, `T: {half, bfloat16, float,
//!   double}`, attrs `ksize`, `strides` (4 values, NHWC, 1 over N and C),
//!   `padding: {'SAME', 'VALID'}`: each output is the median of its
//!   window's elements inside the input (padding excluded), as
//!   `numpy.median` computes it (mean of the two middle values for an even
//!   count); a NaN in the window gives NaN. Output sizes follow
//!   TensorFlow's pooling ops (VALID: `ceil((in - k + 1) / s)`, SAME:
//!   `ceil(in / s)`).
//! - `MedianPoolGrad(orig_input: T, grad: T) -> output: T`: routes each
//!   output's gradient to its window's middle element (1/2 to each of the
//!   two middle ones for an even count; ties to the lowest flat index); it
//!   is `MedianPool`'s gradient, and is itself not differentiable.
//!
//! The kernels gather each window's elements for all channels at once and
//! run a selection network over the channels as SIMD lanes ([`select`]);
//! 3x3 windows at stride 1 (the common case) sort each input column once
//! and reuse it for the three windows covering it. Rows of the output are
//! spread over the host's threads with `parallel_for`. half and bfloat16
//! compute in f32.

mod grad;
pub mod select;

use grad::*;
use opforge_plugin::prelude::*;
use opforge_plugin::{BFloat16, Half, KernelDef, ThreadPool};
use select::Float;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, PoisonError};

/// `MedianPool`'s declaration.
pub const MEDIAN_POOL: OpDefBuilder = OpDefBuilder::new("MedianPool")
    .attr("T: {half, bfloat16, float, double}")
    .attr("ksize: list(int) >= 4")
    .attr("strides: list(int) >= 4")
    .attr("padding: {'SAME', 'VALID'}")
    .input("input: T")
    .output("output: T")
    .set_shape_fn(pool_shape)
    .doc(
        "Median pooling over the spatial dims of an NHWC tensor.\n\
         \n\
         Each output is the median of the elements of its window that lie\n\
         inside the input (padding is excluded), as numpy.median computes it:\n\
         the mean of the two middle values for an even count, NaN if the\n\
         window holds a NaN.\n\
         \n\
         input: 4-D `[batch, height, width, channels]`.\n\
         ksize: the window size for each dimension of the input (1 for batch\n\
         and channels).\n\
         strides: the stride of the sliding window for each dimension (1 for\n\
         batch and channels).\n\
         padding: the type of padding algorithm to use.\n\
         output: the median pooled tensor.",
    );

/// `MedianPoolGrad`'s declaration.
pub const MEDIAN_POOL_GRAD: OpDefBuilder = OpDefBuilder::new("MedianPoolGrad")
    .attr("T: {half, bfloat16, float, double}")
    .attr("ksize: list(int) >= 4")
    .attr("strides: list(int) >= 4")
    .attr("padding: {'SAME', 'VALID'}")
    .input("orig_input: T")
    .input("grad: T")
    .output("output: T")
    .set_shape_fn(grad_shape)
    .doc(
        "The gradient of MedianPool.\n\
         \n\
         Each element of `grad` goes to the middle element of its window in\n\
         `orig_input` (1/2 to each of the two middle ones for an even count;\n\
         ties to the lowest flat index; a window holding a NaN sends it to\n\
         its first NaN); contributions of overlapping windows add up.\n\
         \n\
         orig_input: the input of MedianPool.\n\
         grad: the gradient with respect to MedianPool's output.\n\
         output: the gradient with respect to `orig_input`.",
    );

/// The output size and the padding before the first element of one
/// spatial dim, TensorFlow's `GetWindowedOutputSize` (dilation 1).
pub fn windowed_output_size(input: i64, k: i64, stride: i64, same: bool) -> Result<(i64, i64)> {
    ensure!(
        stride > 0,
        InvalidArgument,
        "Stride must be > 0, but got {}",
        stride
    );
    ensure!(
        k > 0,
        InvalidArgument,
        "Window size must be > 0, but got {}",
        k
    );
    if same {
        let out = (input + stride - 1) / stride;
        let pad = ((out - 1) * stride + k - input).max(0);
        Ok((out, pad / 2))
    } else {
        let out = (input - k + stride) / stride;
        ensure!(
            out >= 0,
            InvalidArgument,
            "Computed output size would be negative: {} [input_size: {}, effective_filter_size: {}, stride: {}]",
            out,
            input,
            k,
            stride
        );
        Ok((out, 0))
    }
}

/// The shape of a pooling: `[N, H, W, C]` in, windows `kh x kw` moved by
/// `sh, sw`, the output `[N, out_h, out_w, C]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Geometry {
    /// Batch.
    pub n: usize,
    /// Input height.
    pub h: usize,
    /// Input width.
    pub w: usize,
    /// Channels.
    pub c: usize,
    /// Output height.
    pub out_h: usize,
    /// Output width.
    pub out_w: usize,
    /// Window height.
    pub kh: usize,
    /// Window width.
    pub kw: usize,
    /// Stride over rows.
    pub sh: usize,
    /// Stride over columns.
    pub sw: usize,
    /// Padding rows above the first window.
    pub pad_top: usize,
    /// Padding columns left of the first window.
    pub pad_left: usize,
}

impl Geometry {
    /// The pooling of an input of `dims` (rank 4).
    pub fn new(dims: &[i64], window: [i64; 2], strides: [i64; 2], same: bool) -> Result<Geometry> {
        ensure!(
            dims.len() == 4,
            InvalidArgument,
            "input must be 4-dimensional, got shape {}",
            fmt_shape(dims)
        );
        let (out_h, pad_top) = windowed_output_size(dims[1], window[0], strides[0], same)?;
        let (out_w, pad_left) = windowed_output_size(dims[2], window[1], strides[1], same)?;
        let u = |v: i64| v as usize;
        Ok(Geometry {
            n: u(dims[0]),
            h: u(dims[1]),
            w: u(dims[2]),
            c: u(dims[3]),
            out_h: u(out_h),
            out_w: u(out_w),
            kh: u(window[0]),
            kw: u(window[1]),
            sh: u(strides[0]),
            sw: u(strides[1]),
            pad_top: u(pad_top),
            pad_left: u(pad_left),
        })
    }

    /// The output dims.
    pub fn out_dims(&self) -> [i64; 4] {
        [self.n, self.out_h, self.out_w, self.c].map(|d| d as i64)
    }

    /// The input rows of output row `oh`'s windows (inside the input).
    pub fn rows(&self, oh: usize) -> std::ops::Range<usize> {
        span(oh * self.sh, self.pad_top, self.kh, self.h)
    }

    /// The input columns of output column `ow`'s windows.
    pub fn cols(&self, ow: usize) -> std::ops::Range<usize> {
        span(ow * self.sw, self.pad_left, self.kw, self.w)
    }
}

/// `[start - pad, start - pad + k)` clipped to `[0, len)`.
fn span(start: usize, pad: usize, k: usize, len: usize) -> std::ops::Range<usize> {
    let lo = start.saturating_sub(pad);
    let hi = (start + k).saturating_sub(pad).min(len);
    lo.min(hi)..hi
}

/// Formats dims as TensorFlow prints a shape: `[2,3]`.
fn fmt_shape(dims: &[i64]) -> String {
    let dims: Vec<String> = dims.iter().map(i64::to_string).collect();
    format!("[{}]", dims.join(","))
}

/// The attrs both ops share, read and checked.
#[derive(Clone, Debug)]
struct PoolAttrs {
    window: [i64; 2],
    strides: [i64; 2],
    same: bool,
}

impl PoolAttrs {
    fn read(init: &OpKernelConstruction<'_>) -> Result<PoolAttrs> {
        let ksize: Vec<i64> = init.get_attr("ksize")?;
        let strides: Vec<i64> = init.get_attr("strides")?;
        let padding: String = init.get_attr("padding")?;
        ensure!(
            ksize.len() == 4,
            InvalidArgument,
            "Sliding window ksize field must specify 4 dimensions"
        );
        ensure!(
            strides.len() == 4,
            InvalidArgument,
            "Sliding window stride field must specify 4 dimensions"
        );
        for (i, &k) in ksize.iter().enumerate() {
            ensure!(
                k >= 1,
                InvalidArgument,
                "Sliding window ksize for dimension {} must be >= 1, got {}",
                i,
                k
            );
        }
        for (i, &s) in strides.iter().enumerate() {
            ensure!(
                s >= 1,
                InvalidArgument,
                "Sliding window stride for dimension {} must be >= 1, got {}",
                i,
                s
            );
        }
        ensure!(
            ksize[0] == 1 && strides[0] == 1,
            InvalidArgument,
            "Pooling is not yet supported on the batch dimension."
        );
        ensure!(
            ksize[3] == 1 && strides[3] == 1,
            InvalidArgument,
            "Pooling is not yet supported on the depth dimension."
        );
        ensure!(
            padding == "SAME" || padding == "VALID",
            InvalidArgument,
            "Unknown padding {:?}",
            padding
        );
        Ok(PoolAttrs {
            window: [ksize[1], ksize[2]],
            strides: [strides[1], strides[2]],
            same: padding == "SAME",
        })
    }

    fn geometry(&self, dims: &[i64]) -> Result<Geometry> {
        Geometry::new(dims, self.window, self.strides, self.same)
    }
}

/// The shape function of `MedianPool`: TensorFlow's pooling output sizes,
/// unknown dims (or an unknown rank) giving unknown sizes.
fn pool_shape(c: &mut InferenceContext<'_>) -> Result<()> {
    let ksize: Vec<i64> = c.get_attr("ksize")?;
    let strides: Vec<i64> = c.get_attr("strides")?;
    let padding: String = c.get_attr("padding")?;
    ensure!(
        strides.len() == 4,
        InvalidArgument,
        "MedianPool requires the stride attribute to contain 4 values, but got: {}",
        strides.len()
    );
    ensure!(
        ksize.len() == 4,
        InvalidArgument,
        "MedianPool requires the ksize attribute to contain 4 values, but got: {}",
        ksize.len()
    );
    let input = c.input(0);
    let input = c.with_rank(input, 4)?;
    let batch = c.dim(input, 0)?;
    let rows = c.dim(input, 1)?;
    let cols = c.dim(input, 2)?;
    let depth = c.dim(input, 3)?;
    let same = padding == "SAME";
    let out_rows = windowed_dim(c, rows, ksize[1], strides[1], same)?;
    let out_cols = windowed_dim(c, cols, ksize[2], strides[2], same)?;
    let out = c.make_shape_from_dims([batch, out_rows, out_cols, depth])?;
    c.set_output(0, out)
}

/// TensorFlow's `GetWindowedOutputSizeFromDims`: VALID
/// `(in - (k - 1) + (s - 1)) / s`, SAME `(in + s - 1) / s`.
fn windowed_dim(
    c: &mut InferenceContext<'_>,
    input: DimensionHandle,
    k: i64,
    stride: i64,
    same: bool,
) -> Result<DimensionHandle> {
    ensure!(
        stride > 0,
        InvalidArgument,
        "Stride must be > 0, but got {}",
        stride
    );
    ensure!(
        k > 0,
        InvalidArgument,
        "Window size must be > 0, but got {}",
        k
    );
    let d = if same {
        c.add(input, stride - 1)?
    } else {
        let d = c.subtract(input, k - 1)?;
        c.add(d, stride - 1)?
    };
    c.divide(d, stride, false)
}

/// The shape function of `MedianPoolGrad`: `orig_input`'s, of rank 4.
fn grad_shape(c: &mut InferenceContext<'_>) -> Result<()> {
    let input = c.input(0);
    let input = c.with_rank(input, 4)?;
    c.set_output(0, input)
}

/// One shard's output rows (`first` is the index of the first, `n * out_h
/// + oh`).
///
/// On x86-64 CPUs with AVX2 the same code runs compiled for AVX2 (8 f32
/// lanes per min/max instead of SSE2's 4), chosen at run time: the library
/// itself is built for the baseline x86-64.
fn pool_rows<W: Float>(x: &[W], g: &Geometry, first: usize, rows: &mut [&mut [W]]) {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU has AVX2 (checked just above).
        unsafe { pool_rows_avx2(x, g, first, rows) };
        return;
    }
    pool_rows_any(x, g, first, rows)
}

/// [`pool_rows_any`] compiled for AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn pool_rows_avx2<W: Float>(x: &[W], g: &Geometry, first: usize, rows: &mut [&mut [W]]) {
    pool_rows_any(x, g, first, rows)
}

/// [`pool_rows`] for any CPU (inlined into the AVX2 version).
#[inline(always)]
fn pool_rows_any<W: Float>(x: &[W], g: &Geometry, first: usize, rows: &mut [&mut [W]]) {
    let mut buf = Vec::with_capacity(g.kh * g.kw * g.c);
    let mut nan = vec![false; g.c];
    let mut columns = Columns::default();
    for (i, out) in rows.iter_mut().enumerate() {
        let row = first + i;
        let (n, oh) = (row / g.out_h, row % g.out_h);
        let ih = g.rows(oh);
        if g.kh == 3 && g.kw == 3 && g.sw == 1 && ih.len() == 3 && g.c > 0 {
            pool_row_3x3(x, g, n, ih.start, out, &mut columns, &mut buf, &mut nan);
            continue;
        }
        for ow in 0..g.out_w {
            pool_window(
                x,
                g,
                n,
                ih.clone(),
                g.cols(ow),
                &mut out[ow * g.c..(ow + 1) * g.c],
                &mut buf,
                &mut nan,
            );
        }
    }
}

/// The medians of one window position for every channel: its elements
/// gathered element-major, then the selection network over the channels.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn pool_window<W: Float>(
    x: &[W],
    g: &Geometry,
    n: usize,
    rows: std::ops::Range<usize>,
    cols: std::ops::Range<usize>,
    out: &mut [W],
    buf: &mut Vec<W>,
    nan: &mut [bool],
) {
    let k = rows.len() * cols.len();
    buf.clear();
    nan.fill(false);
    for ih in rows {
        let base = (n * g.h + ih) * g.w;
        for iw in cols.clone() {
            let src = &x[(base + iw) * g.c..(base + iw + 1) * g.c];
            buf.extend_from_slice(src);
            for (f, v) in nan.iter_mut().zip(src) {
                *f |= v.is_nan();
            }
        }
    }
    select::median_lanes(buf, k, g.c, nan, out);
}

/// Per-row scratch of the 3x3 path: each input column of the three rows,
/// sorted (low, middle, high) per channel, and its NaN flag.
#[derive(Default)]
struct Columns<W> {
    lo: Vec<W>,
    mid: Vec<W>,
    hi: Vec<W>,
    nan: Vec<bool>,
}

/// One output row of 3x3 windows at stride 1 whose three input rows
/// `top..top + 3` are all inside the input: every input column is sorted
/// once (3 compare-exchanges per channel); a full window's median is then
/// `med3(max(lows), med3(middles), min(highs))` (the median of 9 from three
/// sorted triples). Windows cut by the left or right edge (6 elements) take
/// the general path.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn pool_row_3x3<W: Float>(
    x: &[W],
    g: &Geometry,
    n: usize,
    top: usize,
    out: &mut [W],
    cols: &mut Columns<W>,
    buf: &mut Vec<W>,
    nan: &mut [bool],
) {
    let (w, c) = (g.w, g.c);
    let len = w * c;
    for v in [&mut cols.lo, &mut cols.mid, &mut cols.hi] {
        // Every element is written below.
        v.resize(len, W::ZERO);
    }
    let r0 = &x[((n * g.h + top) * w) * c..][..len];
    let r1 = &x[((n * g.h + top + 1) * w) * c..][..len];
    let r2 = &x[((n * g.h + top + 2) * w) * c..][..len];
    // NaN flags only when the three rows hold a NaN (a rare case): the
    // common case runs the min/max network alone.
    let any_nan = has_nan(r0) || has_nan(r1) || has_nan(r2);
    let (lo, mid, hi) = (
        &mut cols.lo[..len],
        &mut cols.mid[..len],
        &mut cols.hi[..len],
    );
    for i in 0..len {
        let (a, b, d) = (r0[i], r1[i], r2[i]);
        let (a, b) = (W::lo(a, b), W::hi(a, b));
        let (b, d) = (W::lo(b, d), W::hi(b, d));
        let (a, b) = (W::lo(a, b), W::hi(a, b));
        lo[i] = a;
        mid[i] = b;
        hi[i] = d;
    }
    cols.nan.clear();
    if any_nan {
        cols.nan
            .extend((0..len).map(|i| r0[i].is_nan() | r1[i].is_nan() | r2[i].is_nan()));
    }
    // The full windows: output columns `full`, whose windows start at input
    // column `ow - pad_left` (stride 1), form one flat run of elements:
    // output element `e` reads column elements `e - pad_left * c` and the
    // next two columns'. One long loop, no per-window bookkeeping.
    let full = g.pad_left.min(g.out_w)..(w + g.pad_left).saturating_sub(2).min(g.out_w);
    if full.start < full.end {
        let base = (full.start - g.pad_left) * c;
        let count = (full.end - full.start) * c;
        let o = &mut out[full.start * c..full.end * c];
        let [l0, l1, l2] = runs(&cols.lo, base, c, count);
        let [m0, m1, m2] = runs(&cols.mid, base, c, count);
        let [h0, h1, h2] = runs(&cols.hi, base, c, count);
        for e in 0..count {
            let l = W::hi(W::hi(l0[e], l1[e]), l2[e]);
            let h = W::lo(W::lo(h0[e], h1[e]), h2[e]);
            let m = med3(m0[e], m1[e], m2[e]);
            o[e] = med3(l, m, h);
        }
        if any_nan {
            let f = &cols.nan[base..base + count + 2 * c];
            for (e, v) in o.iter_mut().enumerate() {
                if f[e] | f[e + c] | f[e + 2 * c] {
                    *v = W::NAN;
                }
            }
        }
    }
    // The windows cut by the left or right edge.
    for ow in (0..g.out_w).filter(|ow| !full.contains(ow)) {
        let o = &mut out[ow * c..(ow + 1) * c];
        pool_window(x, g, n, top..top + 3, g.cols(ow), o, buf, nan);
    }
}

/// Whether `v` holds a NaN: a select per element into lanes of float
/// accumulators (vectorizes; a `bool` fold does not).
#[inline(always)]
fn has_nan<W: Float>(v: &[W]) -> bool {
    const LANES: usize = 16;
    let mut acc = [W::ZERO; LANES];
    let chunks = v.chunks_exact(LANES);
    let rest = chunks.remainder();
    for chunk in chunks {
        for j in 0..LANES {
            #[allow(clippy::eq_op)]
            let keep = chunk[j] == chunk[j];
            acc[j] = if keep { acc[j] } else { chunk[j] };
        }
    }
    acc.iter().chain(rest).any(|v| v.is_nan())
}

/// The three runs of `count` elements from `base`, `base + c` and
/// `base + 2c` (the three columns of consecutive windows).
#[inline(always)]
fn runs<W>(v: &[W], base: usize, c: usize, count: usize) -> [&[W]; 3] {
    [
        &v[base..base + count],
        &v[base + c..base + c + count],
        &v[base + 2 * c..base + 2 * c + count],
    ]
}

/// The median of three (NaN-free) values.
#[inline(always)]
fn med3<W: Float>(a: W, b: W, c: W) -> W {
    let (lo, hi) = (W::lo(a, b), W::hi(a, b));
    W::hi(lo, W::lo(hi, c))
}

/// A block of output rows and the index of its first row.
type Block<'a, 'b, W> = (usize, &'a mut [&'b mut [W]]);

/// `MedianPool` of `x` into `out` on the host's `threads` threads.
///
/// The rows are cut into blocks (about 16 per thread) that the shards claim
/// from a counter: the host splits `parallel_for` into one fixed shard per
/// thread, and on a loaded machine a thread that is descheduled would hold
/// its whole half up; with claimed blocks the running threads take its
/// share.
fn pool_into<W: Float>(
    pool: &ThreadPool<'_>,
    threads: usize,
    x: &[W],
    g: &Geometry,
    out: &mut [W],
) -> Result<()> {
    let row_len = g.out_w * g.c;
    if out.is_empty() || row_len == 0 {
        return Ok(());
    }
    let threads = threads.max(1);
    let n_rows = out.len() / row_len;
    let row_cost = (row_len * (g.kh * g.kw * 4 + 8)) as u64;
    let per_block = (n_rows / (threads * 16)).max(1);
    let mut rows: Vec<&mut [W]> = out.chunks_mut(row_len).collect();
    let blocks: Vec<Mutex<Block<'_, '_, W>>> = rows
        .chunks_mut(per_block)
        .enumerate()
        .map(|(b, chunk)| Mutex::new((b * per_block, chunk)))
        .collect();
    let next = AtomicUsize::new(0);
    let per_shard = row_cost.saturating_mul(n_rows as u64) / threads as u64;
    pool.parallel_for(threads, per_shard, |start, end| {
        for _ in start..end {
            while let Some(block) = blocks.get(next.fetch_add(1, Ordering::Relaxed)) {
                let mut block = block.lock().unwrap_or_else(PoisonError::into_inner);
                let (first, chunk) = &mut *block;
                pool_rows(x, g, *first, chunk);
            }
        }
    })
}

/// Conversions of the 16-bit floats to the f32 they compute in.
trait Narrow: Copy {
    fn widen(self) -> f32;
    fn narrow(v: f32) -> Self;
}

impl Narrow for Half {
    fn widen(self) -> f32 {
        half::f16::from_bits(self.0).to_f32()
    }
    fn narrow(v: f32) -> Self {
        Half(half::f16::from_f32(v).to_bits())
    }
}

impl Narrow for BFloat16 {
    fn widen(self) -> f32 {
        half::bf16::from_bits(self.0).to_f32()
    }
    fn narrow(v: f32) -> Self {
        BFloat16(half::bf16::from_f32(v).to_bits())
    }
}

fn widen<N: Narrow>(v: &[N]) -> Vec<f32> {
    v.iter().map(|x| x.widen()).collect()
}

fn narrow_into<N: Narrow>(v: &[f32], out: &mut [N]) {
    for (o, &x) in out.iter_mut().zip(v) {
        *o = N::narrow(x);
    }
}

/// `MedianPool`'s kernel.
pub struct MedianPoolKernel {
    attrs: PoolAttrs,
}

impl CreateKernel for MedianPoolKernel {
    fn create(init: &OpKernelConstruction<'_>) -> Result<Self> {
        Ok(MedianPoolKernel {
            attrs: PoolAttrs::read(init)?,
        })
    }
}

impl OpKernel for MedianPoolKernel {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let (dtype, dims) = {
            let x = ctx.input(0)?;
            (x.dtype(), x.dims().to_vec())
        };
        let g = self.attrs.geometry(&dims)?;
        let pool = ctx.thread_pool();
        let threads = ctx.num_threads();
        ctx.allocate_output(0, &g.out_dims())?;
        let (ins, mut out) = ctx.inputs_and_output(0)?;
        match dtype {
            DataType::Float => pool_into(
                &pool,
                threads,
                ins[0].flat::<f32>()?,
                &g,
                out.flat_mut::<f32>()?,
            ),
            DataType::Double => pool_into(
                &pool,
                threads,
                ins[0].flat::<f64>()?,
                &g,
                out.flat_mut::<f64>()?,
            ),
            DataType::Half => {
                pool_narrow::<Half>(&pool, threads, ins[0].flat()?, &g, out.flat_mut()?)
            }
            DataType::BFloat16 => {
                pool_narrow::<BFloat16>(&pool, threads, ins[0].flat()?, &g, out.flat_mut()?)
            }
            other => Err(Status::unimplemented(format!(
                "MedianPool does not support {other}"
            ))),
        }
    }
}

fn pool_narrow<N: Narrow>(
    pool: &ThreadPool<'_>,
    threads: usize,
    x: &[N],
    g: &Geometry,
    out: &mut [N],
) -> Result<()> {
    let x = widen(x);
    let mut o = vec![0f32; out.len()];
    pool_into(pool, threads, &x, g, &mut o)?;
    narrow_into(&o, out);
    Ok(())
}

/// `MedianPoolGrad`'s kernel.
pub struct MedianPoolGradKernel {
    attrs: PoolAttrs,
}

impl CreateKernel for MedianPoolGradKernel {
    fn create(init: &OpKernelConstruction<'_>) -> Result<Self> {
        Ok(MedianPoolGradKernel {
            attrs: PoolAttrs::read(init)?,
        })
    }
}

impl OpKernel for MedianPoolGradKernel {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let (dtype, dims, grad_dims) = {
            let x = ctx.input(0)?;
            let dy = ctx.input(1)?;
            (x.dtype(), x.dims().to_vec(), dy.dims().to_vec())
        };
        let g = self.attrs.geometry(&dims)?;
        ensure!(
            grad_dims == g.out_dims(),
            InvalidArgument,
            "grad must have the shape of MedianPool's output {} for orig_input {}, got {}",
            fmt_shape(&g.out_dims()),
            fmt_shape(&dims),
            fmt_shape(&grad_dims)
        );
        let pool = ctx.thread_pool();
        ctx.allocate_output(0, &dims)?;
        let (ins, mut out) = ctx.inputs_and_output(0)?;
        match dtype {
            DataType::Float => grad_into(
                &pool,
                ins[0].flat::<f32>()?,
                ins[1].flat::<f32>()?,
                &g,
                out.flat_mut::<f32>()?,
            ),
            DataType::Double => grad_into(
                &pool,
                ins[0].flat::<f64>()?,
                ins[1].flat::<f64>()?,
                &g,
                out.flat_mut::<f64>()?,
            ),
            DataType::Half => {
                grad_narrow::<Half>(&pool, ins[0].flat()?, ins[1].flat()?, &g, out.flat_mut()?)
            }
            DataType::BFloat16 => {
                grad_narrow::<BFloat16>(&pool, ins[0].flat()?, ins[1].flat()?, &g, out.flat_mut()?)
            }
            other => Err(Status::unimplemented(format!(
                "MedianPoolGrad does not support {other}"
            ))),
        }
    }
}

fn grad_narrow<N: Narrow>(
    pool: &ThreadPool<'_>,
    x: &[N],
    dy: &[N],
    g: &Geometry,
    out: &mut [N],
) -> Result<()> {
    let (x, dy) = (widen(x), widen(dy));
    let mut o = vec![0f32; out.len()];
    grad_into(pool, &x, &dy, g, &mut o)?;
    narrow_into(&o, out);
    Ok(())
}

/// The dtypes of `T`.
const POOL_TYPES: &[DataType] = &[
    DataType::Half,
    DataType::BFloat16,
    DataType::Float,
    DataType::Double,
];

/// `MedianPool`'s kernel definition.
pub const MEDIAN_POOL_KERNEL: KernelDef = KernelDefBuilder::new("MedianPool")
    .type_constraint_list("T", POOL_TYPES)
    .build::<MedianPoolKernel>();
/// `MedianPoolGrad`'s kernel definition.
pub const MEDIAN_POOL_GRAD_KERNEL: KernelDef = KernelDefBuilder::new("MedianPoolGrad")
    .type_constraint_list("T", POOL_TYPES)
    .build::<MedianPoolGradKernel>();

/// `MedianPool`'s gradient: `MedianPoolGrad(x, dy)` with the same attrs.
pub fn median_pool_grad(g: &mut GradientContext<'_>) -> Result<()> {
    let dy = g.grad()?;
    let ksize: Vec<i64> = g.get_attr("ksize")?;
    let strides: Vec<i64> = g.get_attr("strides")?;
    let padding: String = g.get_attr("padding")?;
    let x = g.input(0);
    let dx = g.op1(
        "MedianPoolGrad",
        &[x, dy],
        &[
            ("ksize", AttrValue::IntList(ksize)),
            ("strides", AttrValue::IntList(strides)),
            ("padding", AttrValue::Str(padding)),
        ],
    )?;
    g.set_input_grad(0, dx)
}

opforge_plugin::export! {
    name: "median_pool",
    version: env!("CARGO_PKG_VERSION"),
    ops: [MEDIAN_POOL, MEDIAN_POOL_GRAD],
    kernels: [MEDIAN_POOL_KERNEL, MEDIAN_POOL_GRAD_KERNEL],
    gradients: [
        GradientDef::new("MedianPool", median_pool_grad),
        GradientDef::not_differentiable("MedianPoolGrad"),
    ],
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn output_sizes_follow_tensorflow() {
        // VALID: ceil((in - k + 1) / s); SAME: ceil(in / s), padding split
        // with the extra one after.
        assert_eq!(windowed_output_size(5, 3, 1, false).unwrap(), (3, 0));
        assert_eq!(windowed_output_size(5, 3, 2, false).unwrap(), (2, 0));
        assert_eq!(windowed_output_size(6, 3, 2, false).unwrap(), (2, 0));
        assert_eq!(windowed_output_size(2, 3, 1, false).unwrap(), (0, 0));
        assert!(windowed_output_size(1, 3, 1, false).is_err());
        assert_eq!(windowed_output_size(5, 3, 1, true).unwrap(), (5, 1));
        assert_eq!(windowed_output_size(5, 3, 2, true).unwrap(), (3, 1));
        assert_eq!(windowed_output_size(6, 4, 2, true).unwrap(), (3, 1));
        assert_eq!(windowed_output_size(4, 2, 1, true).unwrap(), (4, 0));
    }

    /// MedianPool by definition, one output at a time.
    fn naive(x: &[f64], g: &Geometry) -> Vec<f64> {
        let mut out = Vec::new();
        for n in 0..g.n {
            for oh in 0..g.out_h {
                for ow in 0..g.out_w {
                    for ch in 0..g.c {
                        let mut v = Vec::new();
                        for ih in g.rows(oh) {
                            for iw in g.cols(ow) {
                                v.push(x[((n * g.h + ih) * g.w + iw) * g.c + ch]);
                            }
                        }
                        out.push(select::median(&mut v));
                    }
                }
            }
        }
        out
    }

    #[test]
    fn pooled_rows_match_the_definition() {
        let mut seed = 0x1234_5678u64;
        let mut next = || {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (seed >> 33) as f64
        };
        for &(dims, k, s) in &[
            ([2usize, 7, 6, 3], [3i64, 3], [1i64, 1]),
            ([1, 5, 5, 1], [3, 3], [2, 2]),
            ([1, 6, 4, 2], [2, 3], [1, 2]),
            ([1, 3, 3, 4], [3, 3], [1, 1]),
            ([1, 4, 9, 2], [4, 2], [3, 1]),
        ] {
            for same in [false, true] {
                let idims = dims.map(|d| d as i64);
                let g = Geometry::new(&idims, k, s, same).unwrap();
                let len = dims.iter().product();
                let mut x: Vec<f64> = (0..len).map(|_| (next() % 7.0) - 3.0).collect();
                x[len / 3] = f64::NAN;
                let want = naive(&x, &g);
                let row_len = g.out_w * g.c;
                let mut got = vec![0.0; want.len()];
                if row_len > 0 {
                    let mut rows: Vec<&mut [f64]> = got.chunks_mut(row_len).collect();
                    pool_rows(&x, &g, 0, &mut rows);
                }
                for (i, (a, b)) in got.iter().zip(&want).enumerate() {
                    assert!(
                        (a.is_nan() && b.is_nan()) || a == b,
                        "{dims:?} {k:?} {s:?} same {same}: output {i}: {a} != {b}"
                    );
                }
            }
        }
    }

    #[test]
    fn gradients_by_rank_counting_match_the_stable_sort() {
        let mut seed = 0x9999u64;
        let mut next = || {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (seed >> 33) as f64
        };
        for &(dims, k, s) in &[
            ([2usize, 7, 6, 3], [3i64, 3], [1i64, 1]),
            ([1, 5, 5, 17], [3, 3], [2, 2]),
            ([1, 6, 4, 2], [2, 3], [1, 2]),
            ([1, 4, 9, 2], [4, 2], [3, 1]),
        ] {
            for same in [false, true] {
                let idims = dims.map(|d| d as i64);
                let g = Geometry::new(&idims, k, s, same).unwrap();
                let len: usize = dims.iter().product();
                // Few distinct values: many ties.
                let mut x: Vec<f64> = (0..len).map(|_| next() % 4.0).collect();
                x[len / 2] = f64::NAN;
                x[len / 5] = f64::NAN;
                let dy: Vec<f64> = (0..g.n * g.out_h * g.out_w * g.c)
                    .map(|_| next() % 5.0 + 1.0)
                    .collect();
                for n in 0..g.n {
                    let image = g.h * g.w * g.c;
                    let mut fast = vec![0.0; image];
                    let mut want = vec![0.0; image];
                    grad_image(&x, &dy, &g, n, &mut fast);
                    grad_image_sorted(&x, &dy, &g, n, &mut want);
                    assert_eq!(fast, want, "{dims:?} {k:?} {s:?} same {same} image {n}");
                }
            }
        }
    }

    #[test]
    fn declarations() {
        assert_eq!(
            MEDIAN_POOL.attrs(),
            [
                "T: {half, bfloat16, float, double}",
                "ksize: list(int) >= 4",
                "strides: list(int) >= 4",
                "padding: {'SAME', 'VALID'}"
            ]
        );
        assert_eq!(MEDIAN_POOL_GRAD.inputs(), ["orig_input: T", "grad: T"]);
        assert_eq!(MEDIAN_POOL_KERNEL.def.constraints()[0].types(), POOL_TYPES);
        assert_eq!(Half::narrow(Half(0x3c00).widen()), Half(0x3c00));
        assert_eq!(BFloat16::narrow(1.5), BFloat16(0x3fc0));
    }
}
