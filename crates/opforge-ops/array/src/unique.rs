//! `Unique`, `UniqueWithCounts` and `EditDistance`.
//!
//! `Unique` and `UniqueWithCounts` have TensorFlow's CPU kernels, for the
//! types it registers them for (the real number types, bool and string,
//! with `out_idx` int32 or int64); TensorFlow declares no gradient for
//! either (`array_grad.py` has none, and `Unique` has only integer-valued
//! outputs besides `y`), so none is registered here: autodiff reports "No
//! gradient defined" as TensorFlow's does. `EditDistance` has TensorFlow's
//! CPU kernel (the Levenshtein distance of each pair of sequences of two
//! sparse tensors, for every POD type and string) and, as in TensorFlow,
//! no gradient.

use std::collections::HashMap;

use opforge_core::device::ThreadPool;
use opforge_core::kernel::{
    CreateKernel, KernelDefBuilder, OpKernel, OpKernelConstruction, OpKernelContext,
};
use opforge_core::shape_inference::common::unknown_shape;
use opforge_core::shape_inference::{DimensionHandle, InferenceContext};
use opforge_core::{ensure, register_kernel, register_op, DataType, OpDefBuilder, Result, Status};
use opforge_core::{Tensor, TensorShape};
use opforge_ops_base::args::{fmt_shape, int_values};
use opforge_ops_base::cpu::mover::{for_each_chunk, move_to_output, Carrier, MoveElements};
use opforge_ops_base::numeric_bool_types;
use opforge_ops_base::shape::*;
use opforge_ops_base::types::{types, INDEX_TYPES, NUMERIC_BOOL_TYPES, REAL_KERNEL_TYPES};

#[cfg(test)]
mod tests;

register_op!(OpDefBuilder::new("EditDistance")
    .input("hypothesis_indices: int64")
    .input("hypothesis_values: T")
    .input("hypothesis_shape: int64")
    .input("truth_indices: int64")
    .input("truth_values: T")
    .input("truth_shape: int64")
    .attr("normalize: bool = true")
    .attr("T: type")
    .output("output: float")
    .set_shape_fn(with_inputs(6, edit_distance_shape))
    .doc(
        "Computes the (possibly normalized) Levenshtein Edit Distance.\n\n\
         The hypothesis and truth sequences are given as SparseTensors.",
    ));

fn edit_distance_shape(c: &mut InferenceContext) -> Result<()> {
    let (hi, hv, hs) = (c.input(0), c.input(1), c.input(2));
    validate_sparse_tensor(c, hi, hv, hs)?;
    let (ti, tv, ts) = (c.input(3), c.input(4), c.input(5));
    validate_sparse_tensor(c, ti, tv, ts)?;
    let (Some(h), Some(t)) = (c.input_tensor(2).cloned(), c.input_tensor(5).cloned()) else {
        return unknown_shape(c);
    };
    if h.num_elements() != t.num_elements() {
        return Err(Status::invalid_argument(format!(
            "Num elements of hypothesis_shape does not match truth_shape: {} vs. {}",
            h.num_elements(),
            t.num_elements()
        )));
    }
    if h.num_elements() == 0 {
        return Err(Status::invalid_argument(
            "hypothesis_shape and truth_shape must have at least one element",
        ));
    }
    let (hv, tv) = (
        int_values(&h, "hypothesis_shape")?,
        int_values(&t, "truth_shape")?,
    );
    let dims: Vec<DimensionHandle> = hv[..hv.len() - 1]
        .iter()
        .zip(&tv)
        .map(|(&a, &b)| c.make_dim(a.max(b)))
        .collect();
    let out = c.make_shape_from_dims(dims);
    c.set_output(0, out);
    Ok(())
}

register_op!(OpDefBuilder::new("Unique")
    .input("x: T")
    .output("y: T")
    .output("idx: out_idx")
    .attr("T: type")
    .attr("out_idx: {int32, int64} = DT_INT32")
    .set_shape_fn(with_inputs(1, unique_shape))
    .doc(
        "Finds unique elements in a 1-D tensor.\n\n\
         `y` holds the unique elements in order of first occurrence; `idx` maps `x` into `y`.",
    ));

