//! The library's manifest, built at compile time from the same
//! declarations init registers, and placed in the file where the header
//! says (ELF: section `opforge_manifest`; Mach-O: `__DATA,__opforge_mf`;
//! PE: `.opfmf$b`), so that a reader finds it without loading the library.
//!
//! The records follow the header's format 1: per record the magic `OPFM`,
//! the format, the JSON's length and its CRC-32 (computed here), each as
//! four little-endian bytes, then the JSON, zero-padded to a multiple of 8.
//! Records: one `library` (name, version, `abi` with major, minor,
//! min_host_minor and layout_hash, `sdk`, `panic`), then one `op` per op,
//! one `kernel` per kernel and one `gradient` per gradient.
//!
//! [`export!`](crate::export) does all of this; the functions here are
//! `const fn`s it calls.

use core::ffi::c_void;

use opforge_abi::{
    OPFORGE_ABI_MAJOR, OPFORGE_ABI_MINOR, OPFORGE_KERNEL_NOT_THREAD_SAFE,
    OPFORGE_KERNEL_OUTPUT_REQUESTS, OPFORGE_KERNEL_PARALLEL_ISOLATED, OPFORGE_LAYOUT_HASH_STR,
    OPFORGE_MANIFEST_ALIGN, OPFORGE_MANIFEST_FORMAT, OPFORGE_MANIFEST_HEADER_SIZE,
    OPFORGE_OP_AGGREGATE, OPFORGE_OP_ALLOWS_UNINITIALIZED_INPUT, OPFORGE_OP_COMMUTATIVE,
    OPFORGE_OP_DISTRIBUTED_COMMUNICATION, OPFORGE_OP_STATEFUL,
};

use crate::registry::{GradientDef, GradientForm, KernelDef, Library, OpDefBuilder};

/// The SDK's version, in the library record's `sdk.version`.
pub const SDK_VERSION: &str = env!("CARGO_PKG_VERSION");

/// The manifest's bytes (`N` a multiple of 8), aligned as records must be.
#[repr(C, align(8))]
pub struct Manifest<const N: usize>(pub [u8; N]);

/// The exported anchor `opforge_manifest_anchor_v1`: a pointer to the
/// manifest, so that the records survive `--gc-sections` (exported symbols
/// are roots).
#[repr(transparent)]
pub struct Anchor(pub *const c_void);

// SAFETY: the anchor points at immutable data (the manifest static) and is
// never written; sharing it between threads is sound.
unsafe impl Sync for Anchor {}

/// A byte sink for `const` code: writes what fits in `buf`, counts all.
struct W<'b> {
    buf: &'b mut [u8],
    pos: usize,
}

const fn put(w: &mut W<'_>, b: u8) {
    if w.pos < w.buf.len() {
        w.buf[w.pos] = b;
    }
    w.pos += 1;
}

const fn raw(w: &mut W<'_>, s: &str) {
    let b = s.as_bytes();
    let mut i = 0;
    while i < b.len() {
        put(w, b[i]);
        i += 1;
    }
}

const HEX: &[u8; 16] = b"0123456789abcdef";

/// A JSON string literal of `s`.
const fn string(w: &mut W<'_>, s: &str) {
    put(w, b'"');
    let b = s.as_bytes();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        match c {
            b'"' => raw(w, "\\\""),
            b'\\' => raw(w, "\\\\"),
            b'\n' => raw(w, "\\n"),
            b'\r' => raw(w, "\\r"),
            b'\t' => raw(w, "\\t"),
            0..=0x1f => {
                raw(w, "\\u00");
                put(w, HEX[(c >> 4) as usize]);
                put(w, HEX[(c & 15) as usize]);
            }
            _ => put(w, c),
        }
        i += 1;
    }
    put(w, b'"');
}

const fn int(w: &mut W<'_>, v: i64) {
    if v < 0 {
        put(w, b'-');
    }
    let mut u = v.unsigned_abs();
    let mut digits = [0u8; 20];
    let mut n = 0;
    loop {
        digits[n] = b'0' + (u % 10) as u8;
        n += 1;
        u /= 10;
        if u == 0 {
            break;
        }
    }
    while n > 0 {
        n -= 1;
        put(w, digits[n]);
    }
}

