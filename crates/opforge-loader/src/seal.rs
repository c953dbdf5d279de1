//! Sealed declarations: what `opforge lib seal` writes into a library that
//! registers its ops by code, so that [`inspect`](crate::inspect) lists them
//! without running the library and [`Loader::load`](crate::Loader::load)
//! checks init against them (the header's "The sealed declaration").
//!
//! The section `opforge_manifest_sealed` (ELF, non-allocated, so the
//! dynamic linker never maps it) holds manifest records in the manifest's
//! record format, every CRC computed: first one `seal` record binding the
//! section to the file it was made for, then op, kernel and gradient
//! records exactly as a declaring library's manifest has them.

use crate::manifest::{self, Manifest};
use opforge_core::{Result, Status};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};

/// The ELF section a sealed declaration lives in.
pub const SEALED_SECTION: &str = "opforge_manifest_sealed";

/// What [`seal`] did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SealOutcome {
    /// The file declares its ops itself (Rust SDK, the header's static
    /// declaration macros): nothing was written.
    AlreadyDeclared,
    /// The declaration was written (replacing an earlier sealed one if
    /// `replaced`).
    Sealed {
        /// Op records written.
        ops: usize,
        /// Kernel records written.
        kernels: usize,
        /// Gradient records written.
        gradients: usize,
        /// Whether the file had a sealed declaration before.
        replaced: bool,
    },
}