fn unique_shape(c: &mut InferenceContext) -> Result<()> {
    let y = c.vector(-1);
    c.set_output(0, y);
    let x = c.input(0);
    c.set_output(1, x);
    c.with_rank(x, 1)?;
    Ok(())
}

register_op!(OpDefBuilder::new("UniqueWithCounts")
    .input("x: T")
    .output("y: T")
    .output("idx: out_idx")
    .output("count: out_idx")
    .attr("T: type")
    .attr("out_idx: {int32, int64} = DT_INT32")
    .set_shape_fn(with_inputs(1, unique_with_counts_shape))
    .doc(
        "Finds unique elements in a 1-D tensor, and counts them.\n\n\
         Like `Unique`, and `count` holds how often each unique element occurs.",
    ));

fn unique_with_counts_shape(c: &mut InferenceContext) -> Result<()> {
    let uniq = c.vector(-1);
    c.set_output(0, uniq);
    let x = c.input(0);
    c.set_output(1, x);
    c.set_output(2, uniq);
    Ok(())
}

// ---------------------------------------------------------------------------
// CPU kernels of Unique and UniqueWithCounts
// ---------------------------------------------------------------------------

/// The unique elements of a vector: the position of each one's first
/// occurrence (in order), the unique slot of every element, and how often
/// each occurs.
#[derive(Debug, Default, PartialEq)]
struct Uniques {
    first: Vec<usize>,
    idx: Vec<usize>,
    count: Vec<usize>,
}

impl Uniques {
    /// Groups the elements by `key`; an element whose key is `None` (a
    /// NaN, equal to nothing, as in TensorFlow's hash map) is unique.
    fn of<K: std::hash::Hash + Eq>(keys: impl ExactSizeIterator<Item = Option<K>>) -> Uniques {
        let mut u = Uniques {
            idx: Vec::with_capacity(keys.len()),
            ..Uniques::default()
        };
        let mut slots: HashMap<K, usize> = HashMap::new();
        for (i, key) in keys.enumerate() {
            let fresh = u.first.len();
            let slot = match key {
                Some(k) => *slots.entry(k).or_insert(fresh),
                None => fresh,
            };
            if slot == fresh {
                u.first.push(i);
                u.count.push(0);
            }
            u.count[slot] += 1;
            u.idx.push(slot);
        }
        u
    }
}

/// The key of a float: its value as f64 bits, with -0 and +0 equal (they
/// compare equal) and NaN keyless.
fn float_key(v: f64) -> Option<u64> {
    if v.is_nan() {
        None
    } else if v == 0.0 {
        Some(0)
    } else {
        Some(v.to_bits())
    }
}

/// The uniques of the vector `x`.
fn uniques(x: &Tensor) -> Result<Uniques> {
    macro_rules! ints {
        ($t:ty) => {
            Uniques::of(x.flat::<$t>()?.iter().map(|&v| Some(v as u64)))
        };
    }
    macro_rules! floats {
        ($t:ty, $f:expr) => {
            Uniques::of(x.flat::<$t>()?.iter().map(|&v| float_key($f(v))))
        };
    }
    Ok(match x.dtype() {
        DataType::Float => floats!(f32, f64::from),
        DataType::Double => floats!(f64, |v| v),
        DataType::Half => floats!(half::f16, half::f16::to_f64),
        DataType::BFloat16 => floats!(half::bf16, half::bf16::to_f64),
        DataType::Int8 => ints!(i8),
        DataType::Int16 => ints!(i16),
        DataType::Int32 => ints!(i32),
        DataType::Int64 => ints!(i64),
        DataType::UInt8 => ints!(u8),
        DataType::UInt16 => ints!(u16),
        DataType::UInt32 => ints!(u32),
        DataType::UInt64 => ints!(u64),
        DataType::Bool => Uniques::of(x.flat::<bool>()?.iter().map(|&v| Some(v))),
        DataType::String => Uniques::of(x.strings()?.iter().map(|v| Some(v.as_slice()))),
        dt => {
            return Err(Status::internal(format!(
                "Unique has no CPU implementation for dtype {dt}"
            )))
        }
    })
}

