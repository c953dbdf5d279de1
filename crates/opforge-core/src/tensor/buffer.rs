//! [`Buffer`]: the memory behind a dense tensor. It is 64-byte aligned and
//! either comes from opforge's host allocator (a size-class cache that
//! recycles freed blocks, so a steady stream of same-sized tensors costs no
//! system allocations), or wraps foreign memory (a numpy or DLPack buffer,
//! a plugin's allocation) that is handed back through a release callback.
//! Every buffer knows where its memory lives.

use crate::{Result, Status};
use std::alloc::Layout;
use std::ptr::NonNull;
use std::sync::{Arc, Mutex};

/// The alignment of every buffer opforge allocates.
pub const ALIGNMENT: usize = 64;

/// Where a buffer's memory lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Location {
    /// Host (CPU) memory, readable from Rust.
    Host,
    /// Memory of an accelerator, not directly readable from the host.
    Device {
        /// The device type, like `"GPU"`.
        device_type: &'static str,
        /// The device's ordinal within its type.
        ordinal: u32,
    },
}

/// A type whose alignment is [`ALIGNMENT`], for aligned dangling pointers.
#[repr(align(64))]
struct Aligned;

/// How a buffer gives its memory back.
enum Release {
    /// Nothing to give back (zero-length buffers).
    None,
    /// Back to the host allocator's cache.
    HostPool,
    /// A foreign owner's callback.
    Foreign(Box<dyn FnOnce() + Send + Sync>),
    /// A foreign owner's function and the pointer it is called with (see
    /// [`Buffer::from_foreign_read_only_raw`]: no allocation for the
    /// callback, for a bridge that wraps memory on every call).
    Raw {
        release: unsafe fn(NonNull<()>),
        ctx: NonNull<()>,
    },
}

/// A contiguous block of bytes behind a dense tensor.
pub struct Buffer {
    ptr: NonNull<u8>,
    len: usize,
    location: Location,
    release: Release,
    /// False for foreign memory lent read-only (a numpy array the caller
    /// still owns): no tensor may write it, and kernels never forward it to
    /// an output.
    writable: bool,
}

// SAFETY: a Buffer is the unique owner of its allocation (or holds the
// foreign owner's release callback, itself Send + Sync). Shared access
// through `&Buffer` only reads; writing needs `&mut Buffer`, which Rust's
// borrow rules (and `Arc::get_mut` in `Tensor`) make exclusive, or the
// address `Tensor::host_data_mut` gives, under the same exclusivity (the
// tensor's `Arc` is the buffer's only one, and the tensor is borrowed
// mutably).
unsafe impl Send for Buffer {}
// SAFETY: see above; `&Buffer` gives read-only access.
unsafe impl Sync for Buffer {}

impl Buffer {
    /// A buffer of `len` bytes from the host allocator. Its bytes are
    /// initialized: zero when fresh from the system, or whatever a previous
    /// tensor of the same size class left in them when recycled.
    pub fn allocate_host(len: usize) -> Result<Buffer> {
        if len == 0 {
            return Ok(Buffer::empty(Location::Host));
        }
        let ptr = HOST_POOL.allocate(len)?;
        Ok(Buffer {
            ptr,
            len,
            location: Location::Host,
            release: Release::HostPool,
            writable: true,
        })
    }

    /// A buffer of `len` zero bytes from the host allocator.
    pub fn zeroed_host(len: usize) -> Result<Buffer> {
        let mut b = Buffer::allocate_host(len)?;
        b.as_mut_slice().fill(0);
        Ok(b)
    }

    /// A zero-length buffer.
    pub fn empty(location: Location) -> Buffer {
        Buffer {
            // A dangling pointer aligned to ALIGNMENT; never dereferenced for
            // a non-empty access because len is 0.
            ptr: NonNull::<Aligned>::dangling().cast(),
            len: 0,
            location,
            release: Release::None,
            writable: true,
        }
    }

    /// Wraps foreign memory. `release` runs once, when the last tensor that
    /// uses the buffer is dropped.
    ///
    /// # Safety
    /// `ptr` must point to `len` bytes that stay valid (and are not written by
    /// anyone else while opforge reads them, unless the caller accepts the
    /// race) until `release` runs. For `Location::Host`, the bytes must be
    /// initialized, and valid values of the dtype the tensor will have.
    pub unsafe fn from_foreign(
        ptr: NonNull<u8>,
        len: usize,
        location: Location,
        release: impl FnOnce() + Send + Sync + 'static,
    ) -> Buffer {
        Buffer {
            ptr,
            len,
            location,
            release: Release::Foreign(Box::new(release)),
            writable: true,
        }
    }

