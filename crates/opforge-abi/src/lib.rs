//! opforge's op-library C ABI, mirrored in Rust.
//!
//! The normative definition is the C header `include/opforge/opforge.h`;
//! this crate is its `#[repr(C)]` mirror, field for field and name for name:
//! every struct (same name as the C typedef), every function-pointer typedef
//! (as `Option<unsafe extern "C" fn(..)>`, so that a NULL slot is `None`),
//! every opaque handle type and every `OPFORGE_*` constant. The test
//! `tests/layout.rs` compiles the header with the system C compiler and
//! compares every size, alignment, offset, field type and constant with
//! this crate, so the two cannot drift apart.
//!
//! The rules the header states (R1-R10: `struct_size` first and append-only,
//! fixed-width integers, enums as integers, TensorFlow dtype numbers and
//! codes, strings as pointer + length, whoever allocates frees, lifetimes,
//! errors, threads, no unwinding) apply to the Rust side unchanged. The
//! versioning rules for library authors are in this crate's README.
//!
//! Beyond the mirror, the crate holds what both sides of the boundary need
//! and must agree on: the layout of every struct ([`layout`]), the layout
//! hash ([`layout_hash`], pinned per minor in [`KNOWN_LAYOUTS`]), version
//! negotiation ([`negotiate`]), and prefix reads and writes of versioned
//! structs ([`Versioned`]). It has no dependencies and is `no_std`, so a
//! plugin built on it carries nothing of opforge.

#![no_std]
#![warn(missing_docs)]

#[cfg(not(target_pointer_width = "64"))]
compile_error!("the opforge C ABI 1.x is defined for 64-bit targets only (rule R2)");

use core::ffi::{c_char, c_void};
use core::fmt;
use core::marker::{PhantomData, PhantomPinned};
use core::mem::{align_of, offset_of, size_of};

pub mod layout;

pub use layout::{
    known_layout_hash, layout_hash, FieldLayout, StructLayout, KNOWN_LAYOUTS, STRUCTS,
};

// ---------------------------------------------------------------------------
// Versions
// ---------------------------------------------------------------------------

/// The ABI major this crate (and the header) defines: a library and a host
/// of different majors never load each other. Also the suffix of the entry
/// points (`opforge_plugin_init_v1`).
pub const OPFORGE_ABI_MAJOR: u32 = 1;
/// The ABI minor this crate defines: what a library built with it has
/// available (the library record's `abi.minor`).
pub const OPFORGE_ABI_MINOR: u32 = 1;
/// The layout hash of this minor ([`layout_hash`], equal to the header's
/// `OPFORGE_LAYOUT_HASH`; both checked by tests).
pub const OPFORGE_LAYOUT_HASH: u64 = 0xd369_ae65_736d_e423;
/// [`OPFORGE_LAYOUT_HASH`] as the 16 lower-case hex digits the manifest
/// carries.
pub const OPFORGE_LAYOUT_HASH_STR: &str = "d369ae65736de423";
/// The lowest host minor a library needs, by default (the header's
/// `OPFORGE_MIN_HOST_MINOR` when the library does not define it): the minor
/// it was built with, which is always safe.
pub const OPFORGE_MIN_HOST_MINOR: u32 = OPFORGE_ABI_MINOR;

// ---------------------------------------------------------------------------
// Typedefs
// ---------------------------------------------------------------------------

/// A typedef of the header and the Rust type that mirrors it, as written in
/// this crate (what the layout test checks against the C compiler).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Typedef {
    /// The typedef's name, as in the header.
    pub name: &'static str,
    /// The Rust type, as written in this crate.
    pub rust_type: &'static str,
}

