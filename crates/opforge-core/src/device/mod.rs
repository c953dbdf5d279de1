//! Devices: where kernels run and tensors live.
//!
//! A [`Device`] must give its name and type, allocate tensors, copy tensors
//! to and from the host, and synchronize; a thread pool for kernels to shard
//! their work over is optional. The [`CpuDevice`] is the host: its tensors
//! are host memory, and it shards over a [`ThreadPool`] it shares with
//! whoever else was given that pool (normally a session's scheduler). A
//! device whose memory is not host memory keeps its tensors in a
//! [`DeviceBuffer`](crate::tensor::DeviceBuffer); runtimes copy values
//! between devices through these functions (see
//! [`Session`](crate::graph::Session)'s placement).

mod spec;
mod thread_pool;

pub use spec::{DeviceSet, DeviceSpec};
pub use thread_pool::ThreadPool;

use crate::tensor::{Location, Tensor, TensorShape};
use crate::{DataType, Result};
use smallvec::SmallVec;
use std::sync::{Arc, OnceLock};

/// The device type of the host CPU.
pub const DEVICE_CPU: &str = "CPU";

/// A place where kernels run and tensors live.
pub trait Device: Send + Sync {
    /// The full name, like `/job:localhost/replica:0/task:0/device:CPU:0`.
    fn name(&self) -> &str;
    /// The device type, like `CPU` (kernels are registered per type).
    fn device_type(&self) -> &'static str;
    /// A tensor for an output or temporary, in this device's memory; its
    /// contents are unspecified (valid values of the dtype) and the kernel
    /// overwrites them. Tensors of types that are not plain bytes
    /// (`string`, `resource`) are host tensors on every device.
    fn allocate(&self, dtype: DataType, shape: TensorShape) -> Result<Tensor>;
    /// A host copy of `t`, a tensor of this device (host tensors come back
    /// as they are).
    fn copy_to_host(&self, t: &Tensor) -> Result<Tensor>;
    /// A copy of the host tensor `t` in this device's memory (tensors of
    /// types that always stay on the host come back as they are).
    fn copy_from_host(&self, t: &Tensor) -> Result<Tensor>;
    /// Waits until every operation queued on the device has finished.
    fn synchronize(&self) -> Result<()>;

    /// Where this device's allocations live: the host for CPU devices,
    /// otherwise the device's own memory (`ordinal` from its name).
    fn location(&self) -> Location {
        if self.device_type() == DEVICE_CPU {
            Location::Host
        } else {
            Location::Device {
                device_type: self.device_type(),
                ordinal: DeviceSpec::parse(self.name())
                    .ok()
                    .and_then(|s| s.id)
                    .unwrap_or(0),
            }
        }
    }

    /// The thread pool kernels on this device shard their work over, if it
    /// has one (kernels then run their shards on the calling thread).
    fn thread_pool(&self) -> Option<&ThreadPool> {
        None
    }
}

/// Where a tensor of `dtype` that a kernel on `device` reads or writes must
/// be: in host memory for host-memory arguments and for types that are not
/// plain bytes, else in the device's memory.
pub fn memory_for(device: &dyn Device, dtype: DataType, host_memory: bool) -> Location {
    if host_memory || !dtype.is_dense() {
        Location::Host
    } else {
        device.location()
    }
}

/// Where each flat input of a kernel must be when it runs (see
/// [`memory_for`]), with the common case (every input on the host, every
/// tensor given already there) checked without a walk over the locations.
///
/// Kept per node of a session's graph, so it is small: the number of
/// inputs, and the locations only when some input is not on the host.
#[derive(Clone, Debug)]
pub struct InputMemory {
    /// Empty when every input is on the host.
    locations: Box<[Location]>,
    len: usize,
    all_host: bool,
}

impl FromIterator<Location> for InputMemory {
    fn from_iter<I: IntoIterator<Item = Location>>(iter: I) -> Self {
        let locations: SmallVec<[Location; 4]> = iter.into_iter().collect();
        let all_host = locations.iter().all(|&l| l == Location::Host);
        InputMemory {
            len: locations.len(),
            locations: if all_host {
                Box::default()
            } else {
                locations.into_iter().collect()
            },
            all_host,
        }
    }
}

impl InputMemory {
    /// Where flat input `i` must be.
    pub fn location(&self, i: usize) -> Option<Location> {
        (i < self.len).then(|| self.locations.get(i).copied().unwrap_or(Location::Host))
    }

