//! Unit tests of the helpers; the layout itself is checked against the C
//! compiler by `tests/layout.rs`.

use super::*;
use crate::versioned::abi_struct;
use core::mem::{offset_of, size_of};

#[test]
fn the_layout_hash_is_pinned() {
    let hash = layout_hash();
    assert_eq!(
        hash, OPFORGE_LAYOUT_HASH,
        "the layout changed: the layout hash is now {hash:#018x}; a released minor's layout \
         must not change (append fields in a new minor instead), and an unreleased one sets \
         OPFORGE_LAYOUT_HASH (lib.rs and opforge.h) and its KNOWN_LAYOUTS entry to it"
    );
    assert_eq!(
        known_layout_hash(OPFORGE_ABI_MAJOR, OPFORGE_ABI_MINOR),
        Some(hash),
        "KNOWN_LAYOUTS has no entry, or another hash, for the current minor"
    );
    let (major, minor, last) = KNOWN_LAYOUTS[KNOWN_LAYOUTS.len() - 1];
    assert_eq!(
        (major, minor, last),
        (OPFORGE_ABI_MAJOR, OPFORGE_ABI_MINOR, hash)
    );
    let mut hex = [0u8; 16];
    for (i, d) in hex.iter_mut().enumerate() {
        *d = b"0123456789abcdef"[((hash >> (60 - 4 * i)) & 0xf) as usize];
    }
    assert_eq!(OPFORGE_LAYOUT_HASH_STR.as_bytes(), &hex[..]);
}

#[test]
fn known_layouts_are_sorted_and_unique() {
    for w in KNOWN_LAYOUTS.windows(2) {
        assert!(
            (w[0].0, w[0].1) < (w[1].0, w[1].1),
            "{:?} then {:?}",
            w[0],
            w[1]
        );
    }
}

#[test]
fn the_hash_is_fnv1a_over_the_documented_bytes() {
    // No struct: the offset basis.
    assert_eq!(layout::hash_structs(&[]), 0xcbf2_9ce4_8422_2325);
    // One struct "A" of size 8, align 8, one field "x" at 0 of size 8: the
    // same bytes hashed by a plain FNV-1a loop.
    const F: &[FieldLayout] = &[FieldLayout {
        name: "x",
        offset: 0,
        size: 8,
        rust_type: "u64",
    }];
    let s = StructLayout {
        name: "A",
        size: 8,
        align: 8,
        min_size: 8,
        fields: F,
    };
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut eat = |b: &[u8]| {
        for &x in b {
            h ^= x as u64;
            h = h.wrapping_mul(0x100_0000_01b3);
        }
    };
    eat(b"A\0");
    eat(&8u64.to_le_bytes());
    eat(&8u64.to_le_bytes());
    eat(&1u64.to_le_bytes());
    eat(b"x\0");
    eat(&0u64.to_le_bytes());
    eat(&8u64.to_le_bytes());
    assert_eq!(layout::hash_structs(&[s]), h);
}

#[test]
fn every_struct_but_two_is_versioned_with_a_valid_min_size() {
    fn check<T: Versioned>() {
        let l = T::FIELDS;
        assert_eq!(l[0].name, "struct_size", "{}", T::NAME);
        assert_eq!((l[0].offset, l[0].size), (0, 8), "{}", T::NAME);
        // Checked against the frozen headers by tests/layout.rs.
        assert!(T::MIN_SIZE <= size_of::<T>(), "{}", T::NAME);
        let new = T::NEW;
        // SAFETY: `new` is a live `T`, whose first field is a `usize`
        // (Versioned's contract), read through an aligned pointer.
        let size = unsafe { (&new as *const T).cast::<usize>().read() };
        assert_eq!(size, size_of::<T>(), "{}", T::NAME);
    }
    check::<OpforgeTensor>();
    check::<OpforgeShapeValue>();
    check::<OpforgeFuncValue>();
    check::<OpforgeAttrValue>();
    check::<OpforgeNamedAttr>();
    check::<OpforgeOpDef>();
    check::<OpforgeTypeConstraint>();
    check::<OpforgeOutputLike>();
    check::<OpforgeKernelViews>();
    check::<OpforgeKernelDef>();
    check::<OpforgeGradSource>();
    check::<OpforgeGradArg>();
    check::<OpforgeGradNode>();
    check::<OpforgeGradientFunction>();
    check::<OpforgeForeignTensor>();
    check::<OpforgeSymArg>();
    check::<OpforgeExtensionHeader>();
    check::<OpforgeRegistrationApi>();
    check::<OpforgeKernelApi>();
    check::<OpforgeShapeApi>();
    check::<OpforgeGradApi>();
    check::<OpforgeHostApi>();
    // The 22 above, OpforgeStr and OpforgeManifestHeader.
    assert_eq!(STRUCTS.len(), 24);
}

