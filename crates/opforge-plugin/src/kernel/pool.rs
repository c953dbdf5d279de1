//! The host's thread pool as a kernel sees it during one compute
//! (TensorFlow's `Shard`), and the trampoline its shards run through.

use super::*;

/// The host's thread pool during one compute ([`OpKernelContext::thread_pool`]).
#[derive(Clone, Copy)]
pub struct ThreadPool<'a> {
    pub(super) raw: *mut OpforgeKernelCtx,
    pub(super) status: *mut OpforgeStatus,
    pub(super) host: &'a Host,
    pub(super) def: &'a KernelDef,
}

impl ThreadPool<'_> {
    /// TensorFlow's `Shard`: splits `[0, total)` into shards by
    /// `cost_per_unit` (a rough count of cycles per unit) and runs
    /// `work(start, end)` on the host's pool and the calling thread,
    /// returning when every shard is done. A panic in `work` is caught per
    /// shard and becomes this call's `Internal` error. `work` cannot reach
    /// the kernel context (rule R9: it is not `Sync`); read views before.
    pub fn parallel_for<F>(&self, total: usize, cost_per_unit: u64, work: F) -> Result<()>
    where
        F: Fn(usize, usize) + Sync,
    {
        let f = slot!(self.host, kernel.parallel_for)?;
        let shard = Shard {
            work: &work,
            def: self.def,
        };
        // SAFETY: the compute's ctx and status (R7); `shard` outlives the
        // call, which returns only when every shard is done; the
        // trampoline matches `F`.
        let code = unsafe {
            f(
                self.raw,
                total as u64,
                cost_per_unit,
                Some(work_trampoline::<F>),
                &shard as *const Shard<'_, F> as *mut c_void,
                self.status,
            )
        };
        self.host.check(code, self.status)
    }

    /// [`parallel_for`](Self::parallel_for) over the elements of `data`:
    /// `work(offset, chunk)` gets the disjoint chunk `data[offset..]` of
    /// each shard, to write in parallel (an output's `flat_mut`).
    pub fn parallel_chunks_mut<T, F>(
        &self,
        data: &mut [T],
        cost_per_unit: u64,
        work: F,
    ) -> Result<()>
    where
        T: Send,
        F: Fn(usize, &mut [T]) + Sync,
    {
        let len = data.len();
        let base = SendPtr(data.as_mut_ptr());
        self.parallel_for(len, cost_per_unit, move |start, end| {
            let base = &base;
            assert!(
                start <= end && end <= len,
                "parallel_for shard {start}..{end} outside 0..{len}"
            );
            // SAFETY: `[start, end)` lies within `data` (checked), and the
            // host hands each unit of `[0, len)` to exactly one shard (the
            // header's parallel_for contract), so the chunks are disjoint;
            // `data` stays mutably borrowed until parallel_for returns,
            // after every shard.
            let chunk = unsafe { core::slice::from_raw_parts_mut(base.0.add(start), end - start) };
            work(start, chunk);
        })
    }
}

/// A pointer shards share; the chunks they form from it are disjoint.
pub(super) struct SendPtr<T>(*mut T);

// SAFETY: only used by `parallel_chunks_mut`, whose shards write disjoint
// chunks of `T: Send` elements.
unsafe impl<T: Send> Sync for SendPtr<T> {}

pub(super) fn rank_of(dims: &[i64]) -> Result<u32> {
    u32::try_from(dims.len()).map_err(|_| Status::invalid_argument("too many dims"))
}

pub(super) struct Shard<'a, F> {
    work: &'a F,
    def: &'a KernelDef,
}

pub(super) unsafe extern "C" fn work_trampoline<F: Fn(usize, usize) + Sync>(
    begin: u64,
    end: u64,
    user: *mut c_void,
    status: *mut OpforgeStatus,
) -> OpforgeCode {
    // SAFETY: `user` is the `Shard<F>` of the running `parallel_for`,
    // alive until it returns (after every shard); shared access only.
    let shard = unsafe { &*(user as *const Shard<'_, F>) };
    host::guard(
        status,
        || {
            format!(
                "a parallel_for body of {}",
                kernel_what(shard.def, "compute")
            )
        },
        |_| {
            (shard.work)(begin as usize, end as usize);
            Ok(())
        },
    )
}
