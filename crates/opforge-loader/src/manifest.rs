//! The manifest: what a library declares, read from the file without
//! loading it (the header's "The manifest" section). Nothing here maps the
//! file for execution or runs any of its code: the bytes are read with
//! `std::fs::read` and parsed with the `object` crate.

use opforge_abi::{LibraryAbi, OPFORGE_MANIFEST_FORMAT, OPFORGE_MANIFEST_HEADER_SIZE};
use opforge_core::proto::OpDef;
use opforge_core::{DataType, OpDefBuilder, Result, Status};
use serde_json::{json, Map, Value};
use std::path::{Path, PathBuf};

/// The section names the manifest lives in: ELF, Mach-O (`__DATA,__opforge_mf`)
/// and PE (`.opfmf$b`, merged by the linker into `.opfmf`).
const SECTION_NAMES: &[&str] = &["opforge_manifest", "__opforge_mf", ".opfmf"];

/// The library record (mandatory).
#[derive(Clone, Debug, PartialEq)]
pub struct LibraryRecord {
    /// The library's name.
    pub name: String,
    /// The library's version.
    pub version: String,
    /// The ABI fields negotiation reads.
    pub abi: LibraryAbi,
    /// The whole record as it is in the file (unknown keys included).
    pub json: Value,
}

/// An op record: the spec strings of `OpforgeOpDef`.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct OpRecord {
    /// The op's name.
    pub name: String,
    /// Attr specs.
    pub attrs: Vec<String>,
    /// Input specs.
    pub inputs: Vec<String>,
    /// Output specs.
    pub outputs: Vec<String>,
    /// Control output names.
    pub control_outputs: Vec<String>,
    /// Flag names (`stateful`, ...).
    pub flags: Vec<String>,
    /// The documentation.
    pub doc: String,
    /// `(version, explanation)` if deprecated.
    pub deprecation: Option<(i32, String)>,
    /// Whether init registers a shape function for it.
    pub shape_fn: bool,
}

impl OpRecord {
    /// The builder registration would use for this record.
    pub fn builder(&self) -> Result<OpDefBuilder> {
        let mut b = OpDefBuilder::new(self.name.clone());
        for a in &self.attrs {
            b = b.attr(a.clone());
        }
        for i in &self.inputs {
            b = b.input(i.clone());
        }
        for o in &self.outputs {
            b = b.output(o.clone());
        }
        for c in &self.control_outputs {
            b = b.control_output(c.clone());
        }
        b = self.apply_flags(b)?;
        if !self.doc.is_empty() {
            b = b.doc(self.doc.clone());
        }
        if let Some((v, e)) = &self.deprecation {
            b = b.deprecated(*v, e.clone());
        }
        Ok(b)
    }

    /// Sets the record's flags on `b`.
    pub(crate) fn apply_flags(&self, mut b: OpDefBuilder) -> Result<OpDefBuilder> {
        for f in &self.flags {
            b = match f.as_str() {
                "stateful" => b.stateful(),
                "commutative" => b.commutative(),
                "aggregate" => b.aggregate(),
                "allows_uninitialized_input" => b.allows_uninitialized_input(),
                "distributed_communication" => b.distributed_communication(),
                other => {
                    return Err(Status::unimplemented(format!(
                        "op '{}' has the flag '{other}', which this host does not know; \
                         upgrade opforge",
                        self.name
                    )));
                }
            };
        }
        Ok(b)
    }

    /// The OpDef registration would register.
    pub fn op_def(&self) -> Result<OpDef> {
        self.builder()?.finalize()
    }

    /// This op as a manifest record (`{"kind":"op", ...}`), the form the
    /// manifest and a sealed declaration store.
    pub fn to_record(&self) -> Value {
        let mut m = Map::new();
        m.insert("kind".into(), json!("op"));
        m.insert("name".into(), json!(self.name));
        m.insert("attrs".into(), json!(self.attrs));
        m.insert("inputs".into(), json!(self.inputs));
        m.insert("outputs".into(), json!(self.outputs));
        if !self.control_outputs.is_empty() {
            m.insert("control_outputs".into(), json!(self.control_outputs));
        }
        m.insert("flags".into(), json!(self.flags));
        if !self.doc.is_empty() {
            m.insert("doc".into(), json!(self.doc));
        }
        if let Some((version, explanation)) = &self.deprecation {
            m.insert(
                "deprecation".into(),
                json!({"version": version, "explanation": explanation}),
            );
        }
        m.insert("shape_fn".into(), json!(self.shape_fn));
        Value::Object(m)
    }
}

