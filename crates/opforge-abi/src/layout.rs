//! The layout of every struct of the ABI, the layout hash, and the table of
//! every constant: what the layout test compares with the C compiler's view
//! of `opforge.h`, and what a library's manifest pins
//! (`abi.layout_hash`).

use crate::*;

/// One field of a struct: its name, offset and size in bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FieldLayout {
    /// The field's name, as in the header.
    pub name: &'static str,
    /// `offsetof`.
    pub offset: usize,
    /// `sizeof` of the field.
    pub size: usize,
    /// The Rust type of the field as written in this crate (not part of the
    /// layout hash; the layout test checks it against the C type).
    pub rust_type: &'static str,
}

/// One struct: its name, size, alignment and fields in declaration order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StructLayout {
    /// The struct's name, as in the header.
    pub name: &'static str,
    /// `sizeof`.
    pub size: usize,
    /// `_Alignof`.
    pub align: usize,
    /// The size of the struct in the minor that introduced it: the smallest
    /// `struct_size` a receiver accepts (R1); `size` for the two structs
    /// without `struct_size`. Not part of the layout hash (checked against
    /// the frozen headers by the layout test).
    pub min_size: usize,
    /// Every field, in order.
    pub fields: &'static [FieldLayout],
}

/// Every struct of the ABI, in header order.
pub const STRUCTS: &[StructLayout] = &[
    OpforgeStr::LAYOUT,
    OpforgeTensor::LAYOUT,
    OpforgeShapeValue::LAYOUT,
    OpforgeFuncValue::LAYOUT,
    OpforgeAttrValue::LAYOUT,
    OpforgeNamedAttr::LAYOUT,
    OpforgeOpDef::LAYOUT,
    OpforgeTypeConstraint::LAYOUT,
    OpforgeOutputLike::LAYOUT,
    OpforgeKernelViews::LAYOUT,
    OpforgeKernelDef::LAYOUT,
    OpforgeGradSource::LAYOUT,
    OpforgeGradArg::LAYOUT,
    OpforgeGradNode::LAYOUT,
    OpforgeGradientFunction::LAYOUT,
    OpforgeForeignTensor::LAYOUT,
    OpforgeSymArg::LAYOUT,
    OpforgeExtensionHeader::LAYOUT,
    OpforgeRegistrationApi::LAYOUT,
    OpforgeKernelApi::LAYOUT,
    OpforgeShapeApi::LAYOUT,
    OpforgeGradApi::LAYOUT,
    OpforgeHostApi::LAYOUT,
    OpforgeManifestHeader::LAYOUT,
];

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;

const fn fnv_bytes(mut h: u64, bytes: &[u8]) -> u64 {
    let mut i = 0;
    while i < bytes.len() {
        h ^= bytes[i] as u64;
        h = h.wrapping_mul(FNV_PRIME);
        i += 1;
    }
    h
}

const fn fnv_u64(h: u64, v: u64) -> u64 {
    fnv_bytes(h, &v.to_le_bytes())
}

/// The layout hash of a list of structs: FNV-1a 64 (offset basis
/// `0xcbf29ce484222325`, prime `0x100000001b3`) over, for each struct in
/// order, its name and a 0 byte, its size, alignment and number of fields
/// (each as 8 little-endian bytes), then for each field its name and a 0
/// byte, its offset and its size (8 little-endian bytes each).
pub const fn hash_structs(structs: &[StructLayout]) -> u64 {
    let mut h = FNV_OFFSET;
    let mut s = 0;
    while s < structs.len() {
        let st = &structs[s];
        h = fnv_bytes(h, st.name.as_bytes());
        h = fnv_bytes(h, &[0]);
        h = fnv_u64(h, st.size as u64);
        h = fnv_u64(h, st.align as u64);
        h = fnv_u64(h, st.fields.len() as u64);
        let mut f = 0;
        while f < st.fields.len() {
            let fl = &st.fields[f];
            h = fnv_bytes(h, fl.name.as_bytes());
            h = fnv_bytes(h, &[0]);
            h = fnv_u64(h, fl.offset as u64);
            h = fnv_u64(h, fl.size as u64);
            f += 1;
        }
        s += 1;
    }
    h
}