const fn key(w: &mut W<'_>, k: &str) {
    put(w, b',');
    string(w, k);
    put(w, b':');
}

const fn strings(w: &mut W<'_>, items: &[&str]) {
    put(w, b'[');
    let mut i = 0;
    while i < items.len() {
        if i > 0 {
            put(w, b',');
        }
        string(w, items[i]);
        i += 1;
    }
    put(w, b']');
}

/// Flag names of a bit set: (bit, name) pairs.
const fn flags(w: &mut W<'_>, bits: u32, names: &[(u32, &str)]) {
    put(w, b'[');
    let mut first = true;
    let mut i = 0;
    while i < names.len() {
        if bits & names[i].0 != 0 {
            if !first {
                put(w, b',');
            }
            first = false;
            string(w, names[i].1);
        }
        i += 1;
    }
    put(w, b']');
}

/// CRC-32/ISO-HDLC (zlib's crc32) of `bytes`.
pub const fn crc32(bytes: &[u8]) -> u32 {
    let mut crc = 0xffff_ffffu32;
    let mut i = 0;
    while i < bytes.len() {
        crc ^= bytes[i] as u32;
        let mut k = 0;
        while k < 8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ 0xedb8_8320
            } else {
                crc >> 1
            };
            k += 1;
        }
        i += 1;
    }
    !crc
}

/// Starts a record: room for its header; returns where it starts.
const fn begin(w: &mut W<'_>, kind: &str) -> usize {
    let start = w.pos;
    let mut i = 0;
    while i < OPFORGE_MANIFEST_HEADER_SIZE {
        put(w, 0);
        i += 1;
    }
    raw(w, "{\"kind\":");
    string(w, kind);
    start
}

/// Ends a record: closes the object, fills the header, pads to 8.
const fn end(w: &mut W<'_>, start: usize) {
    put(w, b'}');
    let json = start + OPFORGE_MANIFEST_HEADER_SIZE;
    let len = w.pos - json;
    if w.pos <= w.buf.len() {
        let (_, rest) = w.buf.split_at(json);
        let (body, _) = rest.split_at(len);
        let crc = crc32(body);
        let mut header = [0u8; OPFORGE_MANIFEST_HEADER_SIZE];
        header[0] = b'O';
        header[1] = b'P';
        header[2] = b'F';
        header[3] = b'M';
        let format = OPFORGE_MANIFEST_FORMAT.to_le_bytes();
        let len_bytes = (len as u32).to_le_bytes();
        let crc_bytes = crc.to_le_bytes();
        let mut i = 0;
        while i < 4 {
            header[4 + i] = format[i];
            header[8 + i] = len_bytes[i];
            header[12 + i] = crc_bytes[i];
            i += 1;
        }
        let mut i = 0;
        while i < OPFORGE_MANIFEST_HEADER_SIZE {
            w.buf[start + i] = header[i];
            i += 1;
        }
    }
    while w.pos % OPFORGE_MANIFEST_ALIGN != 0 {
        put(w, 0);
    }
}

const fn library_record(w: &mut W<'_>, lib: &Library) {
    let start = begin(w, "library");
    key(w, "name");
    string(w, lib.name);
    key(w, "version");
    string(w, lib.version);
    key(w, "abi");
    raw(w, "{\"major\":");
    int(w, OPFORGE_ABI_MAJOR as i64);
    raw(w, ",\"minor\":");
    int(w, OPFORGE_ABI_MINOR as i64);
    raw(w, ",\"min_host_minor\":");
    int(w, lib.min_host_minor as i64);
    raw(w, ",\"layout_hash\":");
    string(w, OPFORGE_LAYOUT_HASH_STR);
    put(w, b'}');
    key(w, "sdk");
    raw(w, "{\"lang\":\"rust\",\"version\":");
    string(w, SDK_VERSION);
    put(w, b'}');
    key(w, "panic");
    string(w, if lib.panic_abort { "abort" } else { "unwind" });
    end(w, start);
}

