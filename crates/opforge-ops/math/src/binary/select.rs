//! Three-way broadcasting and the selects (`Select`, `SelectV2`).

use super::*;
use opforge_core::device::ThreadPool;
use opforge_ops_base::cpu::mover::{move_in_place, Carrier, MoveElements};

// Three-way broadcasting and the selects
// ---------------------------------------------------------------------------

/// A broadcasting plan for three inputs (NumPy rules): the output shape,
/// and the output dims collapsed so that each dim is either broadcast or not
/// for each input, with each input's stride per collapsed dim (0 where broadcast).
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Broadcast3 {
    /// The (uncollapsed) output shape.
    pub(crate) out_shape: Vec<i64>,
    dims: Vec<usize>,
    strides: [Vec<usize>; 3],
}

impl Broadcast3 {
    /// The plan for inputs of shapes `shapes`, or `None` if they do not broadcast.
    pub(crate) fn new(shapes: [&[i64]; 3]) -> Option<Broadcast3> {
        let rank = shapes.iter().map(|s| s.len()).max().unwrap_or(0);
        let padded: Vec<Vec<i64>> = shapes
            .iter()
            .map(|s| {
                let mut v = vec![1; rank - s.len()];
                v.extend_from_slice(s);
                v
            })
            .collect();
        let mut out_shape = vec![1i64; rank];
        for (i, o) in out_shape.iter_mut().enumerate() {
            for p in &padded {
                if p[i] != 1 {
                    if *o != 1 && *o != p[i] {
                        return None;
                    }
                    *o = p[i];
                }
            }
        }
        // Collapse adjacent dims with the same broadcast pattern; drop size-1 output dims.
        let mut dims: Vec<usize> = Vec::new();
        let mut patterns: Vec<[bool; 3]> = Vec::new();
        for (i, &d) in out_shape.iter().enumerate() {
            if d == 1 {
                continue;
            }
            let p = [padded[0][i] == 1, padded[1][i] == 1, padded[2][i] == 1];
            match (patterns.last(), dims.last_mut()) {
                (Some(q), Some(last)) if *q == p => *last *= d as usize,
                _ => {
                    dims.push(d as usize);
                    patterns.push(p);
                }
            }
        }
        let strides = std::array::from_fn(|k| {
            let mut s = vec![0; dims.len()];
            let mut acc = 1;
            for i in (0..dims.len()).rev() {
                if !patterns[i][k] {
                    s[i] = acc;
                    acc *= dims[i];
                }
            }
            s
        });
        Some(Broadcast3 {
            out_shape,
            dims,
            strides,
        })
    }

    /// The length of an innermost row and each input's step along it.
    pub(super) fn inner(&self) -> (usize, [usize; 3]) {
        match self.dims.last() {
            Some(&d) => (
                d,
                std::array::from_fn(|k| self.strides[k][self.dims.len() - 1]),
            ),
            None => (1, [0; 3]),
        }
    }

    /// The number of innermost rows.
    pub(super) fn rows(&self) -> usize {
        match self.dims.split_last() {
            Some((_, outer)) => outer.iter().product(),
            None => 1,
        }
    }

    /// Each input's offset at the start of row `r`.
    pub(super) fn row_offsets(&self, r: usize) -> [usize; 3] {
        let mut rem = r;
        let mut off = [0; 3];
        for d in (0..self.dims.len().saturating_sub(1)).rev() {
            let i = rem % self.dims[d];
            rem /= self.dims[d];
            for (k, o) in off.iter_mut().enumerate() {
                *o += i * self.strides[k][d];
            }
        }
        off
    }
}

/// The mover body of the selects: `dst[i] = condition[i] ? t[i] : e[i]`
/// under `plan`, where `srcs` holds `t` and `e` except the one `forwarded`
/// (inputs 1 and 2), which is `dst` itself.
struct SelectBody<'a> {
    plan: &'a Broadcast3,
    cond: &'a [bool],
    forwarded: Option<usize>,
}

impl MoveElements for SelectBody<'_> {
    fn run<T: Carrier>(&self, pool: &ThreadPool, srcs: &[&[T]], out: &mut [T]) {
        let plan = self.plan;
        let cond = self.cond;
        // `None`: that input is the output's own buffer.
        let mut srcs = srcs.iter().copied();
        let then = (self.forwarded != Some(1)).then(|| srcs.next()).flatten();
        let els = (self.forwarded != Some(2)).then(|| srcs.next()).flatten();
        let (inner, step) = plan.inner();
        let rows = plan.rows();
        let run = |r0: usize, r1: usize, o: &mut [T]| {
            for (r, orow) in (r0..r1).zip(o.chunks_mut(inner)) {
                let off = plan.row_offsets(r);
                for (j, slot) in orow.iter_mut().enumerate() {
                    if cond[off[0] + j * step[0]] {
                        if let Some(t) = then {
                            slot.clone_from(&t[off[1] + j * step[1]]);
                        }
                    } else if let Some(e) = els {
                        slot.clone_from(&e[off[2] + j * step[2]]);
                    }
                }
            }
        };
        let shards = elementwise_shards(pool, out.len(), COST_CHEAP).min(rows);
        chunks_in_shards(pool, out, inner, shards, &|off, o| {
            let r0 = off / inner;
            run(r0, r0 + o.len() / inner, o)
        });
    }
}

