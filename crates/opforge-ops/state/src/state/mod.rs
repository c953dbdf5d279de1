//! Resource variables, as TensorFlow 2.x keeps them: `VarHandleOp` makes a
//! handle (a `resource` scalar naming a container and a variable),
//! `AssignVariableOp` creates or replaces the variable's value,
//! `ReadVariableOp` reads it, `AssignAddVariableOp` / `AssignSubVariableOp`
//! update it in place, and `DestroyResourceOp` deletes it.
//!
//! A variable is a [`Var`] resource in the runtime's
//! [`ResourceMgr`](opforge_core::resource::ResourceMgr), under the handle's
//! container (`localhost` when empty, as TensorFlow's default container) and
//! name. It lives until it is destroyed or its manager is dropped: in eager
//! mode, as long as the [`EagerContext`](opforge_core::eager::EagerContext).
//!
//! **Names.** A `VarHandleOp` with a `shared_name` names that variable.
//! With an empty `shared_name` TensorFlow uses the node's name; here each
//! `VarHandleOp` *kernel* gets a process-unique name (`_AnonymousVar7`), so
//! the handles of different nodes never collide. An eager context caches
//! kernels by op and attrs, so two eager calls with the same attrs and an
//! empty `shared_name` return the same handle; pass a `shared_name` (or
//! TensorFlow's [`ANONYMOUS_NAME`], which makes a new name on every call)
//! for distinct variables.
//!
//! **Concurrency and copy-on-write.** A [`Var`] holds its value under a
//! read-write lock; reads share the variable's buffer and updates write it
//! in place only when no read result still shares it (see
//! [`opforge_ops_base::var`], where the storage lives so that fused
//! updates in other families use the same rules).

use opforge_core::kernel::{
    CreateKernel, KernelDefBuilder, OpKernel, OpKernelConstruction, OpKernelContext,
};
use opforge_core::proto::TensorShapeProto;
use opforge_core::resource::ResourceHandle;
use opforge_core::shape_inference::common::no_outputs;
use opforge_core::shape_inference::{InferenceContext, ShapeAndType};
use opforge_core::{
    dispatch, ensure, register_kernel, register_op, Code, DataType, OpDefBuilder, Result, Status,
    Tensor,
};
use opforge_ops_base::args::fmt_shape;
use opforge_ops_base::cpu::elem::Num;
use opforge_ops_base::types::NUMERIC_KERNEL_TYPES;
use opforge_ops_base::var::{
    self, handle_input, to_update, uninitialized, var_type_name, wrong_assign_dtype, Var,
    DEFAULT_CONTAINER,
};
use std::sync::atomic::{AtomicU64, Ordering};

/// TensorFlow's `ResourceHandle::ANONYMOUS_NAME`: a `VarHandleOp` with this
/// `shared_name` makes a handle with a new unique name on every run.
pub const ANONYMOUS_NAME: &str = "cd2c89b7-88b7-44c8-ad83-06c2a9158347";

/// A handle to variable `name` in `container` (empty = [`DEFAULT_CONTAINER`])
/// on `device`, declaring the variable's dtype and shape.
pub fn var_handle(
    device: &str,
    container: &str,
    name: &str,
    dtype: DataType,
    shape: TensorShapeProto,
) -> ResourceHandle {
    ResourceHandle {
        device: device.to_string(),
        container: if container.is_empty() {
            DEFAULT_CONTAINER.to_string()
        } else {
            container.to_string()
        },
        name: name.to_string(),
        type_name: var_type_name().to_string(),
        dtypes_and_shapes: vec![(dtype, shape)],
    }
}

static NEXT_ANONYMOUS: AtomicU64 = AtomicU64::new(0);

fn anonymous_name() -> String {
    format!(
        "_AnonymousVar{}",
        NEXT_ANONYMOUS.fetch_add(1, Ordering::Relaxed)
    )
}

/// `VarHandleOp`, with TensorFlow 2.21's OpDef.
pub fn var_handle_op() -> OpDefBuilder {
    OpDefBuilder::new("VarHandleOp")
        .output("resource: resource")
        .attr("container: string = ''")
        .attr("shared_name: string = ''")
        .attr("debug_name: string = ''")
        .attr("dtype: type")
        .attr("shape: shape")
        .attr("allowed_devices: list(string) = []")
        .stateful()
        .set_shape_fn(var_handle_shape)
        .doc(
            "Creates a handle to a Variable resource.\n\
             \n\
             The variable itself is created by the first AssignVariableOp through the\n\
             handle. `container` defaults to \"localhost\"; an empty `shared_name`\n\
             gives each kernel its own unique variable name. `dtype` and `shape`\n\
             describe the variable's values; `debug_name` and `allowed_devices`\n\
             are accepted and ignored.",
        )
}

