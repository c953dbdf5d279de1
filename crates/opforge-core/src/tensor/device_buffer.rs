//! [`DeviceBuffer`]: memory of a device that is not a host pointer (a GPU
//! allocation, a test device's private store), behind a tensor.

use super::Location;
use std::any::Any;

/// A block of a device's memory holding a dense tensor's bytes. Only the
/// device that made it reads or writes it (through
/// [`Device::copy_to_host`](crate::device::Device::copy_to_host) and
/// [`Device::copy_from_host`](crate::device::Device::copy_from_host), which
/// downcast it with [`as_any`](Self::as_any)); kernels of that device get it
/// from [`Tensor::device_buffer`](crate::Tensor::device_buffer).
pub trait DeviceBuffer: Send + Sync + 'static {
    /// The size in bytes.
    fn byte_len(&self) -> usize;
    /// Where the memory lives (never [`Location::Host`]).
    fn location(&self) -> Location;
    /// The buffer, for its device to downcast.
    fn as_any(&self) -> &dyn Any;
}
