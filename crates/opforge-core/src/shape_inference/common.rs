//! Shape functions many ops share (TensorFlow's `common_shape_fns`).

use super::{DimensionHandle, InferenceContext, ShapeHandle};
use crate::{DataType, Result, Status};

/// Output 0 has input 0's shape (the same handle), and the shapes and
/// dtypes input 0 holds if it is a resource (TensorFlow's `UnchangedShape`).
pub fn unchanged_shape(c: &mut InferenceContext) -> Result<()> {
    let s = c.input(0);
    c.set_output(0, s);
    if let Some(data) = c.input_handle_shapes_and_types(0).map(<[_]>::to_vec) {
        c.set_output_handle_shapes_and_types(0, data);
    }
    Ok(())
}

/// Every output has an unknown shape.
pub fn unknown_shape(c: &mut InferenceContext) -> Result<()> {
    for i in 0..c.num_outputs() {
        let s = c.unknown_shape();
        c.set_output(i, s);
    }
    Ok(())
}

/// Output 0 is a scalar.
pub fn scalar_shape(c: &mut InferenceContext) -> Result<()> {
    let s = c.scalar();
    c.set_output(0, s);
    Ok(())
}

/// The op has no outputs.
pub fn no_outputs(_: &mut InferenceContext) -> Result<()> {
    Ok(())
}

/// The NumPy broadcast of two shapes, keeping input dim handles where the
/// output dim is an input's (TensorFlow's `BroadcastBinaryOpOutputShapeFnHelper`).
/// Without `incompatible_shape_error`, incompatible shapes give an unknown
/// shape (or a scalar) instead of an error.
pub fn broadcast_shapes(
    c: &mut InferenceContext,
    x: ShapeHandle,
    y: ShapeHandle,
    incompatible_shape_error: bool,
) -> Result<ShapeHandle> {
    let (Some(rx), Some(ry)) = (c.rank(x), c.rank(y)) else {
        return Ok(c.unknown_shape());
    };
    let rank = rx.max(ry);
    let one = if rx != ry { Some(c.make_dim(1)) } else { None };
    let mut dims: Vec<DimensionHandle> = Vec::with_capacity(rank);
    for i in 0..rank {
        let dx = if i < rank - rx {
            one.expect("ranks differ")
        } else {
            c.dims(x).expect("known")[i - (rank - rx)]
        };
        let y_is_one = i < rank - ry;
        let dy = if y_is_one {
            one.expect("ranks differ")
        } else {
            c.dims(y).expect("known")[i - (rank - ry)]
        };
        let (vx, vy) = (c.raw_value(dx), c.raw_value(dy));
        if vx < 0 || vy < 0 {
            if vx > 1 {
                if !incompatible_shape_error {
                    return Ok(c.unknown_shape());
                }
                dims.push(dx);
            } else if vy > 1 {
                if !incompatible_shape_error {
                    return Ok(c.unknown_shape());
                }
                dims.push(dy);
            } else if vx == 1 {
                dims.push(dy);
            } else if vy == 1 || dx == dy {
                dims.push(dx);
            } else if vx < 0 && vy < 0 {
                dims.push(c.unknown_dim());
            } else {
                if !incompatible_shape_error {
                    return Ok(c.unknown_shape());
                }
                dims.push(c.unknown_dim());
            }
        } else if vx == 1 || vy == 1 {
            if vx == 1 && !y_is_one {
                dims.push(dy);
            } else {
                dims.push(dx);
            }
        } else {
            match c.merge_dim(dx, dy) {
                Ok(d) => dims.push(d),
                Err(_) if !incompatible_shape_error => return Ok(c.scalar()),
                Err(e) => return Err(e),
            }
        }
    }
    Ok(c.make_shape_from_dims(dims))
}

/// Output 0 is the broadcast of inputs 0 and 1 (binary elementwise ops).
pub fn broadcast_binary_op_shape(c: &mut InferenceContext) -> Result<()> {
    let (x, y) = (c.input(0), c.input(1));
    let out = broadcast_shapes(c, x, y, true)?;
    c.set_output(0, out);
    Ok(())
}

/// `MatMul`: `[m, k] x [k, n] -> [m, n]`, with `transpose_a`/`transpose_b`.
pub fn matmul_shape(c: &mut InferenceContext) -> Result<()> {
    let out = matrix_product_shape(c, 0, 1)?;
    c.set_output(0, out);
    Ok(())
}

