//! The device seam, proven on the fake device: placement by requested
//! device and kernel availability, copies between devices inserted by the
//! executor, host-memory arguments respected, eager copies; and the
//! registry seam: unloading a library's op under a live session and eager
//! context.

use opforge_core::attrs::AttrMap;
use opforge_core::device::{CpuDevice, Device};
use opforge_core::eager::EagerContext;
use opforge_core::graph::{Graph, NodeSpec, Output, Session};
use opforge_core::kernel::{
    CreateKernel, KernelDefBuilder, KernelRegistration, OpKernel, OpKernelConstruction,
    OpKernelContext,
};
use opforge_core::registry::Registry;
use opforge_core::shape_inference::ShapeFn;
use opforge_core::tensor::Location;
use opforge_core::{Code, OpDefBuilder, Result, Tensor};
use opforge_testing::fake_device::mirror_cpu_kernels;
use opforge_testing::{FakeDevice, DEVICE_FAKE};
use std::sync::Arc;

/// `y = x * k` (k an int32 scalar: host memory on the fake device).
struct Scale;
impl OpKernel for Scale {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let k = ctx.input(1).scalar_value::<i32>()? as f32;
        let y: Vec<f32> = ctx.input(0).flat::<f32>()?.iter().map(|v| v * k).collect();
        let t = Tensor::from_vec(ctx.input(0).dims(), y)?;
        ctx.set_output(0, t)
    }
}
impl CreateKernel for Scale {
    fn create(_: &OpKernelConstruction<'_>) -> Result<Self> {
        Ok(Scale)
    }
}

/// `y = x + 1`, CPU only.
struct Inc;
impl OpKernel for Inc {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let y: Vec<f32> = ctx
            .input(0)
            .flat::<f32>()?
            .iter()
            .map(|v| v + 1.0)
            .collect();
        let t = Tensor::from_vec(ctx.input(0).dims(), y)?;
        ctx.set_output(0, t)
    }
}
impl CreateKernel for Inc {
    fn create(_: &OpKernelConstruction<'_>) -> Result<Self> {
        Ok(Inc)
    }
}

fn registry() -> Arc<Registry> {
    let r = Registry::new();
    r.register_op(
        OpDefBuilder::new("TFeed")
            .attr("dtype: type")
            .output("y: dtype"),
    )
    .unwrap();
    r.register_op(
        OpDefBuilder::new("TScale")
            .input("x: float")
            .input("k: int32")
            .output("y: float"),
    )
    .unwrap();
    r.register_op(
        OpDefBuilder::new("TInc")
            .input("x: float")
            .output("y: float"),
    )
    .unwrap();
    r.register_kernel(KernelRegistration::of::<Scale>(KernelDefBuilder::new(
        "TScale",
    )))
    .unwrap();
    r.register_kernel(KernelRegistration::of::<Inc>(KernelDefBuilder::new("TInc")))
        .unwrap();
    Arc::new(r)
}

fn feed(g: &mut Graph, name: &str, dtype: opforge_core::DataType) -> Output {
    Output::new(
        g.add(NodeSpec::new("TFeed", name).attr("dtype", dtype))
            .unwrap(),
        0,
    )
}

