//! [`Tensor`]: a dtype, a shape and reference-counted storage. No generic
//! parameter: kernels view the data as a typed slice ([`Tensor::flat`]) after
//! checking the dtype, usually inside [`dispatch!`](crate::dispatch).

mod buffer;
mod device_buffer;
mod element;
pub mod json;
pub mod limit;
mod proto;
mod shape;

pub use buffer::{Buffer, Location, ALIGNMENT};
pub use device_buffer::DeviceBuffer;
pub use element::Element;
pub use limit::{max_allocation, set_max_allocation};
pub use shape::{dims_proto, TensorShape};

use crate::dtype::DataType;
use crate::resource_handle::ResourceHandle;
use crate::{Result, Status};
use std::fmt;
use std::mem::ManuallyDrop;
use std::sync::Arc;

#[derive(Clone)]
enum Storage {
    /// Numeric and bool tensors: a byte buffer, with the tensor's bytes
    /// starting at `offset` (views of a larger buffer share it).
    Dense { buf: Arc<Buffer>, offset: usize },
    /// `string` tensors: one byte string per element.
    Strings(Arc<Vec<Vec<u8>>>),
    /// `resource` tensors: one handle per element.
    Resources(Arc<Vec<ResourceHandle>>),
    /// Memory of a device that is not a host pointer (reached only through
    /// the device that owns it: see [`DeviceBuffer`]).
    Device(Arc<dyn DeviceBuffer>),
    /// No storage: what a kernel leaves in an input slot it moved the tensor
    /// out of (a zero-element tensor that costs nothing to make or drop).
    Taken,
}

/// An n-dimensional array of one dtype.
///
/// Cloning a tensor is cheap: the clone shares the storage. A tensor's data
/// can be written only while its storage is not shared ([`Tensor::flat_mut`]).
///
/// ```
/// use opforge_core::{DataType, Tensor};
/// let t = Tensor::from_vec(&[2, 2], vec![1.0f32, 2.0, 3.0, 4.0]).unwrap();
/// assert_eq!(t.dtype(), DataType::Float);
/// assert_eq!(t.flat::<f32>().unwrap()[3], 4.0);
/// assert!(t.flat::<i32>().is_err());
/// let mut u = Tensor::zeros(DataType::Int32, &[3]).unwrap();
/// u.flat_mut::<i32>().unwrap()[1] = 7;
/// assert_eq!(u.flat::<i32>().unwrap(), &[0, 7, 0]);
/// ```
#[derive(Clone)]
pub struct Tensor {
    dtype: DataType,
    shape: TensorShape,
    /// Dropped by `Tensor`'s `Drop`, which recycles small buffers.
    storage: ManuallyDrop<Storage>,
}

impl Drop for Tensor {
    #[inline]
    fn drop(&mut self) {
        // SAFETY: `storage` is taken exactly once, here, and never used again
        // (the tensor is being dropped).
        let storage = unsafe { ManuallyDrop::take(&mut self.storage) };
        if let Storage::Dense { buf, .. } = storage {
            buffer::release_shared(buf);
        }
    }
}

/// The error for writing a tensor over read-only foreign memory.
/// Whether `a` and `b` are fixed-width integer dtypes of one size (`Int32`
/// and `UInt32`): the same bits, read with the other signedness.
#[inline]
fn same_integer_bits(a: DataType, b: DataType) -> bool {
    use DataType::*;
    let fixed = |d| {
        matches!(
            d,
            Int8 | UInt8 | Int16 | UInt16 | Int32 | UInt32 | Int64 | UInt64
        )
    };
    fixed(a) && fixed(b) && a.size() == b.size()
}

fn read_only() -> Status {
    Status::failed_precondition(
        "Cannot write to a tensor whose memory is read-only (a numpy array or DLPack \
         capsule lent to opforge): copy it first",
    )
}

fn check_storable(dtype: DataType) -> Result<()> {
    if dtype.is_ref() || dtype == DataType::Invalid {
        return Err(Status::invalid_argument(format!(
            "Cannot make a tensor of dtype {dtype}"
        )));
    }
    if dtype == DataType::Variant {
        return Err(Status::unimplemented(
            "Tensors of dtype variant are not supported yet",
        ));
    }
    Ok(())
}

impl Tensor {
    /// What a kernel leaves behind when it moves an input out: a `float`
    /// tensor of shape `[0]` with no storage (never shared, never reused
    /// for an output).
    #[inline]
    pub(crate) fn taken() -> Tensor {
        Tensor {
            dtype: DataType::Float,
            shape: TensorShape::vector(0),
            storage: ManuallyDrop::new(Storage::Taken),
        }
    }

