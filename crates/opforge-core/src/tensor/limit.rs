//! The allocation limit: the most bytes one tensor may take. Every path that
//! sizes memory from input data (a shape read from a tensor, a count attr, a
//! decoded proto) reaches an allocation through [`check`], so a hostile size
//! is a `ResourceExhausted` error naming the request, never an allocation
//! that kills the process.

use crate::{Result, Status};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

/// 0 = not set yet (the default is computed on first use).
static LIMIT: AtomicU64 = AtomicU64::new(0);
static DEFAULT: OnceLock<u64> = OnceLock::new();

/// The environment variable that sets the limit (in bytes) for a process.
pub const ENV: &str = "OPFORGE_MAX_ALLOCATION";

/// The default limit: `OPFORGE_MAX_ALLOCATION` if set, else half the
/// machine's physical memory (from `/proc/meminfo`; 2^47 bytes where that is
/// not readable): one tensor larger than that cannot be filled without
/// pushing the process out of memory.
fn default_limit() -> u64 {
    *DEFAULT.get_or_init(|| {
        if let Some(v) = std::env::var(ENV).ok().and_then(|v| v.trim().parse().ok()) {
            return v;
        }
        std::fs::read_to_string("/proc/meminfo")
            .ok()
            .and_then(|m| {
                let line = m.lines().find(|l| l.starts_with("MemTotal:"))?;
                let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
                kib.checked_mul(512)
            })
            .unwrap_or(1 << 47)
    })
}

/// The most bytes one tensor may take.
pub fn max_allocation() -> u64 {
    match LIMIT.load(Ordering::Relaxed) {
        0 => default_limit(),
        n => n,
    }
}

/// Sets the most bytes one tensor may take (for the whole process); 0
/// restores the default.
pub fn set_max_allocation(bytes: u64) {
    LIMIT.store(bytes, Ordering::Relaxed);
}

/// What a tensor allocation is for, as TensorFlow's OOM message names it
/// ("tensor with shape\[2,3\] and type float on the host"): the `what` of
/// [`check`] for tensors.
pub fn describe_tensor(dtype: crate::DataType, shape: &crate::TensorShape) -> String {
    format!("tensor with shape{shape} and type {dtype} on the host")
}

/// `ResourceExhausted` if `bytes` (what `what` needs) is above the limit.
#[inline]
pub fn check(bytes: usize, what: impl FnOnce() -> String) -> Result<()> {
    let limit = max_allocation();
    if bytes as u64 > limit {
        return Err(Status::resource_exhausted(format!(
            "OOM when allocating {}: {bytes} bytes is above the allocation limit of {limit} \
             bytes (set {ENV} or opforge_core::tensor::set_max_allocation to change it)",
            what()
        )));
    }
    Ok(())
}

/// `vec![value; n]` of `what`, checked against the limit and allocated
/// without aborting when the memory is not there.
pub fn filled_vec<T: Clone>(n: usize, value: T, what: impl Fn() -> String) -> Result<Vec<T>> {
    let bytes = n.saturating_mul(std::mem::size_of::<T>().max(1));
    check(bytes, &what)?;
    let mut v = Vec::new();
    v.try_reserve_exact(n)
        .map_err(|_| Status::resource_exhausted(format!("OOM when allocating {}", what())))?;
    v.resize(n, value);
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checks_against_the_limit() {
        assert!(max_allocation() > 0);
        let e = check(usize::MAX, || "a test tensor".into()).unwrap_err();
        assert_eq!(e.code(), crate::Code::ResourceExhausted);
        assert!(e.message().contains("a test tensor"), "{e}");
        assert!(e.message().contains(ENV), "{e}");
        assert!(check(16, || unreachable!()).is_ok());
        let e = filled_vec(usize::MAX / 2, 0u64, || "huge".into()).unwrap_err();
        assert_eq!(e.code(), crate::Code::ResourceExhausted);
        assert_eq!(
            filled_vec(3, 7u8, || "small".into()).unwrap(),
            vec![7, 7, 7]
        );
    }

    /// Issue 16: the OOM message of a tensor names its dtype and shape as
    /// TensorFlow's does, for every dtype (uint32/uint64 included).
    #[test]
    fn tensor_oom_names_the_dtype_and_shape() {
        use crate::{DataType, Tensor, TensorShape};
        let shape = TensorShape::new(&[1 << 40, 1 << 20]).unwrap();
        for dtype in [
            DataType::UInt32,
            DataType::UInt64,
            DataType::Float,
            DataType::Int8,
            DataType::Complex128,
            DataType::String,
            DataType::Bool,
        ] {
            for e in [
                Tensor::uninit(dtype, shape.clone()).unwrap_err(),
                Tensor::zeros_with_shape(dtype, shape.clone()).unwrap_err(),
            ] {
                assert_eq!(e.code(), crate::Code::ResourceExhausted, "{e}");
                let want = format!(
                    "OOM when allocating tensor with shape[1099511627776,1048576] and type {dtype} on the host"
                );
                assert!(e.message().starts_with(&want), "{dtype}: {e}");
            }
        }
    }
}