/// `dst[i] = src[positions[i]]`.
struct Pick<'a> {
    positions: &'a [usize],
}

impl MoveElements for Pick<'_> {
    fn run<T: Carrier>(&self, pool: &ThreadPool, srcs: &[&[T]], dst: &mut [T]) {
        let src = srcs[0];
        for_each_chunk(pool, dst, 1, 8, |start, chunk| {
            for (d, &p) in chunk.iter_mut().zip(&self.positions[start..]) {
                d.clone_from(&src[p]);
            }
        });
    }
}

/// Sets output `i` (int32 or int64, by `out_idx`) to the vector `values`.
fn set_index_output(ctx: &mut OpKernelContext<'_>, i: usize, values: &[usize]) -> Result<()> {
    let shape = TensorShape::new(&[values.len() as i64])?;
    let dtype = ctx.output_type(i);
    let out = ctx.allocate_output(i, shape)?;
    match dtype {
        DataType::Int32 => {
            for (o, &v) in out.flat_mut::<i32>()?.iter_mut().zip(values) {
                *o = v as i32;
            }
        }
        _ => {
            for (o, &v) in out.flat_mut::<i64>()?.iter_mut().zip(values) {
                *o = v as i64;
            }
        }
    }
    Ok(())
}

/// `Unique` (outputs `y`, `idx`) and `UniqueWithCounts` (and `count`).
struct UniqueOp {
    with_counts: bool,
}

impl CreateKernel for UniqueOp {
    fn create(ctx: &OpKernelConstruction<'_>) -> Result<Self> {
        Ok(UniqueOp {
            with_counts: ctx.output_types().len() == 3,
        })
    }
}

impl OpKernel for UniqueOp {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let x = ctx.input(0).clone();
        ensure!(
            x.num_elements() <= i32::MAX as usize,
            InvalidArgument,
            "unique does not support input tensors larger than {} elements",
            i32::MAX
        );
        ensure!(
            x.rank() == 1,
            InvalidArgument,
            "unique expects a 1D vector."
        );
        let u = uniques(&x)?;
        let shape = TensorShape::new(&[u.first.len() as i64])?;
        move_to_output(
            ctx,
            0,
            &[&x],
            shape,
            &Pick {
                positions: &u.first,
            },
        )?;
        set_index_output(ctx, 1, &u.idx)?;
        if self.with_counts {
            set_index_output(ctx, 2, &u.count)?;
        }
        Ok(())
    }
}

/// The `T` of TensorFlow's `Unique` CPU kernels: `TF_CALL_REAL_NUMBER_TYPES`,
/// string and bool.
fn unique_types() -> Vec<DataType> {
    types(&[REAL_KERNEL_TYPES, &[DataType::String, DataType::Bool]])
}

register_kernel!(
    KernelDefBuilder::new("Unique")
        .type_constraint_list("T", &unique_types())
        .type_constraint_list("out_idx", INDEX_TYPES),
    UniqueOp
);
register_kernel!(
    KernelDefBuilder::new("UniqueWithCounts")
        .type_constraint_list("T", &unique_types())
        .type_constraint_list("out_idx", INDEX_TYPES),
    UniqueOp
);

// ---------------------------------------------------------------------------
// CPU kernel of EditDistance
// ---------------------------------------------------------------------------

/// The Levenshtein distance between `a` and `b` (insertions, deletions and
/// substitutions cost 1; elements compare with `==`, so a NaN matches
/// nothing), in O(|a|·|b|) time and O(|b|) memory.
fn levenshtein<T: PartialEq>(a: &[T], b: &[T]) -> usize {
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, x) in a.iter().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, y) in b.iter().enumerate() {
            let substitute = diagonal + usize::from(x != y);
            diagonal = row[j + 1];
            row[j + 1] = substitute.min(diagonal + 1).min(row[j] + 1);
        }
    }
    row[b.len()]
}