    /// Moves every input that is not where it must be there, through
    /// `transfer(i, tensor, wanted)`.
    #[inline]
    pub fn place(
        &self,
        inputs: &mut [Tensor],
        transfer: impl FnMut(usize, &Tensor, Location) -> Result<Tensor>,
    ) -> Result<()> {
        self.place_hinted(self.all_host, inputs, transfer)
    }

    /// Whether every input must be on the host.
    #[inline]
    pub fn all_host(&self) -> bool {
        self.all_host
    }

    /// [`place`](Self::place) with [`all_host`](Self::all_host) given by
    /// the caller, who keeps a copy of it next to its hot data (an executor
    /// walking thousands of nodes would otherwise touch one more cache line
    /// per node).
    #[inline]
    pub fn place_hinted(
        &self,
        all_host: bool,
        inputs: &mut [Tensor],
        transfer: impl FnMut(usize, &Tensor, Location) -> Result<Tensor>,
    ) -> Result<()> {
        if all_host && inputs.iter().all(Tensor::is_host) {
            return Ok(());
        }
        self.place_slow(inputs, transfer)
    }

    #[cold]
    #[inline(never)]
    fn place_slow(
        &self,
        inputs: &mut [Tensor],
        mut transfer: impl FnMut(usize, &Tensor, Location) -> Result<Tensor>,
    ) -> Result<()> {
        for (i, t) in inputs.iter_mut().enumerate() {
            let want = self.locations.get(i).copied().unwrap_or(Location::Host);
            if t.location() != want {
                *t = transfer(i, t, want)?;
            }
        }
        Ok(())
    }
}

/// The host CPU as a device.
pub struct CpuDevice {
    name: String,
    pool: Arc<ThreadPool>,
}

impl CpuDevice {
    /// A CPU device with a pool of its own of `intra_op_threads` threads
    /// (0 = one per core).
    pub fn new(intra_op_threads: usize) -> Result<CpuDevice> {
        Ok(CpuDevice::with_pool(Arc::new(ThreadPool::with_threads(
            intra_op_threads,
        )?)))
    }

    /// A CPU device sharding over `pool` (shared with its other users).
    pub fn with_pool(pool: Arc<ThreadPool>) -> CpuDevice {
        CpuDevice {
            name: "/job:localhost/replica:0/task:0/device:CPU:0".into(),
            pool,
        }
    }

    /// The process-wide default CPU device, on [`ThreadPool::global`].
    pub fn shared() -> Arc<CpuDevice> {
        static SHARED: OnceLock<Arc<CpuDevice>> = OnceLock::new();
        SHARED
            .get_or_init(|| Arc::new(CpuDevice::with_pool(ThreadPool::global().clone())))
            .clone()
    }

    /// The pool kernels shard over.
    pub fn pool(&self) -> &Arc<ThreadPool> {
        &self.pool
    }
}

impl Device for CpuDevice {
    fn name(&self) -> &str {
        &self.name
    }
    fn device_type(&self) -> &'static str {
        DEVICE_CPU
    }
    fn location(&self) -> Location {
        Location::Host
    }
    fn allocate(&self, dtype: DataType, shape: TensorShape) -> Result<Tensor> {
        Tensor::uninit(dtype, shape)
    }
    fn copy_to_host(&self, t: &Tensor) -> Result<Tensor> {
        Ok(t.clone())
    }
    fn copy_from_host(&self, t: &Tensor) -> Result<Tensor> {
        Ok(t.clone())
    }
    fn synchronize(&self) -> Result<()> {
        Ok(())
    }
    fn thread_pool(&self) -> Option<&ThreadPool> {
        Some(&self.pool)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_device() {
        let d = CpuDevice::new(2).unwrap();
        assert_eq!(d.device_type(), "CPU");
        assert_eq!(d.thread_pool().unwrap().num_threads(), 2);
        let t = d.allocate(DataType::Float, TensorShape::vector(3)).unwrap();
        assert_eq!(t.num_elements(), 3);
        assert_eq!(d.location(), Location::Host);
        let h = d.copy_to_host(&t).unwrap();
        assert!(h.shares_storage_with(&t));
        d.synchronize().unwrap();
        assert!(CpuDevice::shared().thread_pool().unwrap().num_threads() >= 1);
        assert!(Arc::ptr_eq(
            CpuDevice::shared().pool(),
            ThreadPool::global()
        ));
        assert_eq!(memory_for(&d, DataType::Float, false), Location::Host);
    }
}