/// The layout hash of this version of the ABI ([`STRUCTS`] hashed by
/// [`hash_structs`]): equal to [`OPFORGE_LAYOUT_HASH`] and the header's
/// `OPFORGE_LAYOUT_HASH`, and to the entry of [`KNOWN_LAYOUTS`] for
/// ([`OPFORGE_ABI_MAJOR`], [`OPFORGE_ABI_MINOR`]) (all checked by tests).
pub const fn layout_hash() -> u64 {
    hash_structs(STRUCTS)
}

/// The layout hash of every released (major, minor), oldest first, as
/// literals: a host accepts a library of a minor it knows only if the
/// library's manifest carries the hash listed here ([`crate::negotiate`]).
/// Entries are never changed or removed; each new minor appends its own
/// (the layout test checks the last one against the current header, and
/// the 1.0 one against the frozen 1.0 header).
pub const KNOWN_LAYOUTS: &[(u32, u32, u64)] =
    &[(1, 0, 0x6ca0_052a_81b1_895f), (1, 1, 0xd369_ae65_736d_e423)];

/// The pinned layout hash of (major, minor), if that version was released.
pub const fn known_layout_hash(major: u32, minor: u32) -> Option<u64> {
    let mut i = 0;
    while i < KNOWN_LAYOUTS.len() {
        let (ma, mi, h) = KNOWN_LAYOUTS[i];
        if ma == major && mi == minor {
            return Some(h);
        }
        i += 1;
    }
    None
}

/// The value of a constant of the header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConstValue {
    /// An integer constant.
    Int(i128),
    /// A string constant.
    Str(&'static str),
}

/// A constant of the header: its name and value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Constant {
    /// The macro's name.
    pub name: &'static str,
    /// Its value.
    pub value: ConstValue,
}

macro_rules! constants {
    ($($name:ident),* $(,)?) => {
        &[$(Constant { name: stringify!($name), value: ConstValue::Int($name as i128) }),*]
    };
}