#[test]
fn the_c_name_of_a_raw_identifier_drops_r_hash() {
    let f = OpforgeAttrValue::LAYOUT.fields;
    assert_eq!(f[2].name, "type");
    assert_eq!(f[2].offset, offset_of!(OpforgeAttrValue, r#type));
}

abi_struct! {
    /// A versioned struct whose first version ended after `a` (a 1.0 struct
    /// that a later minor extended by `f` and `b`).
    pub struct Grown (min_size 16) {
        /// R1.
        pub struct_size: usize,
        /// 1.0.
        pub a: u32,
        /// Appended.
        pub f: Option<unsafe extern "C" fn()>,
        /// Appended.
        pub b: u64,
    }
}

unsafe extern "C" fn nothing() {}

fn grown() -> Grown {
    Grown {
        a: 7,
        f: Some(nothing),
        b: 9,
        ..Grown::new()
    }
}

#[test]
fn an_older_struct_reads_as_its_prefix_with_the_rest_zero() {
    let mut old = grown();
    old.struct_size = 16;
    // SAFETY: `old` is a whole Grown, readable beyond its struct_size.
    let read = unsafe { Grown::read_from(&old) }.unwrap();
    assert_eq!((read.struct_size, read.a, read.b), (16, 7, 0));
    assert!(read.f.is_none(), "a slot past struct_size reads as None");
    // A struct_size cutting a field in two does not copy the half field.
    old.struct_size = 20;
    // SAFETY: as above.
    let read = unsafe { Grown::read_from(&old) }.unwrap();
    assert!(read.f.is_none());
    // A whole or newer struct reads whole.
    let mut new = [grown(), grown()];
    new[0].struct_size = 48;
    // SAFETY: `new[0]` is followed by 32 more readable bytes.
    let read = unsafe { Grown::read_from(&new[0]) }.unwrap();
    assert_eq!((read.struct_size, read.a, read.b), (48, 7, 9));
    assert!(read.f.is_some());
}

#[test]
fn an_out_struct_gets_only_the_fields_that_fit() {
    let src = grown();
    // An older caller: struct_size 16; the bytes past it stay untouched.
    let mut dst = Grown::new();
    dst.struct_size = 16;
    dst.b = 1;
    // SAFETY: `dst` is a whole Grown, not overlapping `src`.
    unsafe { src.write_to(&mut dst) }.unwrap();
    assert_eq!((dst.struct_size, dst.a, dst.b), (16, 7, 1));
    assert!(dst.f.is_none());
    // A newer caller gets every field and keeps its struct_size.
    let mut dst = [Grown::new(), Grown::new()];
    dst[0].struct_size = 40;
    // SAFETY: `dst[0]` is followed by another Grown, so its claimed 40
    // bytes are writable; no overlap with `src`.
    unsafe { src.write_to(&mut dst[0]) }.unwrap();
    assert_eq!((dst[0].struct_size, dst[0].a, dst[0].b), (40, 7, 9));
    assert!(dst[0].f.is_some());
    assert_eq!(dst[1].struct_size, 32, "nothing past size_of is written");
}

#[test]
fn a_struct_size_below_the_first_size_is_refused() {
    let mut def = OpforgeOpDef::new();
    def.struct_size = 16;
    // SAFETY: `def` is a whole OpforgeOpDef.
    let err = unsafe { OpforgeOpDef::read_from(&def) }.unwrap_err();
    assert_eq!(
        err,
        StructSizeError {
            name: "OpforgeOpDef",
            struct_size: 16,
            min_size: OpforgeOpDef::MIN_SIZE,
        }
    );
    let mut text = Buf::default();
    core::fmt::write(&mut text, format_args!("{err}")).unwrap();
    assert!(text
        .as_str()
        .starts_with("OpforgeOpDef.struct_size is 16, below"));
    let mut dst = OpforgeTensor::new();
    dst.struct_size = 8;
    // SAFETY: `dst` is a whole OpforgeTensor.
    let err = unsafe { OpforgeTensor::new().write_to(&mut dst) }.unwrap_err();
    assert_eq!(err.struct_size, 8);
}

#[test]
fn strings() {
    let s = OpforgeStr::from_text("ZeroOut");
    assert_eq!(s.len, 7);
    // SAFETY: `s` borrows a static string.
    assert_eq!(unsafe { s.as_bytes() }, b"ZeroOut");
    // SAFETY: empty strings are never dereferenced.
    assert_eq!(unsafe { OpforgeStr::EMPTY.as_bytes() }, b"");
    assert!(OpforgeStr::default().ptr.is_null());
    let t: OpforgeStr = "T".into();
    assert_eq!(t.len, 1);
}

fn lib(major: u32, minor: u32, min_host_minor: u32, layout_hash: u64) -> LibraryAbi {
    LibraryAbi {
        major,
        minor,
        min_host_minor,
        layout_hash,
    }
}

#[test]
fn negotiation() {
    const KNOWN: &[(u32, u32, u64)] = &[(1, 0, 0xa), (1, 1, 0xb), (1, 2, 0xc)];
    let host = HostAbi { major: 1, minor: 2 };
    // Same version, older minors, a newer minor that does not need it.
    assert_eq!(negotiate_with(&lib(1, 2, 2, 0xc), host, KNOWN), Ok(()));
    assert_eq!(negotiate_with(&lib(1, 0, 0, 0xa), host, KNOWN), Ok(()));
    assert_eq!(negotiate_with(&lib(1, 1, 0, 0xb), host, KNOWN), Ok(()));
    assert_eq!(negotiate_with(&lib(1, 5, 1, 0x1234), host, KNOWN), Ok(()));
    // Another major.
    assert_eq!(
        negotiate_with(&lib(2, 0, 0, 0xa), host, KNOWN),
        Err(Refusal::MajorMismatch {
            library: 2,
            host: 1
        })
    );
    // Needs a newer host.
    let e = negotiate_with(&lib(1, 3, 3, 0), host, KNOWN).unwrap_err();
    assert_eq!(
        e,
        Refusal::HostTooOld {
            needs: (1, 3),
            built_minor: 3,
            host
        }
    );
    let mut text = Buf::default();
    core::fmt::write(&mut text, format_args!("{e}")).unwrap();
    assert_eq!(
        text.as_str(),
        "needs opforge C ABI 1.3+ (built with 1.3); this host provides 1.2"
    );
    // A forged record.
    assert_eq!(
        negotiate_with(&lib(1, 1, 2, 0xb), host, KNOWN),
        Err(Refusal::MinAboveBuilt {
            min_host_minor: 2,
            built_minor: 1
        })
    );
    // A wrong hash for a known minor.
    assert_eq!(
        negotiate_with(&lib(1, 1, 0, 0xc), host, KNOWN),
        Err(Refusal::LayoutMismatch {
            version: (1, 1),
            expected: 0xb,
            found: 0xc
        })
    );
    // A host missing its own pin.
    assert_eq!(
        negotiate_with(&lib(1, 1, 0, 0xb), host, &KNOWN[..1]),
        Err(Refusal::UnknownLayout { version: (1, 1) })
    );
    // This crate's own version accepts what it builds.
    assert_eq!(
        negotiate(&lib(
            OPFORGE_ABI_MAJOR,
            OPFORGE_ABI_MINOR,
            OPFORGE_MIN_HOST_MINOR,
            OPFORGE_LAYOUT_HASH
        )),
        Ok(())
    );
}

#[test]
fn negotiation_between_1_0_and_1_1() {
    const H10: u64 = 0x6ca0_052a_81b1_895f;
    const H11: u64 = 0xd369_ae65_736d_e423;
    assert_eq!((OPFORGE_ABI_MAJOR, OPFORGE_ABI_MINOR), (1, 1));
    assert_eq!(KNOWN_LAYOUTS, &[(1, 0, H10), (1, 1, H11)]);
    // A 1.1 host loads 1.0 libraries and 1.1 libraries of either minimum.
    assert_eq!(negotiate(&lib(1, 0, 0, H10)), Ok(()));
    assert_eq!(negotiate(&lib(1, 1, 0, H11)), Ok(()));
    assert_eq!(negotiate(&lib(1, 1, 1, H11)), Ok(()));
    // ... but not a 1.0 library with the 1.1 hash, nor the reverse.
    assert!(matches!(
        negotiate(&lib(1, 0, 0, H11)),
        Err(Refusal::LayoutMismatch { .. })
    ));
    assert!(matches!(
        negotiate(&lib(1, 1, 1, H10)),
        Err(Refusal::LayoutMismatch { .. })
    ));
    // A 1.0 host (pinning 1.0 only) refuses a library that needs 1.1 (a
    // kernel with compute_views only) before running any of its code, and
    // loads a 1.1 library that keeps min_host_minor 0 (it ignores the 1.1
    // fields, R1).
    let host10 = HostAbi { major: 1, minor: 0 };
    assert_eq!(
        negotiate_with(&lib(1, 1, 1, H11), host10, &KNOWN_LAYOUTS[..1]),
        Err(Refusal::HostTooOld {
            needs: (1, 1),
            built_minor: 1,
            host: host10
        })
    );
    assert_eq!(
        negotiate_with(&lib(1, 1, 0, H11), host10, &KNOWN_LAYOUTS[..1]),
        Ok(())
    );
}

/// A fixed buffer for `Display` output (the crate is no_std).
struct Buf {
    bytes: [u8; 256],
    len: usize,
}

impl Default for Buf {
    fn default() -> Buf {
        Buf {
            bytes: [0; 256],
            len: 0,
        }
    }
}

impl core::fmt::Write for Buf {
    fn write_str(&mut self, s: &str) -> core::fmt::Result {
        let end = self.len + s.len();
        if end > self.bytes.len() {
            return Err(core::fmt::Error);
        }
        self.bytes[self.len..end].copy_from_slice(s.as_bytes());
        self.len = end;
        Ok(())
    }
}

impl Buf {
    fn as_str(&self) -> &str {
        core::str::from_utf8(&self.bytes[..self.len]).unwrap()
    }
}