    /// A tensor of `dtype` and shape `dims` whose elements are all zero
    /// (empty strings, default resource handles).
    pub fn zeros(dtype: DataType, dims: &[i64]) -> Result<Tensor> {
        Tensor::zeros_with_shape(dtype, TensorShape::new(dims)?)
    }

    /// [`Tensor::zeros`] with a [`TensorShape`].
    pub fn zeros_with_shape(dtype: DataType, shape: TensorShape) -> Result<Tensor> {
        check_storable(dtype)?;
        let n = shape.num_elements();
        let storage = match dtype {
            DataType::String => {
                Storage::Strings(Arc::new(limit::filled_vec(n, Vec::new(), || {
                    limit::describe_tensor(dtype, &shape)
                })?))
            }
            DataType::Resource => Storage::Resources(Arc::new(limit::filled_vec(
                n,
                ResourceHandle::default(),
                || limit::describe_tensor(dtype, &shape),
            )?)),
            _ => Storage::Dense {
                buf: {
                    let mut buf = buffer::allocate_host_shared(dense_bytes(dtype, &shape)?)?;
                    match Arc::get_mut(&mut buf) {
                        Some(b) => b.as_mut_slice().fill(0),
                        None => return Err(Status::internal("a new buffer is shared")),
                    }
                    buf
                },
                offset: 0,
            },
        };
        Ok(Tensor {
            dtype,
            shape,
            storage: ManuallyDrop::new(storage),
        })
    }

    /// A tensor whose elements are unspecified but valid values of `dtype`
    /// (recycled memory): for outputs a kernel overwrites completely.
    /// `bool` tensors are zeroed, as are string and resource tensors.
    pub fn uninit(dtype: DataType, shape: TensorShape) -> Result<Tensor> {
        check_storable(dtype)?;
        if matches!(
            dtype,
            DataType::String | DataType::Resource | DataType::Bool
        ) || dtype.size() == 0
        {
            return Tensor::zeros_with_shape(dtype, shape);
        }
        let buf = buffer::allocate_host_shared(dense_bytes(dtype, &shape)?)?;
        Ok(Tensor {
            dtype,
            shape,
            storage: ManuallyDrop::new(Storage::Dense { buf, offset: 0 }),
        })
    }

    /// A tensor of shape `dims` holding `values` (row-major).
    pub fn from_vec<T: Element>(dims: &[i64], values: Vec<T>) -> Result<Tensor> {
        Tensor::from_slice(dims, &values)
    }

    /// A tensor of shape `dims` holding a copy of `values` (row-major).
    pub fn from_slice<T: Element>(dims: &[i64], values: &[T]) -> Result<Tensor> {
        let shape = TensorShape::new(dims)?;
        if shape.num_elements() != values.len() {
            return Err(Status::invalid_argument(format!(
                "{} values given for a tensor of shape {shape} ({} elements)",
                values.len(),
                shape.num_elements()
            )));
        }
        let mut t = Tensor::uninit(T::DTYPE, shape)?;
        t.flat_mut::<T>()?.copy_from_slice(values);
        Ok(t)
    }

    /// A scalar tensor.
    pub fn scalar<T: Element>(value: T) -> Tensor {
        let mut t = Tensor::uninit(T::DTYPE, TensorShape::scalar()).expect("a scalar always fits");
        t.flat_mut::<T>().expect("fresh tensor of T's dtype")[0] = value;
        t
    }

    /// A `string` tensor.
    pub fn from_strings(dims: &[i64], values: Vec<Vec<u8>>) -> Result<Tensor> {
        let shape = TensorShape::new(dims)?;
        if shape.num_elements() != values.len() {
            return Err(Status::invalid_argument(format!(
                "{} strings given for a tensor of shape {shape}",
                values.len()
            )));
        }
        Ok(Tensor {
            dtype: DataType::String,
            shape,
            storage: ManuallyDrop::new(Storage::Strings(Arc::new(values))),
        })
    }

    /// A `resource` tensor.
    pub fn from_resource_handles(dims: &[i64], handles: Vec<ResourceHandle>) -> Result<Tensor> {
        let shape = TensorShape::new(dims)?;
        if shape.num_elements() != handles.len() {
            return Err(Status::invalid_argument(format!(
                "{} handles given for a tensor of shape {shape}",
                handles.len()
            )));
        }
        Ok(Tensor {
            dtype: DataType::Resource,
            shape,
            storage: ManuallyDrop::new(Storage::Resources(Arc::new(handles))),
        })
    }

