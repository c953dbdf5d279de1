//! Devices: where kernels run. A [`Device`] has a name, a type, an allocator
//! and an intra-op thread pool; the [`CpuDevice`] is the host. A GPU device
//! implements the same trait later without changing the kernel interface.

use crate::tensor::{Location, Tensor, TensorShape};
use crate::{DataType, Result, Status};
use std::sync::{Arc, OnceLock};

/// The device type of the host CPU.
pub const DEVICE_CPU: &str = "CPU";

/// A place where kernels run and tensors live.
pub trait Device: Send + Sync {
    /// The full name, like `/job:localhost/replica:0/task:0/device:CPU:0`.
    fn name(&self) -> &str;
    /// The device type, like `CPU`.
    fn device_type(&self) -> &'static str;
    /// Where this device's allocations live.
    fn location(&self) -> Location;
    /// A tensor for an output or temporary; its contents are unspecified
    /// (valid values of the dtype) and the kernel overwrites them.
    fn allocate(&self, dtype: DataType, shape: TensorShape) -> Result<Tensor>;
    /// The intra-op thread pool kernels shard their work over.
    fn thread_pool(&self) -> &ThreadPool;
}

/// An intra-op thread pool with TensorFlow's `Shard` work splitter.
pub struct ThreadPool {
    pool: Option<rayon::ThreadPool>,
    threads: usize,
}

/// Below this much work (in cost units, roughly cycles) a shard is not
/// worth a thread (TensorFlow uses the same figure).
const MIN_COST_PER_SHARD: usize = 10_000;

impl ThreadPool {
    /// A pool of `threads` threads (1 runs everything on the caller's thread).
    pub fn new(threads: usize) -> Result<ThreadPool> {
        let threads = threads.max(1);
        let pool = if threads > 1 {
            Some(
                rayon::ThreadPoolBuilder::new()
                    .num_threads(threads)
                    .thread_name(|i| format!("opforge-intra-op-{i}"))
                    .build()
                    .map_err(|e| {
                        Status::resource_exhausted(format!(
                            "cannot start the intra-op thread pool: {e}"
                        ))
                    })?,
            )
        } else {
            None
        };
        Ok(ThreadPool { pool, threads })
    }

    /// The number of threads.
    pub fn num_threads(&self) -> usize {
        self.threads
    }

    /// Splits `[0, total)` into contiguous shards and runs `work(start, end)`
    /// on each, in parallel when the total cost (`total * cost_per_unit`)
    /// is worth it; returns when all are done. Like TensorFlow's `Shard`.
    ///
    /// ```
    /// use opforge_core::device::ThreadPool;
    /// use std::sync::atomic::{AtomicUsize, Ordering};
    /// let pool = ThreadPool::new(4).unwrap();
    /// let sum = AtomicUsize::new(0);
    /// pool.shard(1000, 100_000, |start, end| { sum.fetch_add((start..end).sum(), Ordering::Relaxed); });
    /// assert_eq!(sum.load(Ordering::Relaxed), 499_500);
    /// ```
    pub fn shard(&self, total: usize, cost_per_unit: usize, work: impl Fn(usize, usize) + Sync) {
        if total == 0 {
            return;
        }
        let shards = self.num_shards(total, cost_per_unit);
        match &self.pool {
            Some(pool) if shards > 1 => {
                let block = total.div_ceil(shards);
                pool.scope(|s| {
                    for start in (block..total).step_by(block) {
                        let work = &work;
                        s.spawn(move |_| work(start, (start + block).min(total)));
                    }
                    work(0, block.min(total));
                });
            }
            _ => work(0, total),
        }
    }

    /// How many shards `shard` would use.
    pub fn num_shards(&self, total: usize, cost_per_unit: usize) -> usize {
        let cost = total.saturating_mul(cost_per_unit.max(1));
        (cost / MIN_COST_PER_SHARD)
            .clamp(1, self.threads)
            .min(total)
    }

    /// Runs `f` inside the pool, so rayon parallel iterators in it use these threads.
    pub fn install<R: Send>(&self, f: impl FnOnce() -> R + Send) -> R {
        match &self.pool {
            Some(pool) => pool.install(f),
            None => f(),
        }
    }
}

/// The host CPU as a device.
pub struct CpuDevice {
    name: String,
    pool: ThreadPool,
}

impl CpuDevice {
    /// A CPU device with `intra_op_threads` threads (0 = one per core).
    pub fn new(intra_op_threads: usize) -> Result<CpuDevice> {
        let threads = if intra_op_threads == 0 {
            default_threads()
        } else {
            intra_op_threads
        };
        Ok(CpuDevice {
            name: "/job:localhost/replica:0/task:0/device:CPU:0".into(),
            pool: ThreadPool::new(threads)?,
        })
    }

    /// The process-wide default CPU device, with `OPFORGE_INTRA_OP_THREADS`
    /// threads if that is set, else one per core.
    pub fn shared() -> Arc<CpuDevice> {
        static SHARED: OnceLock<Arc<CpuDevice>> = OnceLock::new();
        SHARED
            .get_or_init(|| {
                let threads = std::env::var("OPFORGE_INTRA_OP_THREADS")
                    .ok()
                    .and_then(|v| v.parse().ok())
                    .unwrap_or(0);
                Arc::new(CpuDevice::new(threads).expect("the default CPU device starts"))
            })
            .clone()
    }
}

fn default_threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
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
    fn thread_pool(&self) -> &ThreadPool {
        &self.pool
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    #[test]
    fn shard_covers_every_unit_exactly_once() {
        let pool = ThreadPool::new(3).unwrap();
        for (total, cost) in [(1, 1), (10, 1_000_000), (1000, 1), (1001, 100), (7, 10_000)] {
            let seen = Mutex::new(vec![0u8; total]);
            pool.shard(total, cost, |s, e| {
                let mut seen = seen.lock().unwrap();
                for i in s..e {
                    seen[i] += 1;
                }
            });
            assert!(
                seen.into_inner().unwrap().iter().all(|&c| c == 1),
                "{total} {cost}"
            );
        }
        assert_eq!(pool.num_shards(10, 1), 1);
        assert_eq!(pool.num_shards(1_000_000, 100), 3);
        assert_eq!(pool.num_shards(2, 1_000_000), 2);
        pool.shard(0, 1, |_, _| panic!("no work"));
    }

    #[test]
    fn cpu_device() {
        let d = CpuDevice::new(2).unwrap();
        assert_eq!(d.device_type(), "CPU");
        assert_eq!(d.thread_pool().num_threads(), 2);
        let t = d.allocate(DataType::Float, TensorShape::vector(3)).unwrap();
        assert_eq!(t.num_elements(), 3);
        assert!(CpuDevice::shared().thread_pool().num_threads() >= 1);
    }
}
