//! The `opforge` command line, as a library: the argument parser, one
//! module per command group, and [`main`], which the `opforge` binary
//! (`src/main.rs`) calls.
//!
//! ```text
//! opforge ops list                                  every registered op, sorted
//! opforge ops show NAME [--format text|pbtxt|json]  one op
//! opforge lib inspect FILE [--format json|text]     an op library's manifest, without loading it
//! opforge lib cycle FILE [--times N]                load and unload a library N times; memory
//! opforge lib seal FILE [--timeout SECS]            record the ops of a library that registers by code
//! opforge ops export [--format pbtxt|binary|json]   the whole OpList
//! opforge opdef build --jsonl FILE                  builder calls -> OpDefs, one JSON line each
//! opforge opdef check FILE.pbtxt                    validate a text-format OpList
//! opforge shape infer --jsonl FILE [--no-defaults]  shape functions on corpus-style cases
//! opforge graph run --graph FILE --request REQ    run a GraphDef: feeds/fetches/targets in JSON
//! opforge graph gradients --graph FILE --ys Y --xs X1,X2 --out FILE2   add a gradient subgraph
//! opforge exec --jsonl FILE                         run ops eagerly, one JSON line each
//! opforge compat check [--history DIR] [--strict]   registered ops vs. their recorded history
//! opforge compat update [--history DIR]             record new ops and compatible changes
//! opforge compat check-pair OLD NEW                 two text-format OpDefs -> {"compatible": ...}
//! opforge compat check-jsonl FILE                   batch of compatibility cases -> verdicts
//! ```
//!
//! Every command but `lib` takes `--library FILE` (repeatable): op
//! libraries loaded before the command runs.
//!
//! Output goes to stdout; errors go to stderr as `error: CODE: message`
//! with exit code 1. The commands are library functions taking their output
//! stream, so they can be tested without a process.
#![warn(missing_docs)]

use clap::{Parser, Subcommand, ValueEnum};
use opforge::eager::EagerContext;
use opforge::Registry;
use opforge::Status;
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

pub mod compat;
pub mod exec;
pub mod graph;
pub mod lib_cmd;
pub mod new_cmd;
pub mod opdef;
pub mod ops;
pub mod seal_cmd;
pub mod shape;
pub mod sysconfig;

/// `opforge`: define, inspect and check TensorFlow-compatible tensor ops.
#[derive(Debug, Parser)]
#[command(name = "opforge", version, about, long_about = None)]
pub struct Cli {
    /// Load this op library (a shared library built against
    /// include/opforge/opforge.h) before running the command; repeatable.
    /// Every command but `lib` takes it.
    #[arg(long = "library", value_name = "FILE", global = true)]
    pub libraries: Vec<PathBuf>,
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The top-level commands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Inspect the ops registered in this binary.
    Ops {
        /// What to do with them.
        #[command(subcommand)]
        command: OpsCommand,
    },
    /// Build and check OpDefs.
    Opdef {
        /// What to do.
        #[command(subcommand)]
        command: OpdefCommand,
    },
    /// Run ops eagerly, one JSON call per line.
    ///
    /// Each line: {"op": NAME, "node_def": {"attr": {NAME: AttrValue}}, "inputs": [TENSOR, ...]},
    /// where TENSOR is {"dtype": "DT_FLOAT", "shape": [2, 1], "values": [1, 2]}.
    /// Prints one JSON line per input line: {"outputs": [TENSOR, ...]} or
    /// {"error": {"code", "message"}}. All lines share one eager context, so
    /// variables persist from line to line.
    Exec {
        /// The JSON lines file (`-` for stdin).
        #[arg(long, value_name = "FILE")]
        jsonl: PathBuf,
    },
    /// Shape inference.
    Shape {
        /// What to do.
        #[command(subcommand)]
        command: ShapeCommand,
    },
    /// Check that ops change only in backward-compatible ways.
    ///
    /// The op history has one `<Op>.pbtxt` per op, every version oldest
    /// first (as TensorFlow's ops_history_v2).
    Compat {
        /// What to do.
        #[command(subcommand)]
        command: CompatCommand,
    },
    /// Run graphs and add gradients to them.
    Graph {
        /// What to do.
        #[command(subcommand)]
        command: GraphCommand,
    },
    /// Create an op-library crate in ./NAME: an example op with a kernel,
    /// a shape function, a gradient and tests (`cd NAME && cargo build
    /// --release` makes the library, `cargo test` passes).
    New {
        /// The crate's name (letters, digits, '_' and '-').
        name: String,
        /// The opforge-plugin SDK to depend on (default: the source tree
        /// this opforge was built from, else the SDK's published version).
        #[arg(long, value_name = "DIR")]
        sdk_path: Option<PathBuf>,
    },
    /// Op libraries (shared libraries built against include/opforge/opforge.h).
    Lib {
        /// What to do.
        #[command(subcommand)]
        command: LibCommand,
    },
}