/// `output[i] = condition[i] ? t[i] : e[i]` under `plan` (inputs 0, 1, 2),
/// computed in place in `t`'s or `e`'s buffer when one has the output's
/// shape and may be reused.
pub(super) fn select_with_plan(
    ctx: &mut OpKernelContext<'_>,
    plan: &Broadcast3,
    out_shape: &TensorShape,
) -> Result<()> {
    let forwarded = ctx.forward_input_or_allocate_output(&[1, 2], 0, out_shape)?;
    if out_shape.num_elements() == 0 {
        return Ok(());
    }
    let pool = ctx.thread_pool();
    let (ins, out) = ctx.inputs_and_output(0)?;
    let srcs: Vec<&Tensor> = [1, 2]
        .into_iter()
        .filter(|&i| Some(i) != forwarded)
        .map(|i| &ins[i])
        .collect();
    let body = SelectBody {
        plan,
        cond: ins[0].flat::<bool>()?,
        forwarded,
    };
    move_in_place(pool, out, &srcs, &body)
}

/// TensorFlow's original `Select`: `condition` is a scalar (picks `t` or
/// `e` whole), a vector matching the first dimension of `t` (picks rows),
/// or has the shape of `t`; `t` and `e` have the same shape.
pub(super) fn select_v1(ctx: &mut OpKernelContext<'_>) -> Result<()> {
    let cond = ctx.input(0).shape().clone();
    let then = ctx.input(1).shape().clone();
    let els = ctx.input(2).shape().clone();
    let same_size = |then: &TensorShape, els: &TensorShape| -> Result<()> {
        ensure!(
            then == els,
            InvalidArgument,
            "'then' and 'else' must have the same size.  but received: {then} vs. {els}"
        );
        Ok(())
    };
    if cond.rank() == 0 {
        same_size(&then, &els)?;
        let pick = ctx.input(0).scalar_value::<bool>()?;
        let out = ctx.take_input(if pick { 1 } else { 2 });
        return ctx.set_output(0, out);
    }
    let cond_dims: Vec<i64> = if cond.rank() == 1 && then.rank() != 1 {
        ensure!(
            then.rank() >= 1,
            InvalidArgument,
            "'then' must be at least a vector, but saw shape: {then}"
        );
        ensure!(
            then.dim(0) == cond.dim(0),
            InvalidArgument,
            "Number of batches of 'then' must match size of 'cond', but saw: {} vs. {}",
            then.dim(0),
            cond.dim(0)
        );
        same_size(&then, &els)?;
        let mut d = vec![1; then.rank()];
        d[0] = cond.dim(0);
        d
    } else {
        for (i, s) in [(1, &then), (2, &els)] {
            ensure!(
                *s == cond,
                InvalidArgument,
                "Inputs to operation {} of type {} must have the same size and shape.  Input 0: {} != input {}: {}",
                ctx.node_name(),
                ctx.op_def().name,
                cond,
                i,
                s
            );
        }
        cond.dims().to_vec()
    };
    let plan = Broadcast3::new([&cond_dims, then.dims(), els.dims()])
        .ok_or_else(|| Status::internal("Select: shapes checked to broadcast do not"))?;
    select_with_plan(ctx, &plan, &then)
}

/// `SelectV2`: `condition`, `t` and `e` broadcast against each other.
pub(super) fn select_v2(ctx: &mut OpKernelContext<'_>) -> Result<()> {
    let (c, t, e) = (
        ctx.input(0).shape(),
        ctx.input(1).shape(),
        ctx.input(2).shape(),
    );
    let plan = Broadcast3::new([c.dims(), t.dims(), e.dims()]).ok_or_else(|| {
        Status::invalid_argument(format!(
            "condition {c}, then {t}, and else {e} must be broadcastable"
        ))
    })?;
    let out_shape = TensorShape::new(&plan.out_shape)?;
    select_with_plan(ctx, &plan, &out_shape)
}

/// `Select` (`v2 == false`) and `SelectV2`.
pub(super) struct SelectKernel {
    v2: bool,
}

impl OpKernel for SelectKernel {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        if self.v2 {
            select_v2(ctx)
        } else {
            select_v1(ctx)
        }
    }
}

register_op!(OpDefBuilder::new("Select")
    .input("condition: bool")
    .input("t: T")
    .input("e: T")
    .output("output: T")
    .attr("T: type")
    .set_shape_fn(select_shape)
    .doc(
        "Selects elements from `t` or `e`, depending on `condition`.\n\n\
         The `t`, and `e` tensors must all have the same shape, and the output will\n\
         also have that shape. The `condition` tensor must be a scalar if `t` and\n\
         `e` are scalars. If `t` and `e` are vectors or higher rank, then `condition`\n\
         must be either a scalar, a vector with size matching the first dimension of\n\
         `t`, or must have the same shape as `t`."
    ));
register_kernel!(
    KernelDefBuilder::new("Select").type_constraint_list("T", &value_types()),
    fn = |_| Ok(Box::new(SelectKernel { v2: false }) as Box<dyn OpKernel>)
);
register_op!(OpDefBuilder::new("SelectV2")
    .input("condition: bool")
    .input("t: T")
    .input("e: T")
    .output("output: T")
    .attr("T: type")
    .set_shape_fn(select_v2_shape)
    .doc(
        "Selects elements from `t` or `e`, depending on `condition`.\n\n\
         `condition`, `t` and `e` are broadcast against each other (NumPy rules)."
    ));
register_kernel!(
    KernelDefBuilder::new("SelectV2").type_constraint_list("T", &value_types()),
    fn = |_| Ok(Box::new(SelectKernel { v2: true }) as Box<dyn OpKernel>)
);

// ---------------------------------------------------------------------------