/// A kernel record.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct KernelRecord {
    /// The op.
    pub op: String,
    /// The device type.
    pub device: String,
    /// `(attr, dtypes)` in the record's order.
    pub constraints: Vec<(String, Vec<DataType>)>,
    /// The whole record as it is in the file.
    pub json: Value,
}

impl KernelRecord {
    /// What two records of the same kernel share: [`kernel_key`], the
    /// label and the priority.
    fn key(&self) -> (KernelKey, String, i64) {
        let label = self.json.get("label").and_then(Value::as_str);
        let priority = self.json.get("priority").and_then(Value::as_i64);
        (
            kernel_key(&self.op, &self.device, &self.constraints),
            label.unwrap_or_default().to_string(),
            priority.unwrap_or_default(),
        )
    }

    /// `ZeroOut on CPU, T in [DT_FLOAT, DT_INT32]`, for messages and
    /// summaries.
    pub fn describe(&self) -> String {
        describe_kernel(&self.op, &self.device, &self.constraints)
    }
}

/// A kernel as a declaration and init's registrations are compared: its
/// op, its device, and its type constraints sorted (by attr, dtypes by
/// number).
pub(crate) type KernelKey = (String, String, Vec<(String, Vec<i32>)>);

/// The [`KernelKey`] of a kernel.
pub(crate) fn kernel_key(
    op: &str,
    device: &str,
    constraints: &[(String, Vec<DataType>)],
) -> KernelKey {
    let mut c: Vec<(String, Vec<i32>)> = constraints
        .iter()
        .map(|(a, t)| {
            let mut t: Vec<i32> = t.iter().map(|d| *d as i32).collect();
            t.sort_unstable();
            (a.clone(), t)
        })
        .collect();
    c.sort();
    (op.to_string(), device.to_string(), c)
}

/// `ZeroOut on CPU, T in [DT_FLOAT, DT_INT32]`.
pub(crate) fn describe_kernel(
    op: &str,
    device: &str,
    constraints: &[(String, Vec<DataType>)],
) -> String {
    let mut out = format!("{op} on {device}");
    for (attr, types) in constraints {
        let names: Vec<&str> = types.iter().map(|d| d.proto_name()).collect();
        out.push_str(&format!(", {attr} in [{}]", names.join(", ")));
    }
    out
}

/// A gradient record.
#[derive(Clone, Debug, PartialEq)]
pub struct GradientRecord {
    /// The forward op.
    pub op: String,
    /// `fn`, `nodes` or `not_differentiable`.
    pub form: String,
}

/// What a library file declares.
#[derive(Clone, Debug, PartialEq)]
pub struct Manifest {
    /// The file it was read from.
    pub path: PathBuf,
    /// The library record.
    pub library: LibraryRecord,
    /// The op records, `None` if the file declares nothing (a library that
    /// registers by code).
    pub ops: Option<Vec<OpRecord>>,
    /// The kernel records (`None` as `ops`).
    pub kernels: Option<Vec<KernelRecord>>,
    /// The gradient records (`None` as `ops`).
    pub gradients: Option<Vec<GradientRecord>>,
    /// Whether the op, kernel and gradient records come from the file's
    /// sealed declaration (`opforge lib seal`, section
    /// `opforge_manifest_sealed`) rather than from its manifest.
    pub sealed: bool,
}

impl Manifest {
    /// Whether the file declares what init registers: at least one op,
    /// kernel or gradient record in its manifest, or a sealed declaration.
    pub fn is_declared(&self) -> bool {
        self.ops.is_some()
    }