    /// A dense tensor over an existing buffer (foreign memory, a plugin's
    /// allocation, a device buffer).
    pub fn from_buffer(dtype: DataType, dims: &[i64], buffer: Buffer) -> Result<Tensor> {
        check_storable(dtype)?;
        if matches!(dtype, DataType::String | DataType::Resource) {
            return Err(Status::invalid_argument(format!(
                "A {dtype} tensor cannot wrap a byte buffer"
            )));
        }
        let shape = TensorShape::new(dims)?;
        let need = byte_len(dtype, shape.num_elements())?;
        if buffer.len() < need {
            return Err(Status::invalid_argument(format!(
                "A buffer of {} bytes is too small for a {dtype} tensor of shape {shape} ({need} bytes)",
                buffer.len()
            )));
        }
        let align = dtype.size().max(1);
        if buffer.as_ptr() as usize % align != 0 {
            return Err(Status::invalid_argument(format!(
                "A buffer at {:p} is not aligned for {dtype} elements ({align} bytes)",
                buffer.as_ptr()
            )));
        }
        if dtype == DataType::Bool
            && buffer.location() == Location::Host
            && buffer.as_slice()[..need].iter().any(|&b| b > 1)
        {
            return Err(Status::invalid_argument(
                "A bool buffer holds bytes other than 0 and 1",
            ));
        }
        Ok(Tensor {
            dtype,
            shape,
            storage: ManuallyDrop::new(Storage::Dense {
                buf: Arc::new(buffer),
                offset: 0,
            }),
        })
    }

    /// A dense host tensor of `dtype` and `shape` holding a copy of `bytes`
    /// (its elements in row-major order, native byte order);
    /// `InvalidArgument` if the length does not match, or if a `bool`
    /// tensor would hold bytes other than 0 and 1.
    pub fn from_bytes(dtype: DataType, shape: TensorShape, bytes: &[u8]) -> Result<Tensor> {
        check_storable(dtype)?;
        if !dtype.is_dense() {
            return Err(Status::invalid_argument(format!(
                "A {dtype} tensor cannot be made from raw bytes"
            )));
        }
        let need = byte_len(dtype, shape.num_elements())?;
        if bytes.len() != need {
            return Err(Status::invalid_argument(format!(
                "{} bytes given for a {dtype} tensor of shape {shape} ({need} bytes)",
                bytes.len()
            )));
        }
        if dtype == DataType::Bool && bytes.iter().any(|&b| b > 1) {
            return Err(Status::invalid_argument(
                "A bool tensor's bytes must be 0 or 1",
            ));
        }
        let mut buf = buffer::allocate_host_shared(need)?;
        match Arc::get_mut(&mut buf) {
            Some(b) => b.as_mut_slice()[..need].copy_from_slice(bytes),
            None => return Err(Status::internal("a new buffer is shared")),
        }
        Ok(Tensor {
            dtype,
            shape,
            storage: ManuallyDrop::new(Storage::Dense { buf, offset: 0 }),
        })
    }

    /// A dense tensor in device memory (see [`DeviceBuffer`]); the buffer
    /// must hold at least the tensor's bytes. Only the device that made the
    /// buffer reads it ([`Device::copy_to_host`](crate::device::Device::copy_to_host)).
    pub fn from_device_buffer(
        dtype: DataType,
        shape: TensorShape,
        buffer: Arc<dyn DeviceBuffer>,
    ) -> Result<Tensor> {
        check_storable(dtype)?;
        if !dtype.is_dense() {
            return Err(Status::invalid_argument(format!(
                "A {dtype} tensor cannot live in device memory; it stays on the host"
            )));
        }
        let need = byte_len(dtype, shape.num_elements())?;
        if buffer.byte_len() < need {
            return Err(Status::invalid_argument(format!(
                "A device buffer of {} bytes is too small for a {dtype} tensor of shape {shape} ({need} bytes)",
                buffer.byte_len()
            )));
        }
        Ok(Tensor {
            dtype,
            shape,
            storage: ManuallyDrop::new(Storage::Device(buffer)),
        })
    }

    /// The device buffer of a tensor in device memory ([`Tensor::from_device_buffer`]).
    pub fn device_buffer(&self) -> Option<&Arc<dyn DeviceBuffer>> {
        match &*self.storage {
            Storage::Device(b) => Some(b),
            _ => None,
        }
    }

    /// The element type.
    #[inline]
    pub fn dtype(&self) -> DataType {
        self.dtype
    }

    /// The shape.
    #[inline]
    pub fn shape(&self) -> &TensorShape {
        &self.shape
    }

    /// The dimension sizes.
    #[inline]
    pub fn dims(&self) -> &[i64] {
        self.shape.dims()
    }

    /// The number of dimensions.
    #[inline]
    pub fn rank(&self) -> usize {
        self.shape.rank()
    }

