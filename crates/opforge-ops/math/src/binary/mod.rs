//! Elementwise binary math ops with NumPy broadcasting (`Add`, `AddV2`,
//! `Sub`, `Mul`, `Div`, `RealDiv`, `FloorDiv`, `FloorMod`, `Maximum`,
//! `Minimum`, `Pow`, `SquaredDifference`), comparisons (`Equal`, `NotEqual`,
//! `Less`, `LessEqual`, `Greater`, `GreaterEqual`), `LogicalAnd`/`LogicalOr`,
//! `AddN`, and the selects `Select` and `SelectV2`, with TensorFlow 2.21's
//! OpDefs and CPU semantics.
//!
//! Integer `Div`/`RealDiv` truncate toward zero, `FloorDiv` floors and
//! `FloorMod` takes the sign of the divisor; a zero divisor anywhere in `y`
//! (when the output is not empty) is `InvalidArgument: Integer division by
//! zero`, and `MIN / -1` wraps to `MIN` as TensorFlow does. Integer `Pow`
//! with a negative exponent is `InvalidArgument: Integers to negative integer
//! powers are not allowed`. `Maximum`/`Minimum` propagate NaN.
//!
//! `Broadcast3` (three-way broadcasting, used by `SelectV2`) is
//! `pub(crate)` for other kernels of the crate.

use opforge_core::kernel::{
    FInplaceOption, KernelDefBuilder, OpKernel, OpKernelConstruction, OpKernelContext,
    OutputRequest, RequestSupport,
};
use opforge_core::shape_inference::common::{self as shape_common, broadcast_binary_op_shape};
use opforge_core::shape_inference::{InferenceContext, ShapeAndType};
use opforge_core::{
    ensure, register_kernel, register_op, DataType, Element, OpDefBuilder, Result, Status, Tensor,
    TensorShape,
};
use opforge_ops_base::cpu::broadcast::{
    binary_map, binary_same, binary_same_add, broadcast_shapes, broadcast_zip, BroadcastPlan,
};
use opforge_ops_base::cpu::elem::{
    Float, Int, Num, Ordered, RealFloat, COST_CHEAP, COST_DIV, COST_TRANSCENDENTAL,
};
use opforge_ops_base::cpu::par::{chunks_in_shards, elementwise_shards};
use opforge_ops_base::types::unsupported;
use opforge_ops_base::types::{types, NUMERIC_BOOL_TYPES, NUMERIC_KERNEL_TYPES};
use opforge_ops_base::{
    float_complex_types, float_types, int_types, numeric_bool_types, numeric_types, real_types,
    signed_int_types,
};

/// The dtypes `Equal`/`NotEqual` and `Select`/`SelectV2` have CPU kernels
/// for: every numeric type, bool and string.
fn value_types() -> Vec<DataType> {
    types(&[NUMERIC_BOOL_TYPES, &[DataType::String]])
}

// ---------------------------------------------------------------------------
mod functions;

mod kernel;

mod add_n;

mod select;

// Shape functions (TensorFlow's math_ops.cc)
// ---------------------------------------------------------------------------

/// `Equal`/`NotEqual`: the broadcast of `x` and `y`; with
/// `incompatible_shape_error = false`, shapes that do not broadcast give an
/// unknown shape (or a scalar when both dims are known), as the kernel's
/// scalar result.
fn equality_shape(c: &mut InferenceContext) -> Result<()> {
    let (x, y) = (c.input(0), c.input(1));
    let incompatible_shape_error: bool = c.get_attr("incompatible_shape_error")?;
    let out = shape_common::broadcast_shapes(c, x, y, incompatible_shape_error)?;
    c.set_output(0, out);
    Ok(())
}

