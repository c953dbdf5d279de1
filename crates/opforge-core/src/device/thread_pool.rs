//! [`ThreadPool`]: the threads kernels shard their work over (TensorFlow's
//! `Shard`) and the graph executor runs independent nodes on. A pool is
//! shared (`Arc`) by whoever uses it: a CPU device and a session's
//! scheduler normally get the same one, so a node and its kernel's shards
//! run on one set of threads with no hand-off between pools.

use crate::{Result, Status};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

/// An intra-op thread pool with TensorFlow's `Shard` work splitter.
pub struct ThreadPool {
    pool: Option<rayon::ThreadPool>,
    threads: usize,
    /// The process that started the pool's threads: a child forked from it
    /// has none of them, so there the pool runs everything on the calling
    /// thread instead of waiting for threads that do not exist.
    pid: u32,
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
        Ok(ThreadPool {
            pool,
            threads,
            pid: std::process::id(),
        })
    }

    /// The process-wide default pool: `OPFORGE_INTRA_OP_THREADS` threads if
    /// that is set, else one per core. The shared CPU device
    /// ([`CpuDevice::shared`](super::CpuDevice::shared)) and sessions
    /// without their own pool use it.
    pub fn global() -> &'static Arc<ThreadPool> {
        static GLOBAL: OnceLock<Arc<ThreadPool>> = OnceLock::new();
        GLOBAL.get_or_init(|| {
            let threads = std::env::var("OPFORGE_INTRA_OP_THREADS")
                .ok()
                .and_then(|v| v.parse().ok())
                .filter(|&n: &usize| n > 0)
                .unwrap_or_else(default_threads);
            // A pool that cannot start its threads runs everything inline.
            Arc::new(ThreadPool::new(threads).unwrap_or_else(|_| ThreadPool::single()))
        })
    }

    /// A pool of `threads` threads, 0 meaning one per core.
    pub fn with_threads(threads: usize) -> Result<ThreadPool> {
        ThreadPool::new(if threads == 0 {
            default_threads()
        } else {
            threads
        })
    }

    /// A pool that runs everything on the calling thread.
    pub fn single() -> ThreadPool {
        ThreadPool {
            pool: None,
            threads: 1,
            pid: 0,
        }
    }

    /// A shared pool that runs everything on the calling thread (what a
    /// kernel shards over on a device without a thread pool).
    pub fn inline() -> &'static ThreadPool {
        static INLINE: ThreadPool = ThreadPool {
            pool: None,
            threads: 1,
            pid: 0,
        };
        &INLINE
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
    #[inline]
    pub fn shard(&self, total: usize, cost_per_unit: usize, work: impl Fn(usize, usize) + Sync) {
        self.shard_dyn(total, cost_per_unit, &work)
    }

    /// [`shard`](Self::shard) with a `dyn` closure: the pool's machinery is
    /// compiled once here, not once per caller's closure type. Kernels that
    /// dispatch over many dtypes and closures call this (through `shard`,
    /// which only forwards).
    #[inline(never)]
    pub fn shard_dyn(
        &self,
        total: usize,
        cost_per_unit: usize,
        work: &(dyn Fn(usize, usize) + Sync),
    ) {
        if total == 0 {
            return;
        }
        let shards = self.num_shards(total, cost_per_unit);
        match self.live() {
            Some(pool) if shards > 1 => {
                let block = total.div_ceil(shards);
                pool.scope(|s| {
                    for start in (block..total).step_by(block) {
                        s.spawn(move |_| work(start, (start + block).min(total)));
                    }
                    work(0, block.min(total));
                });
            }
            _ => work(0, total),
        }
    }

    /// Like [`shard`](Self::shard), but while the calling thread waits for
    /// the other shards it runs nothing else. Use it for parallel work done
    /// under a lock that other kernels may take (a variable's lock): a
    /// thread waiting in `shard` may run another node meanwhile (the graph
    /// executor shares this pool), and that node could then wait forever
    /// for the lock its own thread holds.
    ///
    /// Shards are claimed from a counter by the caller and by helper jobs
    /// sent to the pool; the caller claims until none are left and then
    /// waits only for shards other threads are already computing. A helper
    /// that starts late finds nothing to claim and returns. A panic in a
    /// shard is re-raised on the calling thread after every shard is done.
    ///
    /// ```
    /// use opforge_core::device::ThreadPool;
    /// use std::sync::atomic::{AtomicUsize, Ordering};
    /// let pool = ThreadPool::new(4).unwrap();
    /// let sum = AtomicUsize::new(0);
    /// pool.shard_isolated(1000, 100_000, |start, end| { sum.fetch_add((start..end).sum(), Ordering::Relaxed); });
    /// assert_eq!(sum.load(Ordering::Relaxed), 499_500);
    /// ```
    #[inline]
    pub fn shard_isolated(
        &self,
        total: usize,
        cost_per_unit: usize,
        work: impl Fn(usize, usize) + Sync,
    ) {
        self.shard_isolated_dyn(total, cost_per_unit, &work)
    }

    /// [`shard_isolated`](Self::shard_isolated) with a `dyn` closure,
    /// compiled once (see [`shard_dyn`](Self::shard_dyn)).
    #[inline(never)]
    pub fn shard_isolated_dyn(
        &self,
        total: usize,
        cost_per_unit: usize,
        work: &(dyn Fn(usize, usize) + Sync),
    ) {
        let shards = self.num_shards(total, cost_per_unit);
        let pool = match &self.pool {
            Some(_) if shards > 1 => match self.live() {
                Some(pool) => pool,
                None => return work(0, total),
            },
            _ => return work(0, total),
        };
        let block = total.div_ceil(shards);
        run_isolated(pool, shards, self.threads, &|i: usize| {
            work(i * block, ((i + 1) * block).min(total))
        });
    }

    /// [`shard_isolated`](Self::shard_isolated) over disjoint chunks of
    /// `data`: `work(offset, chunk)` for each chunk, in parallel when the
    /// cost (`data.len() * cost_per_unit`) is worth it.
    ///
    /// ```
    /// use opforge_core::device::ThreadPool;
    /// let pool = ThreadPool::new(2).unwrap();
    /// let mut v = vec![1u64; 100_000];
    /// pool.chunks_isolated(&mut v, 10, |offset, chunk| {
    ///     for (i, x) in chunk.iter_mut().enumerate() { *x += (offset + i) as u64; }
    /// });
    /// assert_eq!(v[99_999], 100_000);
    /// ```
    #[inline]
    pub fn chunks_isolated<T: Send>(
        &self,
        data: &mut [T],
        cost_per_unit: usize,
        work: impl Fn(usize, &mut [T]) + Sync,
    ) {
        let shards = self.num_shards(data.len(), cost_per_unit);
        if shards <= 1 || self.live().is_none() {
            return work(0, data);
        }
        let block = data.len().div_ceil(shards);
        let chunks: Vec<Mutex<Option<&mut [T]>>> = data
            .chunks_mut(block)
            .map(|c| Mutex::new(Some(c)))
            .collect();
        // One shard per chunk: `shard_isolated_dyn` over `chunks.len()` units,
        // each unit costed so that every unit is its own shard.
        self.shard_isolated_dyn(chunks.len(), usize::MAX, &|start, end| {
            for (i, chunk) in chunks.iter().enumerate().take(end).skip(start) {
                let chunk = chunk.lock().unwrap_or_else(PoisonError::into_inner).take();
                if let Some(chunk) = chunk {
                    work(i * block, chunk);
                }
            }
        });
    }

    /// How many shards `shard` would use.
    pub fn num_shards(&self, total: usize, cost_per_unit: usize) -> usize {
        let cost = total.saturating_mul(cost_per_unit.max(1));
        (cost / MIN_COST_PER_SHARD)
            .clamp(1, self.threads)
            .min(total)
    }

    /// The rayon pool behind this one (`None` with one thread). The graph
    /// executor runs independent nodes on it, so a kernel's shards and
    /// other nodes share these threads. A thread that waits for its
    /// shards may meanwhile run another node, so a kernel must not hold a
    /// lock that another kernel can take while it runs parallel work.
    pub(crate) fn rayon_pool(&self) -> Option<&rayon::ThreadPool> {
        self.live()
    }

    /// The rayon pool when its threads exist in this process (not in a
    /// child forked after they started: there `None`, and work runs on the
    /// calling thread). One `getpid` per use, made only where the pool is
    /// about to take work.
    fn live(&self) -> Option<&rayon::ThreadPool> {
        let pool = self.pool.as_ref()?;
        (std::process::id() == self.pid).then_some(pool)
    }

    /// Runs `f` inside the pool, so rayon parallel iterators in it use these threads.
    pub fn install<R: Send>(&self, f: impl FnOnce() -> R + Send) -> R {
        match self.live() {
            Some(pool) => pool.install(f),
            None => f(),
        }
    }
}

