//! `Unique`, `UniqueWithCounts` and `EditDistance`.
//!
//! `Unique` and `UniqueWithCounts` have TensorFlow's CPU kernels, for the
//! types it registers them for (the real number types, bool and string,
//! with `out_idx` int32 or int64); TensorFlow declares no gradient for
//! either (`array_grad.py` has none, and `Unique` has only integer-valued
//! outputs besides `y`), so none is registered here: autodiff reports "No
//! gradient defined" as TensorFlow's does. `EditDistance` has its OpDef and
//! shape function only (no CPU kernel yet).

use std::collections::HashMap;

use opforge_core::device::ThreadPool;
use opforge_core::kernel::{
    CreateKernel, KernelDefBuilder, OpKernel, OpKernelConstruction, OpKernelContext,
};
use opforge_core::shape_inference::common::unknown_shape;
use opforge_core::shape_inference::{DimensionHandle, InferenceContext};
use opforge_core::{ensure, register_kernel, register_op, DataType, OpDefBuilder, Result, Status};
use opforge_core::{Tensor, TensorShape};
use opforge_ops_base::args::int_values;
use opforge_ops_base::cpu::mover::{for_each_chunk, move_to_output, Carrier, MoveElements};
use opforge_ops_base::shape::*;
use opforge_ops_base::types::{types, INDEX_TYPES, REAL_KERNEL_TYPES};

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
