//! The plugin under test of `mock_host.rs`: ops, kernels, shape functions
//! and gradients gathered by `export!`, whose entry points the tests call.

use opforge_abi::*;
use opforge_plugin::prelude::*;

const ZERO_OUT: OpDefBuilder = OpDefBuilder::new("ZeroOut")
    .attr("T: realnumbertype = DT_INT32")
    .attr("preserve_index: int = 0")
    .input("to_zero: T")
    .output("zeroed: T")
    .set_shape_fn(shape::unchanged_shape)
    .doc("Zeros out every element of the input except one.");

struct ZeroOut {
    keep: usize,
}

impl CreateKernel for ZeroOut {
    fn create(init: &OpKernelConstruction<'_>) -> Result<Self> {
        let keep: i64 = init.get_attr("preserve_index")?;
        ensure!(
            keep >= 0,
            InvalidArgument,
            "Need preserve_index >= 0, got {}",
            keep
        );
        Ok(ZeroOut {
            keep: keep as usize,
        })
    }
}

impl OpKernel for ZeroOut {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let (n, dtype) = {
            let x = ctx.input(0)?;
            (x.num_elements(), x.dtype())
        };
        ensure!(
            self.keep < n,
            InvalidArgument,
            "preserve_index out of range: {} is not in [0, {})",
            self.keep,
            n
        );
        let forwarded = ctx
            .forward_input_or_allocate_output_like(&[0], 0, 0)?
            .is_some();
        let keep = self.keep;
        dispatch!(dtype, T => {
            if forwarded {
                let mut out = ctx.output_mut(0)?;
                let x = out.flat_mut::<T>()?;
                x[..keep].fill(T::default());
                x[keep + 1..].fill(T::default());
            } else {
                let (ins, mut out) = ctx.inputs_and_output(0)?;
                let x = ins[0].flat::<T>()?;
                let o = out.flat_mut::<T>()?;
                o.fill(T::default());
                o[keep] = x[keep];
            }
            Ok(())
        }, [f32, i32, i64])
    }
}

const PANICKY: OpDefBuilder = OpDefBuilder::new("Panicky")
    .input("x: float")
    .output("y: float");

struct Panicky;

impl CreateKernel for Panicky {
    fn create(_: &OpKernelConstruction<'_>) -> Result<Self> {
        Ok(Panicky)
    }
}

impl OpKernel for Panicky {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let n = ctx.input(0)?.num_elements();
        let v: Vec<u8> = Vec::new();
        // An out-of-bounds index: a panic inside compute.
        let _ = v[n];
        Ok(())
    }
}

const SHARDED: OpDefBuilder = OpDefBuilder::new("Sharded")
    .attr("panic_at: int = -1")
    .input("x: float")
    .output("y: float");

struct Sharded {
    panic_at: i64,
}

impl CreateKernel for Sharded {
    fn create(init: &OpKernelConstruction<'_>) -> Result<Self> {
        Ok(Sharded {
            panic_at: init.get_attr("panic_at")?,
        })
    }
}

impl OpKernel for Sharded {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let x = ctx.input(0)?.flat::<f32>()?.to_vec();
        let dims = ctx.input(0)?.dims().to_vec();
        let sum = std::sync::atomic::AtomicU64::new(0);
        let panic_at = self.panic_at;
        ctx.parallel_for(x.len(), 10, |start, end| {
            if (start..end).contains(&(panic_at as usize)) {
                panic!("shard {start}..{end} refuses");
            }
            let s: f32 = x[start..end].iter().sum();
            sum.fetch_add(s as u64, std::sync::atomic::Ordering::Relaxed);
        })?;
        let mut out = ctx.allocate_output(0, &dims)?;
        let o = out.flat_mut::<f32>()?;
        o.fill(sum.into_inner() as f32);
        Ok(())
    }
}

const IOTA: OpDefBuilder = OpDefBuilder::new("Iota")
    .attr("from_vec: bool = false")
    .input("n: int64")
    .output("y: int64");

/// `Iota(n)`: `[0, 1, ..., n-1]`, written from parallel shards, or handed
/// over as the plugin's own `Vec`.
struct Iota {
    from_vec: bool,
}