/// `ReadVariableOp`, with TensorFlow 2.21's OpDef.
pub fn read_variable_op() -> OpDefBuilder {
    OpDefBuilder::new("ReadVariableOp")
        .input("resource: resource")
        .output("value: dtype")
        .attr("dtype: type")
        .stateful()
        .set_shape_fn(read_variable_shape)
        .doc(
            "Reads the value of a variable.\n\
             \n\
             The tensor returned shares the variable's memory until either is\n\
             written; later updates of the variable never change it (copy-on-write).\n\
             Fails if the variable does not exist or has another dtype.",
        )
}

/// `AssignVariableOp`, with TensorFlow 2.21's OpDef.
pub fn assign_variable_op() -> OpDefBuilder {
    OpDefBuilder::new("AssignVariableOp")
        .input("resource: resource")
        .input("value: dtype")
        .attr("dtype: type")
        .attr("validate_shape: bool = false")
        .stateful()
        .set_shape_fn(assign_shape)
        .doc(
            "Assigns a new value to a variable.\n\
             \n\
             Creates the variable on the first assignment. The value must have the\n\
             variable's dtype; with `validate_shape`, it must also have the shape of\n\
             the variable's current value.",
        )
}

/// `AssignAddVariableOp`, with TensorFlow 2.21's OpDef.
pub fn assign_add_variable_op() -> OpDefBuilder {
    OpDefBuilder::new("AssignAddVariableOp")
        .input("resource: resource")
        .input("value: dtype")
        .attr("dtype: type")
        .stateful()
        .set_shape_fn(assign_shape)
        .doc(
            "Adds a value to the current value of a variable.\n\
             \n\
             The value must have the variable's shape. Readers holding an earlier\n\
             value keep seeing it.",
        )
}

/// `AssignSubVariableOp`, with TensorFlow 2.21's OpDef.
pub fn assign_sub_variable_op() -> OpDefBuilder {
    OpDefBuilder::new("AssignSubVariableOp")
        .input("resource: resource")
        .input("value: dtype")
        .attr("dtype: type")
        .stateful()
        .set_shape_fn(assign_shape)
        .doc(
            "Subtracts a value from the current value of a variable.\n\
             \n\
             The value must have the variable's shape. Readers holding an earlier\n\
             value keep seeing it.",
        )
}

/// `ResourceApplyGradientDescent`, with TensorFlow 2.21's OpDef.
pub fn resource_apply_gradient_descent() -> OpDefBuilder {
    OpDefBuilder::new("ResourceApplyGradientDescent")
        .input("var: resource")
        .input("alpha: T")
        .input("delta: T")
        .attr("T: numbertype")
        .attr("use_locking: bool = false")
        .stateful()
        .set_shape_fn(apply_gradient_descent_shape)
        .doc(
            "Update '*var' by subtracting 'alpha' * 'delta' from it.\n\
             \n\
             `alpha` must be a scalar and `delta` must have the variable's shape. The\n\
             update is done in place under the variable's lock whatever `use_locking`\n\
             says (TensorFlow leaves the unlocked case undefined); readers holding an\n\
             earlier value keep seeing it.",
        )
}

/// TensorFlow's `ApplyGradientDescentShapeFn` for a resource variable:
/// `alpha` is a scalar and `delta` has the variable's shape (the shape its
/// handle holds, unknown without handle data).
fn apply_gradient_descent_shape(c: &mut InferenceContext) -> Result<()> {
    let var = var::handle_shape(c, 0);
    let alpha = c.input(1);
    c.with_rank(alpha, 0)?;
    let delta = c.input(2);
    c.merge(var, delta)?;
    Ok(())
}

