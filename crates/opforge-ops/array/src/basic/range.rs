//! `Range` and `InvertPermutation`.

use super::*;
use opforge_ops_base::cpu::elem::{Int, Num, Ordered, RealFloat, Scalar, Wide};

// Range
// ---------------------------------------------------------------------------

/// `Range`.
pub fn range() -> OpDefBuilder {
    OpDefBuilder::new("Range")
        .input("start: Tidx")
        .input("limit: Tidx")
        .input("delta: Tidx")
        .output("output: Tidx")
        .attr(
            "Tidx: {bfloat16, half, float, double, int8, int16, int32, int64, uint16, uint32, \
             uint64} = DT_INT32",
        )
        .doc(
            "Creates a sequence of numbers.\n\n\
             This operation creates a sequence of numbers that begins at `start` and\n\
             extends by increments of `delta` up to but not including `limit`.",
        )
}

pub(super) fn too_many_range_values() -> Status {
    Status::invalid_argument(format!(
        "Requires ((limit - start) / delta) <= {}",
        i64::MAX
    ))
}

/// The number of elements of `range(start, limit, delta)` of an integer
/// type (TensorFlow's `RangeSize`), computed exactly.
pub(super) fn int_range_count<T: Int>(start: T, limit: T, delta: T) -> Result<i64> {
    let span = (limit.to_i128() - start.to_i128()).abs();
    let step = delta.to_i128().abs();
    i64::try_from((span + step - 1) / step).map_err(|_| too_many_range_values())
}

/// The number of elements of `range(start, limit, delta)` of a float type:
/// `ceil(|(limit - start) / delta|)` computed in the type (`half` and
/// `bfloat16` rounding each operation).
pub(super) fn float_range_count<T: RealFloat>(start: T, limit: T, delta: T) -> Result<i64> {
    let n = limit.sub(start).div(delta).abs().ceil().to_f64();
    if n.is_nan() || n > i64::MAX as f64 {
        return Err(too_many_range_values());
    }
    Ok(n as i64)
}

/// A value of `Range`'s messages, as TensorFlow prints it.
fn show<T: Scalar>(v: T) -> String {
    match v.widen() {
        Wide::Int(v) => v.to_string(),
        Wide::UInt(v) => v.to_string(),
        Wide::F32(v) => fmt_float(v as f64, true),
        Wide::F64(v) => fmt_float(v, false),
        other => format!("{other:?}"),
    }
}

/// How `Range` counts the values of its element type.
type RangeCount<T> = fn(T, T, T) -> Result<i64>;

pub(super) struct RangeOp;

pub(super) fn range_typed<T: Num + Ordered>(
    ctx: &mut OpKernelContext<'_>,
    count: RangeCount<T>,
) -> Result<()> {
    let mut vals = [T::default(); 3];
    for (i, name) in ["start", "limit", "delta"].iter().enumerate() {
        let t = ctx.input(i);
        ensure!(
            is_legacy_scalar(t),
            InvalidArgument,
            "{name} must be a scalar, not shape {}",
            fmt_shape(t.dims())
        );
        vals[i] = t.flat::<T>()?[0];
    }
    let [start, limit, delta] = vals;
    ensure!(
        delta != T::ZERO,
        InvalidArgument,
        "Requires delta != 0: {}",
        show(delta)
    );
    if delta > T::ZERO {
        ensure!(
            start <= limit,
            InvalidArgument,
            "Requires start <= limit when delta > 0: {}/{}",
            show(start),
            show(limit)
        );
    } else {
        ensure!(
            start >= limit,
            InvalidArgument,
            "Requires start >= limit when delta < 0: {}/{}",
            show(start),
            show(limit)
        );
    }
    let n = count(start, limit, delta)?;
    let out = ctx.allocate_output(0, TensorShape::new(&[n])?)?;
    // `out[i] = start + i * delta`, accumulated as TensorFlow does.
    let mut v = start;
    for o in out.flat_mut::<T>()? {
        *o = v;
        v = v.add(delta);
    }
    Ok(())
}

impl OpKernel for RangeOp {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let dtype = ctx.input_dtype(0);
        dispatch!(
            dtype,
            T => range_typed::<T>(ctx, int_range_count::<T>),
            [Int8, Int16, Int32, Int64, UInt16, UInt32, UInt64],
            dispatch!(
                dtype,
                T => range_typed::<T>(ctx, float_range_count::<T>),
                [BFloat16, Half, Float, Double],
                Err(Status::unimplemented(format!("Range of {dtype}")))
            )
        )
    }
}

