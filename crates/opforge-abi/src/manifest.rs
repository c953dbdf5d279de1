//! The entry points' symbols and the manifest's record format.

use crate::versioned::abi_struct;

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