/// The shape of `MatMul(a, b)` for inputs `a` and `b` of this node, with
/// its `transpose_a`/`transpose_b` attrs: both matrices, inner dimensions
/// equal (for ops that take a matrix product's operands, such as a fused
/// update).
pub fn matrix_product_shape(c: &mut InferenceContext, a: usize, b: usize) -> Result<ShapeHandle> {
    let (a0, b0) = (c.input(a), c.input(b));
    let a = c.with_rank(a0, 2)?;
    let b = c.with_rank(b0, 2)?;
    let ta: bool = c.get_attr("transpose_a")?;
    let tb: bool = c.get_attr("transpose_b")?;
    let rows = c.dim(a, if ta { 1 } else { 0 });
    let cols = c.dim(b, if tb { 0 } else { 1 });
    let inner_a = c.dim(a, if ta { 0 } else { 1 });
    let inner_b = c.dim(b, if tb { 1 } else { 0 });
    c.merge_dim(inner_a, inner_b)?;
    Ok(c.matrix(rows, cols))
}

/// `BatchMatMulV2`: broadcast batch dims, then a matmul of the last two dims
/// (`adj_x`/`adj_y` swap them).
pub fn batch_matmul_v2_shape(c: &mut InferenceContext) -> Result<()> {
    let (a0, b0) = (c.input(0), c.input(1));
    let a = c.with_rank_at_least(a0, 2)?;
    let b = c.with_rank_at_least(b0, 2)?;
    let adj_x: bool = c.get_attr("adj_x")?;
    let adj_y: bool = c.get_attr("adj_y")?;
    let rows = c.dim(a, if adj_x { -1 } else { -2 });
    let cols = c.dim(b, if adj_y { -2 } else { -1 });
    let inner_a = c.dim(a, if adj_x { -2 } else { -1 });
    let inner_b = c.dim(b, if adj_y { -1 } else { -2 });
    c.merge_dim(inner_a, inner_b)?;
    let a_batch = c.subshape(a, 0, Some(-2))?;
    let b_batch = c.subshape(b, 0, Some(-2))?;
    let batch = broadcast_shapes(c, a_batch, b_batch, true)?;
    let m = c.matrix(rows, cols);
    let out = c.concatenate(batch, m)?;
    c.set_output(0, out);
    Ok(())
}

/// Reductions (`Sum`, `Max`, ...): input 0 reduced over the constant axes in
/// input 1, keeping size-1 dims with `keep_dims`. Unknown axes give an
/// unknown shape (of the input's rank with `keep_dims`).
pub fn reduction_shape(c: &mut InferenceContext) -> Result<()> {
    let input = c.input(0);
    let idx = c.input(1);
    c.with_rank_at_most(idx, 1)?;
    let keep_dims: bool = c.get_attr("keep_dims")?;
    let (Some(t), Some(rank)) = (c.input_tensor(1).cloned(), c.rank(input)) else {
        let out = match (keep_dims, c.rank(input)) {
            (true, Some(r)) => c.unknown_shape_of_rank(r),
            _ => c.unknown_shape(),
        };
        c.set_output(0, out);
        return Ok(());
    };
    let axes: Vec<i64> = match t.dtype() {
        DataType::Int32 => t.flat::<i32>()?.iter().map(|&v| v as i64).collect(),
        DataType::Int64 => t.flat::<i64>()?.to_vec(),
        _ => {
            return Err(Status::invalid_argument(
                "reduction_indices can only be int32 or int64",
            ))
        }
    };
    let r = rank as i64;
    let mut reduced = vec![false; rank];
    for a in axes {
        if a < -r || a >= r {
            return Err(Status::invalid_argument(format!(
                "Invalid reduction dimension {a} for input with {rank} dimensions."
            )));
        }
        reduced[if a < 0 { a + r } else { a } as usize] = true;
    }
    let mut dims = Vec::with_capacity(rank);
    for (i, &red) in reduced.iter().enumerate() {
        if !red {
            dims.push(c.dim(input, i as i64));
        } else if keep_dims {
            dims.push(c.make_dim(1));
        }
    }
    let out = c.make_shape_from_dims(dims);
    c.set_output(0, out);
    Ok(())
}

