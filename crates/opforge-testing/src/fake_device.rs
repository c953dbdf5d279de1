//! A fake accelerator for tests: [`FakeDevice`] keeps dense tensors in
//! memory that only the device itself can read (a [`DeviceBuffer`] with no
//! host pointer), so every value a runtime hands to a kernel on it must have
//! gone through [`Device::copy_from_host`], and every value read back
//! through [`Device::copy_to_host`]. [`mirror_cpu_kernels`] gives it a
//! kernel for each CPU kernel: the mirror checks that each input is in the
//! memory its kernel definition asks for (the device's, or the host's for
//! host-memory arguments), copies the inputs to the host, runs the CPU
//! kernel, and copies the outputs back. Mirrors declare the CPU kernel's
//! host-memory arguments plus every argument of fixed type `int32` (shapes,
//! axes, indices), as TensorFlow's GPU kernels keep `int32` in host memory,
//! so both paths of the runtime's placement are exercised.

use opforge_core::device::{memory_for, CpuDevice, Device, DEVICE_CPU};
use opforge_core::kernel::{
    call_kernel, KernelDef, KernelRegistration, OpKernel, OpKernelConstruction, OpKernelContext,
    TensorVec,
};
use opforge_core::registry::Registry;
use opforge_core::tensor::{DeviceBuffer, Location};
use opforge_core::{Code, DataType, Result, Status, Tensor, TensorShape};
use std::any::Any;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// The device type of [`FakeDevice`].
pub const DEVICE_FAKE: &str = "FAKE";

/// A device whose memory is reachable only through the device interface.
pub struct FakeDevice {
    name: String,
    ordinal: u32,
    to_host: AtomicUsize,
    from_host: AtomicUsize,
}

/// The fake device's memory: bytes no kernel can reach.
struct FakeBuffer {
    bytes: Box<[u8]>,
    ordinal: u32,
}

impl DeviceBuffer for FakeBuffer {
    fn byte_len(&self) -> usize {
        self.bytes.len()
    }
    fn location(&self) -> Location {
        Location::Device {
            device_type: DEVICE_FAKE,
            ordinal: self.ordinal,
        }
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}

impl FakeDevice {
    /// Fake device number `ordinal` (`/job:localhost/replica:0/task:0/device:FAKE:<ordinal>`).
    pub fn new(ordinal: u32) -> FakeDevice {
        FakeDevice {
            name: format!("/job:localhost/replica:0/task:0/device:{DEVICE_FAKE}:{ordinal}"),
            ordinal,
            to_host: AtomicUsize::new(0),
            from_host: AtomicUsize::new(0),
        }
    }

    /// How many tensors were copied to the host, and from it, so far.
    pub fn copies(&self) -> (usize, usize) {
        (
            self.to_host.load(Ordering::Relaxed),
            self.from_host.load(Ordering::Relaxed),
        )
    }

    fn buffer(&self, bytes: Box<[u8]>) -> Arc<dyn DeviceBuffer> {
        Arc::new(FakeBuffer {
            bytes,
            ordinal: self.ordinal,
        })
    }
}

impl Device for FakeDevice {
    fn name(&self) -> &str {
        &self.name
    }

    fn device_type(&self) -> &'static str {
        DEVICE_FAKE
    }

    fn allocate(&self, dtype: DataType, shape: TensorShape) -> Result<Tensor> {
        if !dtype.is_dense() {
            return Tensor::zeros_with_shape(dtype, shape);
        }
        let len = shape
            .num_elements()
            .checked_mul(dtype.size())
            .ok_or_else(|| {
                Status::resource_exhausted(format!(
                    "a {dtype} tensor of shape {shape} is too large"
                ))
            })?;
        Tensor::from_device_buffer(dtype, shape, self.buffer(vec![0; len].into_boxed_slice()))
    }

    fn copy_to_host(&self, t: &Tensor) -> Result<Tensor> {
        let Some(buffer) = t.device_buffer() else {
            return Ok(t.clone());
        };
        let fake = buffer
            .as_any()
            .downcast_ref::<FakeBuffer>()
            .filter(|b| b.ordinal == self.ordinal)
            .ok_or_else(|| {
                Status::invalid_argument(format!(
                    "{}: the tensor is in the memory of {:?}, not of this device",
                    self.name,
                    t.location()
                ))
            })?;
        self.to_host.fetch_add(1, Ordering::Relaxed);
        let n = t.num_elements() * t.dtype().size();
        Tensor::from_bytes(t.dtype(), t.shape().clone(), &fake.bytes[..n])
    }