/// `DestroyResourceOp`, with TensorFlow 2.21's OpDef.
pub fn destroy_resource_op() -> OpDefBuilder {
    OpDefBuilder::new("DestroyResourceOp")
        .input("resource: resource")
        .attr("ignore_lookup_error: bool = true")
        .stateful()
        .set_shape_fn(no_outputs)
        .doc(
            "Deletes the resource specified by the handle.\n\
             \n\
             All subsequent operations using the resource will result in a NotFound\n\
             error status. With `ignore_lookup_error`, deleting a resource that does\n\
             not exist is not an error.",
        )
}

register_op!(var_handle_op());
register_op!(read_variable_op());
register_op!(assign_variable_op());
register_op!(assign_add_variable_op());
register_op!(assign_sub_variable_op());
register_op!(destroy_resource_op());
register_op!(resource_apply_gradient_descent());

// ---- Shape functions (TensorFlow's resource_variable_ops.cc) ----

/// `VarHandleOp`: a scalar handle, holding a value of the `dtype` and
/// `shape` attrs.
fn var_handle_shape(c: &mut InferenceContext) -> Result<()> {
    let scalar = c.scalar();
    c.set_output(0, scalar);
    let dtype: DataType = c.get_attr("dtype")?;
    let shape: TensorShapeProto = c.get_attr("shape")?;
    let shape = c.make_shape_from_proto(&shape)?;
    c.set_output_handle_shapes_and_types(0, vec![ShapeAndType { shape, dtype }]);
    Ok(())
}

/// What resource input 0 holds: its handle data, checked against the
/// `dtype` attr, or an unknown shape (and dtype) when it has none
/// (TensorFlow's `ValidateVariableResourceHandle`).
fn variable_handle_data(c: &mut InferenceContext) -> Result<Vec<ShapeAndType>> {
    match c.input_handle_shapes_and_types(0) {
        Some(data) if !data.is_empty() => {
            let data = data.to_vec();
            let value_dtype: DataType = c.get_attr("dtype")?;
            if data[0].dtype != value_dtype {
                return Err(Status::invalid_argument(format!(
                    "Trying to read variable with wrong dtype. Expected {} got {value_dtype}",
                    data[0].dtype
                )));
            }
            Ok(data)
        }
        _ => {
            let shape = c.unknown_shape();
            Ok(vec![ShapeAndType {
                shape,
                dtype: DataType::Invalid,
            }])
        }
    }
}

/// `ReadVariableOp`: the shape of a `_shape` annotation if the node has
/// one, else the shape the handle holds (unknown without handle data); a
/// `variant` variable's nested handle data passes on.
fn read_variable_shape(c: &mut InferenceContext) -> Result<()> {
    if let Ok(p) = c.get_attr::<TensorShapeProto>("_shape") {
        let s = c.make_shape_from_proto(&p)?;
        c.set_output(0, s);
        return Ok(());
    }
    let data = variable_handle_data(c)?;
    c.set_output(0, data[0].shape);
    if data[0].dtype == DataType::Variant && data.len() > 1 {
        c.set_output_handle_shapes_and_types(0, data[1..].to_vec());
    }
    Ok(())
}

/// `AssignVariableOp`, `AssignAddVariableOp`, `AssignSubVariableOp`: no
/// outputs; the value's shape must merge with the shape the handle holds.
fn assign_shape(c: &mut InferenceContext) -> Result<()> {
    let data = variable_handle_data(c)?;
    let value = c.input(1);
    c.merge(data[0].shape, value)?;
    if data[0].dtype == DataType::Variant && data.len() > 1 {
        if let Some(value_data) = c.input_handle_shapes_and_types(1) {
            if value_data.len() != data.len() - 1 {
                return Err(Status::invalid_argument(format!(
                    "Incompatible handle variant shape_and_type size and input shape_and_type size: {} vs. {}",
                    data.len() - 1,
                    value_data.len()
                )));
            }
        }
    }
    Ok(())
}

struct VarHandleKernel {
    container: String,
    /// `None`: a new anonymous name on every run.
    name: Option<String>,
    dtype: DataType,
    shape: TensorShapeProto,
}

impl CreateKernel for VarHandleKernel {
    fn create(ctx: &OpKernelConstruction<'_>) -> Result<Self> {
        let container: String = ctx.get_attr("container")?;
        let shared_name: String = ctx.get_attr("shared_name")?;
        let name = match shared_name.as_str() {
            ANONYMOUS_NAME => None,
            "" => Some(anonymous_name()),
            _ => Some(shared_name),
        };
        Ok(VarHandleKernel {
            container,
            name,
            dtype: ctx.get_attr("dtype")?,
            shape: ctx.get_attr("shape")?,
        })
    }
}