    /// The number of elements.
    #[inline]
    pub fn num_elements(&self) -> usize {
        self.shape.num_elements()
    }

    /// Whether the tensor's data is in host memory (what `location() ==
    /// Location::Host` says, without building the location).
    #[inline]
    pub fn is_host(&self) -> bool {
        match &*self.storage {
            Storage::Dense { buf, .. } => matches!(buf.location(), Location::Host),
            Storage::Device(_) => false,
            _ => true,
        }
    }

    /// Where the data lives (`Host` for strings and resources).
    #[inline]
    pub fn location(&self) -> Location {
        match &*self.storage {
            Storage::Dense { buf, .. } => buf.location(),
            Storage::Device(b) => b.location(),
            _ => Location::Host,
        }
    }

    #[inline]
    fn check_type<T: Element>(&self) -> Result<()> {
        if T::DTYPE != self.dtype || self.location() != Location::Host {
            return Err(self.view_error(T::DTYPE));
        }
        Ok(())
    }

    /// [`check_type`](Self::check_type), also accepting a fixed-width
    /// integer `T` of the other signedness and the dtype's size.
    #[inline]
    fn check_bits<T: Element>(&self) -> Result<()> {
        if (T::DTYPE != self.dtype && !same_integer_bits(T::DTYPE, self.dtype))
            || self.location() != Location::Host
        {
            return Err(self.view_error(T::DTYPE));
        }
        Ok(())
    }

    /// Why this tensor cannot be viewed as elements of `want` on the host
    /// (kept out of line: the check itself is on every kernel's hot path).
    #[cold]
    #[inline(never)]
    fn view_error(&self, want: DataType) -> Status {
        if want != self.dtype {
            return Status::invalid_argument(format!(
                "Tensor of dtype {} viewed as {want}",
                self.dtype
            ));
        }
        Status::failed_precondition(format!(
            "Tensor data is on {:?}; copy it to the host before reading it",
            self.location()
        ))
    }

    /// The raw bytes of a dense host tensor.
    #[inline]
    pub fn bytes(&self) -> Result<&[u8]> {
        match &*self.storage {
            Storage::Dense { buf, offset } if buf.location() == Location::Host => {
                let len = self.num_elements() * self.dtype.size();
                Ok(&buf.as_slice()[*offset..*offset + len])
            }
            Storage::Dense { .. } | Storage::Device(_) => Err(Status::failed_precondition(
                "Tensor data is not on the host",
            )),
            Storage::Taken => Ok(&[]),
            _ => Err(Status::invalid_argument(format!(
                "A {} tensor has no raw bytes",
                self.dtype
            ))),
        }
    }

    /// The raw bytes of a dense host tensor, mutably. Fails
    /// (`FailedPrecondition`) when the storage is shared with another tensor
    /// or is not host memory, and (`InvalidArgument`) for string and
    /// resource tensors, which have no raw bytes.
    pub fn bytes_mut(&mut self) -> Result<&mut [u8]> {
        if let Some((p, len)) = self.host_data_mut() {
            // SAFETY: `host_data_mut` gives `len` writable bytes that nothing
            // else reads or writes while this tensor lives and is not cloned,
            // which the `&mut self` borrow of the result ensures.
            return Ok(unsafe { std::slice::from_raw_parts_mut(p, len) });
        }
        // Why not (or a taken input's empty bytes).
        let len = self.num_elements() * self.dtype.size();
        match &mut *self.storage {
            Storage::Dense { buf, offset } => {
                if buf.location() != Location::Host {
                    return Err(Status::failed_precondition(
                        "Tensor data is not on the host",
                    ));
                }
                let offset = *offset;
                if !buf.is_writable() {
                    return Err(read_only());
                }
                let buf = Arc::get_mut(buf).ok_or_else(|| {
                    Status::failed_precondition(
                        "Cannot write to a tensor whose buffer is shared with another tensor",
                    )
                })?;
                Ok(&mut buf.as_mut_slice()[offset..offset + len])
            }
            Storage::Device(_) => Err(Status::failed_precondition(
                "Tensor data is not on the host",
            )),
            Storage::Taken => Ok(&mut []),
            _ => Err(Status::invalid_argument(format!(
                "A {} tensor has no raw bytes",
                self.dtype
            ))),
        }
    }