/// `opforge lib ...`.
#[derive(Debug, Subcommand)]
pub enum LibCommand {
    /// Print a library's manifest (name, version, ABI, ops, kernels, shape
    /// functions, gradients) without loading it: no code of the file runs.
    /// Exit 1 if the file has no manifest, a corrupt or inconsistent one
    /// (an op declared twice), or one this host refuses to load (another
    /// ABI major, a newer minimum host minor, a wrong layout hash: the
    /// manifest is printed, then the reason loading would give).
    Inspect {
        /// The shared library.
        file: PathBuf,
        /// How to print it.
        #[arg(long, value_enum, default_value_t = InspectFormat::Json)]
        format: InspectFormat,
    },
    /// Load a library into this process, run its init and unload it (fini,
    /// dlclose), N times, running none of its ops; print the process's
    /// resident memory before the first cycle, after the first and after
    /// the last, and whether every unload unmapped the library. Exit 1 if a
    /// load or unload fails, or if the memory grew by more than
    /// --max-growth-kib from the first cycle to the last.
    Cycle {
        /// The shared library.
        file: PathBuf,
        /// How many times to load and unload it.
        #[arg(long, value_name = "N", default_value_t = 100)]
        times: u32,
        /// Fail if the resident memory grew by more than this many KiB
        /// between the first cycle and the last.
        #[arg(long, value_name = "KIB")]
        max_growth_kib: Option<u64>,
    },
    /// Print the compiler flags of a C or C++ op library, as TensorFlow's
    /// `tf.sysconfig.get_compile_flags()`: the include directories of
    /// opforge's headers (the C ABI's opforge/opforge.h and the TensorFlow
    /// C++ layer, tensorflow/core/framework/op_kernel.h and the rest) and of
    /// Eigen, and Eigen's alignment. TensorFlow's build line works with
    /// them: `c++ -std=c++17 -shared -fPIC -O2 zero_out.cc -o zero_out.so
    /// $(opforge lib cflags) $(opforge lib ldflags)`. The flags let the
    /// library unload again (see `--c`).
    Cflags {
        /// For a C library: the include directory only (the C++ flags that
        /// keep a C++ library unloadable are not C flags).
        #[arg(long = "c")]
        c: bool,
    },
    /// Print the linker flags of an op library, as TensorFlow's
    /// `tf.sysconfig.get_link_flags()`: none (an op library links no
    /// opforge library; everything crosses the C ABI), an empty line.
    Ldflags,
    /// Record in the file the ops, kernels, shape functions and gradients
    /// of a library that registers them by code (hand-written C, TensorFlow
    /// C++ sources: `lib inspect` prints "ops": null for it), so that `lib
    /// inspect` lists them without running it and loading checks init
    /// against them.
    ///
    /// The library's init runs once, in a child process with a fresh
    /// registry (a crash or a hang there is reported, not inherited). What
    /// it registered is written into the ELF section
    /// `opforge_manifest_sealed`, bound to the library's name, version,
    /// layout hash and allocated bytes; the file is replaced atomically and
    /// keeps its permissions. Sealing again replaces the earlier
    /// declaration. A library that declares its ops itself (Rust SDK, the
    /// header's declaration macros) is left as it is (exit 0). ELF only.
    Seal {
        /// The shared library (changed in place).
        file: PathBuf,
        /// Seconds the library's init may take in the child process.
        #[arg(long, value_name = "SECS", default_value_t = 60)]
        timeout: u64,
    },
    /// (Internal: the child process of `lib seal`.) Loads FILE into a fresh
    /// registry and writes what its init registered to OUT as JSON.
    #[command(hide = true)]
    SealProbe {
        /// The shared library.
        file: PathBuf,
        /// Where to write the result.
        #[arg(long, value_name = "OUT")]
        out: PathBuf,
    },
}

