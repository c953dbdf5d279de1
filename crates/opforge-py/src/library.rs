//! Op libraries loaded at run time: `_C.load_library`, and what
//! `opforge.unload_op_library` needs (`_C.release_library`,
//! `_C.unload_library`, and the note errors about an unloaded op get).

use crate::errors;
use crate::exec::context;
use crate::fast::Plan;
use opforge::Registry;
use opforge_loader::{LibraryHandle, Loader};
use pyo3::prelude::*;
use std::sync::{Arc, Mutex, OnceLock, PoisonError, Weak};

/// The process's op-library loader (into the global registry), made on
/// first use.
static LOADER: OnceLock<Loader> = OnceLock::new();

/// The process's op-library loader.
fn loader() -> &'static Loader {
    LOADER.get_or_init(|| Loader::new(Registry::global().clone()))
}

/// The op library loaded from `path` (the path it was loaded from, a
/// symlink, or a copy); `NotFoundError` if none is.
fn loaded_library(py: Python<'_>, path: &std::path::Path) -> PyResult<LibraryHandle> {
    errors::check(py, loader().find(path), None)
}

/// The ops whose cached kernels may be `h`'s: its own ops, and the ops it
/// registered kernels for.
fn kernel_ops(h: &LibraryHandle) -> Vec<String> {
    let mut ops = Registry::global().ops_of(h.owner());
    for record in loader().declaration(h).unwrap_or_default() {
        if record["kind"] == "kernel" {
            if let Some(op) = record["op"].as_str() {
                ops.push(op.to_string());
            }
        }
    }
    ops.sort();
    ops.dedup();
    ops
}

/// The plans of every op function made so far (dead ones pruned as the
/// list grows), so that an unload can make them let go of the library's
/// kernels.
static PLANS: Mutex<Vec<Weak<Plan>>> = Mutex::new(Vec::new());

/// Remembers the plan of a new op function (see [`PLANS`]).
pub fn remember_plan(plan: &Arc<Plan>) {
    let mut plans = PLANS.lock().unwrap_or_else(PoisonError::into_inner);
    if plans.len() >= 64 && plans.len().is_power_of_two() {
        plans.retain(|p| p.strong_count() > 0);
    }
    plans.push(Arc::downgrade(plan));
}

/// Makes every live op function let go of the prepared kernels it holds
/// for the ops in `ops`.
fn release_plans(ops: &[String]) {
    let plans: Vec<Arc<Plan>> = {
        let mut plans = PLANS.lock().unwrap_or_else(PoisonError::into_inner);
        plans.retain(|p| p.strong_count() > 0);
        plans
            .iter()
            .filter_map(Weak::upgrade)
            .filter(|p| ops.iter().any(|op| op == p.op()))
            .collect()
    };
    // Released without the lock held.
    for p in plans {
        p.release();
    }
}

/// Makes opforge's own caches let go of what they hold of `h`: the eager
/// context's kernels (its shared cache and this thread's recent kernels)
/// and the prepared calls of op functions and Tensor operators.
fn release_caches(h: &LibraryHandle) {
    let ops = kernel_ops(h);
    context().release_kernels(&ops);
    release_plans(&ops);
    crate::fast::release_operator_kernels(&ops);
}

/// One row of [`release_library`]: `(name, version, path, ops,
/// kernel_instances, foreign_outputs)`.
type LibraryHolders = (String, String, String, Vec<String>, usize, usize);

/// `_C.release_library(path)`: the op library loaded from `path` (the
/// path it was loaded from, a symlink, or a copy), after opforge's own
/// caches let go of it (the eager context's kernels, the prepared calls of
/// op functions): `(name, version, path, ops, kernel_instances,
/// foreign_outputs)`, what still holds it (kernel instances: sessions of
/// graphs, and other threads' recent kernels until their next call;
/// outputs its kernels made in its own memory). `NotFoundError` if no
/// library is loaded from `path`.
#[pyfunction]
pub fn release_library(py: Python<'_>, path: std::path::PathBuf) -> PyResult<LibraryHolders> {
    errors::guard(py, "release_library", || {
        let h = loaded_library(py, &path)?;
        release_caches(&h);
        let holders = errors::check(py, loader().holders(&h), None)?;
        Ok((
            h.name().to_string(),
            h.version().to_string(),
            h.path().display().to_string(),
            Registry::global().ops_of(h.owner()),
            holders.kernel_instances,
            holders.foreign_outputs,
        ))
    })
}

/// `_C.unload_library(path)`: unloads the op library loaded from `path`
/// (opforge's caches let go of it first): its ops, kernels, shape
/// functions and gradients leave the registry now; it is finalised and
/// unmapped once nothing holds it. Returns `(ops, unmapped, note)`: the
/// ops removed, whether it was unmapped now, and why not.
#[pyfunction]
pub fn unload_library(
    py: Python<'_>,
    path: std::path::PathBuf,
) -> PyResult<(Vec<String>, bool, Option<String>)> {
    errors::guard(py, "unload_library", || {
        let h = loaded_library(py, &path)?;
        release_caches(&h);
        let report = errors::check(py, loader().unload(&h), None)?;
        Ok((report.ops, report.unmapped, report.note))
    })
}

/// What an error about op `op` not being registered can add when the op
/// was in an op library `unload_op_library` unloaded (and no library
/// loaded since registers it): which library, and how to get it back.
pub fn unloaded_note(status: &opforge::Status) -> Option<String> {
    if status.code() != opforge::Code::NotFound {
        return None;
    }
    let rest = status.message().split_once("Op type not registered '")?.1;
    let op = rest.split_once('\'')?.0;
    let library = LOADER.get()?.unloaded_library_of(op)?;
    Some(format!(
        " (op '{op}' was in op library {library}, which opforge.unload_op_library unloaded; \
         load it again with opforge.load_op_library)"
    ))
}

/// `_C.load_library(path)`: loads an op library into the global registry
/// (a second load of the same file is the same library). Returns `(name,
/// version, path, ops)`.
#[pyfunction]
pub fn load_library(
    py: Python<'_>,
    path: std::path::PathBuf,
) -> PyResult<(String, String, String, Vec<String>)> {
    errors::guard(py, "load_library", || {
        let h = errors::check(py, py.detach(|| loader().load(&path)), None)?;
        let ops = Registry::global().ops_of(h.owner());
        Ok((
            h.name().to_string(),
            h.version().to_string(),
            h.path().display().to_string(),
            ops,
        ))
    })
}

/// `_C.compile_flags(include, lang_c=False)`: the compiler flags of an op
/// library built against the headers in `include`, and how to install
/// Eigen when it is missing (or None) (`opforge_loader::build_flags`, the
/// same flags as `opforge lib cflags`).
#[pyfunction]
#[pyo3(signature = (include, lang_c = false))]
pub fn compile_flags(include: std::path::PathBuf, lang_c: bool) -> (Vec<String>, Option<String>) {
    opforge_loader::build_flags::compile_flags(&include, lang_c)
}