/// `AddN`: every input shape merged, from the last to the first; for
/// `variant` inputs, the shapes and dtypes their handles hold merged too.
fn add_n_shape(c: &mut InferenceContext) -> Result<()> {
    let n = c.num_inputs();
    ensure!(n >= 1, InvalidArgument, "AddN needs at least one input");
    let mut cur = c.input(n - 1);
    for i in (0..n - 1).rev() {
        let s = c.input(i);
        cur = c
            .merge(s, cur)
            .map_err(|e| e.append(format!("\n\tFrom merging shape {i} with other shapes.")))?;
    }
    c.set_output(0, cur);
    let dtype: DataType = c.get_attr("T")?;
    if dtype != DataType::Variant {
        return Ok(());
    }
    // As TensorFlow: the handle data of the first input (from the end) that
    // has some, merged with that of the inputs before it. Only the last
    // input's data seeds the merged result.
    let mut first: Option<Vec<ShapeAndType>> =
        c.input_handle_shapes_and_types(n - 1).map(<[_]>::to_vec);
    let mut cur: Vec<ShapeAndType> = first.clone().unwrap_or_default();
    for i in (0..n - 1).rev() {
        let Some(data_i) = c.input_handle_shapes_and_types(i).map(<[_]>::to_vec) else {
            continue;
        };
        let Some(data) = first.clone() else {
            first = Some(data_i);
            continue;
        };
        ensure!(
            data_i.len() == data.len(),
            InvalidArgument,
            "shapes_and_types[{i}].size() == {} != shapes_and_types[0].size() == {}",
            data_i.len(),
            data.len()
        );
        for (j, (a, b)) in data_i.iter().zip(&data).enumerate() {
            ensure!(
                a.dtype == b.dtype,
                InvalidArgument,
                "shapes_and_types[{i}][{j}].dtype() == {} != shapes_and_types[0][{j}].dtype == {}",
                a.dtype,
                b.dtype
            );
            // TensorFlow indexes its (possibly empty) merged list here, which
            // aborts when the last input had no handle data: an error instead.
            let Some(slot) = cur.get_mut(j) else {
                return Err(Status::invalid_argument(format!(
                    "AddN: input {} has no handle shapes and types to merge shapes_and_types[{i}][{j}] into",
                    n - 1
                )));
            };
            let merged = c.merge(a.shape, slot.shape).map_err(|e| {
                e.append(format!(
                    "\n\tFrom merging shapes_and_types[{i}][{j}].shape with shapes_and_types[0][{j}].shape"
                ))
            })?;
            if let Some(slot) = cur.get_mut(j) {
                slot.shape = merged;
            }
        }
    }
    if first.is_some() {
        c.set_output_handle_shapes_and_types(0, cur);
    }
    Ok(())
}

/// The selects: when both `t` and `e` carry handle data (resources,
/// variants), output 0 carries their merge.
fn merge_select_handle_data(c: &mut InferenceContext) -> Result<()> {
    let (Some(h1), Some(h2)) = (
        c.input_handle_shapes_and_types(1).map(<[_]>::to_vec),
        c.input_handle_shapes_and_types(2).map(<[_]>::to_vec),
    ) else {
        return Ok(());
    };
    ensure!(
        h1.len() == h2.len(),
        InvalidArgument,
        "Trying to merge handles pointing to different numbers of tensors."
    );
    let mut merged = Vec::with_capacity(h1.len());
    for (a, b) in h1.iter().zip(&h2) {
        ensure!(
            a.dtype == b.dtype,
            InvalidArgument,
            "Trying to merge handles pointing to different dtypes."
        );
        let shape = c.merge(a.shape, b.shape)?;
        merged.push(ShapeAndType {
            shape,
            dtype: a.dtype,
        });
    }
    c.set_output_handle_shapes_and_types(0, merged);
    Ok(())
}

/// `Select`: `t` and `e` merged; `condition` is a scalar, a vector of
/// `t`'s first dim (when `t` is at least a vector), or `t`'s shape.
fn select_shape(c: &mut InferenceContext) -> Result<()> {
    merge_select_handle_data(c)?;
    let (t, e) = (c.input(1), c.input(2));
    let mut data = c.merge(t, e)?;
    let cond = c.input(0);
    let (Some(cond_rank), Some(data_rank)) = (c.rank(cond), c.rank(data)) else {
        c.set_output(0, data);
        return Ok(());
    };
    if cond_rank == 0 {
        // A scalar condition picks all of `t` or all of `e`.
    } else if cond_rank != 1 || data_rank == 0 {
        // Not a vector (or `t` is a scalar): the condition has `t`'s shape.
        data = c.merge(data, cond)?;
    } else {
        // A vector condition picks rows of `t` / `e`.
        let rows = c.dim(data, 0);
        let v = c.vector(rows);
        c.merge(cond, v)?;
    }
    c.set_output(0, data);
    Ok(())
}

/// `SelectV2`: the broadcast of `condition` with the broadcast of `t` and `e`.
fn select_v2_shape(c: &mut InferenceContext) -> Result<()> {
    merge_select_handle_data(c)?;
    let (cond, t, e) = (c.input(0), c.input(1), c.input(2));
    let other = shape_common::broadcast_shapes(c, t, e, true)?;
    let out = shape_common::broadcast_shapes(c, cond, other, true)?;
    c.set_output(0, out);
    Ok(())
}

// ---- Gradients ----

/// The gradients of the binary ops, `AddN` and the selects, as TensorFlow's
/// `math_grad.py` defines them; broadcasting ops reduce their gradients to
/// their inputs' shapes with [`opforge_ops_base::grad::unbroadcast_grads`]. TensorFlow
/// conjugates `x` and `y` first for complex types; without a `Conj` op these
/// are written for real types.
mod gradients;

#[cfg(test)]
mod tests;