    fn copy_from_host(&self, t: &Tensor) -> Result<Tensor> {
        match t.location() {
            Location::Host if t.dtype().is_dense() => {
                self.from_host.fetch_add(1, Ordering::Relaxed);
                let bytes = t.bytes()?.to_vec().into_boxed_slice();
                Tensor::from_device_buffer(t.dtype(), t.shape().clone(), self.buffer(bytes))
            }
            Location::Host => Ok(t.clone()),
            loc if loc == self.location() => Ok(t.clone()),
            other => Err(Status::invalid_argument(format!(
                "{}: copy_from_host was given a tensor on {other:?}",
                self.name
            ))),
        }
    }

    fn synchronize(&self) -> Result<()> {
        Ok(())
    }
}

/// The owner name of the mirror kernels in a registry.
pub const MIRROR_OWNER: &str = "opforge-testing fake-device mirrors";

/// Registers, for every CPU kernel of `registry`, a mirror on devices of
/// type `device_type` (see the [module docs](self)); returns how many were
/// added. Calling it again adds only mirrors of kernels registered since.
pub fn mirror_cpu_kernels(registry: &Registry, device_type: &'static str) -> Result<usize> {
    let owner = registry.add_owner(MIRROR_OWNER);
    let registrar = registry.registrar(owner, MIRROR_OWNER);
    let mut added = 0;
    for op in registry.names() {
        let kernels = registry.kernels_for(&op);
        let op_def = registry.op_def(&op)?;
        for cpu in kernels.iter().filter(|k| k.def.device_type == DEVICE_CPU) {
            let exists = kernels.iter().any(|k| {
                k.def.device_type == device_type
                    && k.def.constraints == cpu.def.constraints
                    && k.def.label == cpu.def.label
                    && k.def.priority == cpu.def.priority
            });
            if exists {
                continue;
            }
            let mut def = cpu.def.clone();
            def.device_type = device_type.to_string();
            for arg in op_def.input_arg.iter().chain(&op_def.output_arg) {
                let fixed_int32 = arg.r#type == DataType::Int32 as i32 && arg.type_attr.is_empty();
                if fixed_int32 && !def.host_memory_args.contains(&arg.name) {
                    def.host_memory_args.push(arg.name.clone());
                }
            }
            let factory = cpu.factory.clone();
            let mirror_def = def.clone();
            let mut builder =
                opforge_core::kernel::KernelDefBuilder::new(&def.op).device(device_type);
            for (attr, types) in &def.constraints {
                builder = builder.type_constraint_list(attr, types);
            }
            for arg in &def.host_memory_args {
                builder = builder.host_memory(arg);
            }
            let builder = builder.label(&def.label).priority(def.priority);
            let registration = KernelRegistration::with_factory(builder, move |c| {
                let cpu = CpuDevice::shared();
                let cc = OpKernelConstruction::new(
                    c.op_def(),
                    c.node_name(),
                    c.attrs(),
                    cpu.as_ref(),
                    c.input_types(),
                    c.output_types(),
                );
                let inner = factory(&cc)?;
                Ok(Box::new(Mirror {
                    inner,
                    def: mirror_def.clone(),
                    cpu,
                }) as Box<dyn OpKernel>)
            });
            match registrar.kernel(registration) {
                Ok(()) => added += 1,
                // Another thread mirrored it meanwhile.
                Err(e) if e.code() == Code::AlreadyExists => {}
                Err(e) => return Err(e),
            }
        }
    }
    Ok(added)
}

/// A CPU kernel run on the fake device through copies.
struct Mirror {
    inner: Box<dyn OpKernel>,
    def: KernelDef,
    cpu: Arc<CpuDevice>,
}

impl OpKernel for Mirror {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let sig = ctx.signature();
        let device = ctx.device();
        let host_in = self.def.host_memory_inputs(sig);
        let host_out = self.def.host_memory_outputs(sig);
        let mut inputs = TensorVec::new();
        for (i, (t, &host)) in ctx.inputs().iter().zip(&host_in).enumerate() {
            let want = memory_for(device, t.dtype(), host);
            if t.location() != want {
                return Err(Status::internal(format!(
                    "{} ({}): input {i} is in {:?} memory, but its kernel on {} reads it from {want:?}: \
                     the runtime did not place it where the kernel definition asks",
                    sig.node_name,
                    sig.op_def.name,
                    t.location(),
                    device.name()
                )));
            }
            inputs.push(device.copy_to_host(t)?);
        }
        let mut outputs = Vec::with_capacity(ctx.num_outputs());
        call_kernel(
            self.inner.as_ref(),
            sig,
            &mut inputs,
            self.cpu.as_ref(),
            ctx.resource_mgr(),
            |_, _, t| outputs.push(t),
        )?;
        for (i, t) in outputs.into_iter().enumerate() {
            let t = match memory_for(device, t.dtype(), host_out[i]) {
                Location::Host => t,
                _ => device.copy_from_host(&t)?,
            };
            ctx.set_output(i, t)?;
        }
        Ok(())
    }
}