/// The formats of `opforge lib inspect`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum InspectFormat {
    /// One JSON object (the header's form).
    Json,
    /// A readable summary: the library, whether this host loads it, its
    /// ops (with their attrs), kernels and gradients.
    Text,
}

/// `opforge shape ...`.
#[derive(Debug, Subcommand)]
pub enum ShapeCommand {
    /// Run shape functions on cases in the format of TensorFlow's shape
    /// inference corpus ({"op", "node_def", "ins", "input_tensors"} per
    /// line). Prints {"outputs": "<shapes>"} or {"error": "<message>"} per line.
    #[command(long_about = shape::HELP)]
    Infer {
        /// The JSON lines file (`-` for stdin).
        #[arg(long, value_name = "FILE")]
        jsonl: PathBuf,
        /// Run each node as written: attrs it leaves out do not get the
        /// op's defaults (as TensorFlow's shape-function tests run a bare
        /// node).
        #[arg(long)]
        no_defaults: bool,
    },
}

/// `opforge compat ...`.
#[derive(Debug, Subcommand)]
pub enum CompatCommand {
    /// Compare every registered op with its recorded history.
    ///
    /// With --library, only the libraries' ops are compared, against the
    /// library's own history folder (e.g. `--history
    /// examples/zero_out/ops_history`); a recorded op the libraries no longer
    /// register is reported as removed.
    ///
    /// An up-to-date history prints one summary line. A compatible change or a
    /// new op is reported (run `opforge compat update`); an incompatible
    /// change, a changed or removed attr default, or a removed op lists
    /// each broken rule with advice and exits 1.
    Check {
        /// The op-history folder.
        #[arg(long, value_name = "DIR", default_value = compat::DEFAULT_HISTORY_DIR)]
        history: PathBuf,
        /// Also exit 1 if the history is out of date (new ops or compatible
        /// changes not recorded yet).
        #[arg(long)]
        strict: bool,
    },
    /// Record new ops and compatible changes in the op history.
    ///
    /// With --library, only the libraries' ops are recorded.
    ///
    /// The current version of each is appended to its file (or a new
    /// file is made). Writes nothing and exits 1 if
    /// any op fails `check`. Running it again changes nothing.
    Update {
        /// The op-history folder (created if missing).
        #[arg(long, value_name = "DIR", default_value = compat::DEFAULT_HISTORY_DIR)]
        history: PathBuf,
    },
    /// Compare two text-format OpDefs.
    ///
    /// An OpList gives its last op. Prints {"compatible": true} or {"compatible": false, "reasons": [...]},
    /// plus "default_changes": [...] if a default was removed or changed;
    /// exits 1 unless compatible with unchanged defaults.
    CheckPair {
        /// The old OpDef (`-` for stdin).
        old: PathBuf,
        /// The new OpDef (`-` for stdin).
        new: PathBuf,
    },
    /// Judge a batch of compatibility cases (JSON lines).
    ///
    /// One JSON object per line, in the format of TensorFlow's
    /// op_compatibility_cases.jsonl: {"name", "op", "old",
    /// "new" (builder calls [[KIND, SPEC], ...]; or "old_opdef"/"new_opdef",
    /// JSON OpDefs), optional "node_def" (a JSON NodeDef written for the old
    /// op)}. Prints one JSON line per case: {"name", "op", "compatible",
    /// "reasons", "attr_defaults_unchanged", "default_changes"} and, with a
    /// node_def, "validation" ("ok" or the error of the node, with the new
    /// op's defaults, against the new op), "types_match" (input/output dtypes
    /// unchanged; null if unknown) and "summary"; {"name", "error"} for a
    /// line that cannot be read.
    CheckJsonl {
        /// The JSON lines file (`-` for stdin).
        file: PathBuf,
    },
}