#[test]
fn sessions_place_nodes_and_copy_between_devices() {
    let r = registry();
    assert_eq!(mirror_cpu_kernels(&r, DEVICE_FAKE).unwrap(), 2);
    // Mirroring again adds nothing.
    assert_eq!(mirror_cpu_kernels(&r, DEVICE_FAKE).unwrap(), 0);
    let fake = Arc::new(FakeDevice::new(0));
    let cpu: Arc<dyn Device> = Arc::new(CpuDevice::new(1).unwrap());

    let mut g = Graph::with_registry(r.clone());
    let x = feed(&mut g, "x", opforge_core::DataType::Float);
    let k = feed(&mut g, "k", opforge_core::DataType::Int32);
    // Unconstrained: the first device with a kernel, the fake one.
    let scaled = g
        .add(NodeSpec::new("TScale", "scaled").input(x).input(k))
        .unwrap();
    // Pinned to the CPU: its input is copied from the fake device.
    let on_cpu = g
        .add(
            NodeSpec::new("TInc", "inc_cpu")
                .input(Output::new(scaled, 0))
                .device("/job:localhost/replica:0/task:0/device:CPU:0"),
        )
        .unwrap();
    // Asks for the fake device, whose mirror reads `x` from device memory.
    let back = g
        .add(
            NodeSpec::new("TScale", "back")
                .input(Output::new(on_cpu, 0))
                .input(k)
                .device("/device:FAKE:0"),
        )
        .unwrap();
    let s = Session::builder(g)
        .devices(vec![fake.clone() as Arc<dyn Device>, cpu])
        .build()
        .unwrap();
    let out = s
        .run(
            vec![
                (x, Tensor::from_vec(&[3], vec![1.0f32, 2.0, -3.0]).unwrap()),
                (k, Tensor::scalar(2i32)),
            ],
            &[Output::new(scaled, 0), Output::new(back, 0)],
            &[],
        )
        .unwrap();
    // Fetches come back to the host.
    assert!(out.iter().all(|t| t.location() == Location::Host));
    assert_eq!(out[0].flat::<f32>().unwrap(), &[2.0, 4.0, -6.0]);
    assert_eq!(out[1].flat::<f32>().unwrap(), &[6.0, 10.0, -10.0]);
    assert_eq!(s.placement(scaled).unwrap().device_type(), DEVICE_FAKE);
    assert_eq!(s.placement(on_cpu).unwrap().device_type(), "CPU");
    assert_eq!(s.placement(back).unwrap().device_type(), DEVICE_FAKE);
    let (to_host, from_host) = fake.copies();
    // x and inc_cpu's output went to the device; scaled's output came back
    // for inc_cpu, each mirror read its device input and wrote its output,
    // and both fetches came back.
    assert!(from_host >= 4 && to_host >= 5, "{to_host} {from_host}");
}

#[test]
fn placement_without_soft_placement_names_the_device() {
    let r = registry();
    let mut g = Graph::with_registry(r);
    let x = feed(&mut g, "x", opforge_core::DataType::Float);
    let inc = g
        .add(
            NodeSpec::new("TInc", "inc")
                .input(x)
                .device("/device:GPU:3"),
        )
        .unwrap();
    let options = opforge_core::graph::SessionOptions {
        allow_soft_placement: false,
        ..Default::default()
    };
    let s = Session::builder(g).options(options).build().unwrap();
    let err = s
        .run(vec![(x, Tensor::scalar(1f32))], &[Output::new(inc, 0)], &[])
        .unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument);
    assert!(
        err.message().starts_with(
            "Cannot assign a device for operation inc: no device matches '/device:GPU:3'"
        ),
        "{err}"
    );
}

#[test]
fn eager_execution_copies_inputs_to_the_device() {
    let r = registry();
    mirror_cpu_kernels(&r, DEVICE_FAKE).unwrap();
    let fake = Arc::new(FakeDevice::new(0));
    let ctx = EagerContext::with_registry(fake.clone(), r);
    let x = Tensor::from_vec(&[2], vec![1.5f32, -1.0]).unwrap();
    let y = ctx
        .op("TScale")
        .input(x)
        .input(Tensor::scalar(4i32))
        .run1()
        .unwrap();
    // The output stays in the device's memory...
    assert_eq!(y.location(), fake.location());
    assert!(y.flat::<f32>().is_err());
    // ... and is read through the device.
    let host = fake.copy_to_host(&y).unwrap();
    assert_eq!(host.flat::<f32>().unwrap(), &[6.0, -4.0]);
    // A device tensor is a fine input for the next op.
    let z = ctx.op("TInc").input(y).run1().unwrap();
    assert_eq!(
        fake.copy_to_host(&z).unwrap().flat::<f32>().unwrap(),
        &[7.0, -3.0]
    );
}