/// One sparse operand of `EditDistance`: its index rows (`rank` columns)
/// and shape.
struct SparseSeqs<'a> {
    indices: &'a [i64],
    rank: usize,
}

impl SparseSeqs<'_> {
    /// The groups: runs of consecutive entries with the same leading
    /// `rank - 1` indices (TensorFlow's `SparseTensor::group`, which
    /// assumes row-major order and does not sort), as (key, entries).
    fn groups(&self) -> Vec<(&[i64], std::ops::Range<usize>)> {
        let mut out: Vec<(&[i64], std::ops::Range<usize>)> = Vec::new();
        for (i, row) in self.indices.chunks_exact(self.rank).enumerate() {
            let key = &row[..self.rank - 1];
            match out.last_mut() {
                Some((k, r)) if *k == key => r.end = i + 1,
                _ => out.push((key, i..i + 1)),
            }
        }
        out
    }
}

/// `EditDistance`: for every group of the leading dimensions, the edit
/// distance between the hypothesis and truth sequences (normalized by the
/// truth's length when `normalize`).
struct EditDistanceOp {
    normalize: bool,
}

impl CreateKernel for EditDistanceOp {
    fn create(ctx: &OpKernelConstruction<'_>) -> Result<Self> {
        Ok(EditDistanceOp {
            normalize: ctx.get_attr("normalize")?,
        })
    }
}

/// TensorFlow's shape checks of `EditDistance`'s six inputs, in its order
/// and with its messages.
fn validate_edit_distance_inputs(x: &[Tensor]) -> Result<()> {
    let (hi, hv, hs, ti, tv, ts) = (&x[0], &x[1], &x[2], &x[3], &x[4], &x[5]);
    for (t, name, rank, what) in [
        (hi, "hypothesis_indices", 2, "matrix"),
        (ti, "truth_indices", 2, "matrix"),
        (hv, "hypothesis_values", 1, "vector"),
        (tv, "truth_values", 1, "vector"),
        (hs, "hypothesis_shape", 1, "vector"),
        (ts, "truth_shape", 1, "vector"),
    ] {
        ensure!(
            t.rank() == rank,
            InvalidArgument,
            "{name} should be a {what}, but got shape: {}",
            fmt_shape(t.dims())
        );
    }
    let mismatch = |a: &str, b: &str, x: &Tensor, y: &Tensor| {
        Status::invalid_argument(format!(
            "Expected {a} == {b}, their shapes are: {} and {}",
            fmt_shape(x.dims()),
            fmt_shape(y.dims())
        ))
    };
    let n = |t: &Tensor| t.num_elements() as i64;
    if n(hv) != hi.dims()[0] {
        return Err(mismatch(
            "hypothesis_values.NumElements",
            "#rows(hypothesis_indices)",
            hv,
            hi,
        ));
    }
    if n(hs) != hi.dims()[1] {
        return Err(mismatch(
            "hypothesis_shape.NumElements",
            "#cols(hypothesis_indices)",
            hs,
            hi,
        ));
    }
    ensure!(
        n(ts) >= 2,
        InvalidArgument,
        "Input SparseTensors must have rank at least 2, but truth_shape rank is: {}",
        n(ts)
    );
    if n(tv) != ti.dims()[0] {
        return Err(mismatch(
            "truth_values.NumElements",
            "#rows(truth_indices)",
            tv,
            ti,
        ));
    }
    if n(ts) != ti.dims()[1] {
        return Err(mismatch(
            "truth_shape.NumElements",
            "#cols(truth_indices)",
            ts,
            ti,
        ));
    }
    if n(ts) != n(hs) {
        return Err(Status::invalid_argument(format!(
            "Expected truth and hypothesis to have matching ranks, but their shapes are: {} and {}",
            fmt_shape(ts.dims()),
            fmt_shape(hs.dims())
        )));
    }
    Ok(())
}

