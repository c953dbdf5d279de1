//! Resource variables' storage, shared by the kernels that read or update
//! a variable (TensorFlow keeps its `Var` in the framework,
//! `resource_var.h`, for the same reason): the `state` family's variable
//! ops and fused updates elsewhere, such as `linalg`'s SGD update whose
//! gradient is a matrix product.
//!
//! A variable is a [`Var`] resource in the runtime's
//! [`ResourceMgr`](opforge_core::resource::ResourceMgr), under the handle's
//! container ([`DEFAULT_CONTAINER`] when empty) and name.
//!
//! **Concurrency and copy-on-write.** A [`Var`] holds its value under a
//! read-write lock. A read takes the lock shared and returns a clone of the
//! tensor, which shares the variable's buffer (no copy). An update
//! ([`update`]) takes the lock exclusively and writes the buffer in place
//! only when no read result still shares it; if one does, it writes a fresh
//! buffer instead, so a tensor returned by a read never changes. Updates of
//! one variable are serialized; reads run in parallel.

use crate::args::fmt_shape;
use crate::cpu::elem::Num;
use crate::cpu::par::{par_zip, CHEAP_COST};
use opforge_core::kernel::OpKernelContext;
use opforge_core::resource::{Resource, ResourceHandle};
use opforge_core::shape_inference::{InferenceContext, ShapeHandle};
use opforge_core::{DataType, Result, Status, Tensor};
use std::sync::{Arc, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};

/// The container of handles whose `container` attr is empty (TensorFlow's
/// default container).
pub const DEFAULT_CONTAINER: &str = "localhost";

/// A resource variable: a dtype and, once assigned, a value.
pub struct Var {
    dtype: DataType,
    value: RwLock<Option<Tensor>>,
}

impl Var {
    /// An uninitialized variable of `dtype`.
    pub fn new(dtype: DataType) -> Var {
        Var {
            dtype,
            value: RwLock::new(None),
        }
    }

    /// A variable holding `value`.
    pub fn with_value(value: Tensor) -> Var {
        Var {
            dtype: value.dtype(),
            value: RwLock::new(Some(value)),
        }
    }

    /// The dtype of the variable's values.
    pub fn dtype(&self) -> DataType {
        self.dtype
    }

    /// The current value (sharing the variable's buffer), or `None` if the
    /// variable was never assigned.
    pub fn value(&self) -> Option<Tensor> {
        self.read().clone()
    }

    /// Whether the variable holds a value.
    pub fn is_initialized(&self) -> bool {
        self.read().is_some()
    }

    /// The value slot, locked shared.
    pub fn read(&self) -> RwLockReadGuard<'_, Option<Tensor>> {
        // A panic while the lock was held left a whole tensor or none
        // (values are replaced, never half-written through the guard).
        self.value.read().unwrap_or_else(PoisonError::into_inner)
    }

    /// The value slot, locked exclusively. A kernel that shards work while
    /// it holds this lock must use `ThreadPool::shard_isolated` or
    /// `chunks_isolated` (see [`Target::InPlace`]).
    pub fn write(&self) -> RwLockWriteGuard<'_, Option<Tensor>> {
        self.value.write().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Resource for Var {
    fn debug_string(&self) -> String {
        match &*self.read() {
            Some(t) => format!("Var({})", t.summarize(10)),
            None => format!("Var(dtype: {}, uninitialized)", self.dtype),
        }
    }
}

/// The `type_name` of variable handles.
pub fn var_type_name() -> &'static str {
    std::any::type_name::<Var>()
}

/// The handle in resource input `i`, checked to be one handle to a [`Var`]
/// on this device; an empty container means [`DEFAULT_CONTAINER`].
pub fn handle_input(ctx: &OpKernelContext<'_>, i: usize) -> Result<ResourceHandle> {
    let t = ctx.input(i);
    let handles = t.resource_handles()?;
    let [h] = handles else {
        return Err(Status::invalid_argument(format!(
            "The resource handle input must be a scalar, got a tensor of shape {}",
            fmt_shape(t.dims())
        )));
    };
    let mut h = h.clone();
    let device = ctx.device().name();
    if !h.device.is_empty() && h.device != device {
        return Err(Status::invalid_argument(format!(
            "Trying to access resource {} located in device {} from device {device}",
            h.name, h.device
        )));
    }
    if !h.type_name.is_empty() && h.type_name != var_type_name() {
        return Err(Status::invalid_argument(format!(
            "Trying to access a handle's resource using the wrong type. The handle points to a \
             resource (name '{}') of type '{}' but you are trying to access it with type '{}'",
            h.name,
            h.type_name,
            var_type_name()
        )));
    }
    if h.container.is_empty() {
        h.container = DEFAULT_CONTAINER.to_string();
    }
    Ok(h)
}

