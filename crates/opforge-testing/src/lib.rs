//! Test machinery for opforge ops, shared by the op libraries' tests and the
//! conformance tests: a [fake device](fake_device) whose memory is reached
//! only through the [`Device`](opforge_core::device::Device) interface, with
//! [mirrors](fake_device::mirror_cpu_kernels) of every CPU kernel on it, so
//! the same case tables run on the CPU and on a device that needs copies.
#![warn(missing_docs)]

pub mod examples;
pub mod fake_device;
pub mod gradcheck;
pub mod hostile;
pub mod roundtrip;
pub mod shape;
pub mod util;

pub use fake_device::{FakeDevice, DEVICE_FAKE};