impl OpKernel for EditDistanceOp {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let x: Vec<Tensor> = (0..6).map(|i| ctx.input(i).clone()).collect();
        validate_edit_distance_inputs(&x)?;
        let h_shape = TensorShape::new(x[2].flat::<i64>()?)?;
        let t_shape = TensorShape::new(x[5].flat::<i64>()?)?;
        let rank = h_shape.rank();
        let out_dims: Vec<i64> = (0..rank - 1)
            .map(|d| h_shape.dims()[d].max(t_shape.dims()[d]))
            .collect();
        let out_shape = TensorShape::new(&out_dims)?;
        let elements = out_shape.num_elements();
        ensure!(
            elements > 0,
            InvalidArgument,
            "Got output shape {} which has 0 elements",
            fmt_shape(&out_dims)
        );
        let mut strides = vec![1i128; out_dims.len()];
        for d in (0..out_dims.len().saturating_sub(1)).rev() {
            strides[d] = strides[d + 1] * i128::from(out_dims[d + 1]);
        }
        let hyp = SparseSeqs {
            indices: x[0].flat::<i64>()?,
            rank,
        };
        let truth = SparseSeqs {
            indices: x[3].flat::<i64>()?,
            rank,
        };
        let distances = match x[1].dtype() {
            DataType::String => merge_distances(
                &hyp.groups(),
                &truth.groups(),
                x[1].strings()?,
                x[4].strings()?,
                self.normalize,
            ),
            dt => numeric_bool_types!(dt, T => merge_distances(
                &hyp.groups(),
                &truth.groups(),
                x[1].flat::<T>()?,
                x[4].flat::<T>()?,
                self.normalize,
            ), return Err(opforge_ops_base::types::unsupported(ctx, dt))),
        };
        let out = ctx.allocate_output(0, out_shape)?;
        let out = out.flat_mut::<f32>()?;
        out.fill(0.0);
        for (key, value) in distances {
            let loc: i128 = key
                .iter()
                .zip(&strides)
                .map(|(&g, &s)| i128::from(g) * s)
                .sum();
            if loc < 0 || loc >= elements as i128 {
                return Err(Status::internal(format!(
                    "Got an inner product {loc} which would require writing to outside of the \
                     buffer for the output tensor (max elements {elements})"
                )));
            }
            out[loc as usize] = value;
        }
        Ok(())
    }
}

/// Walks the hypothesis and truth groups in step, as TensorFlow does (the
/// smaller key first, by lexicographic order), giving each group key its
/// value: the distance where both have the group, the hypothesis length
/// (infinity when normalized) where only the hypothesis has it, and the
/// truth length (1 when normalized) where only the truth has it.
fn merge_distances<'k, T: PartialEq>(
    hyp: &[(&'k [i64], std::ops::Range<usize>)],
    truth: &[(&'k [i64], std::ops::Range<usize>)],
    hv: &[T],
    tv: &[T],
    normalize: bool,
) -> Vec<(&'k [i64], f32)> {
    let hyp_only = |n: usize| {
        if normalize && n != 0 {
            f32::INFINITY
        } else {
            n as f32
        }
    };
    let truth_only = |n: usize| if normalize { 1.0 } else { n as f32 };
    let mut out = Vec::with_capacity(hyp.len().max(truth.len()));
    let (mut h, mut t) = (hyp.iter().peekable(), truth.iter().peekable());
    loop {
        match (h.peek(), t.peek()) {
            (Some((hk, hr)), Some((tk, tr))) if hk == tk => {
                let d = levenshtein(&tv[tr.clone()], &hv[hr.clone()]) as f32;
                out.push((*hk, if normalize { d / tr.len() as f32 } else { d }));
                h.next();
                t.next();
            }
            (Some((hk, hr)), Some((tk, _))) if tk > hk => {
                out.push((*hk, hyp_only(hr.len())));
                h.next();
            }
            (_, Some((tk, tr))) => {
                out.push((*tk, truth_only(tr.len())));
                t.next();
            }
            (Some((hk, hr)), None) => {
                out.push((*hk, hyp_only(hr.len())));
                h.next();
            }
            (None, None) => return out,
        }
    }
}

register_kernel!(
    KernelDefBuilder::new("EditDistance")
        .type_constraint_list("T", &types(&[NUMERIC_BOOL_TYPES, &[DataType::String]])),
    EditDistanceOp
);