    /// Wraps foreign memory that opforge may read but never write (a numpy
    /// array lent by Python, a read-only DLPack capsule): tensors over it
    /// fail `bytes_mut`/`flat_mut` with FailedPrecondition, and are never
    /// uniquely owned, so no kernel forwards them into an output.
    ///
    /// # Safety
    /// As [`Buffer::from_foreign`].
    pub unsafe fn from_foreign_read_only(
        ptr: NonNull<u8>,
        len: usize,
        location: Location,
        release: impl FnOnce() + Send + Sync + 'static,
    ) -> Buffer {
        // SAFETY: the caller upholds from_foreign's contract.
        let mut b = unsafe { Buffer::from_foreign(ptr, len, location, release) };
        b.writable = false;
        b
    }

    /// [`Buffer::from_foreign_read_only`] with the release given as a
    /// function and its argument rather than a closure (a closure would be
    /// boxed: one allocation more per buffer). `release(ctx)` runs once,
    /// when the last tensor that uses the buffer is dropped.
    ///
    /// # Safety
    /// As [`Buffer::from_foreign`], and `release(ctx)` must be sound to call
    /// once, from any thread (the buffer is `Send` and `Sync`).
    pub unsafe fn from_foreign_read_only_raw(
        ptr: NonNull<u8>,
        len: usize,
        location: Location,
        release: unsafe fn(NonNull<()>),
        ctx: NonNull<()>,
    ) -> Buffer {
        Buffer {
            ptr,
            len,
            location,
            release: Release::Raw { release, ctx },
            writable: false,
        }
    }

    /// Whether tensors may write this memory (false for
    /// [`Buffer::from_foreign_read_only`]).
    #[inline]
    pub fn is_writable(&self) -> bool {
        self.writable
    }

    /// The length in bytes.
    #[inline]
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the buffer has no bytes.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Where the memory lives.
    #[inline]
    pub fn location(&self) -> Location {
        self.location
    }

    /// The address of the first byte.
    #[inline]
    pub fn as_ptr(&self) -> *const u8 {
        self.ptr.as_ptr()
    }

    /// The bytes, for host memory (empty for device memory).
    #[inline]
    pub fn as_slice(&self) -> &[u8] {
        if self.location != Location::Host {
            return &[];
        }
        // SAFETY: host buffers hold `len` initialized bytes (allocator
        // contract and `from_foreign`'s safety contract), valid while self lives.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }

    /// The bytes, mutably, for writable host memory (empty for device
    /// memory and for read-only foreign memory: callers check
    /// [`Buffer::is_writable`] first to report the reason).
    #[inline]
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        if self.location != Location::Host || !self.writable {
            return &mut [];
        }
        // SAFETY: as in `as_slice`; `&mut self` makes the access exclusive.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl Drop for Buffer {
    fn drop(&mut self) {
        match std::mem::replace(&mut self.release, Release::None) {
            Release::None => {}
            Release::HostPool => HOST_POOL.free(self.ptr, self.len),
            Release::Foreign(f) => f(),
            // SAFETY: called once (the release was replaced by None above),
            // as `from_foreign_read_only_raw`'s caller promised is sound.
            Release::Raw { release, ctx } => unsafe { release(ctx) },
        }
    }
}

impl std::fmt::Debug for Buffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Buffer({} bytes at {:?} on {:?})",
            self.len, self.ptr, self.location
        )
    }
}

/// Number of size classes: class `k` holds blocks of `64 << k` bytes.
const CLASSES: usize = 48;
/// Blocks kept per class, small and large (>= 1 MiB).
const KEEP_SMALL: usize = 64;
const KEEP_LARGE: usize = 4;

/// opforge's host allocator: 64-byte aligned blocks in power-of-two size
/// classes, with freed blocks cached per class for reuse.
struct HostPool {
    free: [Mutex<Vec<usize>>; CLASSES],
}

static HOST_POOL: HostPool = HostPool {
    free: [const { Mutex::new(Vec::new()) }; CLASSES],
};

fn class_of(len: usize) -> Option<(usize, usize)> {
    let size = len.max(ALIGNMENT).checked_next_power_of_two()?;
    let class = (size / ALIGNMENT).trailing_zeros() as usize;
    (class < CLASSES).then_some((class, size))
}