    /// The address and length of a dense host tensor's bytes, for lending
    /// them to foreign code (the op-library bridge makes a view of every
    /// argument on every call): what [`bytes`](Self::bytes) gives, inlined
    /// and without building an error; `None` for anything else (strings,
    /// resources, device memory, a taken input), where `bytes` says why.
    ///
    /// The address is valid for reads of `len` bytes while this tensor
    /// lives and its storage is not written.
    #[inline(always)]
    pub fn host_data(&self) -> Option<(*const u8, usize)> {
        match &*self.storage {
            Storage::Dense { buf, offset } if buf.location() == Location::Host => {
                let len = self.num_elements() * self.dtype.size();
                // Within the buffer for every tensor this module makes;
                // checked anyway, as `bytes` checks it by slicing.
                if offset.checked_add(len)? > buf.len() {
                    return None;
                }
                Some((buf.as_ptr().wrapping_add(*offset), len))
            }
            _ => None,
        }
    }

    /// [`host_data`](Self::host_data) for writing: `None` also when this
    /// tensor may not write its bytes, for the reasons
    /// [`bytes_mut`](Self::bytes_mut) refuses them (read-only foreign
    /// memory, or a buffer another tensor shares).
    ///
    /// Exclusivity is read from the buffer's strong count rather than
    /// proven with `Arc::get_mut`, whose atomic read-modify-writes (a
    /// locked compare-exchange and a store on the weak count) cost a bridge
    /// more than the rest of a view. That is enough here because of what
    /// this module does with a buffer's `Arc`: it lives only in tensors'
    /// private storage (and in the spare lists of `buffer`, as a sole
    /// owner), and no `Weak` of it is ever made (`get_mut` locks the weak
    /// count against a `Weak` upgraded meanwhile; checked to be absent here
    /// as well). So with `&mut self` holding this tensor's `Arc`, a strong
    /// count of 1 means no other tensor has the buffer, and none can get it
    /// while the borrow lasts (a new `Arc` is made only by cloning this
    /// one). The acquire fence orders the caller's accesses after those of
    /// the owners that are gone (their drops release the count).
    ///
    /// The address is valid for writes of `len` bytes while this tensor
    /// lives and is not cloned, and nothing else reads or writes its bytes
    /// meanwhile.
    #[inline(always)]
    pub fn host_data_mut(&mut self) -> Option<(*mut u8, usize)> {
        match &*self.storage {
            Storage::Dense { buf, .. }
                if buf.is_writable()
                    && Arc::strong_count(buf) == 1
                    && Arc::weak_count(buf) == 0 =>
            {
                std::sync::atomic::fence(std::sync::atomic::Ordering::Acquire);
                let (p, len) = self.host_data()?;
                Some((p.cast_mut(), len))
            }
            _ => None,
        }
    }

    /// The elements, flattened in row-major order.
    #[inline]
    pub fn flat<T: Element>(&self) -> Result<&[T]> {
        self.check_type::<T>()?;
        // Not through `view_checked` (which `flat_bits` uses): measured
        // that way, a plugin op's eager call from Python took 35 ns more
        // (benches/python_dispatch.py, 0.24 -> 0.28 us): the code of every
        // caller of `flat` changed shape, not its instructions.
        let bytes = self.bytes()?;
        let n = bytes.len() / std::mem::size_of::<T>().max(1);
        // SAFETY: `bytes` holds exactly num_elements * size_of::<T>() bytes
        // (T::DTYPE == self.dtype, whose size equals size_of::<T>(), so `n`
        // is the number of elements), starts at a T-aligned address (buffers
        // are 64-aligned, offsets are multiples of the element size, foreign
        // buffers are checked), and every byte pattern in it is a valid T
        // (the `Element` contract).
        Ok(unsafe { std::slice::from_raw_parts(bytes.as_ptr().cast::<T>(), n) })
    }

    /// The elements as `T`, which is the dtype's element type or, for an
    /// integer dtype, the fixed-width integer of its size and the other
    /// signedness (a `UInt32` tensor read as `i32`): the same bits. For
    /// kernels whose arithmetic gives the same bits either way (wrapping
    /// `+`, `-`, `*`, `==`), so that they compile once per integer size
    /// rather than once per dtype.
    ///
    /// ```
    /// # use opforge_core::Tensor;
    /// let t = Tensor::from_vec(&[2], vec![1u32, u32::MAX]).unwrap();
    /// assert_eq!(t.flat_bits::<i32>().unwrap(), &[1, -1]);
    /// assert!(t.flat_bits::<f32>().is_err());
    /// ```
    #[inline]
    pub fn flat_bits<T: Element>(&self) -> Result<&[T]> {
        self.check_bits::<T>()?;
        self.view_checked()
    }