/// Runs `job(i)` for every `i < shards`: on the calling thread and on up to
/// `threads - 1` helper jobs sent to `pool`, which claim indices from a
/// shared counter; returns when all are done, running nothing else
/// meanwhile (see [`ThreadPool::shard_isolated`]).
fn run_isolated(
    pool: &rayon::ThreadPool,
    shards: usize,
    threads: usize,
    job: &(dyn Fn(usize) + Sync),
) {
    // SAFETY: only the lifetime bound of the trait object changes (same
    // layout); the result is a raw pointer, dereferenced only under the
    // conditions argued in `Claims::run`.
    let job: JobPtr = JobPtr(unsafe {
        std::mem::transmute::<*const (dyn Fn(usize) + Sync + '_), *const (dyn Fn(usize) + Sync)>(
            job,
        )
    });
    let state = Arc::new(Claims {
        next: AtomicUsize::new(0),
        done: AtomicUsize::new(0),
        panic: Mutex::new(None),
        shards,
    });
    for _ in 1..shards.min(threads) {
        let state = state.clone();
        pool.spawn(move || state.run(job));
    }
    state.run(job);
    let mut spins = 0u32;
    while state.done.load(Ordering::Acquire) < shards {
        if spins < 1000 {
            std::hint::spin_loop();
            spins += 1;
        } else {
            std::thread::yield_now();
        }
    }
    let panic = state
        .panic
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .take();
    if let Some(p) = panic {
        std::panic::resume_unwind(p);
    }
}

