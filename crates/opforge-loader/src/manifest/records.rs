//! The records of a manifest section: their framing (magic, format,
//! length, CRC), and what each kind of record holds, with the rules a
//! section must keep (one library record, each op, kernel and gradient
//! declared once) and messages that tell a damaged record from a missing
//! one.

use super::{GradientRecord, KernelRecord, LibraryRecord, Manifest, OpRecord};
use opforge_abi::{LibraryAbi, OPFORGE_MANIFEST_FORMAT, OPFORGE_MANIFEST_HEADER_SIZE};
use opforge_core::{DataType, Result, Status};
use serde_json::Value;
use std::path::Path;

/// A library's name from its file's: `libzero_out.so` and `zero_out.so`
/// are `zero_out` (the platform's prefix and every extension dropped).
pub(crate) fn name_from_file(path: &Path) -> String {
    let file = path
        .file_name()
        .map(|f| f.to_string_lossy().into_owned())
        .unwrap_or_default();
    let stem = file.split('.').next().unwrap_or_default();
    let prefix = std::env::consts::DLL_PREFIX;
    let stem = match stem.strip_prefix(prefix) {
        Some(s) if !prefix.is_empty() && !s.is_empty() => s,
        _ => stem,
    };
    stem.to_string()
}

/// Splits a manifest section into its records' JSON values (with offsets).
/// With `require_crc`, a record whose CRC is 0 (not computed) is corrupt.
pub(crate) fn parse_records(
    path: &Path,
    data: &[u8],
    require_crc: bool,
) -> Result<Vec<(usize, Value)>> {
    let corrupt = |offset: usize, what: String| {
        Status::data_loss(format!(
            "'{}': the opforge manifest is corrupt at offset {offset} of its section: {what}; \
             rebuild the library",
            path.display()
        ))
    };
    let mut out = Vec::new();
    let mut off = 0usize;
    while off < data.len() {
        if data[off] == 0 {
            off += 1;
            continue;
        }
        let Some(header) = data.get(off..off + OPFORGE_MANIFEST_HEADER_SIZE) else {
            return Err(corrupt(off, "a record header is cut short".into()));
        };
        if &header[0..4] != opforge_abi::OPFORGE_MANIFEST_MAGIC.as_bytes() {
            return Err(corrupt(
                off,
                format!("bad magic {:02x?} (expected \"OPFM\")", &header[0..4]),
            ));
        }
        let le = |b: &[u8]| u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
        let format = le(&header[4..8]);
        if format != OPFORGE_MANIFEST_FORMAT {
            return Err(corrupt(
                off,
                format!(
                    "record format {format}, this host reads format {OPFORGE_MANIFEST_FORMAT} \
                     (upgrade opforge if the library is newer)"
                ),
            ));
        }
        let len = le(&header[8..12]) as usize;
        let crc = le(&header[12..16]);
        let start = off + OPFORGE_MANIFEST_HEADER_SIZE;
        let Some(json) = start.checked_add(len).and_then(|end| data.get(start..end)) else {
            return Err(corrupt(
                off,
                format!(
                    "the record says {len} bytes of JSON but the section ends after {}",
                    data.len() - start.min(data.len())
                ),
            ));
        };
        if crc == 0 && require_crc {
            return Err(corrupt(off, "its CRC is 0 (not computed)".into()));
        }
        if crc != 0 && crc32(json) != crc {
            return Err(corrupt(
                off,
                format!(
                    "CRC mismatch (record {crc:08x}, computed {:08x})",
                    crc32(json)
                ),
            ));
        }
        let value: Value = serde_json::from_slice(json)
            .map_err(|e| corrupt(off, format!("its JSON does not parse ({e})")))?;
        if !value.is_object() {
            return Err(corrupt(off, "its JSON is not an object".into()));
        }
        out.push((off, value));
        off = (start + len).div_ceil(opforge_abi::OPFORGE_MANIFEST_ALIGN)
            * opforge_abi::OPFORGE_MANIFEST_ALIGN;
    }
    Ok(out)
}