/// Every integer constant of the header, in header order.
pub const INT_CONSTANTS: &[Constant] = constants![
    OPFORGE_ABI_MAJOR,
    OPFORGE_ABI_MINOR,
    OPFORGE_LAYOUT_HASH,
    OPFORGE_MIN_HOST_MINOR,
    OPFORGE_OK,
    OPFORGE_CANCELLED,
    OPFORGE_UNKNOWN,
    OPFORGE_INVALID_ARGUMENT,
    OPFORGE_DEADLINE_EXCEEDED,
    OPFORGE_NOT_FOUND,
    OPFORGE_ALREADY_EXISTS,
    OPFORGE_PERMISSION_DENIED,
    OPFORGE_RESOURCE_EXHAUSTED,
    OPFORGE_FAILED_PRECONDITION,
    OPFORGE_ABORTED,
    OPFORGE_OUT_OF_RANGE,
    OPFORGE_UNIMPLEMENTED,
    OPFORGE_INTERNAL,
    OPFORGE_UNAVAILABLE,
    OPFORGE_DATA_LOSS,
    OPFORGE_UNAUTHENTICATED,
    OPFORGE_DT_INVALID,
    OPFORGE_DT_FLOAT,
    OPFORGE_DT_DOUBLE,
    OPFORGE_DT_INT32,
    OPFORGE_DT_UINT8,
    OPFORGE_DT_INT16,
    OPFORGE_DT_INT8,
    OPFORGE_DT_STRING,
    OPFORGE_DT_COMPLEX64,
    OPFORGE_DT_INT64,
    OPFORGE_DT_BOOL,
    OPFORGE_DT_QINT8,
    OPFORGE_DT_QUINT8,
    OPFORGE_DT_QINT32,
    OPFORGE_DT_BFLOAT16,
    OPFORGE_DT_QINT16,
    OPFORGE_DT_QUINT16,
    OPFORGE_DT_UINT16,
    OPFORGE_DT_COMPLEX128,
    OPFORGE_DT_HALF,
    OPFORGE_DT_RESOURCE,
    OPFORGE_DT_VARIANT,
    OPFORGE_DT_UINT32,
    OPFORGE_DT_UINT64,
    OPFORGE_DT_FLOAT8_E5M2,
    OPFORGE_DT_FLOAT8_E4M3FN,
    OPFORGE_DT_FLOAT8_E4M3FNUZ,
    OPFORGE_DT_FLOAT8_E4M3B11FNUZ,
    OPFORGE_DT_FLOAT8_E5M2FNUZ,
    OPFORGE_DT_INT4,
    OPFORGE_DT_UINT4,
    OPFORGE_DT_INT2,
    OPFORGE_DT_UINT2,
    OPFORGE_DT_FLOAT4_E2M1FN,
    OPFORGE_NO_HANDLE,
    OPFORGE_UNKNOWN_RANK,
    OPFORGE_UNKNOWN_DIM,
    OPFORGE_TO_END,
    OPFORGE_NOT_FORWARDED,
    OPFORGE_TENSOR_WRITABLE,
    OPFORGE_TENSOR_CONTIGUOUS,
    OPFORGE_TENSOR_HOST_MEMORY,
    OPFORGE_ATTR_NONE,
    OPFORGE_ATTR_INT,
    OPFORGE_ATTR_FLOAT,
    OPFORGE_ATTR_BOOL,
    OPFORGE_ATTR_TYPE,
    OPFORGE_ATTR_STRING,
    OPFORGE_ATTR_SHAPE,
    OPFORGE_ATTR_TENSOR,
    OPFORGE_ATTR_FUNC,
    OPFORGE_ATTR_PLACEHOLDER,
    OPFORGE_ATTR_LIST,
    OPFORGE_ATTR_KIND_MASK,
    OPFORGE_OP_STATEFUL,
    OPFORGE_OP_COMMUTATIVE,
    OPFORGE_OP_AGGREGATE,
    OPFORGE_OP_ALLOWS_UNINITIALIZED_INPUT,
    OPFORGE_OP_DISTRIBUTED_COMMUNICATION,
    OPFORGE_KERNEL_NOT_THREAD_SAFE,
    OPFORGE_KERNEL_PARALLEL_ISOLATED,
    OPFORGE_KERNEL_OUTPUT_REQUESTS,
    OPFORGE_OUTPUT_FORWARD,
    OPFORGE_GRAD_SRC_NONE,
    OPFORGE_GRAD_SRC_INPUT,
    OPFORGE_GRAD_SRC_OUTPUT,
    OPFORGE_GRAD_SRC_OUTPUT_GRAD,
    OPFORGE_GRAD_SRC_NODE,
    OPFORGE_GRAD_WHOLE_ARG,
    OPFORGE_REQ_NULL,
    OPFORGE_REQ_WRITE,
    OPFORGE_REQ_INPLACE,
    OPFORGE_REQ_ADD,
    OPFORGE_DIM_ADD,
    OPFORGE_DIM_SUB,
    OPFORGE_DIM_MUL,
    OPFORGE_DIM_DIV,
    OPFORGE_DIM_DIV_EXACT,
    OPFORGE_DIM_MIN,
    OPFORGE_DIM_MAX,
    OPFORGE_LOG_DEBUG,
    OPFORGE_LOG_INFO,
    OPFORGE_LOG_WARNING,
    OPFORGE_LOG_ERROR,
    OPFORGE_STATUS_PANICKED,
    OPFORGE_MANIFEST_FORMAT,
    OPFORGE_MANIFEST_ALIGN,
    OPFORGE_MANIFEST_HEADER_SIZE,
];

/// Every string constant of the header, in header order.
pub const STR_CONSTANTS: &[Constant] = &[
    Constant {
        name: "OPFORGE_LAYOUT_HASH_STR",
        value: ConstValue::Str(OPFORGE_LAYOUT_HASH_STR),
    },
    Constant {
        name: "OPFORGE_PLUGIN_INIT_SYMBOL",
        value: ConstValue::Str(OPFORGE_PLUGIN_INIT_SYMBOL),
    },
    Constant {
        name: "OPFORGE_PLUGIN_FINI_SYMBOL",
        value: ConstValue::Str(OPFORGE_PLUGIN_FINI_SYMBOL),
    },
    Constant {
        name: "OPFORGE_MANIFEST_ANCHOR_SYMBOL",
        value: ConstValue::Str(OPFORGE_MANIFEST_ANCHOR_SYMBOL),
    },
    Constant {
        name: "OPFORGE_MANIFEST_MAGIC",
        value: ConstValue::Str(OPFORGE_MANIFEST_MAGIC),
    },
    Constant {
        name: "OPFORGE_MANIFEST_SECTION",
        value: ConstValue::Str(OPFORGE_MANIFEST_SECTION),
    },
];