const fn op_record(w: &mut W<'_>, op: &OpDefBuilder) {
    let start = begin(w, "op");
    key(w, "name");
    string(w, op.name());
    key(w, "attrs");
    strings(w, op.attrs());
    key(w, "inputs");
    strings(w, op.inputs());
    key(w, "outputs");
    strings(w, op.outputs());
    if !op.control_outputs().is_empty() {
        key(w, "control_outputs");
        strings(w, op.control_outputs());
    }
    key(w, "flags");
    flags(
        w,
        op.flags(),
        &[
            (OPFORGE_OP_STATEFUL, "stateful"),
            (OPFORGE_OP_COMMUTATIVE, "commutative"),
            (OPFORGE_OP_AGGREGATE, "aggregate"),
            (
                OPFORGE_OP_ALLOWS_UNINITIALIZED_INPUT,
                "allows_uninitialized_input",
            ),
            (
                OPFORGE_OP_DISTRIBUTED_COMMUNICATION,
                "distributed_communication",
            ),
        ],
    );
    key(w, "doc");
    string(w, op.get_doc());
    if let Some((version, explanation)) = op.deprecation() {
        key(w, "deprecation");
        raw(w, "{\"version\":");
        int(w, version as i64);
        raw(w, ",\"explanation\":");
        string(w, explanation);
        put(w, b'}');
    }
    key(w, "shape_fn");
    raw(
        w,
        if op.shape_fn().is_some() {
            "true"
        } else {
            "false"
        },
    );
    end(w, start);
}

const fn kernel_record(w: &mut W<'_>, k: &KernelDef) {
    let d = &k.def;
    let start = begin(w, "kernel");
    key(w, "op");
    string(w, d.op());
    key(w, "device");
    string(w, d.device_type());
    key(w, "constraints");
    put(w, b'{');
    let cs = d.constraints();
    let mut i = 0;
    while i < cs.len() {
        if i > 0 {
            put(w, b',');
        }
        string(w, cs[i].attr());
        raw(w, ":[");
        let types = cs[i].types();
        let mut j = 0;
        while j < types.len() {
            if j > 0 {
                put(w, b',');
            }
            match types[j].name() {
                Some(name) => string(w, name),
                None => panic!("a type constraint names a dtype this SDK does not know"),
            }
            j += 1;
        }
        put(w, b']');
        i += 1;
    }
    put(w, b'}');
    key(w, "host_memory");
    strings(w, d.host_memory_args());
    key(w, "label");
    string(w, d.get_label());
    key(w, "priority");
    int(w, d.get_priority() as i64);
    key(w, "flags");
    flags(
        w,
        d.flags(),
        &[
            (OPFORGE_KERNEL_NOT_THREAD_SAFE, "not_thread_safe"),
            (OPFORGE_KERNEL_PARALLEL_ISOLATED, "parallel_isolated"),
            (OPFORGE_KERNEL_OUTPUT_REQUESTS, "output_requests"),
        ],
    );
    end(w, start);
}

const fn gradient_record(w: &mut W<'_>, g: &GradientDef) {
    let start = begin(w, "gradient");
    key(w, "op");
    string(w, g.op);
    key(w, "form");
    string(
        w,
        match g.form {
            GradientForm::Fn(_) => "fn",
            GradientForm::Nodes(_) => "nodes",
            GradientForm::NotDifferentiable => "not_differentiable",
        },
    );
    end(w, start);
}

const fn write(w: &mut W<'_>, lib: &Library) {
    library_record(w, lib);
    let mut i = 0;
    while i < lib.ops.len() {
        op_record(w, &lib.ops[i]);
        i += 1;
    }
    let mut i = 0;
    while i < lib.kernels.len() {
        kernel_record(w, &lib.kernels[i]);
        i += 1;
    }
    let mut i = 0;
    while i < lib.gradients.len() {
        gradient_record(w, &lib.gradients[i]);
        i += 1;
    }
}

/// The manifest's size in bytes (a multiple of 8).
pub const fn encoded_len(lib: &Library) -> usize {
    let mut empty: [u8; 0] = [];
    let mut w = W {
        buf: &mut empty,
        pos: 0,
    };
    write(&mut w, lib);
    w.pos
}