/// `opforge graph ...`.
#[derive(Debug, Subcommand)]
pub enum GraphCommand {
    /// Run a GraphDef. REQ.json: {"feeds": {"x:0": TENSOR}, "fetches": ["y:0"],
    /// "targets": []}; prints {"outputs": {"y:0": TENSOR}} or {"error": {...}}.
    Run {
        /// The GraphDef (.pb binary or .pbtxt text).
        #[arg(long, value_name = "FILE")]
        graph: PathBuf,
        /// The request JSON file.
        #[arg(long, value_name = "REQ")]
        request: PathBuf,
    },
    /// Add the gradients of the ys with respect to the xs and write the
    /// graph to --out; prints {"gradients": {"w:0": "gradients/...:0", ...}}.
    Gradients {
        /// The GraphDef (.pb binary or .pbtxt text).
        #[arg(long, value_name = "FILE")]
        graph: PathBuf,
        /// The outputs to differentiate, comma-separated (`loss:0`).
        #[arg(long)]
        ys: String,
        /// The outputs to differentiate with respect to, comma-separated.
        #[arg(long)]
        xs: String,
        /// Where to write the new graph (.pb binary, else text).
        #[arg(long, value_name = "FILE2")]
        out: PathBuf,
    },
}

/// `opforge ops ...`.
#[derive(Debug, Subcommand)]
pub enum OpsCommand {
    /// Print the name of every registered op, one per line, sorted.
    List,
    /// Print one op: its signature and documentation, or its OpDef.
    Show {
        /// The op's name, e.g. ZeroOut.
        name: String,
        /// How to print it.
        #[arg(long, value_enum, default_value_t = ShowFormat::Text)]
        format: ShowFormat,
    },
    /// Print every registered OpDef as one OpList, sorted by name.
    Export {
        /// The encoding (binary is the raw protobuf wire format).
        #[arg(long, value_enum, default_value_t = ExportFormat::Pbtxt)]
        format: ExportFormat,
    },
}

/// `opforge opdef ...`.
#[derive(Debug, Subcommand)]
pub enum OpdefCommand {
    /// Build OpDefs from builder calls, one JSON object per line:
    /// {"op": NAME, "calls": [[KIND, SPEC], ...], "flags": [...]}.
    /// Prints one JSON line per input line: {"op", "opdef"} or {"op", "error"}.
    Build {
        /// The JSON lines file (`-` for stdin).
        #[arg(long, value_name = "FILE")]
        jsonl: PathBuf,
    },
    /// Validate every op of a text-format OpList; exit 1 if any is invalid.
    Check {
        /// The OpList in protobuf text format (`-` for stdin).
        file: PathBuf,
    },
}

/// The formats of `opforge ops show`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum ShowFormat {
    /// The human-readable page: Python signature, docs, args, attrs, flags.
    Text,
    /// The OpDef in protobuf text format.
    Pbtxt,
    /// The OpDef in the proto3 JSON mapping.
    Json,
}

/// The formats of `opforge ops export`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum ExportFormat {
    /// Protobuf text format.
    Pbtxt,
    /// Protobuf binary wire format.
    Binary,
    /// The proto3 JSON mapping.
    Json,
}

/// Why a command stopped.
#[derive(Debug)]
pub enum CliError {
    /// A failure to report on stderr (exit code 1).
    Status(Status),
    /// The command already printed what failed (exit code 1).
    Failed,
    /// Writing the output failed.
    Io(io::Error),
}

