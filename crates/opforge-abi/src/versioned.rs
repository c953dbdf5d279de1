//! Rule R1 in Rust: [`Versioned`] (prefix reads and writes of a struct that
//! starts with `struct_size`) and `abi_struct!`, the macro every struct of
//! the mirror is declared with (its layout, its zero value, its `Versioned`
//! implementation).

use crate::*;
use core::fmt;
use core::mem::size_of;

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
pub(crate) const fn c_name(rust: &'static str) -> &'static str {
    match rust.as_bytes() {
        [b'r', b'#', rest @ ..] => match core::str::from_utf8(rest) {
            Ok(name) => name,
            Err(_) => panic!("a field name is ASCII"),
        },
        _ => rust,
    }
}

/// A `#[repr(C)]` struct of the mirror with its [`StructLayout`]; for a struct
/// starting with `struct_size`, also `new()` (zeroed, sized) and [`Versioned`].
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
        $crate::versioned::abi_struct!(@define $(#[$meta])* $name ($min) {
            $(#[$smeta])* struct_size: usize,
            $( $(#[$fmeta])* $field: $ty, )*
        });

        impl $name {
            /// Every field zero (NULL pointers, `None` slots, empty strings)
            /// and `struct_size` set to this crate's size of the struct:
            /// fill the fields you need on top of it (R1).
            pub const fn new() -> Self {
                let mut v = Self::zeroed();
                v.struct_size = ::core::mem::size_of::<Self>();
                v
            }
        }

        // SAFETY: `$name` is `#[repr(C)]`, starts with `struct_size: usize`
        // (matched by this macro arm), every field type accepts every bit
        // pattern (checked by `zeroed`'s reasoning and the layout test's
        // field types), and FIELDS is generated from the same field list.
        unsafe impl $crate::Versioned for $name {
            const NAME: &'static str = stringify!($name);
            const MIN_SIZE: usize = $name::LAYOUT.min_size;
            const FIELDS: &'static [$crate::FieldLayout] = $name::LAYOUT.fields;
            const NEW: Self = Self::new();
        }

        const _: () = assert!($min <= ::core::mem::size_of::<$name>() && $min % ::core::mem::align_of::<$name>() == 0);
    };
    // A struct without `struct_size` (OpforgeStr, OpforgeManifestHeader).
    (
        $(#[$meta:meta])*
        pub struct $name:ident {
            $( $(#[$fmeta:meta])* pub $field:ident : $ty:ty, )*
        }
    ) => {
        $crate::versioned::abi_struct!(@define $(#[$meta])* $name (::core::mem::size_of::<$name>()) {
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
            pub const LAYOUT: $crate::StructLayout = $crate::StructLayout {
                name: stringify!($name),
                size: ::core::mem::size_of::<$name>(),
                align: ::core::mem::align_of::<$name>(),
                min_size: $min,
                fields: &[$(
                    $crate::FieldLayout {
                        name: $crate::versioned::c_name(stringify!($field)),
                        offset: ::core::mem::offset_of!($name, $field),
                        size: ::core::mem::size_of::<$ty>(),
                        rust_type: stringify!($ty),
                    }
                ),*],
            };

            const fn zeroed() -> Self {
                // SAFETY: every field of the ABI's structs is an integer, a
                // float, a raw pointer, an `Option` of a function pointer,
                // an array of bytes or another such struct, and the all-zero
                // bit pattern is valid for each (0, NULL, `None`).
                unsafe { ::core::mem::zeroed() }
            }
        }

        impl Default for $name {
            fn default() -> Self {
                Self::new()
            }
        }
    };
}

/// Declares a struct of the mirror (see the arms).
pub(crate) use abi_struct;