    /// The elements as `T` once the dtype check (`check_type` or
    /// `check_bits`) passed.
    #[inline]
    fn view_checked<T: Element>(&self) -> Result<&[T]> {
        let bytes = self.bytes()?;
        let n = bytes.len() / std::mem::size_of::<T>().max(1);
        // SAFETY: the caller's check made `T` the dtype's element type or an
        // integer of the dtype's size and alignment, so `bytes` holds exactly
        // num_elements * size_of::<T>() bytes (`n` is the number of
        // elements), starts at a T-aligned address (buffers are 64-aligned,
        // offsets are multiples of the element size, foreign buffers are
        // checked), and every byte pattern in it is a valid T (the `Element`
        // contract; any bits are a valid integer).
        Ok(unsafe { std::slice::from_raw_parts(bytes.as_ptr().cast::<T>(), n) })
    }

    /// The elements, mutably. Fails (`FailedPrecondition`) when the storage is
    /// shared with another tensor (writing would change that tensor too), is
    /// read-only foreign memory, or is not on the host.
    #[inline]
    pub fn flat_mut<T: Element>(&mut self) -> Result<&mut [T]> {
        self.check_type::<T>()?;
        self.view_checked_mut()
    }

    /// [`flat_mut`](Self::flat_mut) with the types of
    /// [`flat_bits`](Self::flat_bits).
    #[inline]
    pub fn flat_bits_mut<T: Element>(&mut self) -> Result<&mut [T]> {
        self.check_bits::<T>()?;
        self.view_checked_mut()
    }

    /// The elements as `T`, mutably, once the dtype check passed.
    #[inline]
    fn view_checked_mut<T: Element>(&mut self) -> Result<&mut [T]> {
        if let Some((p, len)) = self.host_data_mut() {
            // SAFETY: as in `view_checked` (T has the dtype's size, the bytes
            // are T-aligned and any byte pattern is a valid T), and
            // `host_data_mut` gives exclusive access to the `len` bytes for
            // as long as the `&mut self` borrow of the result lasts.
            return Ok(unsafe {
                std::slice::from_raw_parts_mut(p.cast::<T>(), len / std::mem::size_of::<T>().max(1))
            });
        }
        // Why not.
        let n = self.num_elements();
        let Storage::Dense { buf, offset } = &mut *self.storage else {
            return Err(Status::internal("dense dtype without a dense buffer"));
        };
        let offset = *offset;
        if buf.location() != Location::Host {
            return Err(Status::failed_precondition(
                "Tensor data is not on the host",
            ));
        }
        if !buf.is_writable() {
            return Err(read_only());
        }
        let buf = Arc::get_mut(buf).ok_or_else(|| {
            Status::failed_precondition(
                "Cannot write to a tensor whose buffer is shared with another tensor",
            )
        })?;
        let bytes = &mut buf.as_mut_slice()[offset..offset + n * std::mem::size_of::<T>()];
        // SAFETY: as in `view_checked`, and `Arc::get_mut` proved exclusive
        // access.
        Ok(unsafe { std::slice::from_raw_parts_mut(bytes.as_mut_ptr().cast::<T>(), n) })
    }

    /// The value of a one-element tensor (a scalar, or any shape with one element).
    #[inline]
    pub fn scalar_value<T: Element>(&self) -> Result<T> {
        let flat = self.flat::<T>()?;
        if flat.len() != 1 {
            return Err(Status::invalid_argument(format!(
                "Expected a scalar, got a tensor of shape {}",
                self.shape
            )));
        }
        Ok(flat[0])
    }

    /// The elements of a `string` tensor.
    pub fn strings(&self) -> Result<&[Vec<u8>]> {
        match &*self.storage {
            Storage::Strings(s) => Ok(s),
            _ => Err(Status::invalid_argument(format!(
                "Tensor of dtype {} viewed as string",
                self.dtype
            ))),
        }
    }

    /// The elements of a `string` tensor, mutably (copying shared storage).
    pub fn strings_mut(&mut self) -> Result<&mut Vec<Vec<u8>>> {
        match &mut *self.storage {
            Storage::Strings(s) => Ok(Arc::make_mut(s)),
            _ => Err(Status::invalid_argument(format!(
                "Tensor of dtype {} viewed as string",
                self.dtype
            ))),
        }
    }

    /// The handles of a `resource` tensor.
    pub fn resource_handles(&self) -> Result<&[ResourceHandle]> {
        match &*self.storage {
            Storage::Resources(r) => Ok(r),
            _ => Err(Status::invalid_argument(format!(
                "Tensor of dtype {} viewed as resource",
                self.dtype
            ))),
        }
    }

    /// Whether no other tensor shares this tensor's storage, so a kernel may
    /// reuse it for an output.
    #[inline]
    pub fn is_uniquely_owned(&self) -> bool {
        match &*self.storage {
            Storage::Dense { buf, .. } => Arc::strong_count(buf) == 1 && buf.is_writable(),
            Storage::Device(b) => Arc::strong_count(b) == 1,
            Storage::Strings(s) => Arc::strong_count(s) == 1,
            Storage::Resources(r) => Arc::strong_count(r) == 1,
            Storage::Taken => false,
        }
    }