impl CreateKernel for Iota {
    fn create(init: &OpKernelConstruction<'_>) -> Result<Self> {
        Ok(Iota {
            from_vec: init.get_attr("from_vec")?,
        })
    }
}

impl OpKernel for Iota {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let n = ctx.input(0)?.flat::<i64>()?[0];
        opforge_plugin::log::info(&format!("iota of {n}"));
        if self.from_vec {
            return ctx.set_output_from_vec(0, &[n], (0..n).collect::<Vec<i64>>());
        }
        let pool = ctx.thread_pool();
        let mut out = ctx.allocate_output(0, &[n])?;
        pool.parallel_chunks_mut(out.flat_mut::<i64>()?, 1, |offset, chunk| {
            for (k, x) in chunk.iter_mut().enumerate() {
                *x = (offset + k) as i64;
            }
        })
    }
}

fn no_grad(_: &mut GradientContext<'_>) -> Result<()> {
    Ok(())
}

fn panicking_grad(_: &mut GradientContext<'_>) -> Result<()> {
    panic!("no gradient today")
}

fn panicking_shape_fn(_: &mut InferenceContext<'_>) -> Result<()> {
    panic!("no shapes today")
}

/// A shape function in TensorFlow's vocabulary: the transpose of a matrix.
fn transpose2_shape(c: &mut InferenceContext<'_>) -> Result<()> {
    let x = c.input(0);
    let m = c.with_rank(x, 2)?;
    let rows = c.dim(m, 0)?;
    let cols = c.dim(m, -1)?;
    ensure!(
        c.value(rows) != Some(0),
        InvalidArgument,
        "Transpose2 needs a non-empty first dim, got {}",
        c.debug_string(m)
    );
    let t = c.make_shape(&[cols.into(), rows.into()])?;
    c.set_output(0, t)
}

const TRANSPOSE2: OpDefBuilder = OpDefBuilder::new("Transpose2")
    .attr("T: type")
    .input("x: T")
    .output("y: T")
    .set_shape_fn(transpose2_shape);

/// Uses a query the mock host's shape table lacks (`num_elements`).
fn counting_shape(c: &mut InferenceContext<'_>) -> Result<()> {
    let x = c.input(0);
    let _ = c.num_elements(x);
    c.set_output(0, x)
}

const COUNTING: OpDefBuilder = OpDefBuilder::new("Counting")
    .input("x: float")
    .output("y: float")
    .set_shape_fn(counting_shape);

const TWICE: OpDefBuilder = OpDefBuilder::new("Twice")
    .attr("T: {float, double}")
    .input("x: T")
    .output("y: T");

/// d(2x) = dy + dy, as data: `AddN([dy, dy], T=$T)`.
fn twice_grad() -> GradientFunction {
    let mut g = GradientFunction::new();
    let dy = GradSource::OutputGrad(ArgRef::arg("y"));
    let sum = g.node(
        "AddN",
        vec![GradArg::list(vec![dy.clone(), dy])],
        vec![("T", NodeAttr::Placeholder("T".into()))],
    );
    g.input_grads(vec![GradArg::one(GradSource::Node(
        sum,
        ArgRef::arg("sum"),
    ))]);
    g
}

const SCALE: OpDefBuilder = OpDefBuilder::new("Scale")
    .input("x: float")
    .output("y: float");

const SPLIT2: OpDefBuilder = OpDefBuilder::new("Split2")
    .input("x: float")
    .output("a: float")
    .output("b: float");

/// A gradient written with `grad()`: `dx = dy * x` (that of `y = x * x / 2`).
fn scale_grad(g: &mut GradientContext<'_>) -> Result<()> {
    let dy = g.grad()?;
    let x = g.input(0);
    let dx = g.op1("Mul", &[dy, x], &[])?;
    g.set_input_grad(0, dx)
}

const ODD: OpDefBuilder = OpDefBuilder::new("Odd")
    .input("x: float")
    .output("y: float")
    .set_shape_fn(panicking_shape_fn);

/// A kernel whose state panics when dropped (destroy).
struct DropPanics;

impl Drop for DropPanics {
    fn drop(&mut self) {
        panic!("cannot let go");
    }
}

impl CreateKernel for DropPanics {
    fn create(_: &OpKernelConstruction<'_>) -> Result<Self> {
        Ok(DropPanics)
    }
}

