//! Array ops of TensorFlow's shape-inference corpus that opforge registers
//! with TensorFlow 2.21's exact OpDefs and TensorFlow's shape functions, but
//! without kernels yet: running one eagerly fails with TensorFlow's
//! "No OpKernel was registered to support Op ..." error. Graphs using them
//! can still be built, checked and shape-inferred.
//!
//! The ops: `BatchToSpace`, `BatchToSpaceND`, `Bitcast`, `CheckNumerics`,
//! `Concat`, `ConcatOffset`, `DepthToSpace`, `Diag`, `DiagPart`,
//! `EditDistance`, `ExtractImagePatches`, `Gather`, `GatherNd`,
//! `GuaranteeConst`, `ImmutableConst`, `MatrixBandPart`, `MatrixDiag`,
//! `MatrixDiagPart`, `MatrixSetDiag`, `MirrorPad`, `MirrorPadGrad`,
//! `RefIdentity`, `ReverseSequence`, `SpaceToBatch`, `SpaceToBatchND`,
//! `SpaceToDepth`, `StridedSliceGrad`, `Unique`, `UniqueWithCounts`,
//! `UnravelIndex` and `_ParallelConcatStart`. The quantization ops of the
//! corpus are in [`crate::quantize_extra`].
//!
//! The shape helpers here follow TensorFlow's `InferenceContext` exactly,
//! including which dimension handle a merge returns (see `InferenceContext::merge`).

use opforge_core::proto::TensorShapeProto;
use opforge_core::shape_inference::common::{concat_shape, unchanged_shape, unknown_shape};
use opforge_core::shape_inference::{DimensionHandle, InferenceContext, ShapeHandle};
use opforge_core::{register_op, DataType, OpDefBuilder, Result, Status, Tensor};
use opforge_ops_base::args::int_values;

// ---------------------------------------------------------------------------
// Shape helpers with TensorFlow's exact semantics.

/// A shape function.
pub(crate) type ShapeFnPtr = fn(&mut InferenceContext) -> Result<()>;

/// `f`, after checking that the node has at least `n` inputs (a node built
/// by hand may have fewer than the op declares; TensorFlow would crash).
pub(crate) fn with_inputs(
    n: usize,
    f: ShapeFnPtr,
) -> impl Fn(&mut InferenceContext) -> Result<()> + Send + Sync + 'static {
    move |c: &mut InferenceContext| {
        if c.num_inputs() < n {
            return Err(Status::invalid_argument(format!(
                "{} expects at least {n} inputs, got {}",
                c.op_def().name,
                c.num_inputs()
            )));
        }
        f(c)
    }
}

/// A rank read from a dimension value or attr, checked as TensorFlow's
/// `WithRank` checks it.
pub(crate) fn rank_arg(rank: i64) -> Result<usize> {
    if rank > i64::from(i32::MAX) {
        return Err(Status::invalid_argument("Rank cannot exceed kint32max"));
    }
    usize::try_from(rank)
        .map_err(|_| Status::invalid_argument(format!("Rank must be non-negative, got {rank}")))
}

/// TensorFlow's `ExplicitShape`: output 0 has the shape of attr `shape`.
pub(crate) fn explicit_shape(c: &mut InferenceContext) -> Result<()> {
    let shape: TensorShapeProto = c.get_attr("shape")?;
    let out = c.make_shape_from_proto(&shape)?;
    c.set_output(0, out);
    Ok(())
}

/// Value `i` of a constant index tensor, with a clear error instead of
/// TensorFlow's out-of-bounds read when the tensor is too short.
fn at(values: &[i64], i: usize, what: &str, want: usize) -> Result<i64> {
    values.get(i).copied().ok_or_else(|| {
        Status::invalid_argument(format!(
            "{what} must have at least {want} elements, but has {}",
            values.len()
        ))
    })
}

/// Checks that `t` is a `[rows, 2]` matrix (a paddings or crops value).
fn check_pairs(t: &Tensor, what: &str) -> Result<usize> {
    match t.dims() {
        &[rows, 2] => Ok(rows as usize),
        dims => Err(Status::invalid_argument(format!(
            "{what} must be a matrix with 2 columns, but has shape {}",
            opforge_ops_base::args::fmt_shape(dims)
        ))),
    }
}

/// TensorFlow's `PadShapeFn` (`Pad`, `PadV2`, `MirrorPad`): the input grown
/// by the constant paddings, or of the paddings' row count rank.
pub(crate) fn pad_shape(c: &mut InferenceContext) -> Result<()> {
    let p = c.input(1);
    let paddings = c.with_rank(p, 2)?;
    let cols = c.dim(paddings, 1);
    c.with_value(cols, 2)?;
    let mut input = c.input(0);
    let mut n_dim = c.dim(paddings, 0);
    if let Some(n) = c.value(n_dim) {
        input = c.with_rank(input, rank_arg(n)?)?;
    } else if let Some(r) = c.rank(input) {
        n_dim = c.with_value(n_dim, r as i64)?;
    }
    let Some(t) = c.input_tensor(1).cloned() else {
        let out = match c.value(n_dim) {
            Some(n) => c.unknown_shape_of_rank(n as usize),
            None => c.unknown_shape(),
        };
        c.set_output(0, out);
        return Ok(());
    };
    let num_dims = check_pairs(&t, "paddings")?;
    let input = c.with_rank(input, num_dims)?;
    c.with_value(n_dim, num_dims as i64)?;
    let values = int_values(&t, "paddings")?;
    let mut dims = Vec::with_capacity(num_dims);
    for i in 0..num_dims {
        let (pad0, pad1) = (values[2 * i], values[2 * i + 1]);
        if pad0 < 0 || pad1 < 0 {
            return Err(Status::invalid_argument("Paddings must be non-negative"));
        }
        let total = pad0.checked_add(pad1).ok_or_else(|| {
            Status::invalid_argument(format!("Paddings {pad0} + {pad1} overflow"))
        })?;
        let d = c.dim(input, i as i64);
        dims.push(c.add(d, total)?);
    }
    let out = c.make_shape_from_dims(dims);
    c.set_output(0, out);
    Ok(())
}

/// TensorFlow's `SetOutputShapeForReshape` (`Reshape`, `QuantizedReshape`):
/// the shape in input 1, with its one unknown dim inferred from input 0's
/// element count where it can be (and the element counts checked).
pub(crate) fn reshape_shape(c: &mut InferenceContext) -> Result<()> {
    let input = c.input(0);
    let mut out = c.make_shape_from_shape_tensor(1)?;
    let (Some(out_dims), Some(in_dims)) = (
        c.dims(out).map(<[DimensionHandle]>::to_vec),
        c.dims(input).map(<[DimensionHandle]>::to_vec),
    ) else {
        c.set_output(0, out);
        return Ok(());
    };
    let mut too_many_unknown = false;
    // The product of the known dims, and the index of the one unknown dim.
    let mut known_elements = |c: &mut InferenceContext,
                              s: ShapeHandle,
                              dims: &[DimensionHandle]|
     -> Result<(DimensionHandle, Option<usize>)> {
        let mut known = c.num_elements_dim(s);
        let mut unknown_idx = None;
        if c.value(known).is_none() {
            known = c.make_dim(1i64);
            for (i, &d) in dims.iter().enumerate() {
                if c.value(d).is_none() {
                    if unknown_idx.is_some() {
                        too_many_unknown = true;
                        break;
                    }
                    unknown_idx = Some(i);
                } else {
                    known = c.multiply(known, d)?;
                }
            }
        }
        Ok((known, unknown_idx))
    };
    let (known_out, out_unknown) = known_elements(c, out, &out_dims)?;
    let (known_in, in_unknown) = known_elements(c, input, &in_dims)?;
    if !too_many_unknown {
        let (n_in, n_out) = (c.raw_value(known_in), c.raw_value(known_out));
        match (in_unknown, out_unknown) {
            (None, None) if n_in != n_out => {
                return Err(Status::invalid_argument(format!(
                    "Cannot reshape a tensor with {} elements to shape {} ({} elements)",
                    c.dim_string(known_in),
                    c.debug_string(out),
                    c.dim_string(known_out)
                )));
            }
            (None, Some(oi)) if n_out > 0 => {
                let inferred = c.divide(known_in, n_out, true)?;
                out = c.replace_dim(out, oi as i64, inferred)?;
            }
            (Some(ii), None) if n_in != 0 => {
                let inferred = c.divide(known_out, n_in, true)?;
                c.merge_dim(in_dims[ii], inferred)?;
            }
            (Some(ii), Some(oi)) if n_in == n_out => {
                out = c.replace_dim(out, oi as i64, in_dims[ii])?;
            }
            _ => {}
        }
    }
    c.set_output(0, out);
    Ok(())
}