    /// Whether two tensors share storage.
    pub fn shares_storage_with(&self, other: &Tensor) -> bool {
        match (&*self.storage, &*other.storage) {
            (Storage::Dense { buf: a, .. }, Storage::Dense { buf: b, .. }) => Arc::ptr_eq(a, b),
            (Storage::Device(a), Storage::Device(b)) => {
                std::ptr::addr_eq(Arc::as_ptr(a), Arc::as_ptr(b))
            }
            (Storage::Strings(a), Storage::Strings(b)) => Arc::ptr_eq(a, b),
            (Storage::Resources(a), Storage::Resources(b)) => Arc::ptr_eq(a, b),
            _ => false,
        }
    }

    /// The same data with another shape of the same number of elements
    /// (no copy: the result shares the storage).
    pub fn reshaped(&self, dims: &[i64]) -> Result<Tensor> {
        let shape = TensorShape::new(dims)?;
        if shape.num_elements() != self.num_elements() {
            return Err(Status::invalid_argument(format!(
                "Cannot reshape a tensor with {} elements to shape {shape} ({} elements)",
                self.num_elements(),
                shape.num_elements()
            )));
        }
        Ok(Tensor {
            dtype: self.dtype,
            shape,
            storage: self.storage.clone(),
        })
    }

    /// The same data with another dtype of the same element size (a bitcast),
    /// sharing the storage. Only between dense numeric dtypes.
    pub fn bitcast(&self, dtype: DataType) -> Result<Tensor> {
        if dtype.size() != self.dtype.size() {
            return Err(Status::invalid_argument(format!(
                "Cannot bitcast {} to {dtype}",
                self.dtype
            )));
        }
        self.bitcast_reshaped(dtype, self.dims())
    }

    /// The same bytes seen as `dtype` elements of shape `dims` (TensorFlow's
    /// `Bitcast`), which must hold exactly as many bytes. Shares the storage
    /// when the data starts at an address aligned for `dtype`, else copies
    /// it once. Only between dense numeric dtypes (not bool, string or
    /// resource: not every byte pattern is one of those).
    pub fn bitcast_reshaped(&self, dtype: DataType, dims: &[i64]) -> Result<Tensor> {
        check_storable(dtype)?;
        let dense = |d: DataType| {
            d.size() != 0 && !matches!(d, DataType::Bool | DataType::String | DataType::Resource)
        };
        if !dense(dtype) || !dense(self.dtype) {
            return Err(Status::invalid_argument(format!(
                "Cannot bitcast {} to {dtype}",
                self.dtype
            )));
        }
        let shape = TensorShape::new(dims)?;
        let bytes = |n: usize, d: DataType| n.checked_mul(d.size());
        if bytes(shape.num_elements(), dtype) != bytes(self.num_elements(), self.dtype) {
            return Err(Status::invalid_argument(format!(
                "Cannot bitcast {} of shape {} to {dtype} of shape {shape}: the byte sizes differ",
                self.dtype, self.shape
            )));
        }
        let aligned = match &*self.storage {
            Storage::Dense { buf, offset } => (buf.as_ptr() as usize + offset) % dtype.size() == 0,
            _ => true,
        };
        let source = if aligned {
            self.clone()
        } else {
            self.deep_copy()?
        };
        Ok(Tensor {
            dtype,
            shape,
            storage: source.storage.clone(),
        })
    }

    /// Elements `[start, end)` of the outermost dimension, sharing the
    /// storage for dense tensors (TensorFlow's `Slice` on dim 0).
    pub fn slice_outer(&self, start: usize, end: usize) -> Result<Tensor> {
        let Some(&outer) = self.dims().first() else {
            return Err(Status::invalid_argument("Cannot slice a scalar"));
        };
        if start > end || end as i64 > outer {
            return Err(Status::out_of_range(format!(
                "Slice [{start}, {end}) is out of range for dimension 0 of size {outer}"
            )));
        }
        let mut dims = self.dims().to_vec();
        dims[0] = (end - start) as i64;
        let shape = TensorShape::new(&dims)?;
        let inner = if outer == 0 {
            0
        } else {
            self.num_elements() / outer as usize
        };
        let storage = match &*self.storage {
            Storage::Dense { buf, offset } => Storage::Dense {
                buf: buf.clone(),
                offset: offset + start * inner * self.dtype.size(),
            },
            Storage::Strings(s) => {
                Storage::Strings(Arc::new(s[start * inner..end * inner].to_vec()))
            }
            Storage::Resources(r) => {
                Storage::Resources(Arc::new(r[start * inner..end * inner].to_vec()))
            }
            Storage::Device(_) => {
                return Err(Status::unimplemented(
                    "Slicing a tensor in device memory: copy it to the host first",
                ))
            }
            Storage::Taken => Storage::Taken,
        };
        Ok(Tensor {
            dtype: self.dtype,
            shape,
            storage: ManuallyDrop::new(storage),
        })
    }