macro_rules! abi_typedefs {
    ($( $(#[$meta:meta])* pub type $name:ident = $ty:ty; )*) => {
        $( $(#[$meta])* pub type $name = $ty; )*

        /// Every scalar and function-pointer typedef of the header, in
        /// header order.
        pub const TYPEDEFS: &[Typedef] = &[
            $( Typedef { name: stringify!($name), rust_type: stringify!($ty) } ),*
        ];
    };
}

abi_typedefs! {
    /// A status code: 0 = OK, 1..16 = TensorFlow's canonical codes (R3, R4).
    /// An unknown value survives as its integer.
    pub type OpforgeCode = i32;
    /// A tensor element type: TensorFlow's `DataType` number (R4), without
    /// the `*_REF` types. An unknown value survives as its integer.
    pub type OpforgeDType = i32;
    /// A shape in a shape-inference context (TensorFlow's `ShapeHandle`):
    /// opaque, of one context (R7); compare with `==` for identity.
    pub type OpforgeShape = u64;
    /// A dimension in a shape-inference context (TensorFlow's
    /// `DimensionHandle`).
    pub type OpforgeDim = u64;
    /// A value (graph output or eager tensor) in a gradient context.
    pub type OpforgeSym = u64;
    /// Makes a kernel instance for one node (or eager call signature): reads
    /// attrs and dtypes from `init` (valid during this call), validates
    /// them, and stores its state in `*state` (may stay NULL). `user` is
    /// [`OpforgeKernelDef::user`].
    pub type OpforgeKernelCreateFn = Option<
        unsafe extern "C" fn(
            init: *const OpforgeKernelInit,
            user: *mut c_void,
            state: *mut *mut c_void,
            status: *mut OpforgeStatus,
        ) -> OpforgeCode,
    >;
    /// Runs the kernel once. Concurrent calls on one state are possible
    /// unless the kernel is [`OPFORGE_KERNEL_NOT_THREAD_SAFE`] (R9).
    pub type OpforgeKernelComputeFn = Option<
        unsafe extern "C" fn(
            state: *mut c_void,
            ctx: *mut OpforgeKernelCtx,
            status: *mut OpforgeStatus,
        ) -> OpforgeCode,
    >;
    /// Frees a kernel instance's state; called once, after its last compute.
    pub type OpforgeKernelDestroyFn =
        Option<unsafe extern "C" fn(state: *mut c_void, user: *mut c_void)>;
    /// A shape function: reads input shapes, sets every output's shape.
    pub type OpforgeShapeFn = Option<
        unsafe extern "C" fn(
            ctx: *mut OpforgeShapeCtx,
            user: *mut c_void,
            status: *mut OpforgeStatus,
        ) -> OpforgeCode,
    >;
    /// A gradient function over the host's graph builder
    /// ([`OpforgeGradApi`]).
    pub type OpforgeGradFn = Option<
        unsafe extern "C" fn(
            ctx: *mut OpforgeGradCtx,
            user: *mut c_void,
            status: *mut OpforgeStatus,
        ) -> OpforgeCode,
    >;
    /// One shard of a `parallel_for`: units `[begin, end)`. Each shard has
    /// its own status; the first failing shard's code and message win.
    pub type OpforgeWorkFn = Option<
        unsafe extern "C" fn(
            begin: u64,
            end: u64,
            user: *mut c_void,
            status: *mut OpforgeStatus,
        ) -> OpforgeCode,
    >;
    /// Releases plugin memory that backed an output
    /// ([`OpforgeForeignTensor`]): called exactly once, on any thread, when
    /// the last tensor using it is gone, always before fini.
    pub type OpforgeReleaseFn = Option<unsafe extern "C" fn(data: *mut c_void, user: *mut c_void)>;
    /// (1.1) Runs the kernel once with its views made
    /// ([`OpforgeKernelViews`]): every input's, and every output declared
    /// in [`OpforgeKernelDef::output_like`] already set. Everything
    /// [`OpforgeKernelComputeFn`] says holds (`ctx` is the same context).
    pub type OpforgeKernelComputeViewsFn = Option<
        unsafe extern "C" fn(
            state: *mut c_void,
            ctx: *mut OpforgeKernelCtx,
            views: *const OpforgeKernelViews,
            status: *mut OpforgeStatus,
        ) -> OpforgeCode,
    >;
    /// The type of `opforge_plugin_init_v1`, the entry point every library
    /// exports.
    pub type OpforgePluginInitFn = Option<
        unsafe extern "C" fn(
            host: *const OpforgeHostApi,
            registrar: *mut OpforgeRegistrar,
            status: *mut OpforgeStatus,
        ) -> OpforgeCode,
    >;
    /// The type of `opforge_plugin_fini_v1`, the optional entry point called
    /// once just before the library is unmapped.
    pub type OpforgePluginFiniFn = Option<unsafe extern "C" fn()>;
}

// ---------------------------------------------------------------------------
// Codes
// ---------------------------------------------------------------------------

/// Not an error.
pub const OPFORGE_OK: OpforgeCode = 0;
/// The operation was cancelled.
pub const OPFORGE_CANCELLED: OpforgeCode = 1;
/// Unknown error (also: a callback returned a code outside 0..16).
pub const OPFORGE_UNKNOWN: OpforgeCode = 2;
/// The caller gave an invalid argument.
pub const OPFORGE_INVALID_ARGUMENT: OpforgeCode = 3;
/// A deadline expired.
pub const OPFORGE_DEADLINE_EXCEEDED: OpforgeCode = 4;
/// Something requested was not found.
pub const OPFORGE_NOT_FOUND: OpforgeCode = 5;
/// Something to be created already exists.
pub const OPFORGE_ALREADY_EXISTS: OpforgeCode = 6;
/// The caller may not do this.
pub const OPFORGE_PERMISSION_DENIED: OpforgeCode = 7;
/// A resource (memory, quota) is exhausted.
pub const OPFORGE_RESOURCE_EXHAUSTED: OpforgeCode = 8;
/// The system is not in a state the operation needs (also: ABI refusals).
pub const OPFORGE_FAILED_PRECONDITION: OpforgeCode = 9;
/// The operation was aborted.
pub const OPFORGE_ABORTED: OpforgeCode = 10;
/// A value was out of range.
pub const OPFORGE_OUT_OF_RANGE: OpforgeCode = 11;
/// Not implemented (also: a slot newer than the host, an enum value of a
/// newer minor).
pub const OPFORGE_UNIMPLEMENTED: OpforgeCode = 12;
/// An internal error (also: a panic or exception caught at the boundary).
pub const OPFORGE_INTERNAL: OpforgeCode = 13;
/// The service is unavailable.
pub const OPFORGE_UNAVAILABLE: OpforgeCode = 14;
/// Unrecoverable data loss or corruption (also: a corrupt manifest).
pub const OPFORGE_DATA_LOSS: OpforgeCode = 15;
/// The caller is not authenticated.
pub const OPFORGE_UNAUTHENTICATED: OpforgeCode = 16;

// ---------------------------------------------------------------------------
// Dtypes (TensorFlow's DataType numbers)
// ---------------------------------------------------------------------------

/// `DT_INVALID`: no type.
pub const OPFORGE_DT_INVALID: OpforgeDType = 0;
/// `DT_FLOAT`: f32.
pub const OPFORGE_DT_FLOAT: OpforgeDType = 1;
/// `DT_DOUBLE`: f64.
pub const OPFORGE_DT_DOUBLE: OpforgeDType = 2;
/// `DT_INT32`.
pub const OPFORGE_DT_INT32: OpforgeDType = 3;
/// `DT_UINT8`.
pub const OPFORGE_DT_UINT8: OpforgeDType = 4;
/// `DT_INT16`.
pub const OPFORGE_DT_INT16: OpforgeDType = 5;
/// `DT_INT8`.
pub const OPFORGE_DT_INT8: OpforgeDType = 6;
/// `DT_STRING`: one [`OpforgeStr`] per element in views.
pub const OPFORGE_DT_STRING: OpforgeDType = 7;
/// `DT_COMPLEX64`: (f32 real, f32 imag).
pub const OPFORGE_DT_COMPLEX64: OpforgeDType = 8;
/// `DT_INT64`.
pub const OPFORGE_DT_INT64: OpforgeDType = 9;
/// `DT_BOOL`: one byte, 0 or 1.
pub const OPFORGE_DT_BOOL: OpforgeDType = 10;
/// `DT_QINT8`.
pub const OPFORGE_DT_QINT8: OpforgeDType = 11;
/// `DT_QUINT8`.
pub const OPFORGE_DT_QUINT8: OpforgeDType = 12;
/// `DT_QINT32`.
pub const OPFORGE_DT_QINT32: OpforgeDType = 13;
/// `DT_BFLOAT16`: two bytes.
pub const OPFORGE_DT_BFLOAT16: OpforgeDType = 14;
/// `DT_QINT16`.
pub const OPFORGE_DT_QINT16: OpforgeDType = 15;
/// `DT_QUINT16`.
pub const OPFORGE_DT_QUINT16: OpforgeDType = 16;
/// `DT_UINT16`.
pub const OPFORGE_DT_UINT16: OpforgeDType = 17;
/// `DT_COMPLEX128`: (f64 real, f64 imag).
pub const OPFORGE_DT_COMPLEX128: OpforgeDType = 18;
/// `DT_HALF`: IEEE binary16, two bytes.
pub const OPFORGE_DT_HALF: OpforgeDType = 19;
/// `DT_RESOURCE` (not readable through the 1.0 ABI).
pub const OPFORGE_DT_RESOURCE: OpforgeDType = 20;
/// `DT_VARIANT` (not readable through the 1.0 ABI).
pub const OPFORGE_DT_VARIANT: OpforgeDType = 21;
/// `DT_UINT32`.
pub const OPFORGE_DT_UINT32: OpforgeDType = 22;
/// `DT_UINT64`.
pub const OPFORGE_DT_UINT64: OpforgeDType = 23;
/// `DT_FLOAT8_E5M2`: one byte.
pub const OPFORGE_DT_FLOAT8_E5M2: OpforgeDType = 24;
/// `DT_FLOAT8_E4M3FN`: one byte.
pub const OPFORGE_DT_FLOAT8_E4M3FN: OpforgeDType = 25;
/// `DT_FLOAT8_E4M3FNUZ`: one byte.
pub const OPFORGE_DT_FLOAT8_E4M3FNUZ: OpforgeDType = 26;
/// `DT_FLOAT8_E4M3B11FNUZ`: one byte.
pub const OPFORGE_DT_FLOAT8_E4M3B11FNUZ: OpforgeDType = 27;
/// `DT_FLOAT8_E5M2FNUZ`: one byte.
pub const OPFORGE_DT_FLOAT8_E5M2FNUZ: OpforgeDType = 28;
/// `DT_INT4`: one byte per element.
pub const OPFORGE_DT_INT4: OpforgeDType = 29;
/// `DT_UINT4`: one byte per element.
pub const OPFORGE_DT_UINT4: OpforgeDType = 30;
/// `DT_INT2`: one byte per element.
pub const OPFORGE_DT_INT2: OpforgeDType = 31;
/// `DT_UINT2`: one byte per element.
pub const OPFORGE_DT_UINT2: OpforgeDType = 32;
/// `DT_FLOAT4_E2M1FN`: one byte per element.
pub const OPFORGE_DT_FLOAT4_E2M1FN: OpforgeDType = 33;

// ---------------------------------------------------------------------------
// Handles, sentinels
// ---------------------------------------------------------------------------

/// The invalid handle ([`OpforgeShape`], [`OpforgeDim`], [`OpforgeSym`]):
/// returned where no handle can be produced, rejected with
/// INVALID_ARGUMENT where one is required.
pub const OPFORGE_NO_HANDLE: u64 = 0;
/// A rank that is not known (shape inference, attr shapes).
pub const OPFORGE_UNKNOWN_RANK: i32 = -1;
/// A dim that is not known (shape inference, attr shapes).
pub const OPFORGE_UNKNOWN_DIM: i64 = -1;
/// `subshape`'s `end` meaning "to the end of the shape".
pub const OPFORGE_TO_END: i64 = i64::MAX;
/// `forward_input_or_allocate_output`: no input was forwarded.
pub const OPFORGE_NOT_FORWARDED: i64 = -1;

// ---------------------------------------------------------------------------
// Opaque host objects
// ---------------------------------------------------------------------------

macro_rules! abi_opaque {
    ($( $(#[$meta:meta])* pub struct $name:ident; )*) => {
        $(
            $(#[$meta])*
            ///
            /// Opaque: only ever handled through a pointer the host gives.
            #[repr(C)]
            pub struct $name {
                _opaque: [u8; 0],
                _not_send_sync_unpin: PhantomData<(*mut u8, PhantomPinned)>,
            }
        )*

        /// The names of the opaque types of the header, in header order.
        pub const OPAQUE_TYPES: &[&str] = &[$( stringify!($name) ),*];
    };
}

abi_opaque! {
    /// A status: a code and a message, written by
    /// [`OpforgeHostApi::set_status`].
    pub struct OpforgeStatus;
    /// Where init registers the library's ops, kernels and gradients (init
    /// only).
    pub struct OpforgeRegistrar;
    /// What a kernel's create reads: attrs, dtypes, names (create only).
    pub struct OpforgeKernelInit;
    /// One run of a kernel: inputs, outputs, temporaries, threads.
    pub struct OpforgeKernelCtx;
    /// One shape-function call (TensorFlow's `InferenceContext`).
    pub struct OpforgeShapeCtx;
    /// One gradient-function call: the forward op and the graph builder.
    pub struct OpforgeGradCtx;
}

// ---------------------------------------------------------------------------
// Structs
// ---------------------------------------------------------------------------

/// A struct of the ABI that starts with `struct_size` (rule R1), with the
/// prefix reads and writes that rule implies.
///
/// A receiver never assumes the other side's struct is as long as its own:
/// [`read_from`](Versioned::read_from) copies the fields that fit in the
/// `struct_size` the struct carries and leaves the rest zero (the default of
/// every appended field), and [`write_to`](Versioned::write_to) writes only
/// the fields that fit in the caller's `struct_size`. A struct_size below
/// [`MIN_SIZE`](Versioned::MIN_SIZE) is refused (INVALID_ARGUMENT).
///
/// # Safety
///
/// Implemented only by this crate, for `#[repr(C)]` structs whose first
/// field is `struct_size: usize`, every field of which accepts every bit
/// pattern (integers, raw pointers, `Option` of function pointers, arrays
/// and structs of those), and whose `FIELDS` describe them exactly.
pub unsafe trait Versioned: Copy + 'static {
    /// The struct's name, as in the header.
    const NAME: &'static str;
    /// The struct's size in the minor that introduced it: the smallest
    /// `struct_size` a receiver accepts.
    const MIN_SIZE: usize;
    /// Every field in declaration order ([`StructLayout::fields`]).
    const FIELDS: &'static [FieldLayout];
    /// Every field zero (NULL pointers, `None` slots, empty strings) and
    /// `struct_size` set to this crate's `size_of::<Self>()`.
    const NEW: Self;

    /// Reads the struct at `src`, which the other side filled and sized:
    /// the fields that end within its `struct_size` are copied, the others
    /// take their zero default. The result's `struct_size` is the other
    /// side's.
    ///
    /// # Safety
    ///
    /// `src` must be non-null, aligned for `Self`, and valid for reads of
    /// the `struct_size` bytes it starts with (at least a `usize`).
    unsafe fn read_from(src: *const Self) -> Result<Self, StructSizeError> {
        // SAFETY: the caller guarantees `src` is aligned and readable for
        // at least its first field, `struct_size: usize`.
        let size = unsafe { src.cast::<usize>().read() };
        check_size::<Self>(size)?;
        if size >= size_of::<Self>() {
            // SAFETY: `size_of::<Self>()` bytes are readable (they are
            // within `struct_size`), and every bit pattern is a valid
            // `Self` (trait contract).
            return Ok(unsafe { src.read() });
        }
        let mut out = Self::NEW;
        let dst = (&mut out as *mut Self).cast::<u8>();
        for f in Self::FIELDS {
            if f.offset + f.size <= size {
                // SAFETY: the field lies within the readable `struct_size`
                // bytes of `src` and within `out`; the two do not overlap
                // (`out` is a local); any bit pattern is valid for the field.
                unsafe {
                    core::ptr::copy_nonoverlapping(
                        src.cast::<u8>().add(f.offset),
                        dst.add(f.offset),
                        f.size,
                    )
                };
            }
        }
        Ok(out)
    }

    /// Writes `self` into the out-struct at `dst`, whose `struct_size` the
    /// caller (the other side) set: every field after `struct_size` that
    /// ends within it is written; `struct_size` itself and any bytes past
    /// it are left alone.
    ///
    /// # Safety
    ///
    /// `dst` must be non-null, aligned for `Self`, valid for reads of its
    /// first `usize` and for writes of the `struct_size` bytes it starts
    /// with, and not overlap `self`.
    unsafe fn write_to(&self, dst: *mut Self) -> Result<(), StructSizeError> {
        // SAFETY: the caller guarantees `dst` is aligned and readable for
        // its first field.
        let size = unsafe { dst.cast::<usize>().read() };
        check_size::<Self>(size)?;
        let src = (self as *const Self).cast::<u8>();
        let dst = dst.cast::<u8>();
        let head = size_of::<usize>();
        if size >= size_of::<Self>() {
            // SAFETY: bytes [head, size_of::<Self>()) lie within both
            // structs and `dst`'s writable struct_size; no overlap (caller).
            unsafe {
                core::ptr::copy_nonoverlapping(
                    src.add(head),
                    dst.add(head),
                    size_of::<Self>() - head,
                )
            };
            return Ok(());
        }
        for f in Self::FIELDS {
            if f.offset >= head && f.offset + f.size <= size {
                // SAFETY: the field lies within `self` and within `dst`'s
                // writable struct_size bytes; no overlap (caller).
                unsafe {
                    core::ptr::copy_nonoverlapping(src.add(f.offset), dst.add(f.offset), f.size)
                };
            }
        }
        Ok(())
    }
}

fn check_size<T: Versioned>(size: usize) -> Result<(), StructSizeError> {
    if size < T::MIN_SIZE {
        return Err(StructSizeError {
            name: T::NAME,
            struct_size: size,
            min_size: T::MIN_SIZE,
        });
    }
    Ok(())
}

/// A versioned struct whose `struct_size` is below the size of its first
/// version (rule R1: INVALID_ARGUMENT).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StructSizeError {
    /// The struct's name.
    pub name: &'static str,
    /// The `struct_size` it carried.
    pub struct_size: usize,
    /// Its smallest valid size ([`Versioned::MIN_SIZE`]).
    pub min_size: usize,
}

impl fmt::Display for StructSizeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}.struct_size is {}, below the struct's first size {} (was it zeroed and \
             struct_size set to sizeof({})?)",
            self.name, self.struct_size, self.min_size, self.name
        )
    }
}

/// The C name of a field: its Rust name without the `r#` of a raw
/// identifier (`r#type` is C's `type`).
const fn c_name(rust: &'static str) -> &'static str {
    match rust.as_bytes() {
        [b'r', b'#', rest @ ..] => match core::str::from_utf8(rest) {
            Ok(name) => name,
            Err(_) => panic!("a field name is ASCII"),
        },
        _ => rust,
    }
}

macro_rules! abi_struct {
    // A struct starting with `struct_size` (R1).
    (
        $(#[$meta:meta])*
        pub struct $name:ident (min_size $min:expr) {
            $(#[$smeta:meta])*
            pub struct_size: usize,
            $( $(#[$fmeta:meta])* pub $field:ident : $ty:ty, )*
        }
    ) => {
        abi_struct!(@define $(#[$meta])* $name ($min) {
            $(#[$smeta])* struct_size: usize,
            $( $(#[$fmeta])* $field: $ty, )*
        });

        impl $name {
            /// Every field zero (NULL pointers, `None` slots, empty strings)
            /// and `struct_size` set to this crate's size of the struct:
            /// fill the fields you need on top of it (R1).
            pub const fn new() -> Self {
                let mut v = Self::zeroed();
                v.struct_size = size_of::<Self>();
                v
            }
        }

        // SAFETY: `$name` is `#[repr(C)]`, starts with `struct_size: usize`
        // (matched by this macro arm), every field type accepts every bit
        // pattern (checked by `zeroed`'s reasoning and the layout test's
        // field types), and FIELDS is generated from the same field list.
        unsafe impl Versioned for $name {
            const NAME: &'static str = stringify!($name);
            const MIN_SIZE: usize = $name::LAYOUT.min_size;
            const FIELDS: &'static [FieldLayout] = $name::LAYOUT.fields;
            const NEW: Self = Self::new();
        }

        const _: () = assert!($min <= size_of::<$name>() && $min % align_of::<$name>() == 0);
    };
    // A struct without `struct_size` (OpforgeStr, OpforgeManifestHeader).
    (
        $(#[$meta:meta])*
        pub struct $name:ident {
            $( $(#[$fmeta:meta])* pub $field:ident : $ty:ty, )*
        }
    ) => {
        abi_struct!(@define $(#[$meta])* $name (size_of::<$name>()) {
            $( $(#[$fmeta])* $field: $ty, )*
        });

        impl $name {
            /// Every field zero.
            pub const fn new() -> Self {
                Self::zeroed()
            }
        }
    };
    (@define $(#[$meta:meta])* $name:ident ($min:expr) {
        $( $(#[$fmeta:meta])* $field:ident : $ty:ty, )*
    }) => {
        $(#[$meta])*
        #[repr(C)]
        #[derive(Clone, Copy, Debug)]
        pub struct $name {
            $( $(#[$fmeta])* pub $field: $ty, )*
        }

        impl $name {
            /// The struct's layout as this crate sees it: the C compiler's
            /// view of the header must be the same (tests/layout.rs).
            pub const LAYOUT: StructLayout = StructLayout {
                name: stringify!($name),
                size: size_of::<$name>(),
                align: align_of::<$name>(),
                min_size: $min,
                fields: &[$(
                    FieldLayout {
                        name: c_name(stringify!($field)),
                        offset: offset_of!($name, $field),
                        size: size_of::<$ty>(),
                        rust_type: stringify!($ty),
                    }
                ),*],
            };

            const fn zeroed() -> Self {
                // SAFETY: every field of the ABI's structs is an integer, a
                // float, a raw pointer, an `Option` of a function pointer,
                // an array of bytes or another such struct, and the all-zero
                // bit pattern is valid for each (0, NULL, `None`).
                unsafe { core::mem::zeroed() }
            }
        }

        impl Default for $name {
            fn default() -> Self {
                Self::new()
            }
        }
    };
}

abi_struct! {
    /// A string: pointer + length, not NUL-terminated (R5). `ptr` may be
    /// NULL when `len` is 0. Names, specs, docs and messages are UTF-8; attr
    /// strings and string-tensor elements are bytes.
    pub struct OpforgeStr {
        /// The first byte.
        pub ptr: *const c_char,
        /// The number of bytes.
        pub len: usize,
    }
}

impl OpforgeStr {
    /// The empty string (NULL, 0).
    pub const EMPTY: OpforgeStr = OpforgeStr::new();

    /// A string over `bytes` (borrowed: it must outlive every use of the
    /// result).
    pub const fn from_bytes(bytes: &[u8]) -> OpforgeStr {
        OpforgeStr {
            ptr: bytes.as_ptr().cast::<c_char>(),
            len: bytes.len(),
        }
    }

    /// A string over `text` (borrowed, as [`from_bytes`](Self::from_bytes)).
    pub const fn from_text(text: &str) -> OpforgeStr {
        OpforgeStr::from_bytes(text.as_bytes())
    }

    /// The bytes.
    ///
    /// # Safety
    ///
    /// Unless `len` is 0, `ptr` must point to `len` readable bytes that stay
    /// valid and unchanged for `'a` (R7 says for how long the other side
    /// lends them).
    pub unsafe fn as_bytes<'a>(self) -> &'a [u8] {
        if self.len == 0 {
            return &[];
        }
        // SAFETY: the caller guarantees `ptr` is valid for `len` bytes for
        // 'a; `len > 0`, so `ptr` is not NULL by that guarantee.
        unsafe { core::slice::from_raw_parts(self.ptr.cast::<u8>(), self.len) }
    }
}

impl From<&str> for OpforgeStr {
    fn from(text: &str) -> OpforgeStr {
        OpforgeStr::from_text(text)
    }
}

/// [`OpforgeTensor::flags`]: the view's data may be written.
pub const OPFORGE_TENSOR_WRITABLE: u32 = 1;
/// [`OpforgeTensor::flags`]: dense row-major; the strides are the row-major
/// ones.
pub const OPFORGE_TENSOR_CONTIGUOUS: u32 = 2;
/// [`OpforgeTensor::flags`]: data is host memory the CPU may read (always
/// set by 1.0 hosts).
pub const OPFORGE_TENSOR_HOST_MEMORY: u32 = 4;

abi_struct! {
    /// A borrowed view of a tensor (an out-struct: the caller sets
    /// `struct_size`). Made by the host (inputs, outputs, temporaries,
    /// constant inputs of shape functions, tensor attrs), it lives as R7
    /// says; element `(i0, .., ik)` is at `data + sum(i_j * strides[j])`
    /// elements. `DT_STRING` views point at `num_elements` [`OpforgeStr`].
    /// Made by the plugin (a gradient constant), `strides` NULL means
    /// row-major.
    pub struct OpforgeTensor (min_size 64) {
        /// Set by the caller to its size of the struct (R1).
        pub struct_size: usize,
        /// The element type.
        pub dtype: OpforgeDType,
        /// The number of dims.
        pub rank: u32,
        /// `rank` sizes (may be NULL when `rank` is 0).
        pub dims: *const i64,
        /// `rank` strides, in elements (not bytes).
        pub strides: *const i64,
        /// The first element; writable only with
        /// [`OPFORGE_TENSOR_WRITABLE`].
        pub data: *mut c_void,
        /// Bytes from `data` to one past the last element.
        pub byte_len: u64,
        /// The product of `dims` (1 for a scalar).
        pub num_elements: i64,
        /// `OPFORGE_TENSOR_*` bits.
        pub flags: u32,
    }
}

abi_struct! {
    /// A shape as a value (shape attrs): `rank` [`OPFORGE_UNKNOWN_RANK`] =
    /// unknown rank; a dim [`OPFORGE_UNKNOWN_DIM`] = unknown size.
    pub struct OpforgeShapeValue (min_size 24) {
        /// Its size of the struct (R1).
        pub struct_size: usize,
        /// The rank, or [`OPFORGE_UNKNOWN_RANK`].
        pub rank: i32,
        /// `rank` dims (NULL when `rank <= 0`).
        pub dims: *const i64,
    }
}

/// [`OpforgeAttrValue::kind`]: no value.
pub const OPFORGE_ATTR_NONE: u32 = 0;
/// `int`: field `i`.
pub const OPFORGE_ATTR_INT: u32 = 1;
/// `float`: field `f`.
pub const OPFORGE_ATTR_FLOAT: u32 = 2;
/// `bool`: field `b`.
pub const OPFORGE_ATTR_BOOL: u32 = 3;
/// `type`: field `type` (`OpforgeAttrValue::r#type` in Rust).
pub const OPFORGE_ATTR_TYPE: u32 = 4;
/// `string`: field `s` (bytes).
pub const OPFORGE_ATTR_STRING: u32 = 5;
/// `shape`: field `shape`.
pub const OPFORGE_ATTR_SHAPE: u32 = 6;
/// `tensor`: field `tensor` (a read-only view).
pub const OPFORGE_ATTR_TENSOR: u32 = 7;
/// `func`: field `func` (a function name with attrs bound to it).
pub const OPFORGE_ATTR_FUNC: u32 = 8;
/// A reference to an attr of the forward op, by name in field `s`
/// (TensorFlow's `$T`); only in declarative gradient nodes.
pub const OPFORGE_ATTR_PLACEHOLDER: u32 = 9;
/// Flag: a list of the element kind (`kind & OPFORGE_ATTR_KIND_MASK`) in
/// `list`/`list_len`: `i64`, `f32`, `u8`, [`OpforgeDType`], [`OpforgeStr`],
/// [`OpforgeShapeValue`], [`OpforgeTensor`] or [`OpforgeFuncValue`]
/// elements; arrays of structs step by the first element's `struct_size`.
pub const OPFORGE_ATTR_LIST: u32 = 0x100;
/// The element kind of an [`OpforgeAttrValue::kind`].
pub const OPFORGE_ATTR_KIND_MASK: u32 = 0xff;

abi_struct! {
    /// A `func` attr value (TensorFlow's `NameAttrList`).
    pub struct OpforgeFuncValue (min_size 40) {
        /// Its size of the struct (R1).
        pub struct_size: usize,
        /// The function's name.
        pub name: OpforgeStr,
        /// Its attrs (`num_attrs` of them).
        pub attrs: *const OpforgeNamedAttr,
        /// The number of attrs.
        pub num_attrs: usize,
    }
}

abi_struct! {
    /// An attr value of any type: a tagged record whose `kind` says which
    /// field holds the value (the others are zero). Filled by the host (an
    /// out-struct: the caller sets `struct_size`) or by the plugin (attrs of
    /// gradient calls and declarative gradient nodes). Everything it points
    /// to lives as the value (R7).
    pub struct OpforgeAttrValue (min_size 88) {
        /// Its size of the struct (R1).
        pub struct_size: usize,
        /// `OPFORGE_ATTR_*`, possibly with [`OPFORGE_ATTR_LIST`].
        pub kind: u32,
        /// TYPE (`type` in C, a Rust keyword).
        pub r#type: OpforgeDType,
        /// INT.
        pub i: i64,
        /// FLOAT.
        pub f: f32,
        /// BOOL (0 or 1).
        pub b: u8,
        /// STRING (bytes); PLACEHOLDER (the forward op's attr name).
        pub s: OpforgeStr,
        /// SHAPE.
        pub shape: *const OpforgeShapeValue,
        /// TENSOR.
        pub tensor: *const OpforgeTensor,
        /// FUNC.
        pub func: *const OpforgeFuncValue,
        /// LIST: the elements (see [`OPFORGE_ATTR_LIST`]).
        pub list: *const c_void,
        /// LIST: the number of elements.
        pub list_len: usize,
    }
}

abi_struct! {
    /// An attr by name.
    pub struct OpforgeNamedAttr (min_size 32) {
        /// Its size of the struct (R1).
        pub struct_size: usize,
        /// The attr's name.
        pub name: OpforgeStr,
        /// Its value.
        pub value: *const OpforgeAttrValue,
    }
}

/// [`OpforgeOpDef::flags`]: the op is stateful.
pub const OPFORGE_OP_STATEFUL: u32 = 1;
/// [`OpforgeOpDef::flags`]: the op is commutative.
pub const OPFORGE_OP_COMMUTATIVE: u32 = 2;
/// [`OpforgeOpDef::flags`]: the op is an aggregate.
pub const OPFORGE_OP_AGGREGATE: u32 = 4;
/// [`OpforgeOpDef::flags`]: the op allows uninitialized inputs.
pub const OPFORGE_OP_ALLOWS_UNINITIALIZED_INPUT: u32 = 8;
/// [`OpforgeOpDef::flags`]: the op communicates across processes.
pub const OPFORGE_OP_DISTRIBUTED_COMMUNICATION: u32 = 16;

abi_struct! {
    /// An op, in the spec language of `REGISTER_OP` / `register_op!`
    /// (attrs `"T: {float, int32} = DT_INT32"`, inputs `"to_zero: T"`,
    /// outputs `"zeroed: T"`); the host builds the OpDef with the same
    /// builder as `register_op!`.
    pub struct OpforgeOpDef (min_size 144) {
        /// Its size of the struct (R1).
        pub struct_size: usize,
        /// The op's name.
        pub name: OpforgeStr,
        /// Attr specs.
        pub attrs: *const OpforgeStr,
        /// The number of attr specs.
        pub num_attrs: usize,
        /// Input specs.
        pub inputs: *const OpforgeStr,
        /// The number of input specs.
        pub num_inputs: usize,
        /// Output specs.
        pub outputs: *const OpforgeStr,
        /// The number of output specs.
        pub num_outputs: usize,
        /// Names of control outputs (rare).
        pub control_outputs: *const OpforgeStr,
        /// The number of control outputs.
        pub num_control_outputs: usize,
        /// `OPFORGE_OP_*` bits.
        pub flags: u32,
        /// The GraphDef version that deprecated the op; 0: not deprecated.
        pub deprecation_version: i32,
        /// Why, and what to use instead (with `deprecation_version`).
        pub deprecation_explanation: OpforgeStr,
        /// The documentation, in `REGISTER_OP`'s `.Doc()` format.
        pub doc: OpforgeStr,
        /// The op's shape function; `None`: outputs of unknown shape.
        pub shape_fn: OpforgeShapeFn,
        /// Passed to `shape_fn`; valid until fini (R7).
        pub shape_fn_user: *mut c_void,
    }
}

/// [`OpforgeKernelDef::flags`]: compute is not thread-safe; the host
/// serialises computes of one instance.
pub const OPFORGE_KERNEL_NOT_THREAD_SAFE: u32 = 1;
/// [`OpforgeKernelDef::flags`]: `parallel_for` runs shards whose waiting
/// thread runs nothing else (`ThreadPool::shard_isolated`).
pub const OPFORGE_KERNEL_PARALLEL_ISOLATED: u32 = 2;
/// [`OpforgeKernelDef::flags`]: the kernel handles every output request
/// (`OPFORGE_REQ_*`); without it the host asks only for WRITE.
pub const OPFORGE_KERNEL_OUTPUT_REQUESTS: u32 = 4;

abi_struct! {
    /// The dtypes a kernel accepts for one `type` or `list(type)` attr.
    pub struct OpforgeTypeConstraint (min_size 40) {
        /// Its size of the struct (R1).
        pub struct_size: usize,
        /// The attr's name.
        pub attr: OpforgeStr,
        /// The accepted dtypes.
        pub types: *const OpforgeDType,
        /// The number of accepted dtypes.
        pub num_types: usize,
    }
}

/// [`OpforgeOutputLike::flags`]: the host may give the output the input's
/// own buffer (forwarding: the kernel then computes in place); without it
/// the host allocates. (1.1)
pub const OPFORGE_OUTPUT_FORWARD: u32 = 1;

abi_struct! {
    /// (1.1) One declaration of [`OpforgeKernelDef::output_like`]: flat
    /// output `output` has the dims of flat input `input` (and its own
    /// dtype); the host sets it (forwarded or allocated) before each
    /// `compute_views` call and passes its writable view.
    pub struct OpforgeOutputLike (min_size 32) {
        /// Its size of the struct (R1).
        pub struct_size: usize,
        /// The flat output index (at most one declaration per output).
        pub output: usize,
        /// The flat input index whose dims the output takes.
        pub input: usize,
        /// `OPFORGE_OUTPUT_*` bits.
        pub flags: u32,
    }
}

abi_struct! {
    /// (1.1) What `compute_views` receives, made by the host for the call
    /// and valid until it returns: a read-only view per flat input, a view
    /// per flat output (writable for a declared output; `flags` 0 and NULL
    /// data for one not set yet), and per output the input it was
    /// forwarded from ([`OPFORGE_NOT_FORWARDED`] if none). The header says
    /// the details.
    pub struct OpforgeKernelViews (min_size 48) {
        /// The host's size of the struct (R1).
        pub struct_size: usize,
        /// `num_inputs` views (step by the first one's `struct_size`).
        pub inputs: *const OpforgeTensor,
        /// The number of flat inputs.
        pub num_inputs: usize,
        /// `num_outputs` views (step by the first one's `struct_size`).
        pub outputs: *const OpforgeTensor,
        /// The number of flat outputs.
        pub num_outputs: usize,
        /// `num_outputs` entries: the flat input each output took the
        /// buffer of, or [`OPFORGE_NOT_FORWARDED`].
        pub forwarded_from: *const i64,
    }
}

abi_struct! {
    /// A kernel (TensorFlow's `REGISTER_KERNEL_BUILDER`): which op, device
    /// and dtypes it serves, and its callbacks. Selection is TensorFlow's
    /// (device, constraints, label, then the highest priority).
    pub struct OpforgeKernelDef (min_size 128) {
        /// Its size of the struct (R1).
        pub struct_size: usize,
        /// The op (registered by this library, an earlier one, or built
        /// in).
        pub op: OpforgeStr,
        /// `"CPU"` (1.0 hosts answer UNIMPLEMENTED for other device types).
        pub device_type: OpforgeStr,
        /// Type constraints (arrays of structs step by `struct_size`).
        pub constraints: *const OpforgeTypeConstraint,
        /// The number of type constraints.
        pub num_constraints: usize,
        /// Input or output argument names kept in host memory.
        pub host_memory_args: *const OpforgeStr,
        /// The number of host-memory argument names.
        pub num_host_memory_args: usize,
        /// The kernel label (`""` for none; selected by the `_kernel` attr).
        pub label: OpforgeStr,
        /// Higher wins among matching kernels; 0 is the default.
        pub priority: i32,
        /// `OPFORGE_KERNEL_*` bits.
        pub flags: u32,
        /// `None`: the state is `user` itself.
        pub create: OpforgeKernelCreateFn,
        /// Required in 1.0; from 1.1 it may be `None` when `compute_views`
        /// is set (the library's `min_host_minor` must then be at least 1).
        pub compute: OpforgeKernelComputeFn,
        /// `None`: nothing to free.
        pub destroy: OpforgeKernelDestroyFn,
        /// Passed to create and destroy; valid until fini (R7).
        pub user: *mut c_void,
        /// (1.1) The views entry; `None`: `compute` only. A 1.1 host calls
        /// it instead of `compute` when it is set.
        pub compute_views: OpforgeKernelComputeViewsFn,
        /// (1.1) The outputs the host sets before `compute_views` runs
        /// (steps by the first one's `struct_size`); only with
        /// `compute_views`.
        pub output_like: *const OpforgeOutputLike,
        /// (1.1) The number of `output_like` declarations.
        pub num_output_like: usize,
    }
}

/// [`OpforgeGradSource::kind`]: no value (in `input_grads`: no gradient).
pub const OPFORGE_GRAD_SRC_NONE: u32 = 0;
/// An input of the forward op.
pub const OPFORGE_GRAD_SRC_INPUT: u32 = 1;
/// An output of the forward op.
pub const OPFORGE_GRAD_SRC_OUTPUT: u32 = 2;
/// The gradient flowing into an output of the forward op (zeros of its
/// shape and dtype where none flows).
pub const OPFORGE_GRAD_SRC_OUTPUT_GRAD: u32 = 3;
/// An output of an earlier node of the list.
pub const OPFORGE_GRAD_SRC_NODE: u32 = 4;
/// [`OpforgeGradSource::index`]: the whole argument (a list as a list).
pub const OPFORGE_GRAD_WHOLE_ARG: i64 = -1;

abi_struct! {
    /// Where a value of a declarative gradient comes from (see the header
    /// for the meaning of `arg` and `index` per `kind`).
    pub struct OpforgeGradSource (min_size 40) {
        /// Its size of the struct (R1).
        pub struct_size: usize,
        /// `OPFORGE_GRAD_SRC_*`.
        pub kind: u32,
        /// NODE: the position of the node in the list.
        pub node: u32,
        /// The argument's name, or empty for a flat index.
        pub arg: OpforgeStr,
        /// The element of a list argument, [`OPFORGE_GRAD_WHOLE_ARG`], or a
        /// flat index.
        pub index: i64,
    }
}

abi_struct! {
    /// One argument of a declarative gradient node: a single tensor
    /// (`is_list` 0: one source) or a list (`is_list` 1).
    pub struct OpforgeGradArg (min_size 32) {
        /// Its size of the struct (R1).
        pub struct_size: usize,
        /// The sources (arrays of structs step by `struct_size`).
        pub sources: *const OpforgeGradSource,
        /// The number of sources.
        pub num_sources: usize,
        /// 1: a list argument.
        pub is_list: u8,
    }
}

abi_struct! {
    /// One node of a declarative gradient: a call of a registered op.
    pub struct OpforgeGradNode (min_size 72) {
        /// Its size of the struct (R1).
        pub struct_size: usize,
        /// Optional: names the node in graphs and messages (`""` for none).
        pub name: OpforgeStr,
        /// The op called.
        pub op: OpforgeStr,
        /// One per input argument of `op`, in order.
        pub inputs: *const OpforgeGradArg,
        /// The number of input arguments.
        pub num_inputs: usize,
        /// Attrs (defaults and type inference as for a gradient call).
        pub attrs: *const OpforgeNamedAttr,
        /// The number of attrs.
        pub num_attrs: usize,
    }
}

abi_struct! {
    /// The gradient of `op` as a node list (TensorFlow's
    /// `REGISTER_OP_GRADIENT` maps onto it).
    pub struct OpforgeGradientFunction (min_size 56) {
        /// Its size of the struct (R1).
        pub struct_size: usize,
        /// The forward op.
        pub op: OpforgeStr,
        /// The nodes, in evaluation order.
        pub nodes: *const OpforgeGradNode,
        /// The number of nodes.
        pub num_nodes: usize,
        /// One per input argument of the forward op, in order: its
        /// gradient.
        pub input_grads: *const OpforgeGradArg,
        /// The number of input gradients.
        pub num_input_grads: usize,
    }
}

abi_struct! {
    /// An output backed by memory the plugin allocated
    /// (`set_output_foreign`). On success the host owns it and calls
    /// `release(data, release_user)` exactly once when the last tensor
    /// sharing it is gone; on failure the plugin still owns it.
    pub struct OpforgeForeignTensor (min_size 64) {
        /// Its size of the struct (R1).
        pub struct_size: usize,
        /// Must be the output's dtype (not `DT_STRING`).
        pub dtype: OpforgeDType,
        /// The number of dims.
        pub rank: u32,
        /// `rank` sizes.
        pub dims: *const i64,
        /// In elements; NULL: row-major (1.0 hosts require row-major).
        pub strides: *const i64,
        /// The first element, aligned to the element size.
        pub data: *mut c_void,
        /// Bytes from `data` to one past the last element.
        pub byte_len: u64,
        /// Frees `data`.
        pub release: OpforgeReleaseFn,
        /// Passed to `release`.
        pub release_user: *mut c_void,
    }
}

/// Output request (MXNet's `OpReqType`): the output is not needed.
pub const OPFORGE_REQ_NULL: u32 = 0;
/// Output request: set the output and write it (the only request of 1.0
/// hosts).
pub const OPFORGE_REQ_WRITE: u32 = 1;
/// Output request: the output is bound to an input's memory; write there.
pub const OPFORGE_REQ_INPLACE: u32 = 2;
/// Output request: the output is bound and holds values; add into it.
pub const OPFORGE_REQ_ADD: u32 = 3;

abi_struct! {
    /// One input argument of a gradient `call`: a single value (`is_list`
    /// 0, one sym) or a list.
    pub struct OpforgeSymArg (min_size 32) {
        /// Its size of the struct (R1).
        pub struct_size: usize,
        /// The values.
        pub syms: *const OpforgeSym,
        /// The number of values.
        pub num_syms: usize,
        /// 1: a list argument.
        pub is_list: u8,
    }
}

/// `dim_op`: `a + b`.
pub const OPFORGE_DIM_ADD: u32 = 1;
/// `dim_op`: `a - b`.
pub const OPFORGE_DIM_SUB: u32 = 2;
/// `dim_op`: `a * b`.
pub const OPFORGE_DIM_MUL: u32 = 3;
/// `dim_op`: `a / b` (TensorFlow's Divide, not evenly divisible).
pub const OPFORGE_DIM_DIV: u32 = 4;
/// `dim_op`: `a / b`, an error unless evenly divisible.
pub const OPFORGE_DIM_DIV_EXACT: u32 = 5;
/// `dim_op`: `min(a, b)`.
pub const OPFORGE_DIM_MIN: u32 = 6;
/// `dim_op`: `max(a, b)`.
pub const OPFORGE_DIM_MAX: u32 = 7;

/// `log` level: debugging detail.
pub const OPFORGE_LOG_DEBUG: u32 = 0;
/// `log` level: information.
pub const OPFORGE_LOG_INFO: u32 = 1;
/// `log` level: a warning.
pub const OPFORGE_LOG_WARNING: u32 = 2;
/// `log` level: an error.
pub const OPFORGE_LOG_ERROR: u32 = 3;

/// Status flag: the error comes from a panic or exception the plugin caught
/// (the host evicts the kernel instance).
pub const OPFORGE_STATUS_PANICKED: u32 = 1;

abi_struct! {
    /// The start of every extension table `extension` returns.
    pub struct OpforgeExtensionHeader (min_size 16) {
        /// The table's size (R1, as a host table).
        pub struct_size: usize,
        /// The table's version (>= the `min_version` asked for).
        pub version: u32,
    }
}

// ---------------------------------------------------------------------------
// The host tables
// ---------------------------------------------------------------------------

abi_struct! {
    /// Registration (inside init only; R7). Everything given is copied; a
    /// failed init leaves nothing registered.
    pub struct OpforgeRegistrationApi (min_size 48) {
        /// The host's size of the table (R1).
        pub struct_size: usize,
        /// Registers an op (an identical registered OpDef is shared).
        pub op: Option<
            unsafe extern "C" fn(
                registrar: *mut OpforgeRegistrar,
                def: *const OpforgeOpDef,
                status: *mut OpforgeStatus,
            ) -> OpforgeCode,
        >,
        /// Registers a kernel for a registered (or staged) op.
        pub kernel: Option<
            unsafe extern "C" fn(
                registrar: *mut OpforgeRegistrar,
                def: *const OpforgeKernelDef,
                status: *mut OpforgeStatus,
            ) -> OpforgeCode,
        >,
        /// Registers a gradient callback for `op`.
        pub gradient_fn: Option<
            unsafe extern "C" fn(
                registrar: *mut OpforgeRegistrar,
                op: OpforgeStr,
                fn_: OpforgeGradFn,
                user: *mut c_void,
                status: *mut OpforgeStatus,
            ) -> OpforgeCode,
        >,
        /// Registers a declarative gradient.
        pub gradient_function: Option<
            unsafe extern "C" fn(
                registrar: *mut OpforgeRegistrar,
                def: *const OpforgeGradientFunction,
                status: *mut OpforgeStatus,
            ) -> OpforgeCode,
        >,
        /// Declares `op` not differentiable.
        pub not_differentiable: Option<
            unsafe extern "C" fn(
                registrar: *mut OpforgeRegistrar,
                op: OpforgeStr,
                status: *mut OpforgeStatus,
            ) -> OpforgeCode,
        >,
    }
}

abi_struct! {
    /// Kernel construction and compute (`OpKernelConstruction` and
    /// `OpKernelContext`). Indices are flat argument indices; a bad index
    /// or name is INVALID_ARGUMENT.
    pub struct OpforgeKernelApi (min_size 232) {
        /// The host's size of the table (R1).
        pub struct_size: usize,
        /// The op's name.
        pub init_op_name: Option<unsafe extern "C" fn(init: *const OpforgeKernelInit) -> OpforgeStr>,
        /// The node's name (the op's name for eager calls).
        pub init_node_name:
            Option<unsafe extern "C" fn(init: *const OpforgeKernelInit) -> OpforgeStr>,
        /// The device type the kernel is built for (`"CPU"`).
        pub init_device_type:
            Option<unsafe extern "C" fn(init: *const OpforgeKernelInit) -> OpforgeStr>,
        /// The number of flat inputs.
        pub init_num_inputs: Option<unsafe extern "C" fn(init: *const OpforgeKernelInit) -> usize>,
        /// The dtype of flat input `i`.
        pub init_input_dtype:
            Option<unsafe extern "C" fn(init: *const OpforgeKernelInit, i: usize) -> OpforgeDType>,
        /// The number of flat outputs.
        pub init_num_outputs: Option<unsafe extern "C" fn(init: *const OpforgeKernelInit) -> usize>,
        /// The dtype of flat output `i`.
        pub init_output_dtype:
            Option<unsafe extern "C" fn(init: *const OpforgeKernelInit, i: usize) -> OpforgeDType>,
        /// The flat range `[*start, *stop)` of an input or output argument.
        pub init_arg_range: Option<
            unsafe extern "C" fn(
                init: *const OpforgeKernelInit,
                name: OpforgeStr,
                is_output: u8,
                start: *mut usize,
                stop: *mut usize,
                status: *mut OpforgeStatus,
            ) -> OpforgeCode,
        >,
        /// Attr `name` of the node, of any type (lives until destroy).
        pub init_attr: Option<
            unsafe extern "C" fn(
                init: *const OpforgeKernelInit,
                name: OpforgeStr,
                value: *mut OpforgeAttrValue,
                status: *mut OpforgeStatus,
            ) -> OpforgeCode,
        >,
        /// The op's name.
        pub op_name: Option<unsafe extern "C" fn(ctx: *const OpforgeKernelCtx) -> OpforgeStr>,
        /// The node's name.
        pub node_name: Option<unsafe extern "C" fn(ctx: *const OpforgeKernelCtx) -> OpforgeStr>,
        /// The number of flat inputs.
        pub num_inputs: Option<unsafe extern "C" fn(ctx: *const OpforgeKernelCtx) -> usize>,
        /// The number of flat outputs.
        pub num_outputs: Option<unsafe extern "C" fn(ctx: *const OpforgeKernelCtx) -> usize>,
        /// The dtype of flat input `i`.
        pub input_dtype:
            Option<unsafe extern "C" fn(ctx: *const OpforgeKernelCtx, i: usize) -> OpforgeDType>,
        /// The dtype output `i` must have.
        pub output_dtype:
            Option<unsafe extern "C" fn(ctx: *const OpforgeKernelCtx, i: usize) -> OpforgeDType>,
        /// The flat range `[*start, *stop)` of an input or output argument.
        pub arg_range: Option<
            unsafe extern "C" fn(
                ctx: *const OpforgeKernelCtx,
                name: OpforgeStr,
                is_output: u8,
                start: *mut usize,
                stop: *mut usize,
                status: *mut OpforgeStatus,
            ) -> OpforgeCode,
        >,
        /// A read-only view of input `i`.
        pub input: Option<
            unsafe extern "C" fn(
                ctx: *const OpforgeKernelCtx,
                i: usize,
                view: *mut OpforgeTensor,
                status: *mut OpforgeStatus,
            ) -> OpforgeCode,
        >,
        /// A writable view of output `i` once it is set.
        pub output: Option<
            unsafe extern "C" fn(
                ctx: *const OpforgeKernelCtx,
                i: usize,
                view: *mut OpforgeTensor,
                status: *mut OpforgeStatus,
            ) -> OpforgeCode,
        >,
        /// What the host asks of output `i` (`OPFORGE_REQ_*`).
        pub output_request: Option<unsafe extern "C" fn(ctx: *const OpforgeKernelCtx, i: usize) -> u32>,
        /// Allocates output `i` of the given shape.
        pub allocate_output: Option<
            unsafe extern "C" fn(
                ctx: *mut OpforgeKernelCtx,
                i: usize,
                dims: *const i64,
                rank: u32,
                view: *mut OpforgeTensor,
                status: *mut OpforgeStatus,
            ) -> OpforgeCode,
        >,
        /// Reuses a candidate input's buffer for output `i`, else
        /// allocates.
        pub forward_input_or_allocate_output: Option<
            unsafe extern "C" fn(
                ctx: *mut OpforgeKernelCtx,
                candidates: *const usize,
                num_candidates: usize,
                i: usize,
                dims: *const i64,
                rank: u32,
                forwarded_from: *mut i64,
                view: *mut OpforgeTensor,
                status: *mut OpforgeStatus,
            ) -> OpforgeCode,
        >,
        /// Output `output` is input `input`, shared.
        pub set_output_from_input: Option<
            unsafe extern "C" fn(
                ctx: *mut OpforgeKernelCtx,
                output: usize,
                input: usize,
                status: *mut OpforgeStatus,
            ) -> OpforgeCode,
        >,
        /// Output `i` wraps plugin memory.
        pub set_output_foreign: Option<
            unsafe extern "C" fn(
                ctx: *mut OpforgeKernelCtx,
                i: usize,
                tensor: *const OpforgeForeignTensor,
                status: *mut OpforgeStatus,
            ) -> OpforgeCode,
        >,
        /// Sets `DT_STRING` output `i` to these elements (copied).
        pub set_output_strings: Option<
            unsafe extern "C" fn(
                ctx: *mut OpforgeKernelCtx,
                i: usize,
                dims: *const i64,
                rank: u32,
                elements: *const OpforgeStr,
                status: *mut OpforgeStatus,
            ) -> OpforgeCode,
        >,
        /// A scratch tensor, freed when compute returns.
        pub allocate_temp: Option<
            unsafe extern "C" fn(
                ctx: *mut OpforgeKernelCtx,
                dtype: OpforgeDType,
                dims: *const i64,
                rank: u32,
                view: *mut OpforgeTensor,
                status: *mut OpforgeStatus,
            ) -> OpforgeCode,
        >,
        /// Attr `name` of the node (lives until compute returns).
        pub attr: Option<
            unsafe extern "C" fn(
                ctx: *const OpforgeKernelCtx,
                name: OpforgeStr,
                value: *mut OpforgeAttrValue,
                status: *mut OpforgeStatus,
            ) -> OpforgeCode,
        >,
        /// Threads of the pool `parallel_for` runs on.
        pub num_threads: Option<unsafe extern "C" fn(ctx: *const OpforgeKernelCtx) -> u32>,
        /// TensorFlow's Shard: `[0, total)` split by `cost_per_unit`.
        pub parallel_for: Option<
            unsafe extern "C" fn(
                ctx: *mut OpforgeKernelCtx,
                total: u64,
                cost_per_unit: u64,
                work: OpforgeWorkFn,
                user: *mut c_void,
                status: *mut OpforgeStatus,
            ) -> OpforgeCode,
        >,
    }
}

abi_struct! {
    /// Shape inference (TensorFlow's `InferenceContext`, same semantics and
    /// error texts). Queries never fail: an unknown or invalid handle reads
    /// as unknown.
    pub struct OpforgeShapeApi (min_size 240) {
        /// The host's size of the table (R1).
        pub struct_size: usize,
        /// The number of flat inputs.
        pub num_inputs: Option<unsafe extern "C" fn(ctx: *const OpforgeShapeCtx) -> usize>,
        /// The number of flat outputs.
        pub num_outputs: Option<unsafe extern "C" fn(ctx: *const OpforgeShapeCtx) -> usize>,
        /// The shape of input `i`.
        pub input: Option<unsafe extern "C" fn(ctx: *const OpforgeShapeCtx, i: usize) -> OpforgeShape>,
        /// The flat range `[*start, *stop)` of an input or output argument.
        pub arg_range: Option<
            unsafe extern "C" fn(
                ctx: *const OpforgeShapeCtx,
                name: OpforgeStr,
                is_output: u8,
                start: *mut usize,
                stop: *mut usize,
                status: *mut OpforgeStatus,
            ) -> OpforgeCode,
        >,
        /// Sets output `i`'s shape.
        pub set_output: Option<
            unsafe extern "C" fn(
                ctx: *mut OpforgeShapeCtx,
                i: usize,
                shape: OpforgeShape,
                status: *mut OpforgeStatus,
            ) -> OpforgeCode,
        >,
        /// The shape output `i` was set to.
        pub output: Option<unsafe extern "C" fn(ctx: *const OpforgeShapeCtx, i: usize) -> OpforgeShape>,
        /// The rank, or [`OPFORGE_UNKNOWN_RANK`].
        pub rank: Option<unsafe extern "C" fn(ctx: *const OpforgeShapeCtx, shape: OpforgeShape) -> i32>,
        /// Dim `index` (negative counts from the end).
        pub dim: Option<
            unsafe extern "C" fn(
                ctx: *mut OpforgeShapeCtx,
                shape: OpforgeShape,
                index: i64,
                out: *mut OpforgeDim,
                status: *mut OpforgeStatus,
            ) -> OpforgeCode,
        >,
        /// The size, or [`OPFORGE_UNKNOWN_DIM`].
        pub value: Option<unsafe extern "C" fn(ctx: *const OpforgeShapeCtx, dim: OpforgeDim) -> i64>,
        /// The number of elements, or -1 if not fully defined.
        pub num_elements:
            Option<unsafe extern "C" fn(ctx: *const OpforgeShapeCtx, shape: OpforgeShape) -> i64>,
        /// A new dim of this size.
        pub make_dim: Option<unsafe extern "C" fn(ctx: *mut OpforgeShapeCtx, value: i64) -> OpforgeDim>,
        /// A new shape of these dims.
        pub make_shape: Option<
            unsafe extern "C" fn(
                ctx: *mut OpforgeShapeCtx,
                dims: *const OpforgeDim,
                rank: usize,
                out: *mut OpforgeShape,
                status: *mut OpforgeStatus,
            ) -> OpforgeCode,
        >,
        /// A new shape of these sizes.
        pub make_shape_from_values: Option<
            unsafe extern "C" fn(
                ctx: *mut OpforgeShapeCtx,
                dims: *const i64,
                rank: usize,
                out: *mut OpforgeShape,
                status: *mut OpforgeStatus,
            ) -> OpforgeCode,
        >,
        /// A shape of this rank with unknown dims, or of unknown rank.
        pub unknown_shape: Option<unsafe extern "C" fn(ctx: *mut OpforgeShapeCtx, rank: i32) -> OpforgeShape>,
        /// TensorFlow's WithRank.
        pub with_rank: Option<
            unsafe extern "C" fn(
                ctx: *mut OpforgeShapeCtx,
                shape: OpforgeShape,
                rank: i32,
                out: *mut OpforgeShape,
                status: *mut OpforgeStatus,
            ) -> OpforgeCode,
        >,
        /// TensorFlow's WithRankAtLeast.
        pub with_rank_at_least: Option<
            unsafe extern "C" fn(
                ctx: *mut OpforgeShapeCtx,
                shape: OpforgeShape,
                rank: i32,
                out: *mut OpforgeShape,
                status: *mut OpforgeStatus,
            ) -> OpforgeCode,
        >,
        /// TensorFlow's WithRankAtMost.
        pub with_rank_at_most: Option<
            unsafe extern "C" fn(
                ctx: *mut OpforgeShapeCtx,
                shape: OpforgeShape,
                rank: i32,
                out: *mut OpforgeShape,
                status: *mut OpforgeStatus,
            ) -> OpforgeCode,
        >,
        /// TensorFlow's WithValue.
        pub with_value: Option<
            unsafe extern "C" fn(
                ctx: *mut OpforgeShapeCtx,
                dim: OpforgeDim,
                value: i64,
                out: *mut OpforgeDim,
                status: *mut OpforgeStatus,
            ) -> OpforgeCode,
        >,
        /// TensorFlow's Merge (shapes).
        pub merge: Option<
            unsafe extern "C" fn(
                ctx: *mut OpforgeShapeCtx,
                a: OpforgeShape,
                b: OpforgeShape,
                out: *mut OpforgeShape,
                status: *mut OpforgeStatus,
            ) -> OpforgeCode,
        >,
        /// TensorFlow's Merge (dims).
        pub merge_dim: Option<
            unsafe extern "C" fn(
                ctx: *mut OpforgeShapeCtx,
                a: OpforgeDim,
                b: OpforgeDim,
                out: *mut OpforgeDim,
                status: *mut OpforgeStatus,
            ) -> OpforgeCode,
        >,
        /// TensorFlow's MergePrefix.
        pub merge_prefix: Option<
            unsafe extern "C" fn(
                ctx: *mut OpforgeShapeCtx,
                shape: OpforgeShape,
                prefix: OpforgeShape,
                shape_out: *mut OpforgeShape,
                prefix_out: *mut OpforgeShape,
                status: *mut OpforgeStatus,
            ) -> OpforgeCode,
        >,
        /// TensorFlow's Subshape (with stride).
        pub subshape: Option<
            unsafe extern "C" fn(
                ctx: *mut OpforgeShapeCtx,
                shape: OpforgeShape,
                start: i64,
                end: i64,
                stride: i64,
                out: *mut OpforgeShape,
                status: *mut OpforgeStatus,
            ) -> OpforgeCode,
        >,
        /// TensorFlow's Concatenate.
        pub concatenate: Option<
            unsafe extern "C" fn(
                ctx: *mut OpforgeShapeCtx,
                a: OpforgeShape,
                b: OpforgeShape,
                out: *mut OpforgeShape,
                status: *mut OpforgeStatus,
            ) -> OpforgeCode,
        >,
        /// TensorFlow's ReplaceDim.
        pub replace_dim: Option<
            unsafe extern "C" fn(
                ctx: *mut OpforgeShapeCtx,
                shape: OpforgeShape,
                index: i64,
                dim: OpforgeDim,
                out: *mut OpforgeShape,
                status: *mut OpforgeStatus,
            ) -> OpforgeCode,
        >,
        /// `a op b` for `op` an `OPFORGE_DIM_*`.
        pub dim_op: Option<
            unsafe extern "C" fn(
                ctx: *mut OpforgeShapeCtx,
                op: u32,
                a: OpforgeDim,
                b: OpforgeDim,
                out: *mut OpforgeDim,
                status: *mut OpforgeStatus,
            ) -> OpforgeCode,
        >,
        /// The value of input `i` if it is a constant: 1 and a view; else 0.
        pub input_tensor: Option<
            unsafe extern "C" fn(ctx: *const OpforgeShapeCtx, i: usize, view: *mut OpforgeTensor) -> u8,
        >,
        /// Input `i` (a shape tensor) as a shape (MakeShapeFromShapeTensor).
        pub input_as_shape: Option<
            unsafe extern "C" fn(
                ctx: *mut OpforgeShapeCtx,
                i: usize,
                out: *mut OpforgeShape,
                status: *mut OpforgeStatus,
            ) -> OpforgeCode,
        >,
        /// Attr `name` of the node.
        pub attr: Option<
            unsafe extern "C" fn(
                ctx: *const OpforgeShapeCtx,
                name: OpforgeStr,
                value: *mut OpforgeAttrValue,
                status: *mut OpforgeStatus,
            ) -> OpforgeCode,
        >,
        /// A shape as text (`"[2,?,3]"` or `"?"`).
        pub shape_string:
            Option<unsafe extern "C" fn(ctx: *const OpforgeShapeCtx, shape: OpforgeShape) -> OpforgeStr>,
    }
}

abi_struct! {
    /// Gradient callbacks (autodiff's `Ops` interface plus the forward op):
    /// every value is an [`OpforgeSym`] of the context.
    pub struct OpforgeGradApi (min_size 112) {
        /// The host's size of the table (R1).
        pub struct_size: usize,
        /// The forward op's name.
        pub op_name: Option<unsafe extern "C" fn(ctx: *const OpforgeGradCtx) -> OpforgeStr>,
        /// Attr `name` of the forward node.
        pub attr: Option<
            unsafe extern "C" fn(
                ctx: *const OpforgeGradCtx,
                name: OpforgeStr,
                value: *mut OpforgeAttrValue,
                status: *mut OpforgeStatus,
            ) -> OpforgeCode,
        >,
        /// The number of the forward op's flat inputs.
        pub num_inputs: Option<unsafe extern "C" fn(ctx: *const OpforgeGradCtx) -> usize>,
        /// The forward op's flat input `i`.
        pub input: Option<unsafe extern "C" fn(ctx: *const OpforgeGradCtx, i: usize) -> OpforgeSym>,
        /// The number of the forward op's flat outputs.
        pub num_outputs: Option<unsafe extern "C" fn(ctx: *const OpforgeGradCtx) -> usize>,
        /// The forward op's flat output `i`.
        pub output: Option<unsafe extern "C" fn(ctx: *const OpforgeGradCtx, i: usize) -> OpforgeSym>,
        /// The flat range of the forward op's input/output argument `name`.
        pub arg_range: Option<
            unsafe extern "C" fn(
                ctx: *const OpforgeGradCtx,
                name: OpforgeStr,
                is_output: u8,
                start: *mut usize,
                stop: *mut usize,
                status: *mut OpforgeStatus,
            ) -> OpforgeCode,
        >,
        /// The gradient flowing into output `i`: 1 and `*grad`, or 0.
        pub output_grad: Option<
            unsafe extern "C" fn(ctx: *const OpforgeGradCtx, i: usize, grad: *mut OpforgeSym) -> u8,
        >,
        /// The dtype of a value.
        pub dtype: Option<unsafe extern "C" fn(ctx: *const OpforgeGradCtx, sym: OpforgeSym) -> OpforgeDType>,
        /// What is known of a value's shape: the rank, and the first
        /// `min(rank, cap)` dims written to `dims`.
        pub shape: Option<
            unsafe extern "C" fn(
                ctx: *const OpforgeGradCtx,
                sym: OpforgeSym,
                dims: *mut i64,
                cap: usize,
            ) -> i32,
        >,
        /// Calls registered op `op` on `args` with `attrs`.
        pub call: Option<
            unsafe extern "C" fn(
                ctx: *mut OpforgeGradCtx,
                op: OpforgeStr,
                args: *const OpforgeSymArg,
                num_args: usize,
                attrs: *const OpforgeNamedAttr,
                num_attrs: usize,
                outs: *mut OpforgeSym,
                cap: usize,
                num_outs: *mut usize,
                status: *mut OpforgeStatus,
            ) -> OpforgeCode,
        >,
        /// A constant (the view's memory is copied).
        pub constant: Option<
            unsafe extern "C" fn(
                ctx: *mut OpforgeGradCtx,
                value: *const OpforgeTensor,
                out: *mut OpforgeSym,
                status: *mut OpforgeStatus,
            ) -> OpforgeCode,
        >,
        /// Sets the gradient of flat input `i`.
        pub set_input_grad: Option<
            unsafe extern "C" fn(
                ctx: *mut OpforgeGradCtx,
                i: usize,
                grad: OpforgeSym,
                status: *mut OpforgeStatus,
            ) -> OpforgeCode,
        >,
    }
}

abi_struct! {
    /// The table the host passes to init: everything a plugin may call.
    /// Each library gets its own (R7).
    pub struct OpforgeHostApi (min_size 136) {
        /// The host's size of the table (R1).
        pub struct_size: usize,
        /// The host's ABI major (equal to the library's).
        pub abi_major: u32,
        /// The host's ABI minor.
        pub abi_minor: u32,
        /// The host's own version, e.g. `"opforge 0.1.0"`.
        pub host_version: OpforgeStr,
        /// Registration (init only).
        pub registration: *const OpforgeRegistrationApi,
        /// Kernel construction and compute.
        pub kernel: *const OpforgeKernelApi,
        /// Shape inference.
        pub shape: *const OpforgeShapeApi,
        /// Gradient callbacks.
        pub grad: *const OpforgeGradApi,
        /// Sets a status's code and message (copied); OK clears it.
        pub set_status: Option<
            unsafe extern "C" fn(status: *mut OpforgeStatus, code: OpforgeCode, message: OpforgeStr),
        >,
        /// A status's code.
        pub status_code: Option<unsafe extern "C" fn(status: *const OpforgeStatus) -> OpforgeCode>,
        /// A status's message (valid until the status changes).
        pub status_message: Option<unsafe extern "C" fn(status: *const OpforgeStatus) -> OpforgeStr>,
        /// Sets `OPFORGE_STATUS_*` flags.
        pub set_status_flags: Option<unsafe extern "C" fn(status: *mut OpforgeStatus, flags: u32)>,
        /// A status's flags.
        pub status_flags: Option<unsafe extern "C" fn(status: *const OpforgeStatus) -> u32>,
        /// A new OK status owned by the plugin (free with `status_delete`).
        pub status_new: Option<unsafe extern "C" fn() -> *mut OpforgeStatus>,
        /// Frees a status made by `status_new`.
        pub status_delete: Option<unsafe extern "C" fn(status: *mut OpforgeStatus)>,
        /// Logs a message at an `OPFORGE_LOG_*` level; `host` is the table
        /// the library's init received.
        pub log: Option<
            unsafe extern "C" fn(host: *const OpforgeHostApi, level: u32, message: OpforgeStr),
        >,
        /// An extension table by name, of at least `min_version`, or NULL.
        pub extension:
            Option<unsafe extern "C" fn(name: OpforgeStr, min_version: u32) -> *const c_void>,
    }
}

// The host tables are shared between threads: a host keeps them in
// statics, a plugin in a global.
//
// SAFETY: (for this impl and the nine below) a host table is filled once by
// the host and never written again; its function slots may be called from any
// thread (R9), and the pointers it holds (sub-tables, the host version
// string) point to data that is immutable for as long as the table lives
// (R7). Moving or sharing a table between threads is therefore sound.
unsafe impl Send for OpforgeRegistrationApi {}
// SAFETY: see above.
unsafe impl Sync for OpforgeRegistrationApi {}
// SAFETY: see above.
unsafe impl Send for OpforgeKernelApi {}
// SAFETY: see above.
unsafe impl Sync for OpforgeKernelApi {}
// SAFETY: see above.
unsafe impl Send for OpforgeShapeApi {}
// SAFETY: see above.
unsafe impl Sync for OpforgeShapeApi {}
// SAFETY: see above.
unsafe impl Send for OpforgeGradApi {}
// SAFETY: see above.
unsafe impl Sync for OpforgeGradApi {}
// SAFETY: see above.
unsafe impl Send for OpforgeHostApi {}
// SAFETY: see above.
unsafe impl Sync for OpforgeHostApi {}

// ---------------------------------------------------------------------------
// Entry points
// ---------------------------------------------------------------------------

/// The symbol of the init entry point every library exports.
pub const OPFORGE_PLUGIN_INIT_SYMBOL: &str = "opforge_plugin_init_v1";
/// The symbol of the optional fini entry point.
pub const OPFORGE_PLUGIN_FINI_SYMBOL: &str = "opforge_plugin_fini_v1";
/// The exported anchor of the manifest (C libraries: `OPFORGE_LIBRARY`).
pub const OPFORGE_MANIFEST_ANCHOR_SYMBOL: &str = "opforge_manifest_anchor_v1";

// ---------------------------------------------------------------------------
// The manifest
// ---------------------------------------------------------------------------

/// The magic of a manifest record (4 bytes, no NUL).
pub const OPFORGE_MANIFEST_MAGIC: &str = "OPFM";
/// The record format this crate writes and reads.
pub const OPFORGE_MANIFEST_FORMAT: u32 = 1;
/// Records start at multiples of this.
pub const OPFORGE_MANIFEST_ALIGN: usize = 8;
/// Bytes of [`OpforgeManifestHeader`].
pub const OPFORGE_MANIFEST_HEADER_SIZE: usize = 16;
/// The ELF section of the manifest (Mach-O: `__DATA,__opforge_mf`; PE:
/// `.opfmf$b`).
pub const OPFORGE_MANIFEST_SECTION: &str = "opforge_manifest";

abi_struct! {
    /// The 16 bytes before a record's JSON: integers little-endian, as
    /// bytes, so that the layout is the same on every target. Not a
    /// versioned struct: a new layout is a new `format`.
    pub struct OpforgeManifestHeader {
        /// `"OPFM"`.
        pub magic: [u8; 4],
        /// [`OPFORGE_MANIFEST_FORMAT`], u32 little-endian.
        pub format: [u8; 4],
        /// Bytes of JSON, u32 little-endian.
        pub len: [u8; 4],
        /// CRC-32/ISO-HDLC of the JSON bytes, u32 little-endian; 0 = not
        /// computed.
        pub crc32: [u8; 4],
    }
}

// ---------------------------------------------------------------------------
// Version negotiation
// ---------------------------------------------------------------------------

/// The ABI fields of a library record (`abi` in the manifest).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LibraryAbi {
    /// `abi.major`: the major the library was built for.
    pub major: u32,
    /// `abi.minor`: the minor of the header or SDK it was built with.
    pub minor: u32,
    /// `abi.min_host_minor`: the lowest host minor it runs on.
    pub min_host_minor: u32,
    /// `abi.layout_hash`.
    pub layout_hash: u64,
}

/// The ABI version of a host.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HostAbi {
    /// The host's major.
    pub major: u32,
    /// The host's minor.
    pub minor: u32,
}

impl HostAbi {
    /// The version this crate defines.
    pub const CURRENT: HostAbi = HostAbi {
        major: OPFORGE_ABI_MAJOR,
        minor: OPFORGE_ABI_MINOR,
    };
}

/// Why a host refuses a library, decided from its manifest before any of its
/// code runs (all FAILED_PRECONDITION). The `Display` text names both
/// versions; the loader adds the file and the remedy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// The library was built for another major.
    MajorMismatch {
        /// The library's major.
        library: u32,
        /// The host's major.
        host: u32,
    },
    /// The library needs a newer host minor.
    HostTooOld {
        /// The library's major and minimum host minor.
        needs: (u32, u32),
        /// The minor it was built with.
        built_minor: u32,
        /// The host's version.
        host: HostAbi,
    },
    /// `min_host_minor` is above the minor the library was built with (a
    /// corrupt or forged record).
    MinAboveBuilt {
        /// The library's `min_host_minor`.
        min_host_minor: u32,
        /// The minor it was built with.
        built_minor: u32,
    },
    /// The host has no pinned layout for a minor it claims to serve (a
    /// broken host build).
    UnknownLayout {
        /// The library's (major, minor).
        version: (u32, u32),
    },
    /// The layout hash differs from the one pinned for (major, minor): the
    /// header was edited, or the compiler laid the structs out differently.
    LayoutMismatch {
        /// The library's (major, minor).
        version: (u32, u32),
        /// The pinned hash.
        expected: u64,
        /// The library's hash.
        found: u64,
    },
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Refusal::MajorMismatch { library, host } => write!(
                f,
                "built for opforge C ABI {library}.x; this host provides {host}.x"
            ),
            Refusal::HostTooOld {
                needs,
                built_minor,
                host,
            } => write!(
                f,
                "needs opforge C ABI {}.{}+ (built with {}.{}); this host provides {}.{}",
                needs.0, needs.1, needs.0, built_minor, host.major, host.minor
            ),
            Refusal::MinAboveBuilt {
                min_host_minor,
                built_minor,
            } => write!(
                f,
                "its manifest is inconsistent: min_host_minor {min_host_minor} is above the \
                 minor {built_minor} it was built with"
            ),
            Refusal::UnknownLayout { version } => write!(
                f,
                "this host has no layout hash pinned for opforge C ABI {}.{}",
                version.0, version.1
            ),
            Refusal::LayoutMismatch {
                version,
                expected,
                found,
            } => write!(
                f,
                "its layout hash {found:016x} is not the one of opforge C ABI {}.{} \
                 ({expected:016x}): it was built with a modified opforge.h or a compiler that \
                 lays the ABI's structs out differently",
                version.0, version.1
            ),
        }
    }
}

/// Whether a host of version `host`, which pins the layout hashes `known`
/// (`(major, minor, hash)`, as [`KNOWN_LAYOUTS`]), may load a library whose
/// manifest says `library` (step 1 of version negotiation, before the
/// library is mapped):
///
/// 1. `library.major == host.major`;
/// 2. `library.min_host_minor <= library.minor` and `<= host.minor`;
/// 3. if `library.minor <= host.minor`, `library.layout_hash` is the hash
///    pinned for `(major, minor)`. A library built against a newer minor
///    than the host's (with a low enough `min_host_minor`) is accepted
///    without a hash check: the host cannot know a later minor's hash, and
///    rule R1 makes the newer structs extensions of the host's.
pub const fn negotiate_with(
    library: &LibraryAbi,
    host: HostAbi,
    known: &[(u32, u32, u64)],
) -> Result<(), Refusal> {
    if library.major != host.major {
        return Err(Refusal::MajorMismatch {
            library: library.major,
            host: host.major,
        });
    }
    if library.min_host_minor > library.minor {
        return Err(Refusal::MinAboveBuilt {
            min_host_minor: library.min_host_minor,
            built_minor: library.minor,
        });
    }
    if library.min_host_minor > host.minor {
        return Err(Refusal::HostTooOld {
            needs: (library.major, library.min_host_minor),
            built_minor: library.minor,
            host,
        });
    }
    if library.minor > host.minor {
        return Ok(());
    }
    let mut i = 0;
    while i < known.len() {
        let (major, minor, hash) = known[i];
        if major == library.major && minor == library.minor {
            if hash == library.layout_hash {
                return Ok(());
            }
            return Err(Refusal::LayoutMismatch {
                version: (major, minor),
                expected: hash,
                found: library.layout_hash,
            });
        }
        i += 1;
    }
    Err(Refusal::UnknownLayout {
        version: (library.major, library.minor),
    })
}

/// [`negotiate_with`] for a host of this crate's version and
/// [`KNOWN_LAYOUTS`].
pub const fn negotiate(library: &LibraryAbi) -> Result<(), Refusal> {
    negotiate_with(library, HostAbi::CURRENT, KNOWN_LAYOUTS)
}

#[cfg(test)]
mod tests;