    /// Version negotiation (step 1 of the header's "Version negotiation"),
    /// from the manifest alone: `Ok` if this host may load the library,
    /// else `FailedPrecondition` naming both versions and the remedy, the
    /// error [`Loader::load`](crate::Loader::load) gives before any code of
    /// the library runs (and `opforge lib inspect` exits with).
    pub fn check_host(&self) -> Result<()> {
        use opforge_abi::Refusal;
        opforge_abi::negotiate(&self.library.abi).map_err(|refusal| {
            let remedy = match refusal {
                Refusal::MajorMismatch { library, host } if library > host => {
                    "upgrade opforge to a version with that ABI major, or rebuild the library \
                     against this opforge's include/opforge/opforge.h"
                }
                Refusal::HostTooOld { .. } => {
                    "upgrade opforge, or rebuild the library with a lower OPFORGE_MIN_HOST_MINOR \
                     (checking newer slots with OPFORGE_HAS_SLOT)"
                }
                _ => "rebuild the library against this opforge's include/opforge/opforge.h",
            };
            Status::failed_precondition(format!(
                "op library '{}' ({} {}) cannot be loaded: {refusal}; {remedy}",
                self.path.display(),
                self.library.name,
                self.library.version
            ))
        })
    }

    /// The JSON object `opforge lib inspect` prints (the header's form):
    /// `name`, `version`, `abi`, `ops` (OpDefs in proto3 JSON),
    /// `kernels`, `shape_fns`, `gradients`, then `sealed` (whether the
    /// lists come from a sealed declaration) and `path`.
    pub fn to_json(&self) -> Result<Value> {
        let ops = match &self.ops {
            None => Value::Null,
            Some(ops) => {
                let mut out = Vec::new();
                for o in ops {
                    let def = o.op_def().map_err(|e| {
                        e.prepend(format!(
                            "{}: the manifest's op record '{}' is not a valid op: ",
                            self.path.display(),
                            o.name
                        ))
                    })?;
                    out.push(opforge_core::proto::to_json(&def));
                }
                Value::Array(out)
            }
        };
        let kernels = match &self.kernels {
            None => Value::Null,
            Some(ks) => Value::Array(
                ks.iter()
                    .map(|k| {
                        let mut m = match &k.json {
                            Value::Object(m) => m.clone(),
                            _ => Map::new(),
                        };
                        m.remove("kind");
                        let mut c = Map::new();
                        for (attr, types) in &k.constraints {
                            c.insert(
                                attr.clone(),
                                Value::Array(types.iter().map(|d| json!(d.proto_name())).collect()),
                            );
                        }
                        let mut out = Map::new();
                        out.insert("op".into(), json!(k.op));
                        out.insert("device".into(), json!(k.device));
                        out.insert("constraints".into(), Value::Object(c));
                        for (key, v) in m {
                            out.entry(key).or_insert(v);
                        }
                        Value::Object(out)
                    })
                    .collect(),
            ),
        };
        let shape_fns = match &self.ops {
            None => Value::Null,
            Some(ops) => Value::Array(
                ops.iter()
                    .filter(|o| o.shape_fn)
                    .map(|o| json!(o.name))
                    .collect(),
            ),
        };
        let gradients = match &self.gradients {
            None => Value::Null,
            Some(gs) => Value::Array(
                gs.iter()
                    .map(|g| json!({"op": g.op, "form": g.form}))
                    .collect(),
            ),
        };
        let abi = &self.library.abi;
        Ok(json!({
            "name": self.library.name,
            "version": self.library.version,
            "abi": {
                "major": abi.major,
                "minor": abi.minor,
                "min_host_minor": abi.min_host_minor,
            },
            "ops": ops,
            "kernels": kernels,
            "shape_fns": shape_fns,
            "gradients": gradients,
            "sealed": self.sealed,
            "path": self.path.display().to_string(),
        }))
    }
}

/// Reads the manifest of the library at `path` without loading it: no code
/// of the file runs. `NotFound` if the file does not exist,
/// `InvalidArgument` if it is not an object file, `FailedPrecondition` if it
/// has no manifest or no library record, `DataLoss` if a record is corrupt.
pub fn inspect(path: impl AsRef<Path>) -> Result<Manifest> {
    let path = path.as_ref();
    let bytes = std::fs::read(path).map_err(|e| {
        let code = if e.kind() == std::io::ErrorKind::NotFound {
            opforge_core::Code::NotFound
        } else {
            opforge_core::Code::FailedPrecondition
        };
        Status::new(
            code,
            format!("cannot read op library '{}': {e}", path.display()),
        )
    })?;
    parse(path, &bytes)
}