/// For shape functions: the variable's shape that the handle in input
/// `input` holds (its first shape and dtype), unknown without handle data.
pub fn handle_shape(c: &mut InferenceContext, input: usize) -> ShapeHandle {
    match c.input_handle_shapes_and_types(input) {
        Some([first, ..]) if first.dtype != DataType::Invalid => first.shape,
        _ => c.unknown_shape(),
    }
}

/// TensorFlow's error for reading or updating a variable with no value.
pub fn uninitialized(h: &ResourceHandle) -> Status {
    Status::failed_precondition(format!(
        "Error while reading resource variable {} from Container: {}. This could mean that the \
         variable was uninitialized.",
        h.name, h.container
    ))
}

/// TensorFlow's error for assigning a value of another dtype.
pub fn wrong_assign_dtype(expected: DataType, got: DataType) -> Status {
    Status::invalid_argument(format!(
        "Trying to assign variable with wrong dtype. Expected {expected} got {got}"
    ))
}

/// The variable an update kernel's input 0 names, which must exist and
/// have the dtype of input `value`.
pub fn to_update(ctx: &OpKernelContext<'_>, value: usize) -> Result<(ResourceHandle, Arc<Var>)> {
    let h = handle_input(ctx, 0)?;
    let var = ctx.resource_mgr().lookup::<Var>(&h.container, &h.name)?;
    let dtype = ctx.input(value).dtype();
    if var.dtype() != dtype {
        return Err(wrong_assign_dtype(var.dtype(), dtype));
    }
    Ok((h, var))
}

/// Where an update ([`update`]) writes the variable's new value.
pub enum Target<'a> {
    /// The variable's own buffer, which no other tensor shares: compute the
    /// new value in place. The variable's write lock is held, so shard only
    /// with `ThreadPool::shard_isolated`/`chunks_isolated`: a thread waiting
    /// in `shard` may run another node meanwhile (the executor shares the
    /// intra-op pool), and a node reading this variable would then wait
    /// forever for the lock its own thread holds.
    InPlace(&'a mut Tensor),
    /// A read result still shares the variable's buffer: compute the new
    /// value from `old` into `new` (a fresh buffer of the same dtype and
    /// shape). No lock is held; shard freely.
    Fresh {
        /// The value to update.
        old: &'a Tensor,
        /// The buffer for the new value.
        new: &'a mut Tensor,
    },
}

/// Replaces the variable's value by `apply`'s update of it (copy-on-write).
///
/// When no read result shares the variable's buffer, `apply` gets
/// [`Target::InPlace`] under the write lock. Otherwise (copy-on-write) it
/// gets [`Target::Fresh`] outside the lock, and the new value is swapped in
/// if no other update landed meanwhile, else recomputed from that update's
/// result. `check` validates the variable's current value first, each time.
pub fn update(
    ctx: &OpKernelContext<'_>,
    var: &Var,
    h: &ResourceHandle,
    check: impl Fn(&Tensor) -> Result<()>,
    apply: impl Fn(Target<'_>) -> Result<()>,
) -> Result<()> {
    let mut snapshot = {
        let mut slot = var.write();
        let current = slot.as_mut().ok_or_else(|| uninitialized(h))?;
        check(current)?;
        if current.bytes_mut().is_ok() {
            return apply(Target::InPlace(current));
        }
        current.clone()
    };
    loop {
        let mut fresh = ctx.allocate_temp(snapshot.dtype(), snapshot.shape().clone())?;
        apply(Target::Fresh {
            old: &snapshot,
            new: &mut fresh,
        })?;
        let mut slot = var.write();
        let current = slot.as_mut().ok_or_else(|| uninitialized(h))?;
        if current.shares_storage_with(&snapshot) {
            *current = fresh;
            return Ok(());
        }
        check(current)?;
        snapshot = current.clone();
    }
}

/// `var = f(var, value)` elementwise, for the update kernels
/// (`AssignAddVariableOp`, `ResourceApplyGradientDescent`, ...): in place
/// and sharded with `ThreadPool::chunks_isolated` under the write lock, or
/// into a fresh buffer when a read still shares the variable's (see
/// [`update`]). `check` validates the variable's current value first.
pub fn update_elementwise<T: Num>(
    ctx: &OpKernelContext<'_>,
    var: &Var,
    h: &ResourceHandle,
    value: &Tensor,
    check: impl Fn(&Tensor) -> Result<()>,
    f: impl Fn(T, T) -> T + Sync,
) -> Result<()> {
    let pool = ctx.thread_pool();
    let v = value.flat::<T>()?;
    update(ctx, var, h, check, |target| {
        match target {
            Target::InPlace(x) => {
                pool.chunks_isolated(x.flat_mut::<T>()?, CHEAP_COST * 8, |offset, x| {
                    let v = &v[offset..offset + x.len()];
                    x.iter_mut().zip(v).for_each(|(a, &b)| *a = f(*a, b));
                })
            }
            Target::Fresh { old, new } => par_zip(
                pool,
                old.flat::<T>()?,
                v,
                new.flat_mut::<T>()?,
                CHEAP_COST,
                &f,
            ),
        }
        Ok(())
    })
}