impl From<Status> for CliError {
    fn from(status: Status) -> Self {
        CliError::Status(status)
    }
}

impl From<io::Error> for CliError {
    fn from(err: io::Error) -> Self {
        CliError::Io(err)
    }
}

/// The ops of the libraries a command loaded (`None`: no `--library`).
struct LibraryOps(Option<Vec<String>>);

impl LibraryOps {
    fn as_scope(&self) -> compat::Scope<'_> {
        match &self.0 {
            None => compat::Scope::All,
            Some(ops) => compat::Scope::Libraries(ops),
        }
    }
}

/// Runs one parsed command against `registry`, writing its output to `out`.
pub fn run(cli: &Cli, registry: &Arc<Registry>, out: &mut dyn Write) -> Result<(), CliError> {
    // The libraries stay loaded while the command runs (and until exit).
    let _loader = match &cli.command {
        Command::Lib { .. } if !cli.libraries.is_empty() => {
            return Err(Status::invalid_argument(
                "--library is not used by `opforge lib` commands, which take the library file \
                 as their argument: pass it there",
            )
            .into());
        }
        Command::Lib { .. } | Command::New { .. } => None,
        _ => Some(lib_cmd::load_all(registry, &cli.libraries)?),
    };
    // `compat` with --library covers the libraries' ops only.
    let scope = LibraryOps(
        _loader
            .as_ref()
            .filter(|_| !cli.libraries.is_empty())
            .map(|l| {
                l.libraries()
                    .iter()
                    .flat_map(|h| registry.ops_of(h.owner()))
                    .collect()
            }),
    );
    match &cli.command {
        Command::Ops { command } => match command {
            OpsCommand::List => ops::list(registry, out),
            OpsCommand::Show { name, format } => ops::show(registry, name, *format, out),
            OpsCommand::Export { format } => ops::export(registry, *format, out),
        },
        Command::Opdef { command } => match command {
            OpdefCommand::Build { jsonl } => {
                let input = open_input(jsonl)?;
                opdef::build_jsonl(io::BufReader::new(input), out)
            }
            OpdefCommand::Check { file } => {
                let mut text = String::new();
                open_input(file)?
                    .read_to_string(&mut text)
                    .map_err(|e| read_error(file, e))?;
                opdef::check(&text, out)
            }
        },
        Command::Shape {
            command: ShapeCommand::Infer { jsonl, no_defaults },
        } => {
            let defaults = match no_defaults {
                true => shape::Defaults::AsGiven,
                false => shape::Defaults::Add,
            };
            let input = io::BufReader::new(open_input(jsonl)?);
            shape::infer_jsonl(registry, defaults, input, out)
        }
        Command::Compat { command } => match command {
            CompatCommand::Check { history, strict } => {
                compat::check(registry, scope.as_scope(), history, *strict, out)
            }
            CompatCommand::Update { history } => {
                compat::update(registry, scope.as_scope(), history, out)
            }
            CompatCommand::CheckPair { old, new } => {
                let old_text = read_text(old)?;
                let new_text = read_text(new)?;
                compat::check_pair(&old_text, &new_text, out)
            }
            CompatCommand::CheckJsonl { file } => {
                compat::check_jsonl(io::BufReader::new(open_input(file)?), out)
            }
        },
        Command::Graph { command } => match command {
            GraphCommand::Run { graph, request } => graph::run(graph, request, out),
            GraphCommand::Gradients {
                graph,
                ys,
                xs,
                out: path,
            } => graph::add_gradients(graph, ys, xs, path, out),
        },
        Command::Lib {
            command: LibCommand::Inspect { file, format },
        } => lib_cmd::inspect(file, *format, out),
        Command::Lib {
            command:
                LibCommand::Cycle {
                    file,
                    times,
                    max_growth_kib,
                },
        } => lib_cmd::cycle(file, *times, *max_growth_kib, out),
        Command::Lib {
            command: LibCommand::Cflags { c },
        } => sysconfig::cflags(out, &mut io::stderr(), *c),
        Command::Lib {
            command: LibCommand::Ldflags,
        } => sysconfig::ldflags(out),
        Command::Lib {
            command: LibCommand::Seal { file, timeout },
        } => seal_cmd::seal(file, std::time::Duration::from_secs(*timeout), out),
        Command::Lib {
            command: LibCommand::SealProbe { file, out: result },
        } => seal_cmd::seal_probe(file, result),
        Command::New { name, sdk_path } => new_cmd::new_crate(name, sdk_path.as_deref(), out),
        Command::Exec { jsonl } => {
            // Kernels come from the global registries (those of the linked op libraries).
            Registry::global().verify()?;
            let input = open_input(jsonl)?;
            let ctx = EagerContext::default_cpu();
            exec::exec_jsonl(io::BufReader::new(input), &ctx, out)
        }
    }
}

