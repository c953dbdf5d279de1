//! `opforge._C`: the native half of the `opforge` Python package (glue
//! only: the runtime is the Rust crates). The pure-Python layer in
//! `python/opforge/` builds the user-facing API on it: dtypes, error
//! classes, generated op functions, `load_op_library`.
//!
//! Entry points never let a Rust panic reach Python as pyo3's
//! `PanicException`: [`errors::guard`] turns one into
//! `opforge.errors.InternalError`.
#![warn(missing_docs)]

use pyo3::prelude::*;

/// The extension's Rust allocations go to mimalloc: eager calls allocate
/// small blocks (a result's buffer header, the call's tensor vector), and a
/// recording `GradientTape` keeps thousands of them alive, where glibc's
/// malloc leaves its per-thread cache for slower paths. Memory crosses no
/// allocator boundary: what opforge allocates it frees (numpy views of a
/// tensor keep the tensor, and op libraries free their own allocations).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

mod attrs;
mod convert;
mod custom;
mod errors;
mod exec;
mod fast;
mod grad;
mod graph;
mod graph_grad;
mod hooks;
mod library;
mod pykernel;
mod run;
mod tape;
mod tensor;
mod vectorcall;

/// The module `opforge._C`.
#[pymodule]
#[pyo3(name = "_C")]
fn opforge_c(m: &Bound<'_, PyModule>) -> PyResult<()> {
    opforge::opforge_ops::link();
    if let Err(e) = opforge::Registry::global().verify() {
        return Err(pyo3::exceptions::PyRuntimeError::new_err(format!(
            "opforge's op registry failed its startup check: {e}"
        )));
    }
    m.add_class::<tensor::PyTensor>()?;
    m.add_class::<tape::Tape>()?;
    m.add_class::<graph::PyGraph>()?;
    m.add_function(wrap_pyfunction!(graph::graph_def_to_text, m)?)?;
    m.add_function(wrap_pyfunction!(graph::graph_def_to_bytes, m)?)?;
    m.add_function(wrap_pyfunction!(graph::graph_def_nodes, m)?)?;
    m.add_function(wrap_pyfunction!(graph_grad::graph_gradients, m)?)?;
    m.add_class::<fast::OpFunction>()?;
    fast::enable_vectorcall(m.py())?;
    m.add_function(wrap_pyfunction!(fast::set_eager_fast_path, m)?)?;
    m.add_function(wrap_pyfunction!(fast::eager_fast_path, m)?)?;
    m.add_function(wrap_pyfunction!(fast::set_recording_tapes, m)?)?;
    m.add_function(wrap_pyfunction!(hooks::set_hooks, m)?)?;
    m.add_function(wrap_pyfunction!(errors::set_error_classes, m)?)?;
    m.add_function(wrap_pyfunction!(convert::from_numpy, m)?)?;
    m.add_function(wrap_pyfunction!(convert::from_bytes, m)?)?;
    m.add_function(wrap_pyfunction!(convert::from_strings, m)?)?;
    m.add_function(wrap_pyfunction!(exec::op_defs_json, m)?)?;
    m.add_function(wrap_pyfunction!(exec::op_names, m)?)?;
    m.add_function(wrap_pyfunction!(exec::python_signature, m)?)?;
    m.add_function(wrap_pyfunction!(exec::python_params, m)?)?;
    m.add_function(wrap_pyfunction!(exec::python_docstring, m)?)?;
    m.add_function(wrap_pyfunction!(exec::snake_case, m)?)?;
    m.add_function(wrap_pyfunction!(exec::op_list_bytes, m)?)?;
    m.add_function(wrap_pyfunction!(exec::execute, m)?)?;
    m.add_function(wrap_pyfunction!(exec::graph_call, m)?)?;
    m.add_function(wrap_pyfunction!(library::load_library, m)?)?;
    m.add_function(wrap_pyfunction!(library::release_library, m)?)?;
    m.add_function(wrap_pyfunction!(library::unload_library, m)?)?;
    m.add_function(wrap_pyfunction!(library::compile_flags, m)?)?;
    m.add_function(wrap_pyfunction!(grad::register_gradient, m)?)?;
    m.add_function(wrap_pyfunction!(grad::not_differentiable, m)?)?;
    m.add_function(wrap_pyfunction!(exec::registry_generation, m)?)?;
    m.add_class::<pykernel::KernelCall>()?;
    m.add_class::<pykernel::LentBuffer>()?;
    m.add_function(wrap_pyfunction!(pykernel::register_python_op, m)?)?;
    m.add_function(wrap_pyfunction!(pykernel::python_kernels_shutdown, m)?)?;
    m.add_function(wrap_pyfunction!(pykernel::python_kernel_plans_changed, m)?)?;
    m.add_function(wrap_pyfunction!(custom::set_custom_training, m)?)?;
    m.add_class::<custom::CustomCaller>()?;
    custom::enable_vectorcall(m.py())?;
    Ok(())
}