impl OpKernel for VarHandleKernel {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let name = self.name.clone().unwrap_or_else(anonymous_name);
        let handle = var_handle(
            ctx.device().name(),
            &self.container,
            &name,
            self.dtype,
            self.shape.clone(),
        );
        ctx.set_output(0, Tensor::from_resource_handles(&[], vec![handle])?)
    }
}

register_kernel!(KernelDefBuilder::new("VarHandleOp"), VarHandleKernel);

struct ReadVariableKernel {
    dtype: DataType,
}

impl CreateKernel for ReadVariableKernel {
    fn create(ctx: &OpKernelConstruction<'_>) -> Result<Self> {
        Ok(ReadVariableKernel {
            dtype: ctx.get_attr("dtype")?,
        })
    }
}

impl OpKernel for ReadVariableKernel {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let h = handle_input(ctx, 0)?;
        let var = ctx
            .resource_mgr()
            .lookup::<Var>(&h.container, &h.name)
            .map_err(|e| {
                Status::failed_precondition(format!(
                    "Could not find variable {}. This could mean that the variable has been \
                     deleted. In TF1, it can also mean the variable is uninitialized. Debug info: \
                     container={}, status error message={}",
                    h.name,
                    h.container,
                    e.message()
                ))
            })?;
        if var.dtype() != self.dtype {
            return Err(Status::invalid_argument(format!(
                "Trying to read variable with wrong dtype. Expected {} got {}",
                self.dtype,
                var.dtype()
            )));
        }
        // The clone shares the buffer; the lock is released before returning.
        let value = var.value().ok_or_else(|| uninitialized(&h))?;
        ctx.set_output(0, value)
    }
}

register_kernel!(KernelDefBuilder::new("ReadVariableOp"), ReadVariableKernel);

struct AssignVariableKernel {
    validate_shape: bool,
}

impl CreateKernel for AssignVariableKernel {
    fn create(ctx: &OpKernelConstruction<'_>) -> Result<Self> {
        Ok(AssignVariableKernel {
            validate_shape: ctx.get_attr("validate_shape")?,
        })
    }
}

impl OpKernel for AssignVariableKernel {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let h = handle_input(ctx, 0)?;
        // Taking the input lets a uniquely owned value become the variable's
        // buffer, to be updated in place later without a copy.
        let value = ctx.take_input(1);
        let dtype = value.dtype();
        // The handle declares the variable's dtype (VarHandleOp's `dtype`).
        if let Some(&(declared, _)) = h.dtypes_and_shapes.first() {
            if declared != DataType::Invalid && declared != dtype {
                return Err(wrong_assign_dtype(declared, dtype));
            }
        }
        let var = ctx
            .resource_mgr()
            .lookup_or_create(&h.container, &h.name, || Ok(Var::new(dtype)))?;
        if var.dtype() != dtype {
            return Err(wrong_assign_dtype(var.dtype(), dtype));
        }
        let mut slot = var.write();
        if self.validate_shape {
            if let Some(current) = slot.as_ref() {
                if current.shape() != value.shape() {
                    return Err(Status::invalid_argument(format!(
                        "Trying to assign to variable with tensor with wrong shape. Expected {} got {}",
                        fmt_shape(current.dims()),
                        fmt_shape(value.dims())
                    )));
                }
            }
        }
        *slot = Some(value);
        Ok(())
    }
}

register_kernel!(
    KernelDefBuilder::new("AssignVariableOp"),
    AssignVariableKernel
);

/// The element types the update kernels support: every numeric dtype.
/// (TensorFlow's `TF_CALL_NUMBER_TYPES` without the quantized types).
macro_rules! dispatch_update {
    ($ctx:expr, $dt:expr, $T:ident => $body:expr) => {
        dispatch!(
            $dt,
            $T => $body,
            [Float, Double, Half, BFloat16, Int8, Int16, Int32, Int64, UInt8, UInt16, UInt32,
             UInt64, Complex64, Complex128],
            Err(Status::unimplemented(format!(
                "{} does not support {} variables",
                $ctx.op_def().name,
                $dt
            )))
        )
    };
}

struct AssignUpdateKernel {
    sub: bool,
}

