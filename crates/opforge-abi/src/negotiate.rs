//! Version negotiation: whether a host may load a library, decided from
//! its manifest's library record before any of its code runs.

use crate::*;
use core::fmt;

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
