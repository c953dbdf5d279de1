//! The manifest: what a library declares, read from the file without
//! loading it (the header's "The manifest" section). Nothing here maps the
//! file for execution or runs any of its code: the bytes are read with
//! `std::fs::read` and parsed with the `object` crate.

use opforge_abi::LibraryAbi;
use opforge_core::proto::OpDef;
use opforge_core::{DataType, OpDefBuilder, Result, Status};
use serde_json::{json, Map, Value};
use std::path::{Path, PathBuf};

mod records;
use records::from_records;
pub(crate) use records::{collect, crc32, parse_records};
#[cfg(test)]
mod tests;

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
    let bytes = std::fs::read(path).map_err(|e| io_status("cannot read op library", path, &e))?;
    parse(path, &bytes)
}

/// "`doing` 'PATH': ERROR": `NotFound` if the file does not exist, else
/// `FailedPrecondition`.
pub(crate) fn io_status(doing: &str, path: &Path, e: &std::io::Error) -> Status {
    let code = if e.kind() == std::io::ErrorKind::NotFound {
        opforge_core::Code::NotFound
    } else {
        opforge_core::Code::FailedPrecondition
    };
    Status::new(code, format!("{doing} '{}': {e}", path.display()))
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