/// FNV-1a 64 over the file's allocated sections: for each section with
/// `SHF_ALLOC`, in section-header order, its byte count in the file as 8
/// little-endian bytes (0 for `SHT_NOBITS`), then those bytes. Sealing
/// changes none of them; rebuilding the library changes them.
pub(crate) fn image_digest(file: &object::File<'_>) -> u64 {
    use object::{Object, ObjectSection, SectionFlags};
    const SHF_ALLOC: u64 = 2;
    let mut h = 0xcbf2_9ce4_8422_2325u64;
    let mut eat = |bytes: &[u8]| {
        for &b in bytes {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
    };
    for s in file.sections() {
        let alloc =
            matches!(s.flags(), SectionFlags::Elf { sh_flags } if sh_flags & SHF_ALLOC != 0);
        if !alloc {
            continue;
        }
        let data = if s.kind() == object::SectionKind::UninitializedData
            || s.kind() == object::SectionKind::UninitializedTls
        {
            &[][..]
        } else {
            s.data().unwrap_or(&[])
        };
        eat(&(data.len() as u64).to_le_bytes());
        eat(data);
    }
    h
}

/// One record in the manifest's record format, its CRC computed.
pub(crate) fn encode_record(v: &Value) -> Vec<u8> {
    let json = v.to_string();
    let mut out = opforge_abi::OPFORGE_MANIFEST_MAGIC.as_bytes().to_vec();
    out.extend_from_slice(&opforge_abi::OPFORGE_MANIFEST_FORMAT.to_le_bytes());
    out.extend_from_slice(&(json.len() as u32).to_le_bytes());
    out.extend_from_slice(&manifest::crc32(json.as_bytes()).to_le_bytes());
    out.extend_from_slice(json.as_bytes());
    out.resize(out.len().div_ceil(8) * 8, 0);
    out
}

/// Applies the sealed declaration of `file` (if it has one) to `m`, the
/// manifest read from its `opforge_manifest` section.
pub(crate) fn apply(m: &mut Manifest, file: &object::File<'_>) -> Result<()> {
    use object::{Object, ObjectSection};
    let Some(section) = file.section_by_name(SEALED_SECTION) else {
        return Ok(());
    };
    let path = m.path.clone();
    let in_section = |e: Status| {
        Status::new(
            e.code(),
            format!(
                "{} (in section {SEALED_SECTION}, written by `opforge lib seal`); run `opforge \
                 lib seal {}` again to replace it",
                e.message().replace("; rebuild the library", ""),
                path.display()
            ),
        )
    };
    if m.is_declared() {
        return Err(Status::failed_precondition(format!(
            "'{}' declares its ops in its manifest and also carries a sealed declaration \
             (section {SEALED_SECTION}); only libraries that register by code are sealed. \
             Rebuild the library",
            path.display()
        )));
    }
    let data = section.data().map_err(|e| {
        Status::data_loss(format!(
            "'{}': section {SEALED_SECTION} cannot be read ({e}); run `opforge lib seal` again",
            path.display()
        ))
    })?;
    let records = manifest::parse_records(&path, data, true).map_err(in_section)?;
    let c = manifest::collect(&path, records).map_err(in_section)?;
    if c.library.is_some() {
        return Err(in_section(Status::data_loss(format!(
            "'{}': the sealed declaration has a library record",
            path.display()
        ))));
    }
    let [(off, seal)] = c.seals.as_slice() else {
        return Err(in_section(Status::data_loss(format!(
            "'{}': the sealed declaration has {} seal records (there must be one, first)",
            path.display(),
            c.seals.len()
        ))));
    };
    let field = |v: &Value, key: &str| v.get(key).and_then(Value::as_str).map(str::to_string);
    let lib = seal.get("library").unwrap_or(&Value::Null);
    let (Some(name), Some(version), Some(hash), Some(image)) = (
        field(lib, "name"),
        field(lib, "version"),
        field(lib, "layout_hash"),
        field(seal, "image_fnv1a64"),
    ) else {
        return Err(in_section(Status::data_loss(format!(
            "'{}': the seal record at offset {off} lacks library.name, library.version, \
             library.layout_hash or image_fnv1a64",
            path.display()
        ))));
    };
    let l = &m.library;
    let want_hash = format!("{:016x}", l.abi.layout_hash);
    let want_image = format!("{:016x}", image_digest(file));
    if name != l.name || version != l.version || hash != want_hash || image != want_image {
        return Err(Status::failed_precondition(format!(
            "'{}': its sealed declaration (section {SEALED_SECTION}) was made for {name} \
             {version} (layout hash {hash}, image {image}), but the file is {} {} (layout hash \
             {want_hash}, image {want_image}): the library changed after it was sealed. Run \
             `opforge lib seal {}` again",
            path.display(),
            l.name,
            l.version,
            path.display()
        )));
    }
    m.ops = Some(c.ops);
    m.kernels = Some(c.kernels);
    m.gradients = Some(c.gradients);
    m.sealed = true;
    Ok(())
}

fn read_error(path: &Path, e: std::io::Error) -> Status {
    manifest::io_status("cannot read", path, &e)
}

/// What the library at `path` declares in its own manifest (a sealed
/// declaration ignored), after checking that [`seal`] can write the file:
/// errors as [`seal`]'s, without running anything. The caller seals it
/// unless [`Manifest::is_declared`].
pub fn sealable(path: impl AsRef<Path>) -> Result<Manifest> {
    let path = path.as_ref();
    let bytes = std::fs::read(path).map_err(|e| read_error(path, e))?;
    check_sealable(path, &bytes)
}

fn check_sealable(path: &Path, bytes: &[u8]) -> Result<Manifest> {
    let kind = object::FileKind::parse(bytes).map_err(|e| {
        Status::invalid_argument(format!(
            "'{}' is not a shared library this host can read ({e}); pass the .so an op \
             library build produced",
            path.display()
        ))
    })?;
    if !matches!(kind, object::FileKind::Elf32 | object::FileKind::Elf64) {
        return Err(Status::unimplemented(format!(
            "'{}' is a {kind:?} file; `opforge lib seal` writes ELF files only (sealing \
             {kind:?} libraries is not implemented)",
            path.display()
        )));
    }
    manifest::parse_unsealed(path, bytes)
}

/// Writes `records` (op, kernel and gradient records, as
/// [`Loader::declaration`](crate::Loader::declaration) gives them) into the
/// library at `path` as its sealed declaration, replacing an earlier one. A
/// library that declares its ops itself is left alone
/// ([`SealOutcome::AlreadyDeclared`]). The file is replaced atomically (a
/// new file in the same directory, renamed over it) and keeps its
/// permissions; a symlink is followed and its target replaced.
///
/// Errors: `NotFound` (no file), `InvalidArgument` (not an object file),
/// `Unimplemented` (Mach-O, PE or another non-ELF format), `FailedPrecondition`
/// / `DataLoss` from the manifest (as [`inspect`](crate::inspect)).
pub fn seal(path: impl AsRef<Path>, records: &[Value]) -> Result<SealOutcome> {
    let path = path.as_ref();
    let real = std::fs::canonicalize(path).map_err(|e| read_error(path, e))?;
    let bytes = std::fs::read(&real).map_err(|e| read_error(path, e))?;
    let m = check_sealable(path, &bytes)?;
    let file = object::File::parse(&*bytes).map_err(|e| Status::internal(e.to_string()))?;
    if m.is_declared() {
        return Ok(SealOutcome::AlreadyDeclared);
    }
    let replaced = {
        use object::Object;
        file.section_by_name(SEALED_SECTION).is_some()
    };
    let (mut ops, mut kernels, mut gradients) = (0, 0, 0);
    for r in records {
        match r.get("kind").and_then(Value::as_str) {
            Some("op") => ops += 1,
            Some("kernel") => kernels += 1,
            Some("gradient") => gradients += 1,
            other => {
                return Err(Status::invalid_argument(format!(
                    "a sealed declaration holds op, kernel and gradient records, not {other:?}"
                )))
            }
        }
    }
    let seal = json!({
        "kind": "seal",
        "library": {
            "name": m.library.name,
            "version": m.library.version,
            "layout_hash": format!("{:016x}", m.library.abi.layout_hash),
        },
        "image_fnv1a64": format!("{:016x}", image_digest(&file)),
        "sealed_by": concat!("opforge ", env!("CARGO_PKG_VERSION")),
    });
    let mut data = encode_record(&seal);
    for r in records {
        data.extend(encode_record(r));
    }
    let out = crate::elf_edit::set_section(&bytes, SEALED_SECTION, &data)
        .map_err(|e| e.prepend(format!("cannot seal '{}': ", path.display())))?;
    // What was written must read back as the declaration.
    let back = manifest::parse(path, &out)
        .map_err(|e| e.prepend("the sealed file does not read back (nothing was written): "))?;
    back.to_json()
        .map_err(|e| e.prepend("the sealed declaration is invalid (nothing was written): "))?;
    replace_file(&real, &out)?;
    Ok(SealOutcome::Sealed {
        ops,
        kernels,
        gradients,
        replaced,
    })
}

/// Replaces the file at `real` (a canonical path) by `bytes` atomically,
/// keeping its permissions.
fn replace_file(real: &Path, bytes: &[u8]) -> Result<()> {
    use std::io::Write;
    let dir = real.parent().unwrap_or(Path::new("."));
    let base = real
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let perms = std::fs::metadata(real)
        .map_err(|e| read_error(real, e))?
        .permissions();
    let tmp: PathBuf = dir.join(format!(".{base}.opforge-seal.{}.tmp", std::process::id()));
    let write_err = |what: &str, e: std::io::Error| {
        Status::failed_precondition(format!(
            "cannot seal '{}': {what} '{}' failed: {e} (the library is unchanged)",
            real.display(),
            tmp.display()
        ))
    };
    let result = (|| {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&tmp)
            .map_err(|e| write_err("creating", e))?;
        f.write_all(bytes).map_err(|e| write_err("writing", e))?;
        f.set_permissions(perms)
            .map_err(|e| write_err("setting the permissions of", e))?;
        f.sync_all().map_err(|e| write_err("syncing", e))?;
        drop(f);
        std::fs::rename(&tmp, real).map_err(|e| write_err("renaming", e))
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}