/// Concatenation of inputs `[start, end)` along the constant axis in input
/// `axis_index` (TensorFlow's `ConcatShapeHelper`).
pub fn concat_shape_helper(
    c: &mut InferenceContext,
    start: usize,
    end: usize,
    axis_index: usize,
) -> Result<()> {
    let axis_in = c.input(axis_index);
    c.with_rank(axis_in, 0)?;
    let Some(t) = c.input_tensor(axis_index).cloned() else {
        let rank = (start..end).find_map(|i| c.rank(c.input(i)));
        match rank {
            None => {
                let u = c.unknown_shape();
                c.set_output(0, u);
            }
            Some(0) => {
                return Err(Status::invalid_argument(
                    "Can't concatenate scalars (use tf.stack instead)",
                ))
            }
            Some(r) => {
                for i in start..end {
                    let s = c.input(i);
                    c.with_rank(s, r)?;
                }
                let out = c.unknown_shape_of_rank(r);
                c.set_output(0, out);
            }
        }
        return Ok(());
    };
    let axis: i64 = match t.dtype() {
        DataType::Int32 => t.flat::<i32>()?[0] as i64,
        DataType::Int64 => t.flat::<i64>()?[0],
        other => {
            return Err(Status::invalid_argument(format!(
                "axis must be int32 or int64, not {other}"
            )))
        }
    };
    // No shape has more than MAX_RANK dims, so a larger axis can never be
    // in range (and `-axis` / `axis + 1` would overflow at the i64 limits).
    let min_rank = if axis < 0 {
        axis.unsigned_abs()
    } else {
        axis.unsigned_abs() + 1
    };
    if min_rank > super::MAX_RANK as u64 {
        return Err(Status::invalid_argument(format!(
            "concat axis {axis} is out of range: a shape has at most {} dimensions",
            super::MAX_RANK
        )));
    }
    let min_rank = min_rank as usize;
    let parts = |c: &mut InferenceContext,
                 i: usize|
     -> Result<(ShapeHandle, DimensionHandle, ShapeHandle)> {
        let s = c.input(i);
        let s = c.with_rank_at_least(s, min_rank)?;
        let before = c.subshape(s, 0, Some(axis))?;
        let middle = c.dim(s, axis);
        let after = if axis == -1 {
            c.scalar()
        } else {
            c.subshape(s, axis + 1, None)?
        };
        Ok((before, middle, after))
    };
    let (mut before, mut middle, mut after) = parts(c, end - 1)?;
    for i in (start..end - 1).rev() {
        let (b, m, a) = parts(c, i)?;
        before = c.merge(b, before)?;
        middle = c.add(middle, m)?;
        after = c.merge(a, after)?;
    }
    let mid = c.vector(middle);
    let s = c.concatenate(before, mid)?;
    let s = c.concatenate(s, after)?;
    c.set_output(0, s);
    Ok(())
}

/// `ConcatV2`: values first, the axis last.
pub fn concat_v2_shape(c: &mut InferenceContext) -> Result<()> {
    let n = c.num_inputs();
    concat_shape_helper(c, 0, n - 1, n - 1)
}

/// `Concat`: the axis first, then the values.
pub fn concat_shape(c: &mut InferenceContext) -> Result<()> {
    let n = c.num_inputs();
    concat_shape_helper(c, 1, n, 0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{OpDefBuilder, Tensor};

    /// Fuzz finding (shape_inference): a constant `concat_dim` of i64::MIN
    /// overflowed `-axis` (and i64::MAX `axis + 1` on an input of unknown
    /// rank); an axis beyond the maximum rank is out of range.
    #[test]
    fn a_concat_axis_beyond_the_maximum_rank_is_invalid() {
        let op = OpDefBuilder::new("Concat")
            .input("concat_dim: int32")
            .input("values: N * T")
            .output("output: T")
            .attr("N: int >= 2")
            .attr("T: type")
            .finalize()
            .unwrap();
        for (axis, shapes) in [
            (
                i64::MIN,
                vec![Some(vec![]), Some(vec![-1]), Some(vec![1, 0])],
            ),
            (i64::MAX, vec![Some(vec![]), None, None]),
            (-255, vec![Some(vec![]), None, None]),
            (254, vec![Some(vec![]), None, None]),
        ] {
            let mut c = InferenceContext::new(&op, "c", &Default::default(), &shapes, 1);
            c.set_input_tensor(0, Tensor::scalar(axis));
            let e = concat_shape(&mut c).unwrap_err();
            assert_eq!(e.code(), crate::Code::InvalidArgument);
            assert!(
                e.message().contains(&format!(
                    "concat axis {axis} is out of range: a shape has at most 254 dimensions"
                )),
                "{e}"
            );
        }
        // The largest axes a shape can have are still fine.
        for axis in [253i64, -254] {
            let mut c = InferenceContext::new(
                &op,
                "c",
                &Default::default(),
                &[Some(vec![]), None, None],
                1,
            );
            c.set_input_tensor(0, Tensor::scalar(axis));
            concat_shape(&mut c).unwrap();
        }
    }
}