/// [`inspect`] over bytes already read (`path` is for messages).
pub fn parse(path: &Path, bytes: &[u8]) -> Result<Manifest> {
    parse_with(path, bytes, true)
}

/// [`parse`], ignoring a sealed declaration (section
/// `opforge_manifest_sealed`): what the file's own manifest declares.
pub fn parse_unsealed(path: &Path, bytes: &[u8]) -> Result<Manifest> {
    parse_with(path, bytes, false)
}

fn parse_with(path: &Path, bytes: &[u8], sealed: bool) -> Result<Manifest> {
    use object::{Object, ObjectSection};
    let file = object::File::parse(bytes).map_err(|e| {
        Status::invalid_argument(format!(
            "'{}' is not a shared library this host can read ({e}); pass the .so/.dylib/.dll \
             an op library build produced",
            path.display()
        ))
    })?;
    let section = file
        .sections()
        .find(|s| s.name().is_ok_and(|n| SECTION_NAMES.contains(&n)));
    let Some(section) = section else {
        return Err(Status::failed_precondition(format!(
            "'{}' has no opforge manifest (no section 'opforge_manifest'): it is not an opforge \
             op library, or it was built without OPFORGE_LIBRARY(...) (C/C++) or the \
             opforge-plugin SDK (Rust); add the library record and rebuild it",
            path.display()
        )));
    };
    let data = section.data().map_err(|e| {
        Status::data_loss(format!(
            "'{}': the manifest section cannot be read ({e}); the file is damaged, rebuild it",
            path.display()
        ))
    })?;
    let records = parse_records(path, data, false)?;
    let mut m = from_records(path, records)?;
    if sealed {
        crate::seal::apply(&mut m, &file)?;
    }
    Ok(m)
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

fn from_records(path: &Path, records: Vec<(usize, Value)>) -> Result<Manifest> {
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
                    name: r.str("name")?,
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

#[cfg(test)]
mod tests {
    use super::*;

    fn record(json: &str) -> Vec<u8> {
        let mut v = b"OPFM".to_vec();
        v.extend_from_slice(&1u32.to_le_bytes());
        v.extend_from_slice(&(json.len() as u32).to_le_bytes());
        v.extend_from_slice(&crc32(json.as_bytes()).to_le_bytes());
        v.extend_from_slice(json.as_bytes());
        while v.len() % 8 != 0 {
            v.push(0);
        }
        v
    }

    const LIB: &str = r#"{"kind":"library","name":"x","version":"1","abi":{"major":1,"minor":0,"min_host_minor":0,"layout_hash":"6ca0052a81b1895f"}}"#;

    #[test]
    fn crc_is_zlibs() {
        assert_eq!(crc32(b"123456789"), 0xcbf4_3926);
    }

    #[test]
    fn records_parse_with_padding_and_unknown_kinds() {
        let mut data = vec![0u8; 16];
        data.extend(record(LIB));
        data.extend(record(r#"{"kind":"future","x":1}"#));
        data.extend(record(
            r#"{"kind":"op","name":"A","inputs":["x: int32"],"outputs":["y: int32"],"shape_fn":true}"#,
        ));
        let m = from_records(
            Path::new("f"),
            parse_records(Path::new("f"), &data, false).unwrap(),
        )
        .unwrap();
        assert_eq!(m.library.name, "x");
        // LIB is a 1.0 library record.
        assert_eq!(
            Some(m.library.abi.layout_hash),
            opforge_abi::known_layout_hash(1, 0)
        );
        assert_eq!(m.ops.as_ref().unwrap()[0].op_def().unwrap().name, "A");
        let j = m.to_json().unwrap();
        assert_eq!(j["shape_fns"], json!(["A"]));
        assert_eq!(j["kernels"], json!([]));
    }

    #[test]
    fn corrupt_records_are_data_loss_naming_the_offset() {
        let mut data = record(LIB);
        let n = data.len();
        data[n - 20] ^= 0x55; // inside the JSON: the CRC no longer matches
        let e = parse_records(Path::new("f"), &data, false).unwrap_err();
        assert_eq!(e.code(), opforge_core::Code::DataLoss);
        assert!(e.message().contains("offset 0"), "{}", e.message());
        let mut data = record(LIB);
        data[0] = b'X';
        let e = parse_records(Path::new("f"), &data, false).unwrap_err();
        assert!(e.message().contains("bad magic"), "{}", e.message());
        let data = &record(LIB)[..40];
        let e = parse_records(Path::new("f"), data, false).unwrap_err();
        assert!(e.message().contains("section ends"), "{}", e.message());
        let e = from_records(Path::new("f"), vec![]).unwrap_err();
        assert_eq!(e.code(), opforge_core::Code::FailedPrecondition);
    }

    fn parsed(records: &[&str]) -> Result<Manifest> {
        let data: Vec<u8> = records.iter().flat_map(|r| record(r)).collect();
        from_records(
            Path::new("f"),
            parse_records(Path::new("f"), &data, false).unwrap(),
        )
    }

    #[test]
    fn a_kernel_declared_twice_is_refused() {
        let k = r#"{"kind":"kernel","op":"A","device":"CPU","constraints":{"T":["DT_FLOAT","DT_INT32"]}}"#;
        // The same constraints in another order are the same kernel.
        let k2 = r#"{"kind":"kernel","op":"A","device":"CPU","constraints":{"T":["DT_INT32","DT_FLOAT"]}}"#;
        let e = parsed(&[LIB, k, k2]).unwrap_err();
        assert_eq!(e.code(), opforge_core::Code::InvalidArgument);
        assert!(
            e.message().contains(
                "declares the kernel A on CPU, T in [DT_INT32, DT_FLOAT] twice, in the records \
                 at offsets 144 and 248"
            ),
            "{}",
            e.message()
        );
        // Another label is another kernel.
        let k3 = r#"{"kind":"kernel","op":"A","device":"CPU","label":"x","constraints":{"T":["DT_INT32","DT_FLOAT"]}}"#;
        assert_eq!(parsed(&[LIB, k, k3]).unwrap().kernels.unwrap().len(), 2);
    }

    #[test]
    fn records_of_unknown_kinds_are_named_when_the_library_record_is_missing() {
        let e = parsed(&[r#"{"kind":"future","x":1}"#]).unwrap_err();
        assert_eq!(e.code(), opforge_core::Code::FailedPrecondition);
        assert!(
            e.message()
                .contains(r#"kinds this host does not know ("future" at offset 0)"#),
            "{}",
            e.message()
        );
        assert!(
            !e.message().contains("add OPFORGE_LIBRARY"),
            "{}",
            e.message()
        );
        // Known records only: the library record is missing, add it.
        let e = parsed(&[r#"{"kind":"op","name":"A"}"#]).unwrap_err();
        assert!(
            e.message().contains("add OPFORGE_LIBRARY"),
            "{}",
            e.message()
        );
        // A record without a kind is damaged.
        let e = parsed(&[LIB, r#"{"name":"A"}"#]).unwrap_err();
        assert_eq!(e.code(), opforge_core::Code::DataLoss);
        assert!(e.message().contains("at offset 144"), "{}", e.message());
        assert!(e.message().contains("(its keys: name)"), "{}", e.message());
    }

    #[test]
    fn an_abi_field_out_of_range_names_its_value() {
        let lib = LIB.replace(r#""minor":0"#, r#""minor":-1"#);
        let e = parsed(&[&lib]).unwrap_err();
        assert!(
            e.message()
                .contains("'minor' is -1, not an integer from 0 to 4294967295"),
            "{}",
            e.message()
        );
    }

    #[test]
    fn non_object_files_are_invalid_argument() {
        let e = parse(Path::new("f"), b"not an elf").unwrap_err();
        assert_eq!(e.code(), opforge_core::Code::InvalidArgument);
    }
}