    /// A copy that owns its storage alone.
    pub fn deep_copy(&self) -> Result<Tensor> {
        match &*self.storage {
            Storage::Dense { .. } => {
                let mut t = Tensor::uninit(self.dtype, self.shape.clone())?;
                let src = self.bytes()?;
                if let Storage::Dense { buf, offset } = &mut *t.storage {
                    let buf = Arc::get_mut(buf)
                        .ok_or_else(|| Status::internal("fresh tensor is shared"))?;
                    buf.as_mut_slice()[*offset..*offset + src.len()].copy_from_slice(src);
                }
                Ok(t)
            }
            Storage::Strings(s) => Tensor::from_strings(self.dims(), s.to_vec()),
            Storage::Resources(r) => Tensor::from_resource_handles(self.dims(), r.to_vec()),
            Storage::Device(_) => Err(Status::failed_precondition(
                "A deep copy of a tensor in device memory is the device's job: copy it to the host first",
            )),
            Storage::Taken => Ok(Tensor::taken()),
        }
    }

    /// A short description: `Tensor<type: float shape: [2] values: 1 2>`,
    /// at most `max_values` values shown.
    pub fn summarize(&self, max_values: usize) -> String {
        let mut values: Vec<String> = Vec::new();
        let n = self.num_elements().min(max_values);
        if self.location() == Location::Host {
            crate::dispatch!(
                self.dtype,
                T => if let Ok(flat) = self.flat::<T>() {
                    values.extend(flat[..n].iter().map(|v| format!("{v:?}")));
                },
                [Float, Double, Int32, UInt8, Int16, Int8, Int64, Bool, UInt16, UInt32, UInt64, Half, BFloat16,
                 Complex64, Complex128],
                {
                    if let Ok(s) = self.strings() {
                        values.extend(s[..n].iter().map(|v| format!("\"{}\"", crate::strings::c_escape(v))));
                    } else if let Ok(r) = self.resource_handles() {
                        values.extend(r[..n].iter().map(|h| format!("<{}>", h.name)));
                    }
                }
            );
        }
        if self.num_elements() > n {
            values.push("...".into());
        }
        format!(
            "Tensor<type: {} shape: {} values: {}>",
            self.dtype,
            self.shape,
            values.join(" ")
        )
    }
}

/// Bytes for `n` elements of `dtype`, checked for overflow.
/// The bytes of a dense tensor of `dtype` and `shape`, checked against the
/// allocation limit with a message naming the shape and dtype.
fn dense_bytes(dtype: DataType, shape: &TensorShape) -> Result<usize> {
    let Some(bytes) = shape.num_elements().checked_mul(dtype.size()) else {
        return Err(Status::resource_exhausted(format!(
            "OOM when allocating {}: it needs more than 2^64 bytes",
            limit::describe_tensor(dtype, shape)
        )));
    };
    limit::check(bytes, || limit::describe_tensor(dtype, shape))?;
    Ok(bytes)
}

fn byte_len(dtype: DataType, n: usize) -> Result<usize> {
    n.checked_mul(dtype.size()).ok_or_else(|| {
        Status::resource_exhausted(format!("A {dtype} tensor of {n} elements is too large"))
    })
}

impl fmt::Debug for Tensor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.summarize(10))
    }
}

impl PartialEq for Tensor {
    /// Equal dtype, shape and elements (NaN != NaN).
    fn eq(&self, other: &Tensor) -> bool {
        if self.dtype != other.dtype || self.shape != other.shape {
            return false;
        }
        crate::dispatch!(
            self.dtype,
            T => match (self.flat::<T>(), other.flat::<T>()) {
                (Ok(a), Ok(b)) => a == b,
                _ => false,
            },
            [Float, Double, Int32, UInt8, Int16, Int8, Int64, Bool, UInt16, UInt32, UInt64, Half, BFloat16,
             Complex64, Complex128],
            match (&*self.storage, &*other.storage) {
                (Storage::Strings(a), Storage::Strings(b)) => a == b,
                (Storage::Resources(a), Storage::Resources(b)) => a == b,
                _ => self.bytes().ok() == other.bytes().ok(),
            }
        )
    }
}

#[cfg(test)]
mod tests;