impl HostPool {
    fn allocate(&self, len: usize) -> Result<NonNull<u8>> {
        super::limit::check(len, || format!("a buffer of {len} bytes on the host"))?;
        let (class, size) = class_of(len).ok_or_else(|| {
            Status::resource_exhausted(format!("cannot allocate {len} bytes: too large"))
        })?;
        if let Some(addr) = self.free[class]
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .pop()
        {
            // The address came from a block of this class that was freed.
            return NonNull::new(addr as *mut u8)
                .ok_or_else(|| Status::internal("null block in host pool"));
        }
        let layout = Layout::from_size_align(size, ALIGNMENT)
            .map_err(|_| Status::resource_exhausted(format!("cannot allocate {len} bytes")))?;
        // SAFETY: layout has non-zero size (at least ALIGNMENT).
        let ptr = unsafe { std::alloc::alloc_zeroed(layout) };
        NonNull::new(ptr).ok_or_else(|| {
            Status::resource_exhausted(format!(
                "OOM when allocating a buffer of {len} bytes on the host"
            ))
        })
    }

    fn free(&self, ptr: NonNull<u8>, len: usize) {
        if let Some((class, _)) = class_of(len) {
            self.free_shared(class, ptr);
        }
    }

    /// Gives a block of `class` to the shared cache, or to the system when
    /// the class's cache is full.
    fn free_shared(&self, class: usize, ptr: NonNull<u8>) {
        let size = ALIGNMENT << class;
        let keep = if size >= 1 << 20 {
            KEEP_LARGE
        } else {
            KEEP_SMALL
        };
        let mut list = self.free[class].lock().unwrap_or_else(|p| p.into_inner());
        if list.len() < keep {
            list.push(ptr.as_ptr() as usize);
            return;
        }
        drop(list);
        // SAFETY: the block was allocated by `allocate` with this exact layout
        // (size class `class`, same alignment) and is no longer referenced.
        unsafe {
            std::alloc::dealloc(
                ptr.as_ptr(),
                Layout::from_size_align_unchecked(size, ALIGNMENT),
            )
        };
    }
}

/// Size classes small enough for the per-thread spares (blocks up to 64 KiB).
const SPARE_CLASSES: usize = 11;
/// Buffers each thread keeps per small class.
const SPARE_KEEP: usize = 8;

/// Small host buffers each thread keeps whole, reference count and all, for
/// the next tensor of the same size class: a steady stream of small
/// tensors (eager dispatch, graphs of scalars) then costs no allocation at
/// all, not even of the `Arc`.
struct SpareBuffers {
    free: [Vec<Arc<Buffer>>; SPARE_CLASSES],
}

thread_local! {
    static SPARE: std::cell::RefCell<SpareBuffers> = const {
        std::cell::RefCell::new(SpareBuffers { free: [const { Vec::new() }; SPARE_CLASSES] })
    };
}

/// A host buffer of `len` bytes in an `Arc` (see [`Buffer::allocate_host`]
/// for its contents), from this thread's spares when it has one.
pub(crate) fn allocate_host_shared(len: usize) -> Result<Arc<Buffer>> {
    if let Some((class, _)) = class_of(len).filter(|&(c, _)| c < SPARE_CLASSES && len > 0) {
        let spare = SPARE
            .try_with(|s| s.try_borrow_mut().ok()?.free[class].pop())
            .ok()
            .flatten();
        if let Some(mut buf) = spare {
            if let Some(b) = Arc::get_mut(&mut buf) {
                // The block holds a whole size class, so any length of the class fits.
                b.len = len;
                return Ok(buf);
            }
        }
    }
    Ok(Arc::new(Buffer::allocate_host(len)?))
}