/// A [`run_isolated`] job, its lifetime erased so helper jobs on the pool
/// can hold it; it is a raw pointer, so a helper that outlives the call
/// holds no dangling reference, only a pointer it never dereferences.
#[derive(Clone, Copy)]
struct JobPtr(*const (dyn Fn(usize) + Sync));

// SAFETY: the pointee is `Sync`, so calling it from several threads is
// sound; when it may be called is argued in `Claims::run`.
unsafe impl Send for JobPtr {}

/// The shard counters of one [`run_isolated`] call.
struct Claims {
    next: AtomicUsize,
    done: AtomicUsize,
    panic: Mutex<Option<Box<dyn std::any::Any + Send>>>,
    shards: usize,
}

impl Claims {
    /// Claims and runs shards until none are left.
    fn run(&self, job: JobPtr) {
        loop {
            let i = self.next.fetch_add(1, Ordering::AcqRel);
            if i >= self.shards {
                return;
            }
            // SAFETY: `job` points at the closure borrowed by the
            // `run_isolated` call that made these claims, which returns only
            // once `done` reaches `shards`, and `done` counts this shard
            // only after the call below has returned or unwound. A claim
            // below `shards` therefore happens while that borrow is alive
            // and stays alive until the call ends; a helper that starts late
            // gets an index past `shards` and never dereferences `job`.
            let job = unsafe { &*job.0 };
            if let Err(p) = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| job(i))) {
                self.panic
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .get_or_insert(p);
            }
            self.done.fetch_add(1, Ordering::AcqRel);
        }
    }
}

/// One thread per core.
pub(crate) fn default_threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
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
    fn shard_isolated_covers_every_unit_and_reraises_panics() {
        let pool = ThreadPool::new(3).unwrap();
        for (total, cost) in [(0, 1), (1, 1), (10, 1_000_000), (1000, 100), (100_000, 7)] {
            let hits: Vec<AtomicUsize> = (0..total).map(|_| AtomicUsize::new(0)).collect();
            pool.shard_isolated(total, cost, |s, e| {
                for h in &hits[s..e] {
                    h.fetch_add(1, Ordering::Relaxed);
                }
            });
            assert!(hits.iter().all(|h| h.load(Ordering::Relaxed) == 1));
        }
        let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            pool.shard_isolated(10, 1_000_000, |s, _| assert!(s < 4, "a shard panics"))
        }));
        assert!(caught.is_err());
        // The pool still works. A pool thread that holds a lock, and has a
        // job that takes the same lock in its queue, does not run that job
        // while it waits for shards running elsewhere (it would deadlock;
        // `shard` does here).
        let pool = ThreadPool::new(2).unwrap();
        let lock = Mutex::new(0usize);
        pool.install(|| {
            rayon::scope(|scope| {
                let mut guard = lock.lock().unwrap();
                let me = std::thread::current().id();
                let (lock, spawned) = (&lock, std::sync::atomic::AtomicBool::new(false));
                pool.shard_isolated(2, 100_000, |_, _| {
                    if std::thread::current().id() == me {
                        if spawned.swap(true, Ordering::Relaxed) {
                            return;
                        }
                        scope.spawn(move |_| *lock.lock().unwrap() += 1);
                    } else {
                        std::thread::sleep(std::time::Duration::from_millis(30));
                    }
                });
                *guard += 1;
            })
        });
        assert_eq!(*lock.lock().unwrap(), 2);
        let mut v: Vec<usize> = vec![0; 100_000];
        pool.chunks_isolated(&mut v, 100, |offset, chunk| {
            for (i, x) in chunk.iter_mut().enumerate() {
                *x = offset + i;
            }
        });
        assert!(v.iter().enumerate().all(|(i, &x)| i == x));
    }

    #[test]
    fn shared_pools() {
        assert!(ThreadPool::global().num_threads() >= 1);
        assert!(Arc::ptr_eq(ThreadPool::global(), ThreadPool::global()));
        assert_eq!(ThreadPool::inline().num_threads(), 1);
        assert_eq!(ThreadPool::with_threads(3).unwrap().num_threads(), 3);
        let hits = AtomicUsize::new(0);
        ThreadPool::inline().shard(100, 1_000_000, |s, e| {
            hits.fetch_add(e - s, Ordering::Relaxed);
        });
        assert_eq!(hits.load(Ordering::Relaxed), 100);
    }
}