impl OpKernel for DropPanics {
    fn compute(&self, _: &mut OpKernelContext<'_>) -> Result<()> {
        Ok(())
    }
}

/// `ZeroOut` again, its output declared (`output_like_forwarding`): the
/// same kernel, written before declarations, still asks for the output.
const ZERO_OUT_DECLARED: OpDefBuilder = OpDefBuilder::new("ZeroOutDeclared")
    .attr("T: realnumbertype = DT_INT32")
    .attr("preserve_index: int = 0")
    .input("to_zero: T")
    .output("zeroed: T");

const NEGATE: OpDefBuilder = OpDefBuilder::new("Negate")
    .input("x: float")
    .output("y: float");

/// An elementwise kernel written for a declared output (`output_like`).
struct Negate;

impl CreateKernel for Negate {
    fn create(_: &OpKernelConstruction<'_>) -> Result<Self> {
        Ok(Negate)
    }
}

impl OpKernel for Negate {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let (ins, mut out) = ctx.inputs_and_output(0)?;
        for (y, x) in out.flat_mut::<f32>()?.iter_mut().zip(ins[0].flat::<f32>()?) {
            *y = -x;
        }
        Ok(())
    }
}

const READ_AFTER_USE: OpDefBuilder = OpDefBuilder::new("ReadAfterUse")
    .input("x: float")
    .output("y: float");

/// Reads its input, writes its (declared, forwardable) output, then reads
/// the input again: an error exactly when the output took over the input.
struct ReadAfterUse;

impl CreateKernel for ReadAfterUse {
    fn create(_: &OpKernelConstruction<'_>) -> Result<Self> {
        Ok(ReadAfterUse)
    }
}

impl OpKernel for ReadAfterUse {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let first = ctx.input(0)?.flat::<f32>()?[0];
        ctx.output_mut(0)?.flat_mut::<f32>()?.fill(first + 1.0);
        let again = ctx.input(0)?.flat::<f32>()?[0];
        ensure!(
            again == first && ctx.forwarded_from(0).is_none(),
            Internal,
            "input 0 read {again} after its output was written"
        );
        Ok(())
    }
}

opforge_plugin::export! {
    name: "mock_test_lib",
    version: "9.8.7",
    ops: [
        ZERO_OUT,
        PANICKY,
        SHARDED,
        ODD,
        IOTA,
        TRANSPOSE2,
        COUNTING,
        TWICE,
        ZERO_OUT_DECLARED,
        NEGATE,
        READ_AFTER_USE,
        SCALE,
        SPLIT2,
    ],
    kernels: [
        KernelDefBuilder::new("ZeroOut")
            .type_constraint_list("T", &[DataType::Float, DataType::Int32, DataType::Int64])
            .build::<ZeroOut>(),
        KernelDefBuilder::new("ZeroOutDeclared")
            .type_constraint_list("T", &[DataType::Float, DataType::Int32, DataType::Int64])
            .output_like_forwarding(0, 0)
            .build::<ZeroOut>(),
        KernelDefBuilder::new("Negate").output_like(0, 0).build::<Negate>(),
        KernelDefBuilder::new("ReadAfterUse")
            .output_like_forwarding(0, 0)
            .build::<ReadAfterUse>(),
        KernelDefBuilder::new("Panicky").build::<Panicky>(),
        KernelDefBuilder::new("Sharded").not_thread_safe().build::<Sharded>(),
        KernelDefBuilder::new("Odd").build::<DropPanics>(),
        KernelDefBuilder::new("Iota").host_memory("n").build::<Iota>(),
    ],
    gradients: [
        GradientDef::new("ZeroOut", no_grad),
        GradientDef::not_differentiable("Panicky"),
        GradientDef::new("Odd", panicking_grad),
        GradientDef::nodes("Twice", twice_grad),
        GradientDef::new("Scale", scale_grad),
        GradientDef::new("Split2", scale_grad),
    ],
}

unsafe extern "C" {
    pub fn opforge_plugin_init_v1(
        host: *const OpforgeHostApi,
        registrar: *mut OpforgeRegistrar,
        status: *mut OpforgeStatus,
    ) -> OpforgeCode;
    pub fn opforge_plugin_fini_v1();
}