/// Runs `f` on every line of a JSON-lines input and prints what it returns,
/// one line each, flushed as it goes (`None` prints nothing, for blank
/// lines). A line that is not UTF-8 reaches `f` as an error. Only an I/O
/// error stops the loop.
pub fn for_each_line(
    mut input: impl io::BufRead,
    out: &mut dyn Write,
    mut f: impl FnMut(Result<&str, Status>) -> Option<String>,
) -> Result<(), CliError> {
    let mut raw = Vec::new();
    let mut number = 0usize;
    loop {
        raw.clear();
        let read = input
            .read_until(b'\n', &mut raw)
            .map_err(|e| Status::unknown(format!("cannot read line {}: {e}", number + 1)))?;
        if read == 0 {
            return Ok(());
        }
        number += 1;
        let line = std::str::from_utf8(&raw).map_err(|e| {
            Status::invalid_argument(format!("line {number} is not valid UTF-8: {e}"))
        });
        if let Some(text) = f(line) {
            writeln!(out, "{text}")?;
            out.flush()?;
        }
    }
}

/// The whole text of `path` (`-` is stdin).
fn read_text(path: &Path) -> Result<String, Status> {
    let mut text = String::new();
    open_input(path)?
        .read_to_string(&mut text)
        .map_err(|e| read_error(path, e))?;
    Ok(text)
}

/// Opens `path` for reading (`-` is stdin).
fn open_input(path: &Path) -> Result<Box<dyn Read>, Status> {
    if path == Path::new("-") {
        return Ok(Box::new(io::stdin()));
    }
    let file = std::fs::File::open(path).map_err(|e| read_error(path, e))?;
    Ok(Box::new(file))
}

fn read_error(path: &Path, err: io::Error) -> Status {
    Status::io("read", path, &err)
}

/// The `opforge` binary: parses the arguments, links the standard op
/// library, checks the registry, runs the command and maps the outcome to
/// an exit code (0 success, 1 any error, including usage errors).
pub fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            return if e.use_stderr() {
                ExitCode::FAILURE
            } else {
                // --help and --version.
                ExitCode::SUCCESS
            };
        }
    };
    opforge::opforge_ops::link();
    let registry = Registry::global();
    if let Err(e) = registry.verify() {
        eprintln!("error: {e}");
        return ExitCode::FAILURE;
    }
    let stdout = io::stdout();
    let mut out = io::BufWriter::new(stdout.lock());
    let result = run(&cli, registry, &mut out).and_then(|()| out.flush().map_err(CliError::Io));
    match result {
        Ok(()) => ExitCode::SUCCESS,
        // The reader went away (`opforge ops list | head`): not an error.
        Err(CliError::Io(e)) if e.kind() == io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
        Err(CliError::Io(e)) => {
            eprintln!("error: cannot write the output: {e}");
            ExitCode::FAILURE
        }
        Err(CliError::Status(status)) => {
            // Flush what was printed before the error; it may be partial.
            let _ = out.flush();
            eprintln!("error: {status}");
            ExitCode::FAILURE
        }
        Err(CliError::Failed) => {
            let _ = out.flush();
            ExitCode::FAILURE
        }
    }
}