#[test]
fn unloading_a_library_stops_sessions_and_eager_caches_cleanly() {
    let r = registry();
    let lib = r.add_owner("/tmp/libdouble.so");
    let reg = r.registrar(lib, "/tmp/libdouble.so");
    reg.op(OpDefBuilder::new("TDouble")
        .input("x: float")
        .output("y: float")
        .set_shape_fn(|c| {
            let s = c.input(0);
            c.set_output(0, s);
            Ok(())
        }))
    .unwrap();
    reg.kernel(KernelRegistration::with_factory(
        KernelDefBuilder::new("TDouble"),
        |_| Ok(Box::new(Doubler) as Box<dyn OpKernel>),
    ))
    .unwrap();
    assert!(r.attr::<ShapeFn>("TDouble").is_some());

    let ctx = EagerContext::with_registry(Arc::new(CpuDevice::new(1).unwrap()), r.clone());
    let run = |ctx: &EagerContext| ctx.op("TDouble").input(Tensor::scalar(3f32)).run1();
    assert_eq!(run(&ctx).unwrap().scalar_value::<f32>().unwrap(), 6.0);
    assert_eq!(ctx.cached_kernels(), 1);

    let mut g = Graph::with_registry(r.clone());
    let x = feed(&mut g, "x", opforge_core::DataType::Float);
    let d = g.add(NodeSpec::new("TDouble", "double").input(x)).unwrap();
    let s = Session::new(g).unwrap();
    let fetch = |s: &Session| s.run(vec![(x, Tensor::scalar(2f32))], &[Output::new(d, 0)], &[]);
    assert_eq!(fetch(&s).unwrap()[0].scalar_value::<f32>().unwrap(), 4.0);

    let unloaded = r.unload(lib);
    assert_eq!(unloaded.ops, ["TDouble"]);
    // The session fails cleanly, naming the node, the op and the library.
    let err = fetch(&s).unwrap_err();
    assert_eq!(err.code(), Code::FailedPrecondition);
    let msg = err.message();
    assert!(msg.contains("Node 'double' uses op 'TDouble'"), "{msg}");
    assert!(msg.contains("/tmp/libdouble.so"), "{msg}");
    // The eager cache drops the kernel; the op is gone.
    let err = run(&ctx).unwrap_err();
    assert_eq!(err.code(), Code::NotFound);
    assert!(
        err.message().contains("Op type not registered 'TDouble'"),
        "{err}"
    );
    assert_eq!(ctx.cached_kernels(), 0);
    // Other ops keep working in both.
    let inc = ctx.op("TInc").input(Tensor::scalar(1f32)).run1().unwrap();
    assert_eq!(inc.scalar_value::<f32>().unwrap(), 2.0);
    // A graph that still holds the node reports it too.
    let err = s.graph().check_live().unwrap_err();
    assert_eq!(err.code(), Code::FailedPrecondition);
    let _ = AttrMap::new();
}

struct Doubler;
impl OpKernel for Doubler {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let v = ctx.input(0).scalar_value::<f32>()?;
        ctx.set_output(0, Tensor::scalar(v * 2.0))
    }
}

#[test]
fn foreign_and_forged_handles_are_invalid_arguments() {
    use opforge_core::autodiff::{GradientTape, Sym};
    let r = registry();
    let mut g1 = Graph::with_registry(r.clone());
    let mut g2 = Graph::with_registry(r.clone());
    let x1 = feed(&mut g1, "x", opforge_core::DataType::Float);
    let x2 = feed(&mut g2, "x", opforge_core::DataType::Float);
    assert_eq!(g1.node(x2.node).unwrap_err().code(), Code::InvalidArgument);
    assert!(g1.node(x1.node).is_ok());
    let s = Session::new(g1).unwrap();
    let err = s
        .run(vec![(x1, Tensor::scalar(1f32))], &[x2], &[])
        .unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument);
    assert!(err.message().contains("another graph"), "{err}");
    let ctx = EagerContext::with_registry(Arc::new(CpuDevice::new(1).unwrap()), r);
    let mut t1 = GradientTape::new(&ctx, false);
    let t2 = GradientTape::new(&ctx, false);
    let a = t1.watch(Tensor::scalar(1f32));
    assert_eq!(t2.value(a).unwrap_err().code(), Code::InvalidArgument);
    let forged = Sym::new(a.scope(), 99);
    assert_eq!(t1.value(forged).unwrap_err().code(), Code::InvalidArgument);
    assert_eq!(
        t1.gradient(forged, &[a]).unwrap_err().code(),
        Code::InvalidArgument
    );
}

#[test]
fn autodiff_in_a_registry_without_its_ops_names_them() {
    use opforge_core::autodiff::{GradientTape, Ops};
    // A selective build with only the ops of this file: autodiff's own ops
    // (AddN, OnesLike, ...) are missing, and its first use says so.
    let r = registry();
    let ctx = EagerContext::with_registry(Arc::new(CpuDevice::new(1).unwrap()), r);
    let mut tape = GradientTape::new(&ctx, false);
    let x = tape.watch(Tensor::scalar(2f32));
    let y = tape
        .call(
            "TInc",
            &[opforge_core::autodiff::SymArg::One(x)],
            &AttrMap::new(),
        )
        .unwrap()[0];
    let err = tape.gradient(y, &[x]).unwrap_err();
    assert_eq!(err.code(), Code::FailedPrecondition);
    assert!(
        err.message()
            .starts_with("autodiff needs the ops 'AddN', 'AddV2', 'Const'"),
        "{err}"
    );
}