/// Gives up a tensor's buffer: kept as a spare when this was its last owner
/// and it is a small block of opforge's host pool, dropped otherwise.
pub(crate) fn release_shared(mut buf: Arc<Buffer>) {
    // A plain load first: most releases are of a buffer other tensors
    // still hold (an eager call's input clones), and `get_mut`'s
    // compare-exchange costs more than the load. (A count that drops to
    // one meanwhile only means this release keeps no spare.)
    if Arc::strong_count(&buf) != 1 {
        return;
    }
    let Some(b) = Arc::get_mut(&mut buf) else {
        return; // another tensor still uses it
    };
    if !matches!(b.release, Release::HostPool) {
        return;
    }
    let Some((class, _)) = class_of(b.len).filter(|&(c, _)| c < SPARE_CLASSES) else {
        return;
    };
    let _ = SPARE.try_with(|s| {
        if let Ok(mut s) = s.try_borrow_mut() {
            let list = &mut s.free[class];
            if list.len() < SPARE_KEEP {
                list.reserve_exact(SPARE_KEEP);
                list.push(buf);
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    use std::sync::Arc;

    #[test]
    fn host_buffers_are_aligned_initialized_and_recycled() {
        let b = Buffer::allocate_host(1000).unwrap();
        assert_eq!(b.as_ptr() as usize % ALIGNMENT, 0);
        assert_eq!(b.len(), 1000);
        let addr = b.as_ptr() as usize;
        drop(b);
        let b2 = Buffer::allocate_host(900).unwrap(); // same 1024-byte class
        assert_eq!(b2.as_ptr() as usize % ALIGNMENT, 0);
        // Recycling is per class; another thread could have taken the block,
        // so only check that a same-class allocation can reuse it.
        let _ = addr;
        let z = Buffer::zeroed_host(4096).unwrap();
        assert!(z.as_slice().iter().all(|&x| x == 0));
        assert!(Buffer::allocate_host(0).unwrap().is_empty());
        assert!(Buffer::allocate_host(usize::MAX / 2).is_err());
    }

    #[test]
    fn foreign_release_runs_once_on_drop() {
        let released = Arc::new(AtomicBool::new(false));
        let mut data = vec![1u8, 2, 3];
        let flag = released.clone();
        // SAFETY: `data` outlives the buffer (dropped below before `data`).
        let b = unsafe {
            Buffer::from_foreign(
                NonNull::new(data.as_mut_ptr()).unwrap(),
                3,
                Location::Host,
                move || flag.store(true, Ordering::SeqCst),
            )
        };
        assert_eq!(b.as_slice(), &[1, 2, 3]);
        assert!(!released.load(Ordering::SeqCst));
        drop(b);
        assert!(released.load(Ordering::SeqCst));
        drop(data);
    }

    #[test]
    fn a_raw_release_runs_once_when_the_last_tensor_goes() {
        static CALLS: AtomicUsize = AtomicUsize::new(0);
        static SEEN: AtomicUsize = AtomicUsize::new(0);
        /// Counts its calls and the context it was given.
        unsafe fn release(ctx: NonNull<()>) {
            CALLS.fetch_add(1, Ordering::SeqCst);
            SEEN.store(ctx.as_ptr() as usize, Ordering::SeqCst);
        }
        let mut data = [7u8; 8];
        let ctx = NonNull::from(&CALLS).cast::<()>();
        // SAFETY: `data` outlives the buffer and its tensors (dropped at
        // the end of the test); `release` only counts.
        let b = unsafe {
            Buffer::from_foreign_read_only_raw(
                NonNull::new(data.as_mut_ptr()).unwrap(),
                8,
                Location::Host,
                release,
                ctx,
            )
        };
        assert!(!b.is_writable());
        let t = crate::Tensor::from_buffer(crate::DataType::UInt8, &[8], b).unwrap();
        let shared = t.clone();
        drop(t);
        assert_eq!(CALLS.load(Ordering::SeqCst), 0, "a tensor still holds it");
        assert_eq!(shared.bytes().unwrap(), &[7u8; 8]);
        drop(shared);
        assert_eq!(CALLS.load(Ordering::SeqCst), 1);
        assert_eq!(SEEN.load(Ordering::SeqCst), ctx.as_ptr() as usize);
    }

    #[test]
    fn small_buffers_are_recycled_whole_by_their_last_owner() {
        let a = allocate_host_shared(12).unwrap();
        let addr = a.as_ptr();
        let shared = a.clone();
        release_shared(a); // not the last owner: nothing is kept
        let b = allocate_host_shared(12).unwrap();
        assert_ne!(
            b.as_ptr(),
            addr,
            "a buffer still in use was handed out again"
        );
        release_shared(shared); // the last owner: kept as this thread's spare
        let c = allocate_host_shared(40).unwrap(); // same 64-byte class
        assert_eq!(c.as_ptr(), addr);
        assert_eq!(c.len(), 40);
        drop(b);
    }

    #[test]
    fn size_classes() {
        assert_eq!(class_of(1), Some((0, 64)));
        assert_eq!(class_of(64), Some((0, 64)));
        assert_eq!(class_of(65), Some((1, 128)));
        assert_eq!(class_of(64 << 20), Some((20, 64 << 20)));
    }
}