impl OpKernel for AssignUpdateKernel {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let (h, var) = to_update(ctx, 1)?;
        let value = ctx.input(1);
        let check = |current: &Tensor| {
            ensure!(
                current.shape() == value.shape(),
                InvalidArgument,
                "Cannot update variable with shape {} using a Tensor with shape {}, shapes must be equal.",
                fmt_shape(current.dims()),
                fmt_shape(value.dims())
            );
            Ok(())
        };
        let sub = self.sub;
        dispatch_update!(ctx, value.dtype(), T => var::update_elementwise::<T>(ctx, &var, &h, value, check, |a, b| {
            if sub { a.sub(b) } else { a.add(b) }
        }))
    }
}

/// `ResourceApplyGradientDescent`: `var -= alpha * delta` (TensorFlow's
/// SGD update, as `tf.keras.optimizers.SGD` applies it) in one pass.
struct ApplyGradientDescentKernel;

impl OpKernel for ApplyGradientDescentKernel {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let (h, var) = to_update(ctx, 2)?;
        let (alpha, delta) = (ctx.input(1), ctx.input(2));
        ensure!(
            alpha.rank() == 0,
            InvalidArgument,
            "alpha is not a scalar: {}",
            fmt_shape(alpha.dims())
        );
        let check = |current: &Tensor| {
            ensure!(
                current.shape() == delta.shape(),
                InvalidArgument,
                "var and delta do not have the same shape{} {}",
                fmt_shape(current.dims()),
                fmt_shape(delta.dims())
            );
            Ok(())
        };
        dispatch_update!(ctx, delta.dtype(), T => {
            let a = alpha.flat::<T>()?[0];
            var::update_elementwise::<T>(ctx, &var, &h, delta, check, |v, d| v.sub(a.mul(d)))
        })
    }
}

register_kernel!(
    KernelDefBuilder::new("AssignAddVariableOp").type_constraint_list("dtype", NUMERIC_KERNEL_TYPES),
    fn = |_| Ok(Box::new(AssignUpdateKernel { sub: false }))
);
register_kernel!(
    KernelDefBuilder::new("AssignSubVariableOp").type_constraint_list("dtype", NUMERIC_KERNEL_TYPES),
    fn = |_| Ok(Box::new(AssignUpdateKernel { sub: true }))
);
register_kernel!(
    KernelDefBuilder::new("ResourceApplyGradientDescent").type_constraint_list("T", NUMERIC_KERNEL_TYPES),
    fn = |_| Ok(Box::new(ApplyGradientDescentKernel))
);

struct DestroyResourceKernel {
    ignore_lookup_error: bool,
}

impl CreateKernel for DestroyResourceKernel {
    fn create(ctx: &OpKernelConstruction<'_>) -> Result<Self> {
        Ok(DestroyResourceKernel {
            ignore_lookup_error: ctx.get_attr("ignore_lookup_error")?,
        })
    }
}

impl OpKernel for DestroyResourceKernel {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        // Variables are the only resource type opforge has; a handle of
        // another type fails the type check with a clear message.
        let h = handle_input(ctx, 0)?;
        match ctx.resource_mgr().delete::<Var>(&h.container, &h.name) {
            Err(e) if e.code() == Code::NotFound && self.ignore_lookup_error => Ok(()),
            other => other,
        }
    }
}

register_kernel!(
    KernelDefBuilder::new("DestroyResourceOp"),
    DestroyResourceKernel
);

// ---- Gradients ----

/// `ReadVariableOp`'s gradient is TensorFlow's pass-through (`_ReadGrad`):
/// the value's gradient is returned for the resource input. Gradients do not
/// flow into `resource` values, so what training uses is the gradient with
/// respect to the *read value* (as `GradientTape.watch` on a variable does).
/// The ops without inputs or outputs a gradient could flow through are
/// registered not differentiable.
mod gradients {
    use opforge_core::{register_gradient, register_not_differentiable};
    use opforge_ops_base::grad::identity_grad;

    register_gradient!("ReadVariableOp", identity_grad);
    register_not_differentiable!(
        "VarHandleOp",
        "AssignVariableOp",
        "AssignAddVariableOp",
        "AssignSubVariableOp",
        "DestroyResourceOp",
        "ResourceApplyGradientDescent",
    );
}

#[cfg(test)]
mod tests;