/// TensorFlow's `ValidateSparseTensor`: indices `[N, R]`, values `[N]`,
/// shape `[R]`.
pub(crate) fn validate_sparse_tensor(
    c: &mut InferenceContext,
    indices: ShapeHandle,
    values: ShapeHandle,
    shape: ShapeHandle,
) -> Result<()> {
    c.with_rank(indices, 2)?;
    c.with_rank(values, 1)?;
    c.with_rank(shape, 1)?;
    let num_index = c.dim(indices, 0);
    if let Some(n) = c.value(num_index) {
        let num_values = c.dim(values, 0);
        if let Some(v) = c.value(num_values) {
            if n != v {
                return Err(Status::invalid_argument(format!(
                    "Number of elements in index ({n}) and values ({v}) do not match."
                )));
            }
        }
    }
    let index_rank = c.dim(indices, 1);
    if let Some(r) = c.value(index_rank) {
        let shape_rank = c.dim(shape, 0);
        if let Some(s) = c.value(shape_rank) {
            if r != s {
                return Err(Status::invalid_argument(format!(
                    "Index rank ({r}) and shape rank ({s}) do not match."
                )));
            }
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------
// Registrations and shape functions.

register_op!(OpDefBuilder::new("UnravelIndex")
    .input("indices: Tidx")
    .input("dims: Tidx")
    .output("output: Tidx")
    .attr("Tidx: {int32, int64} = DT_INT32")
    .set_shape_fn(with_inputs(2, unravel_index_shape))
    .doc(
        "Converts an array of flat indices into a tuple of coordinate arrays.\n\n\
         Each flat index of `indices` becomes its coordinates in an array of shape `dims`.",
    ));

fn unravel_index_shape(c: &mut InferenceContext) -> Result<()> {
    let indices = c.input(0);
    let d = c.input(1);
    let dims = c.with_rank(d, 1)?;
    let n = c.dim(dims, 0);
    let out = match c.rank(indices) {
        Some(0) => c.vector(n),
        Some(_) => {
            let elems = c.num_elements_dim(indices);
            c.matrix(n, elems)
        }
        None => c.unknown_shape(),
    };
    c.set_output(0, out);
    Ok(())
}

register_op!(OpDefBuilder::new("Concat")
    .input("concat_dim: int32")
    .input("values: N * T")
    .output("output: T")
    .attr("N: int >= 2")
    .attr("T: type")
    .set_shape_fn(with_inputs(1, concat_shape))
    .doc(
        "Concatenates tensors along one dimension.\n\n\
         The dimension comes first; `ConcatV2` takes it last.",
    ));

register_op!(OpDefBuilder::new("ConcatOffset")
    .input("concat_dim: int32")
    .input("shape: N * shape_type")
    .output("offset: N * shape_type")
    .attr("N: int >= 2")
    .attr("shape_type: {int32, int64} = DT_INT32")
    .set_shape_fn(concat_offset_shape)
    .doc(
        "Computes offsets of concat inputs within its output.\n\n\
         Used by the gradient of `Concat`: offset `i` is where input `i` starts in the output.",
    ));

fn concat_offset_shape(c: &mut InferenceContext) -> Result<()> {
    for i in 1..c.num_inputs().min(c.num_outputs() + 1) {
        let s = c.input(i);
        c.set_output(i - 1, s);
    }
    Ok(())
}

register_op!(OpDefBuilder::new("_ParallelConcatStart")
    .output("output: dtype")
    .attr("shape: shape")
    .attr("dtype: type")
    .stateful()
    .set_shape_fn(explicit_shape)
    .doc(
        "Creates an empty Tensor with shape `shape` and type `dtype`.\n\n\
         Used with in-place updates by `parallel_stack`.",
    ));

register_op!(OpDefBuilder::new("ImmutableConst")
    .attr("dtype: type")
    .attr("shape: shape")
    .attr("memory_region_name: string")
    .output("tensor: dtype")
    .set_shape_fn(explicit_shape)
    .doc(
        "Returns an immutable tensor from a memory region.\n\n\
         The tensor's memory is a read-only memory-mapped region.",
    ));

register_op!(OpDefBuilder::new("GuaranteeConst")
    .input("input: T")
    .output("output: T")
    .attr("T: type")
    .stateful()
    .set_shape_fn(with_inputs(1, unchanged_shape))
    .doc(
        "Gives a guarantee to the runtime that the input tensor is a constant.\n\n\
         The runtime may then fold the subgraph computing it.",
    ));

register_op!(OpDefBuilder::new("Diag")
    .input("diagonal: T")
    .output("output: T")
    .attr("T: {bfloat16, half, float, double, int32, int64, complex64, complex128}")
    .set_shape_fn(with_inputs(1, diag_shape))
    .doc(
        "Returns a diagonal tensor with the given diagonal values.\n\n\
         A diagonal of shape `[D1, ..., Dk]` gives an output of shape `[D1, ..., Dk, D1, ..., Dk]`.",
    ));

fn diag_shape(c: &mut InferenceContext) -> Result<()> {
    let i = c.input(0);
    let s = c.with_rank_at_least(i, 1)?;
    let out = c.concatenate(s, s)?;
    c.set_output(0, out);
    Ok(())
}

register_op!(OpDefBuilder::new("DiagPart")
    .input("input: T")
    .output("diagonal: T")
    .attr("T: {bfloat16, half, float, double, int32, int64, complex64, complex128}")
    .set_shape_fn(with_inputs(1, diag_part_shape))
    .doc(
        "Returns the diagonal part of the tensor.\n\n\
         The inverse of `Diag`: an input of shape `[D1, ..., Dk, D1, ..., Dk]` gives `[D1, ..., Dk]`.",
    ));

fn diag_part_shape(c: &mut InferenceContext) -> Result<()> {
    let input = c.input(0);
    let Some(dims) = c.dims(input).map(<[DimensionHandle]>::to_vec) else {
        let u = c.unknown_shape();
        c.set_output(0, u);
        return Ok(());
    };
    let rank = dims.len();
    if rank % 2 != 0 || rank == 0 {
        return Err(Status::invalid_argument(format!(
            "Input must have even and non-zero rank, input rank is {rank}"
        )));
    }
    let mid = rank / 2;
    let mut out = Vec::with_capacity(mid);
    for i in 0..mid {
        out.push(c.merge_dim(dims[i], dims[i + mid])?);
    }
    let s = c.make_shape_from_dims(out);
    c.set_output(0, s);
    Ok(())
}

register_op!(OpDefBuilder::new("MatrixDiag")
    .input("diagonal: T")
    .output("output: T")
    .attr("T: type")
    .set_shape_fn(with_inputs(1, matrix_diag_shape))
    .doc(
        "Returns a batched diagonal tensor with given batched diagonal values.\n\n\
         A diagonal of shape `[I, J, ..., N]` gives matrices of shape `[I, J, ..., N, N]`.",
    ));

fn matrix_diag_shape(c: &mut InferenceContext) -> Result<()> {
    let i = c.input(0);
    let s = c.with_rank_at_least(i, 1)?;
    if !c.rank_known(s) {
        let u = c.unknown_shape();
        c.set_output(0, u);
        return Ok(());
    }
    let last = c.dim(s, -1);
    let v = c.vector(last);
    let out = c.concatenate(s, v)?;
    c.set_output(0, out);
    Ok(())
}

register_op!(OpDefBuilder::new("MatrixSetDiag")
    .input("input: T")
    .input("diagonal: T")
    .output("output: T")
    .attr("T: type")
    .set_shape_fn(with_inputs(2, matrix_set_diag_shape))
    .doc(
        "Returns a batched matrix tensor with new batched diagonal values.\n\n\
         The main diagonals of the innermost matrices of `input` are replaced by `diagonal`.",
    ));

fn matrix_set_diag_shape(c: &mut InferenceContext) -> Result<()> {
    let (i0, i1) = (c.input(0), c.input(1));
    let input = c.with_rank_at_least(i0, 2)?;
    let mut diag = c.with_rank_at_least(i1, 1)?;
    if let Some(r) = c.rank(input) {
        diag = c.with_rank(i1, r - 1)?;
    }
    let (rows, cols) = (c.dim(input, -2), c.dim(input, -1));
    let smallest = c.min(rows, cols)?;
    let diag_last = c.dim(diag, -1);
    c.merge_dim(smallest, diag_last)?;
    let mut output = input;
    if c.rank_known(diag) && !c.fully_defined(input) {
        // Infer what the diagonal tells of the batch dims.
        let batch = c.subshape(diag, 0, Some(-1))?;
        let matrix = c.unknown_shape_of_rank(2);
        let from_diag = c.concatenate(batch, matrix)?;
        output = c.merge(input, from_diag)?;
    }
    c.set_output(0, output);
    Ok(())
}

register_op!(OpDefBuilder::new("MatrixDiagPart")
    .input("input: T")
    .output("diagonal: T")
    .attr("T: type")
    .set_shape_fn(with_inputs(1, matrix_diag_part_shape))
    .doc(
        "Returns the batched diagonal part of a batched tensor.\n\n\
         An input of shape `[I, J, ..., M, N]` gives diagonals of shape `[I, J, ..., min(M, N)]`.",
    ));

fn matrix_diag_part_shape(c: &mut InferenceContext) -> Result<()> {
    let i = c.input(0);
    let s = c.with_rank_at_least(i, 2)?;
    let Some(dims) = c.dims(s).map(<[DimensionHandle]>::to_vec) else {
        let u = c.unknown_shape();
        c.set_output(0, u);
        return Ok(());
    };
    let rank = dims.len();
    let mut out = dims[..rank - 2].to_vec();
    out.push(c.min(dims[rank - 2], dims[rank - 1])?);
    let s = c.make_shape_from_dims(out);
    c.set_output(0, s);
    Ok(())
}

register_op!(OpDefBuilder::new("MatrixBandPart")
    .input("input: T")
    .input("num_lower: Tindex")
    .input("num_upper: Tindex")
    .output("band: T")
    .attr("T: type")
    .attr("Tindex: {int32, int64} = DT_INT64")
    .set_shape_fn(with_inputs(1, unchanged_shape))
    .doc(
        "Copy a tensor setting everything outside a central band in each innermost matrix to zero.\n\n\
         `num_lower` and `num_upper` are the number of sub- and superdiagonals to keep (negative: all).",
    ));

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

register_op!(OpDefBuilder::new("Gather")
    .input("params: Tparams")
    .input("indices: Tindices")
    .attr("validate_indices: bool = true")
    .output("output: Tparams")
    .attr("Tparams: type")
    .attr("Tindices: {int32,int64}")
    .set_shape_fn(with_inputs(2, gather_shape))
    .doc(
        "Gather slices from `params` according to `indices`.\n\n\
         The output has shape `indices.shape + params.shape[1:]`.",
    ));

fn gather_shape(c: &mut InferenceContext) -> Result<()> {
    let params = c.input(0);
    c.with_rank_at_least(params, 1)?;
    let inner = c.subshape(params, 1, None)?;
    let indices = c.input(1);
    let out = c.concatenate(indices, inner)?;
    c.set_output(0, out);
    Ok(())
}

register_op!(OpDefBuilder::new("GatherNd")
    .input("params: Tparams")
    .input("indices: Tindices")
    .output("output: Tparams")
    .attr("Tparams: type")
    .attr("Tindices: {int16, int32, int64}")
    .attr("bad_indices_policy: string = ''")
    .set_shape_fn(with_inputs(2, gather_nd_shape))
    .doc(
        "Gather slices from `params` into a Tensor with shape specified by `indices`.\n\n\
         The output has shape `indices.shape[:-1] + params.shape[indices.shape[-1]:]`.",
    ));

/// TensorFlow's `GatherNdShape`.
pub(crate) fn gather_nd_shape(c: &mut InferenceContext) -> Result<()> {
    let params = c.input(0);
    let i = c.input(1);
    let indices = c.with_rank_at_least(i, 1)?;
    let r_dim = c.dim(indices, -1);
    let (Some(params_rank), Some(r)) = (c.rank(params), c.value(r_dim)) else {
        let u = c.unknown_shape();
        c.set_output(0, u);
        return Ok(());
    };
    if r > params_rank as i64 {
        return Err(Status::invalid_argument(format!(
            "indices.shape[-1] must be <= params.rank, but saw indices shape: {} and params shape: {}",
            c.debug_string(indices),
            c.debug_string(params)
        )));
    }
    let indices_slice = c.subshape(indices, 0, Some(-1))?;
    let params_slice = c.subshape(params, r, None)?;
    let out = c.concatenate(indices_slice, params_slice)?;
    c.set_output(0, out);
    Ok(())
}

register_op!(OpDefBuilder::new("RefIdentity")
    .input("input: Ref(T)")
    .output("output: Ref(T)")
    .attr("T: type")
    .allows_uninitialized_input()
    .set_shape_fn(with_inputs(1, unchanged_shape))
    .doc("Return the same ref tensor as the input ref tensor."));

register_op!(OpDefBuilder::new("CheckNumerics")
    .input("tensor: T")
    .output("output: T")
    .attr("T: {bfloat16, half, float, double}")
    .attr("message: string")
    .stateful()
    .set_shape_fn(with_inputs(1, unchanged_shape))
    .doc(
        "Checks a tensor for NaN and Inf values.\n\n\
         Fails with `message` if the tensor has any; otherwise passes it through.",
    ));

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

register_op!(OpDefBuilder::new("ReverseSequence")
    .input("input: T")
    .input("seq_lengths: Tlen")
    .output("output: T")
    .attr("seq_dim: int")
    .attr("batch_dim: int = 0")
    .attr("T: type")
    .attr("Tlen: {int32, int64} = DT_INT64")
    .set_shape_fn(with_inputs(2, reverse_sequence_shape))
    .doc(
        "Reverses variable length slices.\n\n\
         For each batch entry `i` along `batch_dim`, the first `seq_lengths[i]` elements along \
         `seq_dim` are reversed.",
    ));

fn reverse_sequence_shape(c: &mut InferenceContext) -> Result<()> {
    let input = c.input(0);
    let l = c.input(1);
    let seq_lens = c.with_rank(l, 1)?;
    let seq_dim: i64 = c.get_attr("seq_dim")?;
    let batch_dim: i64 = c.get_attr("batch_dim")?;
    let Some(rank) = c.rank(input) else {
        return unknown_shape(c);
    };
    let rank = rank as i64;
    if batch_dim >= rank {
        return Err(Status::invalid_argument(format!(
            "batch_dim must be < input rank: {batch_dim} vs. {rank}"
        )));
    }
    if seq_dim >= rank {
        return Err(Status::invalid_argument(format!(
            "seq_dim must be < input rank: {seq_dim} vs. {rank}"
        )));
    }
    if batch_dim < 0 {
        return Err(Status::invalid_argument(format!(
            "batch_dim must be >=0, got {batch_dim}"
        )));
    }
    let batch = c.dim(input, batch_dim);
    let n = c.dim(seq_lens, 0);
    let batch = c.merge_dim(batch, n)?;
    let out = c.replace_dim(input, batch_dim, batch)?;
    c.set_output(0, out);
    Ok(())
}

register_op!(OpDefBuilder::new("StridedSliceGrad")
    .input("shape: Index")
    .input("begin: Index")
    .input("end: Index")
    .input("strides: Index")
    .input("dy: T")
    .output("output: T")
    .attr("T: type")
    .attr("Index: {int32, int64}")
    .attr("begin_mask: int = 0")
    .attr("end_mask: int = 0")
    .attr("ellipsis_mask: int = 0")
    .attr("new_axis_mask: int = 0")
    .attr("shrink_axis_mask: int = 0")
    .set_shape_fn(with_inputs(1, strided_slice_grad_shape))
    .doc(
        "Returns the gradient of `StridedSlice`.\n\n\
         `dy` is scattered into a zero tensor of shape `shape` where `StridedSlice` read it.",
    ));

fn strided_slice_grad_shape(c: &mut InferenceContext) -> Result<()> {
    let out = c.make_shape_from_shape_tensor(0)?;
    c.set_output(0, out);
    Ok(())
}

register_op!(OpDefBuilder::new("MirrorPad")
    .input("input: T")
    .input("paddings: Tpaddings")
    .output("output: T")
    .attr("T: type")
    .attr("Tpaddings: {int32, int64} = DT_INT32")
    .attr("mode: {'REFLECT', 'SYMMETRIC'}")
    .set_shape_fn(with_inputs(2, pad_shape))
    .doc(
        "Pads a tensor with mirrored values.\n\n\
         `REFLECT` mode does not repeat the border values, `SYMMETRIC` mode does.",
    ));

register_op!(OpDefBuilder::new("MirrorPadGrad")
    .input("input: T")
    .input("paddings: Tpaddings")
    .output("output: T")
    .attr("T: type")
    .attr("Tpaddings: {int32, int64} = DT_INT32")
    .attr("mode: {'REFLECT', 'SYMMETRIC'}")
    .set_shape_fn(with_inputs(2, mirror_pad_grad_shape))
    .doc(
        "Gradient op for `MirrorPad` op.\n\n\
         Folds the mirror-padded gradient back into the input's shape.",
    ));

fn mirror_pad_grad_shape(c: &mut InferenceContext) -> Result<()> {
    let p = c.input(1);
    let mut paddings = c.with_rank(p, 2)?;
    let pad_0 = c.dim(paddings, 0);
    let Some(input_rank) = c.value(pad_0) else {
        let u = c.unknown_shape();
        c.set_output(0, u);
        return Ok(());
    };
    let i = c.input(0);
    let input = c.with_rank(i, rank_arg(input_rank)?)?;
    let m = c.matrix(input_rank, 2);
    paddings = c.merge(paddings, m)?;
    debug_assert_eq!(c.rank(paddings), Some(2));
    let Some(t) = c.input_tensor(1).cloned() else {
        let out = c.unknown_shape_of_rank(input_rank as usize);
        c.set_output(0, out);
        return Ok(());
    };
    check_pairs(&t, "paddings")?;
    let values = int_values(&t, "paddings")?;
    let rank = input_rank as usize;
    let mut dims = Vec::with_capacity(rank);
    for i in 0..rank {
        let pad0 = at(&values, 2 * i, "paddings", 2 * rank)?;
        let pad1 = at(&values, 2 * i + 1, "paddings", 2 * rank)?;
        if pad0 < 0 || pad1 < 0 {
            return Err(Status::invalid_argument("Paddings must be non-negative"));
        }
        let total = pad0.checked_add(pad1).ok_or_else(|| {
            Status::invalid_argument(format!("Paddings {pad0} + {pad1} overflow"))
        })?;
        let d = c.dim(input, i as i64);
        dims.push(c.subtract(d, total)?);
    }
    let out = c.make_shape_from_dims(dims);
    c.set_output(0, out);
    Ok(())
}

/// The block shape and the number of block dims of a space/batch op.
fn num_block_dims(c: &mut InferenceContext, block_shape_shape: ShapeHandle) -> Result<usize> {
    if c.rank(block_shape_shape) != Some(1) {
        return Err(Status::invalid_argument("block_shape must have rank 1."));
    }
    let d = c.dim(block_shape_shape, 0);
    let Some(n) = c.value(d) else {
        return Err(Status::invalid_argument(
            "block_shape must have known size.",
        ));
    };
    // The input must have rank n + 1 at least.
    rank_arg(n.saturating_add(1))?;
    Ok(n as usize)
}

/// TensorFlow's `SpaceToBatchShapeHelper`. `block` is the block shape's
/// value (if known); `paddings` the paddings' value.
fn space_to_batch_helper(
    c: &mut InferenceContext,
    input_shape: ShapeHandle,
    block_shape_shape: ShapeHandle,
    block: Option<Vec<i64>>,
    paddings_shape: ShapeHandle,
    paddings: Option<Vec<i64>>,
) -> Result<()> {
    let n = num_block_dims(c, block_shape_shape)?;
    let input_shape = c.with_rank_at_least(input_shape, n + 1)?;
    let m = c.matrix(n as i64, 2);
    c.merge(paddings_shape, m)?;
    let mut batch = c.dim(input_shape, 0);
    match &block {
        Some(b) if !b.is_empty() => {
            for dim in 0..n {
                let v = at(b, dim, "block_shape", n)?;
                if v < 1 {
                    return Err(Status::invalid_argument("block_shape must be positive"));
                }
                batch = if c.value(batch).is_some() {
                    c.multiply(batch, v)?
                } else {
                    c.unknown_dim()
                };
            }
        }
        _ if n > 0 => batch = c.unknown_dim(),
        _ => {}
    }
    let unknown = c.unknown_dim();
    let mut out = vec![unknown; n + 1];
    out[0] = batch;
    if let Some(p) = paddings.filter(|p| !p.is_empty()) {
        for dim in 0..n {
            let (start, end) = (
                at(&p, 2 * dim, "paddings", 2 * n)?,
                at(&p, 2 * dim + 1, "paddings", 2 * n)?,
            );
            if start < 0 || end < 0 {
                return Err(Status::invalid_argument("paddings cannot be negative"));
            }
            if let Some(b) = &block {
                let d = c.dim(input_shape, dim as i64 + 1);
                let padded = c.add(d, start)?;
                let padded = c.add(padded, end)?;
                out[dim + 1] = c.divide(padded, at(b, dim, "block_shape", n)?, true)?;
            }
        }
    }
    let rest = c.subshape(input_shape, 1 + n as i64, None)?;
    let head = c.make_shape_from_dims(out);
    let result = c.concatenate(head, rest)?;
    c.set_output(0, result);
    Ok(())
}

/// TensorFlow's `BatchToSpaceShapeHelper`. `block` is the block shape's
/// value (if known); `crops` the crops' value.
fn batch_to_space_helper(
    c: &mut InferenceContext,
    input_shape: ShapeHandle,
    block_shape_shape: ShapeHandle,
    block: Option<Vec<i64>>,
    crops_shape: ShapeHandle,
    crops: Option<Vec<i64>>,
) -> Result<()> {
    let n = num_block_dims(c, block_shape_shape)?;
    let input_shape = c.with_rank_at_least(input_shape, n + 1)?;
    let m = c.matrix(n as i64, 2);
    c.merge(crops_shape, m)?;
    let mut batch = c.dim(input_shape, 0);
    match &block {
        Some(b) => {
            for dim in 0..n {
                let v = at(b, dim, "block_shape", n)?;
                if v < 1 {
                    return Err(Status::invalid_argument("block_shape must be positive"));
                }
                batch = if c.value(batch).is_some() {
                    c.divide(batch, v, true)?
                } else {
                    c.unknown_dim()
                };
            }
        }
        None if n > 0 => batch = c.unknown_dim(),
        None => {}
    }
    let unknown = c.unknown_dim();
    let mut out = vec![unknown; n + 1];
    out[0] = batch;
    if let Some(cr) = crops {
        for dim in 0..n {
            let (start, end) = (
                at(&cr, 2 * dim, "crops", 2 * n)?,
                at(&cr, 2 * dim + 1, "crops", 2 * n)?,
            );
            if start < 0 || end < 0 {
                return Err(Status::invalid_argument("crops cannot be negative"));
            }
            if let Some(b) = &block {
                let d = c.dim(input_shape, dim as i64 + 1);
                let size = c.multiply(d, at(b, dim, "block_shape", n)?)?;
                let size = c.subtract(size, start)?;
                out[dim + 1] = c.subtract(size, end)?;
            }
        }
    }
    let rest = c.subshape(input_shape, 1 + n as i64, None)?;
    let head = c.make_shape_from_dims(out);
    let result = c.concatenate(head, rest)?;
    c.set_output(0, result);
    Ok(())
}

/// The value of constant input `i` as integers, if known.
fn const_ints(c: &InferenceContext, i: usize, what: &str) -> Result<Option<Vec<i64>>> {
    c.input_tensor(i).map(|t| int_values(t, what)).transpose()
}

register_op!(OpDefBuilder::new("SpaceToBatchND")
    .input("input: T")
    .input("block_shape: Tblock_shape")
    .input("paddings: Tpaddings")
    .output("output: T")
    .attr("T: type")
    .attr("Tblock_shape: {int32, int64} = DT_INT32")
    .attr("Tpaddings: {int32, int64} = DT_INT32")
    .set_shape_fn(with_inputs(3, space_to_batch_nd_shape))
    .doc(
        "SpaceToBatch for N-D tensors of type T.\n\n\
         Zero-pads the spatial dimensions, then moves blocks of them into the batch dimension.",
    ));

fn space_to_batch_nd_shape(c: &mut InferenceContext) -> Result<()> {
    let (input, block_shape, paddings) = (c.input(0), c.input(1), c.input(2));
    let block = const_ints(c, 1, "block_shape")?;
    let pads = const_ints(c, 2, "paddings")?;
    space_to_batch_helper(c, input, block_shape, block, paddings, pads)
}

register_op!(OpDefBuilder::new("SpaceToBatch")
    .input("input: T")
    .input("paddings: Tpaddings")
    .output("output: T")
    .attr("T: type")
    .attr("Tpaddings: {int32, int64} = DT_INT32")
    .attr("block_size: int >= 2")
    .set_shape_fn(with_inputs(2, space_to_batch_shape))
    .doc(
        "SpaceToBatch for 4-D tensors of type T.\n\n\
         `SpaceToBatchND` with a block of `block_size` x `block_size`.",
    ));

fn space_to_batch_shape(c: &mut InferenceContext) -> Result<()> {
    let i = c.input(0);
    let input = c.with_rank(i, 4)?;
    let block_size: i32 = c.get_attr("block_size")?;
    let block_shape = c.make_shape(&[2.into()]);
    let paddings = c.input(1);
    let pads = const_ints(c, 1, "paddings")?;
    let b = i64::from(block_size);
    space_to_batch_helper(c, input, block_shape, Some(vec![b, b]), paddings, pads)
}

register_op!(OpDefBuilder::new("BatchToSpaceND")
    .input("input: T")
    .input("block_shape: Tblock_shape")
    .input("crops: Tcrops")
    .output("output: T")
    .attr("T: type")
    .attr("Tblock_shape: {int32, int64} = DT_INT32")
    .attr("Tcrops: {int32, int64} = DT_INT32")
    .set_shape_fn(with_inputs(3, batch_to_space_nd_shape))
    .doc(
        "BatchToSpace for N-D tensors of type T.\n\n\
         Moves blocks of the batch dimension back into the spatial dimensions, then crops them.",
    ));

fn batch_to_space_nd_shape(c: &mut InferenceContext) -> Result<()> {
    let (input, block_shape, crops) = (c.input(0), c.input(1), c.input(2));
    let block = const_ints(c, 1, "block_shape")?;
    let cr = const_ints(c, 2, "crops")?;
    batch_to_space_helper(c, input, block_shape, block, crops, cr)
}

register_op!(OpDefBuilder::new("BatchToSpace")
    .input("input: T")
    .input("crops: Tidx")
    .output("output: T")
    .attr("T: type")
    .attr("block_size: int >= 2")
    .attr("Tidx: {int32, int64} = DT_INT32")
    .set_shape_fn(with_inputs(2, batch_to_space_shape))
    .doc(
        "BatchToSpace for 4-D tensors of type T.\n\n\
         `BatchToSpaceND` with a block of `block_size` x `block_size`.",
    ));

fn batch_to_space_shape(c: &mut InferenceContext) -> Result<()> {
    let i = c.input(0);
    let input = c.with_rank(i, 4)?;
    let block_size: i32 = c.get_attr("block_size")?;
    let block_shape = c.make_shape(&[2.into()]);
    let crops = c.input(1);
    let cr = const_ints(c, 1, "crops")?;
    let b = i64::from(block_size);
    batch_to_space_helper(c, input, block_shape, Some(vec![b, b]), crops, cr)
}

/// A data format of the depth/space ops: the rank and the indices of the
/// batch, height, width and (outer) channel dims.
fn image_format(name: &str) -> Result<(usize, [i64; 4])> {
    match name {
        "NHWC" => Ok((4, [0, 1, 2, 3])),
        "NCHW" => Ok((4, [0, 2, 3, 1])),
        "NCHW_VECT_C" => Ok((5, [0, 2, 3, 1])),
        other => Err(Status::invalid_argument(format!(
            "Invalid data format string: {other}"
        ))),
    }
}

/// TensorFlow's `MakeShapeFromFormat` for two spatial dims.
fn shape_from_format(
    c: &mut InferenceContext,
    format: &str,
    [n, h, w, ch]: [DimensionHandle; 4],
) -> ShapeHandle {
    match format {
        "NHWC" => c.make_shape_from_dims(vec![n, h, w, ch]),
        "NCHW" => c.make_shape_from_dims(vec![n, ch, h, w]),
        _ => {
            let four = c.make_dim(4);
            c.make_shape_from_dims(vec![n, ch, h, w, four])
        }
    }
}

/// Reads the depth/space ops' input dims: `[batch, height, width, depth]`,
/// the format and the block size.
fn depth_space_inputs(c: &mut InferenceContext) -> Result<([DimensionHandle; 4], String, i64)> {
    let format: String = c.get_attr("data_format")?;
    let (rank, idx) = image_format(&format)?;
    let i = c.input(0);
    let input = c.with_rank(i, rank)?;
    let block_size: i32 = c.get_attr("block_size")?;
    let dims = idx.map(|k| c.dim(input, k));
    Ok((dims, format, i64::from(block_size)))
}

register_op!(OpDefBuilder::new("SpaceToDepth")
    .input("input: T")
    .output("output: T")
    .attr("T: type")
    .attr("block_size: int >= 2")
    .attr("data_format: {'NHWC', 'NCHW', 'NCHW_VECT_C'} = 'NHWC'")
    .set_shape_fn(with_inputs(1, space_to_depth_shape))
    .doc(
        "SpaceToDepth for tensors of type T.\n\n\
         Moves `block_size` x `block_size` blocks of the spatial dims into the depth dim.",
    ));

fn space_to_depth_shape(c: &mut InferenceContext) -> Result<()> {
    let ([n, h, w, d], format, block) = depth_space_inputs(c)?;
    let oh = c.divide(h, block, true)?;
    let ow = c.divide(w, block, true)?;
    let sq = block
        .checked_mul(block)
        .ok_or_else(|| Status::invalid_argument("block_size is too large"))?;
    let od = c.multiply(d, sq)?;
    let out = shape_from_format(c, &format, [n, oh, ow, od]);
    c.set_output(0, out);
    Ok(())
}

register_op!(OpDefBuilder::new("DepthToSpace")
    .input("input: T")
    .output("output: T")
    .attr("T: type")
    .attr("block_size: int >= 2")
    .attr("data_format: {'NHWC', 'NCHW', 'NCHW_VECT_C'} = 'NHWC'")
    .set_shape_fn(with_inputs(1, depth_to_space_shape))
    .doc(
        "DepthToSpace for tensors of type T.\n\n\
         Moves depth data into `block_size` x `block_size` blocks of the spatial dims.",
    ));

fn depth_to_space_shape(c: &mut InferenceContext) -> Result<()> {
    let ([n, h, w, d], format, block) = depth_space_inputs(c)?;
    let oh = c.multiply(h, block)?;
    let ow = c.multiply(w, block)?;
    let sq = block
        .checked_mul(block)
        .ok_or_else(|| Status::invalid_argument("block_size is too large"))?;
    let od = c.divide(d, sq, true)?;
    let out = shape_from_format(c, &format, [n, oh, ow, od]);
    c.set_output(0, out);
    Ok(())
}

register_op!(OpDefBuilder::new("ExtractImagePatches")
    .input("images: T")
    .output("patches: T")
    .attr("ksizes: list(int) >= 4")
    .attr("strides: list(int) >= 4")
    .attr("rates: list(int) >= 4")
    .attr(
        "T: {bfloat16, half, float, double, int8, int16, int32, int64, uint8, uint16, uint32, \
         uint64, complex64, complex128, bool}"
    )
    .attr("padding: {'SAME', 'VALID'}")
    .set_shape_fn(with_inputs(1, extract_image_patches_shape))
    .doc(
        "Extract `patches` from `images` and put them in the \"depth\" output dimension.\n\n\
         Each patch of `ksizes` (sampled every `rates`, placed every `strides`) becomes a \
         depth vector.",
    ));

/// TensorFlow's `GetWindowedOutputSizeVerbose` without dilation: the output
/// size of a window of `filter` moved by `stride` over `input` elements.
pub(crate) fn windowed_output_size(
    input: i64,
    filter: i64,
    stride: i64,
    padding: &str,
) -> Result<i64> {
    if stride <= 0 {
        return Err(Status::invalid_argument(format!(
            "Stride must be > 0, but got {stride}"
        )));
    }
    let overflow = || Status::invalid_argument("Windowed output size overflows int64");
    let out = match padding {
        "VALID" => {
            input
                .checked_sub(filter)
                .and_then(|v| v.checked_add(stride))
                .ok_or_else(overflow)?
                / stride
        }
        _ => input.checked_add(stride - 1).ok_or_else(overflow)? / stride,
    };
    if out < 0 {
        return Err(Status::invalid_argument(format!(
            "Computed output size would be negative: {out} [input_size: {input}, \
             effective_filter_size: {filter}, stride: {stride}]"
        )));
    }
    Ok(out)
}

/// A `list(int)` attr that must have 4 values.
fn four_ints(c: &InferenceContext, name: &str, what: &str) -> Result<Vec<i64>> {
    let v: Vec<i64> = c.get_attr(name)?;
    if v.len() != 4 {
        return Err(Status::invalid_argument(format!(
            "ExtractImagePatches requires the {what} attribute to contain 4 values, but got: {}",
            v.len()
        )));
    }
    Ok(v)
}

fn extract_image_patches_shape(c: &mut InferenceContext) -> Result<()> {
    let i = c.input(0);
    let input = c.with_rank(i, 4)?;
    let ksizes = four_ints(c, "ksizes", "ksizes")?;
    let strides = four_ints(c, "strides", "stride")?;
    let rates = four_ints(c, "rates", "rates")?;
    let overflow = || Status::invalid_argument("ExtractImagePatches sizes overflow");
    // ksize + (ksize - 1) * (rate - 1)
    let effective = |k: i64, r: i64| -> Result<i64> {
        (k - 1)
            .checked_mul(r - 1)
            .and_then(|v| v.checked_add(k))
            .ok_or_else(overflow)
    };
    let k_rows_eff = effective(ksizes[1], rates[1])?;
    let k_cols_eff = effective(ksizes[2], rates[2])?;
    let batch = c.dim(input, 0);
    let (in_rows, in_cols) = (c.dim(input, 1), c.dim(input, 2));
    let depth = c.dim(input, 3);
    let k_area = ksizes[1].checked_mul(ksizes[2]).ok_or_else(overflow)?;
    let out_depth = c.multiply(depth, k_area)?;
    let (Some(rows), Some(cols)) = (c.value(in_rows), c.value(in_cols)) else {
        let (r, cl) = (c.unknown_dim(), c.unknown_dim());
        let out = c.make_shape_from_dims(vec![batch, r, cl, out_depth]);
        c.set_output(0, out);
        return Ok(());
    };
    let padding: String = c.get_attr("padding")?;
    if !matches!(padding.as_str(), "SAME" | "VALID" | "EXPLICIT") {
        return Err(Status::not_found(format!(
            "{padding} is not an allowed padding type"
        )));
    }
    let out_rows = windowed_output_size(rows, k_rows_eff, strides[1], &padding)?;
    let out_cols = windowed_output_size(cols, k_cols_eff, strides[2], &padding)?;
    let (r, cl) = (c.make_dim(out_rows), c.make_dim(out_cols));
    let out = c.make_shape_from_dims(vec![batch, r, cl, out_depth]);
    c.set_output(0, out);
    Ok(())
}

register_op!(OpDefBuilder::new("Bitcast")
    .input("input: T")
    .output("output: type")
    .attr(
        "T: {bfloat16, half, float, double, int64, int32, uint8, uint16, uint32, uint64, int8, \
         int16, complex64, complex128, qint8, quint8, qint16, quint16, qint32}"
    )
    .attr(
        "type: {bfloat16, half, float, double, int64, int32, uint8, uint16, uint32, uint64, \
         int8, int16, complex64, complex128, qint8, quint8, qint16, quint16, qint32}"
    )
    .set_shape_fn(with_inputs(1, bitcast_shape))
    .doc(
        "Bitcasts a tensor from one type to another without copying data.\n\n\
         A narrower output type adds a last dimension; a wider one consumes the last dimension.",
    ));

fn bitcast_shape(c: &mut InferenceContext) -> Result<()> {
    let input = c.input(0);
    if !c.rank_known(input) {
        return unknown_shape(c);
    }
    let from: DataType = c.get_attr("T")?;
    let to: DataType = c.get_attr("type")?;
    let (in_size, out_size) = (from.size(), to.size());
    // TensorFlow's C API shape function prints the types' enum values.
    let (fc, tc) = (from as i32, to as i32);
    if in_size == 0 || out_size == 0 {
        return Err(Status::invalid_argument(format!(
            "Cannot bitcast type {fc} to {tc} because one of the type sizes is zero"
        )));
    }
    let out = if in_size < out_size {
        let s = c.with_rank_at_least(input, 1)?;
        let divisor = (out_size / in_size) as i64;
        let last = c.dim(s, -1);
        match c.value(last) {
            Some(v) if v != divisor => {
                return Err(Status::invalid_argument(format!(
                    "Cannot bitcast from {fc} to {tc} due to shape. {v} does not match {divisor}"
                )))
            }
            _ => c.subshape(s, 0, Some(-1))?,
        }
    } else if in_size > out_size {
        let ext = c.vector((in_size / out_size) as i64);
        c.concatenate(input, ext)?
    } else {
        input
    };
    c.set_output(0, out);
    Ok(())
}

#[cfg(test)]
mod tests {
    use opforge_core::proto::TensorShapeProto;
    use opforge_core::shape_inference::testutil::ShapeTestOp;
    use opforge_core::{infer_error, infer_ok, Code, DataType, Tensor};
    use opforge_ops_base::testutil::{ctx, t};

    fn op(name: &str) -> ShapeTestOp {
        ShapeTestOp::new(name)
    }

    fn i32s(dims: &[i64], v: Vec<i32>) -> Tensor {
        Tensor::from_vec(dims, v).unwrap()
    }

    fn i64s(dims: &[i64], v: Vec<i64>) -> Tensor {
        Tensor::from_vec(dims, v).unwrap()
    }

    fn shape(dims: &[i64]) -> TensorShapeProto {
        opforge_core::TensorShape::new(dims).unwrap().to_proto()
    }

    #[test]
    fn ops_without_kernels_say_so_when_run() {
        opforge_core::OpRegistry::global().check_startup().unwrap();
        for (name, input) in [
            ("Diag", t(&[2], vec![1f32, 2.])),
            ("Unique", t(&[3], vec![1i32, 1, 2])),
            ("GuaranteeConst", t(&[1], vec![5f64])),
        ] {
            let e = ctx().op(name).input(input).run().unwrap_err();
            assert_eq!(e.code(), Code::NotFound, "{e}");
            assert!(
                e.message().starts_with(&format!(
                    "No OpKernel was registered to support Op '{name}'"
                )),
                "{e}"
            );
            assert!(e.message().contains("<no registered kernels>"), "{e}");
        }
    }

    #[test]
    fn tf_merge_semantics() {
        // Where both dims are unknown, the merge keeps the first's (the input's).
        let op = op("MatrixSetDiag");
        infer_ok!(op, "[?,?,3];[1,2]", "[d1_0,d0_1,d0_2]");
        infer_ok!(op, "[?,?,?];[?,?]", "in0");
        // Where both ranks are unknown, the first shape.
        let op = ShapeTestOp::new("ReverseSequence")
            .attr("seq_dim", 0i64)
            .attr("batch_dim", 0i64);
        infer_ok!(op, "?;?", "?");
    }

    #[test]
    fn unravel_index() {
        let op = op("UnravelIndex");
        infer_ok!(op, "?;?", "?");
        infer_ok!(op, "[];[?]", "[d1_0]");
        infer_ok!(op, "[4,5];[?]", "[d1_0,20]");
        infer_ok!(op, "[2,3,4];[?]", "[d1_0,24]");
        infer_ok!(op, "[5];[3]", "[d1_0,5]");
        infer_ok!(op, "[5,0,?];[3]", "[d1_0,0]");
        infer_ok!(op, "?;[?]", "?");
        infer_ok!(op, "[?];[?]", "[d1_0,?]");
        infer_error!(op, "?;[1,1]", "Shape must be rank 1 but is rank 2");
        infer_error!(op, "[2];[]", "Shape must be rank 1 but is rank 0");
    }

    #[test]
    fn unchanged_shape_ops() {
        for name in ["CheckNumerics", "RefIdentity", "GuaranteeConst"] {
            let op = op(name);
            infer_ok!(op, "?", "in0");
            infer_ok!(op, "[]", "in0");
            infer_ok!(op, "[1,2,?,4,5]", "in0");
        }
        let op = op("MatrixBandPart");
        infer_ok!(op, "?;?;?", "in0");
        infer_ok!(op, "[];?;?", "in0");
        infer_ok!(op, "[1,2,?,4,5];[];[]", "in0");
    }

    #[test]
    fn diag_and_diag_part() {
        let op = op("Diag");
        infer_ok!(op, "?", "?");
        infer_ok!(op, "[1,?,3]", "[d0_0,d0_1,d0_2,d0_0,d0_1,d0_2]");
        infer_ok!(op, "[?,1,2,3]", "[d0_0,d0_1,d0_2,d0_3,d0_0,d0_1,d0_2,d0_3]");
        infer_error!(op, "[]", "Shape must be at least rank 1 but is rank 0");
        let op = ShapeTestOp::new("DiagPart");
        infer_ok!(op, "?", "?");
        infer_ok!(op, "[1,?,?,4]", "[d0_0,d0_3]");
        infer_ok!(op, "[?,?]", "[d0_0]");
        infer_ok!(op, "[1,?,3,?,4,3]", "[d0_0,d0_4,d0_2|d0_5]");
        infer_ok!(op, "[1,2,3,?,?,?,?,4]", "[d0_0,d0_1,d0_2,d0_7]");
        infer_error!(
            op,
            "[]",
            "Input must have even and non-zero rank, input rank is 0"
        );
        infer_error!(op, "[?]", "Input must have even and non-zero rank");
        infer_error!(op, "[1,2,3]", "Input must have even and non-zero rank");
        infer_error!(
            op,
            "[1,2,?,10]",
            "Dimensions must be equal, but are 2 and 10"
        );
    }

    #[test]
    fn matrix_diag_ops() {
        let op = op("MatrixDiag");
        infer_ok!(op, "?", "?");
        infer_error!(op, "[]", "Shape must be at least rank 1 but is rank 0");
        infer_ok!(op, "[?]", "[d0_0,d0_0]");
        infer_ok!(op, "[1,?,?,4]", "[d0_0,d0_1,d0_2,d0_3,d0_3]");
        let op = ShapeTestOp::new("MatrixDiagPart");
        infer_ok!(op, "?", "?");
        infer_error!(op, "[?]", "Shape must be at least rank 2 but is rank 1");
        infer_ok!(op, "[?,1,2,2]", "[d0_0,d0_1,d0_2|d0_3]");
        infer_ok!(op, "[?,1,2,3]", "[d0_0,d0_1,d0_2]");
        infer_ok!(op, "[?,1,3,2]", "[d0_0,d0_1,d0_3]");
        infer_ok!(op, "[?,?]", "[?]");
        infer_ok!(op, "[0,?]", "[d0_0]");
    }

    #[test]
    fn matrix_set_diag() {
        let op = op("MatrixSetDiag");
        infer_error!(op, "[1];?", "Shape must be at least rank 2 but is rank 1");
        infer_error!(op, "?;[]", "Shape must be at least rank 1 but is rank 0");
        infer_error!(
            op,
            "[2,2];[]",
            "Shape must be at least rank 1 but is rank 0"
        );
        infer_error!(op, "[2,2];[2,2]", "Shape must be rank 1 but is rank 2");
        infer_error!(op, "[2,3];[3]", "Dimensions must be equal, but are 2 and 3");
        infer_ok!(op, "?;?", "in0");
        infer_ok!(op, "[1,2,2];[1,2]", "in0");
        infer_ok!(op, "[1,2,3];?", "in0");
        infer_ok!(op, "[1,3,2];?", "in0");
        infer_ok!(op, "[1,?,2];[?,?]", "in0");
        infer_ok!(op, "[1,?,?];[?,2]", "in0");
        infer_ok!(op, "?;[1,2]", "[d1_0,?,?]");
        infer_ok!(op, "[?,?,3];[1,2]", "[d1_0,d0_1,d0_2]");
        infer_ok!(op, "[?,3,?];[1,2]", "[d1_0,d0_1,d0_2]");
        infer_ok!(op, "[?,3,2];[1,2]", "[d1_0,d0_1,d0_2]");
        infer_error!(
            op,
            "[2,?,3];[4,3]",
            "Dimension 0 in both shapes must be equal, but are 2 and 4"
        );
    }

    #[test]
    fn gather_and_gather_nd() {
        let op = op("Gather");
        infer_ok!(op, "?;?", "?");
        infer_ok!(op, "[1,?,2];[3]", "[d1_0,d0_1,d0_2]");
        infer_ok!(op, "[5];[?,2]", "[d1_0,d1_1]");
        infer_ok!(op, "?;[3]", "?");
        infer_error!(
            op,
            "[];[1,2,3]",
            "Shape must be at least rank 1 but is rank 0"
        );
        let op = ShapeTestOp::new("GatherNd");
        infer_ok!(op, "?;?", "?");
        infer_ok!(op, "[1,?,3,?];[?,0]", "[d1_0,d0_0,d0_1,d0_2,d0_3]");
        infer_ok!(op, "[1,?,3,?];[?,4]", "[d1_0]");
        infer_ok!(op, "[1,?,3,?];[2,?]", "?");
        infer_ok!(op, "?;[2,1]", "?");
        infer_error!(
            op,
            "[1,2,3];[4]",
            "indices.shape[-1] must be <= params.rank, but saw indices shape: [4] and params shape: [1,2,3]"
        );
        infer_error!(op, "[1];[]", "Shape must be at least rank 1 but is rank 0");
    }

    #[test]
    fn unique_ops() {
        let op = op("Unique");
        infer_ok!(op, "?", "[?];in0");
        infer_ok!(op, "[5]", "[?];in0");
        infer_error!(op, "[1,2,3,?,5]", "Shape must be rank 1 but is rank 5");
        let op = ShapeTestOp::new("UniqueWithCounts");
        infer_ok!(op, "?", "[?];in0;[?]");
        infer_ok!(op, "[1,2,3,?,5]", "[?];in0;[?]");
    }

    #[test]
    fn mirror_pad() {
        let op = op("MirrorPad");
        infer_ok!(op, "?;?", "?");
        infer_error!(op, "?;[1,2,3]", "Shape must be rank 2 but is rank 3");
        infer_error!(op, "?;[1,4]", "Dimension must be 2 but is 4");
        infer_error!(op, "[1,2,3];[4,2]", "Shape must be rank 4 but is rank 3");
        infer_error!(op, "[1,2,3];[2,2]", "Shape must be rank 2 but is rank 3");
        infer_ok!(op, "[1,2,3];?", "[?,?,?]");
        infer_ok!(op, "?;[3,2]", "[?,?,?]");
        let pads = i64s(&[3, 2], vec![1, 10, 2, 20, 3, 30]);
        let op = ShapeTestOp::new("MirrorPad").input_tensor(1, pads);
        infer_ok!(op, "[100,200,300];[3,2]", "[111,222,333]");
        infer_ok!(op, "[100,?,300];[3,2]", "[111,?,333]");
        infer_ok!(op, "?;[3,2]", "[?,?,?]");
        infer_ok!(op, "?;?", "[?,?,?]");
        infer_error!(op, "[1,2];?", "Shape must be rank 3 but is rank 2");
        let zero = i32s(&[2, 2], vec![0, 0, 1, 0]);
        let op = ShapeTestOp::new("MirrorPad").input_tensor(1, zero);
        infer_ok!(op, "[4,5];[2,2]", "[d0_0,6]");
        let neg = i32s(&[1, 2], vec![-1, 0]);
        let op = ShapeTestOp::new("MirrorPad").input_tensor(1, neg);
        infer_error!(op, "[4];[1,2]", "Paddings must be non-negative");
        let bad = i32s(&[2], vec![1, 1]);
        let op = ShapeTestOp::new("MirrorPad").input_tensor(1, bad);
        infer_error!(op, "[4];?", "paddings must be a matrix with 2 columns");
    }

    #[test]
    fn mirror_pad_grad() {
        let op = op("MirrorPadGrad");
        infer_ok!(op, "?;?", "?");
        infer_ok!(op, "?;[?,4]", "?");
        infer_error!(op, "[?,?];[3,2]", "must be rank 3 but is rank 2");
        infer_error!(
            op,
            "[?,?,?];[3,3]",
            "Dimension 1 in both shapes must be equal, but are 3 and 2"
        );
        infer_ok!(op, "[?,?,?];[3,2]", "[?,?,?]");
        let pads = i64s(&[3, 2], vec![1, 10, 2, 20, 3, 30]);
        let op = ShapeTestOp::new("MirrorPadGrad").input_tensor(1, pads);
        infer_ok!(op, "[111,222,333];[3,2]", "[100,200,300]");
        infer_ok!(op, "[111,?,333];[3,2]", "[100,?,300]");
        infer_error!(
            op,
            "[10,222,333];[3,2]",
            "Negative dimension size caused by subtracting 11 from 10"
        );
        let zero = i32s(&[1, 2], vec![0, 0]);
        let op = ShapeTestOp::new("MirrorPadGrad").input_tensor(1, zero);
        infer_ok!(op, "[7];[1,2]", "[d0_0]");
        let neg = i32s(&[1, 2], vec![0, -3]);
        let op = ShapeTestOp::new("MirrorPadGrad").input_tensor(1, neg);
        infer_error!(op, "[7];[1,2]", "Paddings must be non-negative");
    }

    #[test]
    fn explicit_shape_ops() {
        let op = op("ImmutableConst")
            .attr("dtype", DataType::Float)
            .attr("shape", shape(&[1, 2, 3]))
            .attr("memory_region_name", "test_region");
        infer_ok!(op, "", "[1,2,3]");
        let op = ShapeTestOp::new("ImmutableConst")
            .attr("dtype", DataType::Float)
            .attr("shape", shape(&[]))
            .attr("memory_region_name", "test_region");
        infer_ok!(op, "", "[]");
        let op = ShapeTestOp::new("ImmutableConst")
            .attr("dtype", DataType::Float)
            .attr("shape", "invalid")
            .attr("memory_region_name", "test_region");
        infer_error!(
            op,
            "",
            "AttrValue had value with type 'string' when 'shape' expected"
        );
        let unknown = TensorShapeProto {
            unknown_rank: true,
            ..Default::default()
        };
        let op = ShapeTestOp::new("_ParallelConcatStart")
            .attr("dtype", DataType::Float)
            .attr("shape", unknown);
        infer_ok!(op, "", "?");
        let op = ShapeTestOp::new("_ParallelConcatStart")
            .attr("dtype", DataType::Float)
            .attr("shape", shape(&[1, 2, 3]));
        infer_ok!(op, "", "[1,2,3]");
        infer_error!(
            ShapeTestOp::new("_ParallelConcatStart"),
            "",
            "No attr named 'shape' in NodeDef"
        );
    }

    fn concat(n: i64) -> ShapeTestOp {
        op("Concat").attr("N", n).attr("T", DataType::Float)
    }

    #[test]
    fn concat_unknown_axis() {
        infer_error!(concat(2), "[1];?;?", "Shape must be rank 0 but is rank 1");
        infer_ok!(concat(7), "?;?;?;?;[1,2,3];?;[3,2,1];?", "[?,?,?]");
        infer_ok!(concat(4), "?;?;?;[1,2,3,4];[4,3,2,1]", "[?,?,?,?]");
        infer_ok!(concat(4), "?;?;?;?;?", "?");
        infer_error!(
            concat(4),
            "?;?;?;[];[]",
            "Can't concatenate scalars (use tf.stack instead)"
        );
        infer_error!(
            concat(4),
            "?;?;?;[1,2];[1,2,3]",
            "Shape must be rank 2 but is rank 3"
        );
    }

    #[test]
    fn concat_known_axis() {
        for axis in [0, -3] {
            let op = concat(2).input_tensor(0, Tensor::scalar(axis));
            infer_ok!(op, "[];[100,2,?];[10,?,3]", "[110,d1_1,d2_2]");
            infer_error!(
                op,
                "[];[100,2,5];[10,?,3]",
                "Dimension 1 in both shapes must be equal, but are 5 and 3"
            );
            infer_ok!(op, "[];[100,2,?];[?,?,3]", "[?,d1_1,d2_2]");
            infer_ok!(op, "[];[?,2,?];[10,?,3]", "[?,d1_1,d2_2]");
        }
        let op = concat(2).input_tensor(0, Tensor::scalar(1i32));
        infer_ok!(op, "[];[1,100,?];[?,10,3]", "[d1_0,110,d2_2]");
        infer_ok!(op, "[];[1,100];[?,10]", "[d1_0,110]");
        infer_ok!(op, "[];[?,100];[1,10]", "[d2_0,110]");
        infer_error!(
            op,
            "[];[100];[10,?]",
            "Shape must be at least rank 2 but is rank 1"
        );
        let op = concat(5).input_tensor(0, Tensor::scalar(1i32));
        infer_ok!(op, "[];?;[1,100,?];[?,?,?];[?,10,3];?", "[d2_0,?,d4_2]");
        let op = concat(2).input_tensor(0, Tensor::scalar(-1i32));
        infer_ok!(op, "[];[?,100];[1,10]", "[d2_0,110]");
        infer_error!(op, "", "Concat expects at least 1 inputs, got 0");
    }

    #[test]
    fn concat_offset() {
        let op = op("ConcatOffset")
            .attr("N", 4i64)
            .attr("shape_type", DataType::Int32);
        infer_ok!(op, "?;?;?;?;?", "in1;in2;in3;in4");
        infer_ok!(op, "[];[3];[3];[3];[3]", "in1;in2;in3;in4");
    }

    #[test]
    fn bitcast() {
        let cast = |from: DataType, to: DataType| op("Bitcast").attr("T", from).attr("type", to);
        use DataType::*;
        infer_ok!(cast(Float, Int32), "?", "?");
        infer_ok!(cast(Float, Int32), "[1,2]", "in0");
        infer_ok!(cast(Int32, Int64), "[1,2]", "[d0_0]");
        infer_ok!(cast(Int32, Int64), "[1,?]", "[d0_0]");
        infer_error!(
            cast(Int32, Int64),
            "[1,4]",
            "Cannot bitcast from 3 to 9 due to shape. 4 does not match 2"
        );
        infer_error!(cast(Int32, Int64), "[1,3]", "does not match");
        infer_error!(
            cast(Int32, Int64),
            "[]",
            "Shape must be at least rank 1 but is rank 0"
        );
        infer_ok!(cast(Int64, Int32), "[4,5]", "[d0_0,d0_1,2]");
        infer_ok!(cast(Complex128, Int32), "[4,5]", "[d0_0,d0_1,4]");
        infer_ok!(cast(Complex128, Half), "[4,5]", "[d0_0,d0_1,8]");
        infer_ok!(cast(Complex128, Int8), "[4,5]", "[d0_0,d0_1,16]");
        infer_ok!(cast(QUInt8, QInt16), "[?,2]", "[d0_0]");
        infer_error!(
            cast(String, Int32),
            "[1,2,3]",
            "Cannot bitcast type 7 to 3 because one of the type sizes is zero"
        );
        infer_error!(
            cast(Int32, String),
            "[1,2,3]",
            "one of the type sizes is zero"
        );
        infer_error!(op("Bitcast"), "[1]", "No attr named 'T' in NodeDef");
    }

    fn reverse_sequence(seq_dim: i64, batch_dim: i64) -> ShapeTestOp {
        op("ReverseSequence")
            .attr("T", DataType::Float)
            .attr("Tlen", DataType::Int64)
            .attr("seq_dim", seq_dim)
            .attr("batch_dim", batch_dim)
    }

    #[test]
    fn reverse_sequence_shapes() {
        let op = reverse_sequence(1, 2);
        infer_ok!(op, "?;[10]", "?");
        infer_error!(op, "?;[10,10]", "Shape must be rank 1 but is rank 2");
        infer_ok!(op, "[1,2,3];[3]", "[d0_0,d0_1,d0_2]");
        infer_ok!(op, "[1,2,?];[3]", "[d0_0,d0_1,d1_0]");
        infer_ok!(op, "[1,2,3];[?]", "[d0_0,d0_1,d0_2]");
        infer_error!(
            op,
            "[1,2,3];[4]",
            "Dimensions must be equal, but are 3 and 4"
        );
        infer_error!(
            reverse_sequence(1, 4),
            "[1,2,3];[3]",
            "batch_dim must be < input rank: 4 vs. 3"
        );
        infer_error!(
            reverse_sequence(4, 1),
            "[1,2,3];[3]",
            "seq_dim must be < input rank: 4 vs. 3"
        );
        infer_error!(
            reverse_sequence(1, -1),
            "[1,2,3];[3]",
            "batch_dim must be >=0, got -1"
        );
        infer_error!(
            ShapeTestOp::new("ReverseSequence"),
            "[1,2,3];[3]",
            "No attr named 'seq_dim' in NodeDef"
        );
    }

    #[test]
    fn edit_distance() {
        let op = op("EditDistance");
        infer_ok!(op, "[?,?];[?];[4];[?,?];[?];[4]", "?");
        infer_ok!(op, "?;?;?;?;?;?", "?");
        infer_error!(
            op,
            "[5,?];[4];[?];[?,?];[?];[?]",
            "Number of elements in index (5) and values (4) do not match."
        );
        infer_error!(
            op,
            "[?,?];[?];[?];[?,3];[?];[4]",
            "Index rank (3) and shape rank (4) do not match."
        );
        infer_error!(
            op,
            "[?];[?];[?];[?,?];[?];[?]",
            "Shape must be rank 2 but is rank 1"
        );
        let with = |h: Tensor, tr: Tensor| {
            ShapeTestOp::new("EditDistance")
                .input_tensor(2, h)
                .input_tensor(5, tr)
        };
        let op = with(
            i64s(&[4], vec![2, 30, 4, 50]),
            i64s(&[4], vec![20, 3, 40, 5]),
        );
        infer_ok!(op, "[?,?];[?];[4];[?,?];[?];[4]", "[20,30,40]");
        let op = with(i64s(&[1], vec![2]), i64s(&[4], vec![20, 3, 40, 5]));
        infer_error!(
            op,
            "[?,?];[?];[1];[?,?];[?];[4]",
            "Num elements of hypothesis_shape does not match truth_shape: 1 vs. 4"
        );
        let op = with(i64s(&[0], vec![]), i64s(&[0], vec![]));
        infer_error!(op, "[?,?];[?];[0];[?,?];[?];[0]", "at least one element");
        let op = with(i64s(&[1], vec![7]), i64s(&[1], vec![3]));
        infer_ok!(op, "[?,?];[?];[1];[?,?];[?];[1]", "[]");
    }

    fn patches(ksizes: Vec<i64>, rates: Vec<i64>, strides: Vec<i64>, padding: &str) -> ShapeTestOp {
        op("ExtractImagePatches")
            .attr("T", DataType::Float)
            .attr("ksizes", ksizes)
            .attr("rates", rates)
            .attr("strides", strides)
            .attr("padding", padding)
    }

    #[test]
    fn extract_image_patches() {
        let one = vec![1i64, 1, 1, 1];
        let op = patches(vec![1, 2, 2, 1], vec![1, 2, 2, 1], one.clone(), "VALID");
        infer_ok!(op, "[1,7,7,2]", "[d0_0,5,5,8]");
        infer_ok!(op, "[1,?,7,2]", "[d0_0,?,?,8]");
        infer_ok!(op, "?", "[?,?,?,?]");
        infer_error!(op, "[1,7,7]", "Shape must be rank 4 but is rank 3");
        let op = patches(one.clone(), vec![1, 2, 2, 1], one.clone(), "VALID");
        infer_ok!(op, "[1,7,7,2]", "[d0_0,7,7,d0_3]");
        let op = patches(vec![1, 3, 3, 1], one.clone(), vec![1, 2, 2, 1], "SAME");
        infer_ok!(op, "[2,7,8,1]", "[d0_0,4,4,9]");
        let op = patches(vec![1, 9, 9, 1], one.clone(), one.clone(), "VALID");
        infer_error!(
            op,
            "[1,7,7,2]",
            "Computed output size would be negative: -1 [input_size: 7, effective_filter_size: 9, stride: 1]"
        );
        let op = patches(vec![1, 2, 2, 1, 1], vec![1, 2, 2, 1], one.clone(), "VALID");
        infer_error!(
            op,
            "[1,7,7,2]",
            "ExtractImagePatches requires the ksizes attribute to contain 4 values, but got: 5"
        );
        let op = patches(one.clone(), one.clone(), vec![1, 1, 1], "VALID");
        infer_error!(
            op,
            "[1,7,7,2]",
            "ExtractImagePatches requires the stride attribute to contain 4 values, but got: 3"
        );
        let op = patches(one.clone(), one.clone(), vec![1, 0, 1, 1], "VALID");
        infer_error!(op, "[1,7,7,2]", "Stride must be > 0, but got 0");
    }

    fn s2b(block: i64) -> ShapeTestOp {
        op("SpaceToBatch")
            .attr("T", DataType::Float)
            .attr("Tpaddings", DataType::Int32)
            .attr("block_size", block)
    }

    #[test]
    fn space_to_batch() {
        infer_ok!(s2b(2), "[1,10,10,3];[2,2]", "[4,?,?,d0_3]");
        infer_ok!(s2b(2), "[1,10,10,3];?", "[4,?,?,d0_3]");
        infer_ok!(s2b(2), "?;?", "[?,?,?,?]");
        infer_error!(
            s2b(2),
            "[1,10,10,3];[4]",
            "Shapes must be equal rank, but are 1 and 2"
        );
        infer_error!(
            s2b(2),
            "[1,10,10,3];[2,3]",
            "Dimension 1 in both shapes must be equal, but are 3 and 2"
        );
        infer_error!(
            s2b(2),
            "[1,10,10];[2,2]",
            "Shape must be rank 4 but is rank 3"
        );
        let op = s2b(2).input_tensor(1, i32s(&[2, 2], vec![4, 2, 2, 4]));
        infer_ok!(op, "[1,10,10,3];[2,2]", "[4,8,8,d0_3]");
        let op = s2b(2).input_tensor(1, i64s(&[2, 2], vec![4, 2, 2, 4]));
        infer_ok!(op, "[1,10,10,3];[2,2]", "[4,8,8,d0_3]");
        let op = s2b(2).input_tensor(1, i32s(&[2, 2], vec![1, 2, 3, 4]));
        infer_error!(
            op,
            "[1,10,10,3];[2,2]",
            "Dimension size must be evenly divisible by 2 but is 13"
        );
        let op = s2b(2).input_tensor(1, i32s(&[2, 2], vec![1, -2, 3, 4]));
        infer_error!(op, "[1,10,10,3];[2,2]", "paddings cannot be negative");
        let op = s2b(2).input_tensor(1, i32s(&[1, 2], vec![0, 0]));
        infer_error!(
            op,
            "[1,10,10,3];[2,2]",
            "paddings must have at least 4 elements"
        );
    }

    fn nd(name: &str) -> ShapeTestOp {
        op(name).attr("T", DataType::Float)
    }

    #[test]
    fn space_to_batch_nd() {
        let op = nd("SpaceToBatchND");
        infer_ok!(op, "?;[2];?", "?");
        infer_ok!(op, "[?,?,?,?];[2];?", "[?,?,?,d0_3]");
        infer_ok!(op, "[?,?,?,2];[2];?", "[?,?,?,d0_3]");
        infer_ok!(op, "[5,2];[0];?", "[d0_0,d0_1]");
        infer_error!(op, "?;[1,1];?", "block_shape must have rank 1.");
        infer_error!(op, "?;?;?", "block_shape must have rank 1.");
        infer_error!(op, "?;[?];?", "block_shape must have known size.");
        infer_error!(op, "[1,3,3,1];[2];[1]", "Shapes must be equal rank");
        infer_error!(op, "[1,3,3,1];[2];[1,2]", "both shapes must be equal");
        infer_error!(
            op,
            "[1,3];[2];?",
            "Shape must be at least rank 3 but is rank 2"
        );
        let block = i32s(&[2], vec![2, 3]);
        let op = nd("SpaceToBatchND").input_tensor(1, block.clone());
        infer_ok!(op, "[3,?,?,2];[2];?", "[18,?,?,d0_3]");
        infer_ok!(op, "[?,?,?,2];[2];?", "[?,?,?,d0_3]");
        let op = nd("SpaceToBatchND")
            .input_tensor(1, block.clone())
            .input_tensor(2, i32s(&[2, 2], vec![1, 1, 0, 1]));
        infer_ok!(op, "[3,?,2,2];[2];[2,2]", "[18,?,1,d0_3]");
        let op = nd("SpaceToBatchND")
            .input_tensor(1, block)
            .input_tensor(2, i32s(&[2, 2], vec![1, 1, 0, 0]));
        infer_ok!(op, "[3,2,3,2];[2];[2,2]", "[18,2,1,d0_3]");
        let op = nd("SpaceToBatchND").input_tensor(1, i32s(&[2], vec![0, 2]));
        infer_error!(op, "[1,2,2];[2];[2,2]", "block_shape must be positive");
        let op = nd("SpaceToBatchND")
            .input_tensor(1, i32s(&[2], vec![1, 1]))
            .input_tensor(2, i32s(&[2, 2], vec![0, -1, 0, 0]));
        infer_error!(op, "[1,2,2];[2];[2,2]", "paddings cannot be negative");
        let op = nd("SpaceToBatchND")
            .input_tensor(1, i32s(&[2], vec![3, 3]))
            .input_tensor(2, i32s(&[2, 2], vec![0, 0, 0, 0]));
        infer_error!(
            op,
            "[1,2,3,1];[2];[2,2]",
            "Dimension size must be evenly divisible by 3 but is 2"
        );
        let op = nd("SpaceToBatchND")
            .input_tensor(1, i32s(&[1], vec![2]))
            .input_tensor(2, i32s(&[2, 2], vec![0, 0, 0, 0]));
        infer_error!(
            op,
            "[1,2,4,1];[2];[2,2]",
            "block_shape must have at least 2 elements"
        );
    }

    fn b2s(block: i64) -> ShapeTestOp {
        op("BatchToSpace")
            .attr("T", DataType::Float)
            .attr("Tidx", DataType::Int32)
            .attr("block_size", block)
    }

    #[test]
    fn batch_to_space() {
        infer_ok!(b2s(2), "[4,8,8,3];[2,2]", "[1,?,?,d0_3]");
        infer_error!(
            b2s(2),
            "[5,8,8,3];[2,2]",
            "Dimension size must be evenly divisible by 2 but is 5"
        );
        infer_ok!(b2s(2), "[4,8,8,3];?", "[1,?,?,d0_3]");
        infer_ok!(b2s(2), "?;?", "[?,?,?,?]");
        infer_error!(
            b2s(2),
            "[4,8,8,3];[4]",
            "Shapes must be equal rank, but are 1 and 2"
        );
        infer_error!(
            b2s(2),
            "[4,8,8,3];[2,3]",
            "Dimension 1 in both shapes must be equal, but are 3 and 2"
        );
        let op = b2s(2).input_tensor(1, i64s(&[2, 2], vec![4, 2, 2, 4]));
        infer_ok!(op, "[4,8,8,3];[2,2]", "[1,10,10,d0_3]");
        let op = b2s(2).input_tensor(1, i32s(&[2, 2], vec![100, 2, 3, 4]));
        infer_error!(
            op,
            "[4,8,8,3];[2,2]",
            "Negative dimension size caused by subtracting 100 from 16"
        );
        let op = b2s(2).input_tensor(1, i32s(&[2, 2], vec![1, 2, 3, 400]));
        infer_error!(
            op,
            "[4,8,8,3];[2,2]",
            "Negative dimension size caused by subtracting 400 from 13"
        );
        let op = b2s(2).input_tensor(1, i32s(&[2, 2], vec![1, -2, 3, 4]));
        infer_error!(op, "[4,8,8,3];[2,2]", "crops cannot be negative");
    }

    #[test]
    fn batch_to_space_nd() {
        let op = nd("BatchToSpaceND");
        infer_ok!(op, "?;[2];?", "?");
        infer_ok!(op, "[?,?,?,?];[2];?", "[?,?,?,d0_3]");
        infer_error!(op, "?;[1,1];?", "block_shape must have rank 1.");
        infer_error!(op, "?;[?];?", "block_shape must have known size.");
        infer_error!(
            op,
            "[2,2];[2];[2,2]",
            "Shape must be at least rank 3 but is rank 2"
        );
        infer_error!(
            op,
            "[2,2,3];[3];[3,2]",
            "Shape must be at least rank 4 but is rank 3"
        );
        let block = i32s(&[2], vec![2, 3]);
        let op = nd("BatchToSpaceND").input_tensor(1, block.clone());
        infer_ok!(op, "[?,?,?,2];[2];?", "[?,?,?,d0_3]");
        infer_ok!(op, "[18,?,?,2];[2];?", "[3,?,?,d0_3]");
        infer_error!(
            op,
            "[3,1,1,1];[2];[2,2]",
            "Dimension size must be evenly divisible by 2 but is 3"
        );
        let op = nd("BatchToSpaceND")
            .input_tensor(1, block.clone())
            .input_tensor(2, i32s(&[2, 2], vec![1, 1, 0, 1]));
        infer_ok!(op, "[18,?,2,2];[2];[2,2]", "[3,?,5,d0_3]");
        let op = nd("BatchToSpaceND")
            .input_tensor(1, block)
            .input_tensor(2, i32s(&[2, 2], vec![1, 1, 0, 0]));
        infer_ok!(op, "[18,2,1,2];[2];[2,2]", "[3,2,3,d0_3]");
        let op = nd("BatchToSpaceND").input_tensor(1, i32s(&[2], vec![0, 2]));
        infer_error!(op, "[1,2,2];[2];[2,2]", "block_shape must be positive");
        let op = nd("BatchToSpaceND")
            .input_tensor(1, i32s(&[2], vec![1, 1]))
            .input_tensor(2, i32s(&[2, 2], vec![0, -1, 0, 0]));
        infer_error!(op, "[1,2,2];[2];[2,2]", "crops cannot be negative");
        let op = nd("BatchToSpaceND")
            .input_tensor(1, i32s(&[2], vec![2, 2]))
            .input_tensor(2, i32s(&[2, 2], vec![3, 2, 0, 0]));
        infer_error!(
            op,
            "[4,2,3,1];[2];[2,2]",
            "Negative dimension size caused by subtracting 2 from 1"
        );
    }

    fn depth_op(name: &str, block: i64, format: &str) -> ShapeTestOp {
        op(name)
            .attr("T", DataType::Float)
            .attr("block_size", block)
            .attr("data_format", format)
    }

    #[test]
    fn space_to_depth() {
        let op = depth_op("SpaceToDepth", 2, "NHWC");
        infer_ok!(op, "[1,2,4,4]", "[d0_0,1,2,16]");
        infer_error!(
            op,
            "[1,3,8,4]",
            "Dimension size must be evenly divisible by 2 but is 3"
        );
        infer_error!(
            op,
            "[1,2,5,4]",
            "Dimension size must be evenly divisible by 2 but is 5"
        );
        infer_ok!(op, "[1,2,4,?]", "[d0_0,1,2,?]");
        infer_ok!(op, "?", "[?,?,?,?]");
        infer_error!(op, "[1,2,4]", "Shape must be rank 4 but is rank 3");
        let op = depth_op("SpaceToDepth", 2, "NCHW");
        infer_ok!(op, "[1,4,2,4]", "[d0_0,16,1,2]");
        let op = depth_op("SpaceToDepth", 2, "NCHW_VECT_C");
        infer_ok!(op, "[1,4,2,4,4]", "[d0_0,16,1,2,4]");
        infer_error!(
            ShapeTestOp::new("SpaceToDepth"),
            "[1,2,4,4]",
            "No attr named 'data_format' in NodeDef"
        );
    }

    #[test]
    fn depth_to_space() {
        let op = depth_op("DepthToSpace", 2, "NHWC");
        infer_ok!(op, "[1,1,2,16]", "[d0_0,2,4,4]");
        infer_error!(
            op,
            "[1,1,2,15]",
            "Dimension size must be evenly divisible by 4 but is 15"
        );
        infer_ok!(op, "[1,2,4,?]", "[d0_0,4,8,?]");
        let op = depth_op("DepthToSpace", 10, "NHWC");
        infer_ok!(op, "[1,1,2,200]", "[d0_0,10,20,2]");
        let op = depth_op("DepthToSpace", 2, "NCHW");
        infer_ok!(op, "[1,16,1,2]", "[d0_0,4,2,4]");
        infer_ok!(op, "[?,?,?,?]", "[d0_0,?,?,?]");
    }

    #[test]
    fn strided_slice_grad() {
        let op = op("StridedSliceGrad");
        infer_ok!(op, "?;?;?;?;?", "?");
        infer_ok!(op, "[?];?;?;?;?", "?");
        infer_ok!(op, "[4];?;?;?;?", "[?,?,?,?]");
        infer_error!(op, "[4,1];?;?;?;?", "Shape must be rank 1 but is rank 2");
        let op = ShapeTestOp::new("StridedSliceGrad").input_tensor(0, i32s(&[4], vec![1, 2, 3, 4]));
        infer_ok!(op, "[4];?;?;?;?", "[1,2,3,4]");
        let op = ShapeTestOp::new("StridedSliceGrad").input_tensor(0, i64s(&[2], vec![-1, 5]));
        infer_ok!(op, "[2];?;?;?;?", "[?,5]");
    }
}