/// The manifest of `lib`; `N` must be [`encoded_len`]`(lib)`.
pub const fn encode<const N: usize>(lib: &Library) -> Manifest<N> {
    let mut buf = [0u8; N];
    let pos = {
        let mut w = W {
            buf: &mut buf,
            pos: 0,
        };
        write(&mut w, lib);
        w.pos
    };
    assert!(pos == N, "the manifest's size changed between passes");
    Manifest(buf)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::KernelDefBuilder;
    use crate::{CreateKernel, DataType, OpKernel, OpKernelConstruction, OpKernelContext, Result};

    struct Nop;
    impl CreateKernel for Nop {
        fn create(_: &OpKernelConstruction<'_>) -> Result<Self> {
            Ok(Nop)
        }
    }

    impl OpKernel for Nop {
        fn compute(&self, _: &mut OpKernelContext<'_>) -> Result<()> {
            Ok(())
        }
    }

    const LIB: Library = Library {
        name: "t",
        version: "1.2.3",
        min_host_minor: 0,
        panic_abort: false,
        ops: &[OpDefBuilder::new("Q\"x")
            .attr("T: type")
            .input("a: T")
            .output("b: T")
            .set_is_stateful()
            .doc("line 1\n\tline \u{1}2 é")],
        kernels: &[KernelDefBuilder::new("Q\"x")
            .type_constraint("T", DataType::Float)
            .type_constraint("T", DataType::Int64)
            .host_memory("a")
            .priority(-3)
            .not_thread_safe()
            .build::<Nop>()],
        gradients: &[GradientDef::not_differentiable("Q\"x")],
    };

    static BYTES: Manifest<{ encoded_len(&LIB) }> = encode(&LIB);

    fn records(bytes: &[u8]) -> Vec<serde_json::Value> {
        let mut out = Vec::new();
        let mut at = 0;
        while at < bytes.len() {
            assert_eq!(&bytes[at..at + 4], b"OPFM", "magic at {at}");
            let u = |o: usize| u32::from_le_bytes(bytes[at + o..at + o + 4].try_into().unwrap());
            assert_eq!(u(4), 1);
            let len = u(8) as usize;
            let json = &bytes[at + 16..at + 16 + len];
            assert_eq!(u(12), crc32(json));
            out.push(serde_json::from_slice(json).unwrap());
            at = (at + 16 + len).div_ceil(8) * 8;
        }
        assert_eq!(at, bytes.len());
        out
    }

    #[test]
    fn crc32_is_zlibs() {
        assert_eq!(crc32(b"123456789"), 0xcbf4_3926);
        assert_eq!(crc32(b""), 0);
    }

    #[test]
    fn records_are_well_formed_json() {
        assert_eq!(BYTES.0.len() % 8, 0);
        let r = records(&BYTES.0);
        assert_eq!(r.len(), 4);
        assert_eq!(r[0]["kind"], "library");
        assert_eq!(r[0]["abi"]["major"], 1);
        assert_eq!(r[0]["abi"]["minor"], opforge_abi::OPFORGE_ABI_MINOR);
        assert_eq!(r[0]["abi"]["minor"], 1);
        assert_eq!(r[0]["abi"]["min_host_minor"], 0);
        assert_eq!(r[0]["abi"]["layout_hash"], OPFORGE_LAYOUT_HASH_STR);
        assert_eq!(r[0]["panic"], "unwind");
        assert_eq!(r[1]["name"], "Q\"x");
        assert_eq!(r[1]["doc"], "line 1\n\tline \u{1}2 é");
        assert_eq!(r[1]["flags"], serde_json::json!(["stateful"]));
        assert_eq!(r[1]["shape_fn"], false);
        assert_eq!(
            r[2]["constraints"],
            serde_json::json!({"T": ["DT_FLOAT", "DT_INT64"]})
        );
        assert_eq!(r[2]["priority"], -3);
        assert_eq!(r[2]["host_memory"], serde_json::json!(["a"]));
        assert_eq!(r[2]["flags"], serde_json::json!(["not_thread_safe"]));
        assert_eq!(r[3]["form"], "not_differentiable");
    }
}