/// CRC-32/ISO-HDLC (zlib's), bitwise: manifests are small.
pub(crate) fn crc32(bytes: &[u8]) -> u32 {
    let mut crc = 0xffff_ffffu32;
    for &b in bytes {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ 0xedb8_8320
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

/// The records of one section, sorted by kind.
pub(crate) struct Collected {
    pub(crate) library: Option<LibraryRecord>,
    pub(crate) ops: Vec<OpRecord>,
    pub(crate) kernels: Vec<KernelRecord>,
    pub(crate) gradients: Vec<GradientRecord>,
    /// Whether there was an op, kernel or gradient record.
    pub(crate) declared: bool,
    /// `seal` records (only a sealed declaration has one), with offsets.
    pub(crate) seals: Vec<(usize, Value)>,
    /// Records of kinds this host does not know (ignored, as the header
    /// says), with offsets: named when the library record is missing.
    pub(crate) unknown: Vec<(usize, Value)>,
}

pub(super) fn from_records(path: &Path, records: Vec<(usize, Value)>) -> Result<Manifest> {
    let c = collect(path, records)?;
    let Some(library) = c.library else {
        return Err(missing_library(path, &c.unknown));
    };
    Ok(Manifest {
        path: path.to_path_buf(),
        library,
        ops: c.declared.then_some(c.ops),
        kernels: c.declared.then_some(c.kernels),
        gradients: c.declared.then_some(c.gradients),
        sealed: false,
    })
}

/// What a record without a `kind` or of an unknown kind tells a reader:
/// records written by C carry no CRC (a compiler cannot compute it), so a
/// damaged byte in one is only found when its content makes no sense.
const DAMAGED: &str = "records written by C carry no CRC, so a byte changed in the file is \
                       only found here";

/// The keys of a record, for messages: `kind, name, version, abi`.
fn keys(v: &Value) -> String {
    match v {
        Value::Object(m) => m.keys().map(String::as_str).collect::<Vec<_>>().join(", "),
        _ => String::new(),
    }
}

/// The error of a manifest without a library record: a damaged library
/// record (a record of an unknown kind with the library record's keys), a
/// library for a newer opforge (records of kinds this host does not know),
/// or a library built without one.
fn missing_library(path: &Path, unknown: &[(usize, Value)]) -> Status {
    let kind = |v: &Value| v.get("kind").map(Value::to_string).unwrap_or_default();
    if let Some((off, v)) = unknown.iter().find(|(_, v)| v.get("abi").is_some()) {
        return Status::data_loss(format!(
            "'{}': the opforge manifest has no library record, but the record at offset {off} \
             of its section has the library record's keys ({}) under the kind {}, which no \
             opforge defines: the record is damaged ({DAMAGED}). Rebuild the library from its \
             sources",
            path.display(),
            keys(v),
            kind(v)
        ));
    }
    if !unknown.is_empty() {
        let list: Vec<String> = unknown
            .iter()
            .map(|(off, v)| format!("{} at offset {off}", kind(v)))
            .collect();
        return Status::failed_precondition(format!(
            "'{}': the opforge manifest has no library record, which version negotiation needs, \
             and records of kinds this host does not know ({}): the library was built for a \
             newer opforge, or its records are damaged ({DAMAGED}). Rebuild it against this \
             opforge's include/opforge/opforge.h (OPFORGE_LIBRARY) or opforge-plugin SDK",
            path.display(),
            list.join(", ")
        ));
    }
    Status::failed_precondition(format!(
        "'{}' has an opforge manifest without the library record, which version \
         negotiation needs; add OPFORGE_LIBRARY(\"name\", \"version\") (C/C++) or use the \
         opforge-plugin SDK, and rebuild",
        path.display()
    ))
}

/// Refuses a second record of the same op, kernel or gradient: `seen`
/// maps what a record declares to the offset of the first record of it.
fn refuse_twice<K: Ord>(
    path: &Path,
    seen: &mut std::collections::BTreeMap<K, usize>,
    key: K,
    off: usize,
    what: impl FnOnce() -> String,
) -> Result<()> {
    if let Some(first) = seen.insert(key, off) {
        return Err(Status::invalid_argument(format!(
            "'{}': the opforge manifest declares {} twice, in the records at offsets {first} \
             and {off} of its section; declare each once (one OPFORGE_MANIFEST_* record per op, \
             kernel and gradient), then rebuild the library",
            path.display(),
            what()
        )));
    }
    Ok(())
}

/// Reads every record of a section.
pub(crate) fn collect(path: &Path, records: Vec<(usize, Value)>) -> Result<Collected> {
    let bad = |offset: usize, what: String| {
        Status::data_loss(format!(
            "'{}': the opforge manifest record at offset {offset} is invalid: {what}; rebuild \
             the library",
            path.display()
        ))
    };
    let mut library = None;
    let (mut ops, mut kernels, mut gradients) = (Vec::new(), Vec::new(), Vec::new());
    let mut declared = false;
    let (mut seals, mut unknown) = (Vec::new(), Vec::new());
    let (mut op_at, mut kernel_at, mut gradient_at) = Default::default();
    for (off, v) in records {
        let Some(kind) = v.get("kind").and_then(Value::as_str) else {
            return Err(bad(
                off,
                format!(
                    "it has no \"kind\" string (its keys: {}); a record without one is damaged \
                     ({DAMAGED})",
                    keys(&v)
                ),
            ));
        };
        let r = Rec {
            v: &v,
            off,
            bad: &bad,
        };
        match kind {
            "library" => {
                if library.is_some() {
                    return Err(bad(
                        off,
                        "a second library record (there must be one)".into(),
                    ));
                }
                let abi = v.get("abi").ok_or_else(|| r.missing("abi", "an object"))?;
                let a = Rec {
                    v: abi,
                    off,
                    bad: &bad,
                };
                let hash = a.str("layout_hash")?;
                let layout_hash = u64::from_str_radix(&hash, 16).map_err(|_| {
                    bad(
                        off,
                        format!("abi.layout_hash '{hash}' is not 16 hex digits"),
                    )
                })?;
                library = Some(LibraryRecord {
                    // "": the library is named after its file, as
                    // TensorFlow-layer libraries built without
                    // OPFORGE_LIBRARY_NAME are (a missing key is damage).
                    name: match r.str("name")? {
                        n if n.is_empty() => name_from_file(path),
                        n => n,
                    },
                    version: r.str("version")?,
                    abi: LibraryAbi {
                        major: a.u32("major")?,
                        minor: a.u32("minor")?,
                        min_host_minor: a.u32("min_host_minor")?,
                        layout_hash,
                    },
                    json: v.clone(),
                });
            }
            "op" => {
                declared = true;
                let deprecation = match v.get("deprecation") {
                    None | Some(Value::Null) => None,
                    Some(d) => {
                        let d = Rec {
                            v: d,
                            off,
                            bad: &bad,
                        };
                        let version = i32::try_from(d.u32("version")?)
                            .map_err(|_| bad(off, "deprecation.version is too large".into()))?;
                        Some((version, d.opt_str("explanation")?.unwrap_or_default()))
                    }
                };
                let name = r.str("name")?;
                refuse_twice(path, &mut op_at, name.clone(), off, || {
                    format!("op '{name}'")
                })?;
                ops.push(OpRecord {
                    name,
                    attrs: r.strs("attrs")?,
                    inputs: r.strs("inputs")?,
                    outputs: r.strs("outputs")?,
                    control_outputs: r.strs("control_outputs")?,
                    flags: r.strs("flags")?,
                    doc: r.opt_str("doc")?.unwrap_or_default(),
                    deprecation,
                    shape_fn: match v.get("shape_fn") {
                        None | Some(Value::Null) => false,
                        Some(Value::Bool(b)) => *b,
                        Some(_) => return Err(bad(off, "'shape_fn' is not a boolean".into())),
                    },
                });
            }
            "kernel" => {
                declared = true;
                let mut constraints = Vec::new();
                match v.get("constraints") {
                    None | Some(Value::Null) => {}
                    Some(Value::Object(m)) => {
                        for (attr, types) in m {
                            let list = types.as_array().ok_or_else(|| {
                                bad(off, format!("constraints.{attr} is not a list"))
                            })?;
                            let mut dts = Vec::new();
                            for t in list {
                                let name = t.as_str().unwrap_or("");
                                let d = DataType::from_proto_name(name).ok_or_else(|| {
                                    bad(
                                        off,
                                        format!(
                                            "constraints.{attr}: '{t}' is not a dtype name \
                                             (DT_FLOAT, ...)"
                                        ),
                                    )
                                })?;
                                dts.push(d);
                            }
                            constraints.push((attr.clone(), dts));
                        }
                    }
                    Some(_) => return Err(bad(off, "'constraints' is not an object".into())),
                }
                let k = KernelRecord {
                    op: r.str("op")?,
                    device: r.str("device")?,
                    constraints,
                    json: v.clone(),
                };
                refuse_twice(path, &mut kernel_at, k.key(), off, || {
                    format!("the kernel {}", k.describe())
                })?;
                kernels.push(k);
            }
            "gradient" => {
                declared = true;
                let op = r.str("op")?;
                refuse_twice(path, &mut gradient_at, op.clone(), off, || {
                    format!("a gradient of op '{op}'")
                })?;
                gradients.push(GradientRecord {
                    op,
                    form: r.str("form")?,
                });
            }
            "seal" => seals.push((off, v.clone())),
            // Records of an unknown kind are ignored (header), but named
            // if the library record is missing.
            _ => unknown.push((off, v.clone())),
        }
    }
    Ok(Collected {
        library,
        ops,
        kernels,
        gradients,
        declared,
        seals,
        unknown,
    })
}

struct Rec<'a, F: Fn(usize, String) -> Status> {
    v: &'a Value,
    off: usize,
    bad: &'a F,
}

impl<F: Fn(usize, String) -> Status> Rec<'_, F> {
    fn opt_str(&self, key: &str) -> Result<Option<String>> {
        match self.v.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(_) => Err((self.bad)(self.off, format!("'{key}' is not a string"))),
        }
    }

    fn str(&self, key: &str) -> Result<String> {
        self.opt_str(key)?
            .ok_or_else(|| self.missing(key, "a string"))
    }

    /// `key` is missing: names the keys there are (a damaged key shows).
    fn missing(&self, key: &str, what: &str) -> Status {
        (self.bad)(
            self.off,
            format!(
                "'{key}' ({what}) is missing (the keys there: {}); if the record was written \
                 correctly, it is damaged ({DAMAGED})",
                keys(self.v)
            ),
        )
    }

    fn u32(&self, key: &str) -> Result<u32> {
        let Some(v) = self.v.get(key) else {
            return Err(self.missing(key, "an integer"));
        };
        v.as_u64()
            .and_then(|n| u32::try_from(n).ok())
            .ok_or_else(|| {
                (self.bad)(
                    self.off,
                    format!("'{key}' is {v}, not an integer from 0 to 4294967295"),
                )
            })
    }

    fn strs(&self, key: &str) -> Result<Vec<String>> {
        match self.v.get(key) {
            None | Some(Value::Null) => Ok(Vec::new()),
            Some(Value::Array(a)) => a
                .iter()
                .map(|s| {
                    s.as_str().map(str::to_string).ok_or_else(|| {
                        (self.bad)(self.off, format!("an element of '{key}' is not a string"))
                    })
                })
                .collect(),
            Some(_) => Err((self.bad)(self.off, format!("'{key}' is not a list"))),
        }
    }
}