/// `Range` with constant `start`, `limit` and `delta` of type `T`: a
/// vector of the number of values (TensorFlow's `RangeSize`).
pub(super) fn range_size<T: Num + Ordered>(
    c: &mut InferenceContext,
    [start, limit, delta]: [&Tensor; 3],
    count: RangeCount<T>,
) -> Result<()> {
    let scalar = |t: &Tensor| -> Result<T> {
        t.flat::<T>()?
            .first()
            .copied()
            .ok_or_else(|| Status::invalid_argument("start, limit and delta must be scalars"))
    };
    let (start, limit, delta) = (scalar(start)?, scalar(limit)?, scalar(delta)?);
    let zero = T::ZERO;
    ensure!(
        !(start > limit && delta > zero),
        InvalidArgument,
        "Requires start <= limit when delta > 0: {}/{}",
        show(start),
        show(limit)
    );
    ensure!(
        !(start < limit && delta < zero),
        InvalidArgument,
        "Requires start >= limit when delta < 0: {}/{}",
        show(start),
        show(limit)
    );
    ensure!(delta != zero, InvalidArgument, "Requires delta != 0");
    let n = count(start, limit, delta)?;
    let out = c.vector(n);
    c.set_output(0, out);
    Ok(())
}

/// `Range`: a vector, of known length when the three inputs are constant.
pub(super) fn range_shape(c: &mut InferenceContext) -> Result<()> {
    for (i, name) in ["start", "limit", "delta"].iter().enumerate() {
        let s = c.input(i);
        c.with_rank(s, 0)
            .map_err(|e| e.with_context(format!(" for '{name}'")))?;
    }
    let dtype: DataType = c.get_attr("Tidx")?;
    let (Some(start), Some(limit), Some(delta)) = (
        c.input_tensor(0).cloned(),
        c.input_tensor(1).cloned(),
        c.input_tensor(2).cloned(),
    ) else {
        let out = c.vector(-1);
        c.set_output(0, out);
        return Ok(());
    };
    let inputs = [&start, &limit, &delta];
    dispatch!(
        dtype,
        T => range_size::<T>(c, inputs, int_range_count::<T>),
        [Int8, Int16, Int32, Int64, UInt16, UInt32, UInt64],
        dispatch!(
            dtype,
            T => range_size::<T>(c, inputs, float_range_count::<T>),
            [BFloat16, Half, Float, Double],
            Err(Status::invalid_argument(format!("Unsupported dtype{}", dtype as i32)))
        )
    )
}

register_op!(range().set_shape_fn(range_shape));
register_kernel!(
    KernelDefBuilder::new("Range")
        .type_constraint_list(
            "Tidx",
            &[
                DataType::BFloat16,
                DataType::Half,
                DataType::Float,
                DataType::Double,
                DataType::Int8,
                DataType::Int16,
                DataType::Int32,
                DataType::Int64,
                DataType::UInt16,
                DataType::UInt32,
                DataType::UInt64,
            ]
        )
        .host_memory("start")
        .host_memory("limit")
        .host_memory("delta"),
    fn = |_| Ok(Box::new(RangeOp))
);

// ---------------------------------------------------------------------------
// InvertPermutation
// ---------------------------------------------------------------------------

/// `InvertPermutation`.
pub fn invert_permutation() -> OpDefBuilder {
    OpDefBuilder::new("InvertPermutation")
        .input("x: T")
        .output("y: T")
        .attr(format!("T: {{{INDEX_SPEC}}} = DT_INT32"))
        .doc(
            "Computes the inverse permutation of a tensor.\n\n\
             `y[x[i]] = i for i in [0, 1, ..., len(x) - 1]`. The values must be a\n\
             permutation of `0 .. len(x) - 1`.",
        )
}

pub(super) struct InvertPermutationOp;

impl OpKernel for InvertPermutationOp {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let x = ctx.input(0);
        ensure!(
            x.rank() == 1,
            InvalidArgument,
            "invert_permutation expects a 1D vector."
        );
        let n = x.num_elements();
        ensure!(
            n < i32::MAX as usize,
            InvalidArgument,
            "permutation of nonnegative int32s must have <= int32 max elements"
        );
        let values = index_values(x, "x")?;
        let mut inverse = vec![-1i64; n];
        for (i, &d) in values.iter().enumerate() {
            ensure!(
                d >= 0 && (d as usize) < n,
                InvalidArgument,
                "{d} is not between 0 and {n}"
            );
            let slot = &mut inverse[d as usize];
            ensure!(
                *slot == -1,
                InvalidArgument,
                "{d} is duplicated in the input."
            );
            *slot = i as i64;
        }
        let out = index_tensor(ctx.output_type(0), &[n as i64], &inverse)?;
        ctx.set_output(0, out)
    }
}

/// `InvertPermutation`: the input vector's shape.
pub(super) fn invert_permutation_shape(c: &mut InferenceContext) -> Result<()> {
    let x = c.input(0);
    let x = c.with_rank(x, 1)?;
    c.set_output(0, x);
    Ok(())
}

register_op!(invert_permutation().set_shape_fn(invert_permutation_shape));
register_kernel!(
    KernelDefBuilder::new("InvertPermutation").type_constraint_list("T", INDEX_TYPES),
    fn = |_| Ok(Box::new(InvertPermutationOp))
);
