//! Static registrations: what `register_op!`, `register_kernel!`,
//! `register_gradient!` and `register_op_attr!` submit to [`inventory`],
//! run into [`Registry::global`](super::Registry::global) on first use.

use crate::kernel::KernelRegistration;
use crate::op_attr::ErasedAttr;
use crate::OpDefBuilder;

/// What one static registration registers.
#[derive(Clone, Copy, Debug)]
pub enum StaticKind {
    /// An op (with the per-op attributes its builder carries).
    Op(fn() -> OpDefBuilder),
    /// A kernel.
    Kernel(fn() -> KernelRegistration),
    /// A per-op attribute of op `op`.
    Attr {
        /// The op.
        op: &'static str,
        /// Makes the value.
        make: fn() -> ErasedAttr,
    },
}

/// One static registration, made by a `register_*!` macro next to the code
/// and collected by [`inventory`].
#[derive(Clone, Copy, Debug)]
pub struct StaticRegistration {
    pub(crate) kind: StaticKind,
    pub(crate) file: &'static str,
    pub(crate) line: u32,
}

impl StaticRegistration {
    /// A registration of `kind`, written at `file:line`.
    pub const fn new(kind: StaticKind, file: &'static str, line: u32) -> Self {
        StaticRegistration { kind, file, line }
    }

    /// An op registration.
    pub const fn op(build: fn() -> OpDefBuilder, file: &'static str, line: u32) -> Self {
        StaticRegistration::new(StaticKind::Op(build), file, line)
    }

    /// A kernel registration.
    pub const fn kernel(build: fn() -> KernelRegistration, file: &'static str, line: u32) -> Self {
        StaticRegistration::new(StaticKind::Kernel(build), file, line)
    }

    /// A per-op attribute registration.
    pub const fn attr(
        op: &'static str,
        make: fn() -> ErasedAttr,
        file: &'static str,
        line: u32,
    ) -> Self {
        StaticRegistration::new(StaticKind::Attr { op, make }, file, line)
    }

    /// What it registers.
    pub fn kind(&self) -> StaticKind {
        self.kind
    }

    /// The source file of the registration.
    pub fn file(&self) -> &'static str {
        self.file
    }

    /// The line of the registration in [`file`](Self::file).
    pub fn line(&self) -> u32 {
        self.line
    }

    /// `file:line`.
    pub fn location(&self) -> String {
        format!("{}:{}", self.file, self.line)
    }
}

inventory::collect!(StaticRegistration);

/// Registers an op statically, next to its code: the argument is an
/// expression that evaluates to an [`OpDefBuilder`]. The op (with the
/// per-op attributes the builder carries, such as its shape function) is
/// added to [`Registry::global`](crate::registry::Registry::global) when
/// that is first used, if the build's
/// [selective registration](crate::registry::OPS_TO_REGISTER) includes it.
///
/// The expression is evaluated inside a closure without captures, so it may
/// only use constants and calls.
///
/// ```
/// use opforge_core::{register_op, OpDefBuilder};
///
/// register_op!(OpDefBuilder::new("MyDocOp")
///     .input("x: float")
///     .output("y: float")
///     .doc("Returns its input."));
/// ```
///
/// A registration that fails (a bad spec, or a different op under a taken
/// name) does not panic: it is reported by
/// [`Registry::verify`](crate::registry::Registry::verify).
#[macro_export]
macro_rules! register_op {
    ($builder:expr $(,)?) => {
        $crate::inventory::submit! {
            $crate::registry::StaticRegistration::op(|| $builder, file!(), line!())
        }
    };
}

/// Registers a per-op attribute statically: `register_op_attr!(Kind, "Op", value)`,
/// where `value` evaluates to an `Arc<Kind::Value>` (see [`crate::op_attr`]).
///
/// ```
/// use opforge_core::op_attr::OpAttr;
/// use opforge_core::{register_op, register_op_attr, OpDefBuilder};
/// use std::sync::Arc;
///
/// struct Flops;
/// impl OpAttr for Flops { type Value = u64; const NAME: &'static str = "Flops"; }
///
/// register_op!(OpDefBuilder::new("DocFlopsOp").input("x: float").output("y: float"));
/// register_op_attr!(Flops, "DocFlopsOp", Arc::new(3));
/// ```
#[macro_export]
macro_rules! register_op_attr {
    ($kind:ty, $op:expr, $value:expr $(,)?) => {
        $crate::inventory::submit! {
            $crate::registry::StaticRegistration::attr(
                $op,
                || $crate::op_attr::ErasedAttr::new::<$kind>($value),
                file!(),
                line!(),
            )
        }
    };
}

/// Registers a kernel next to its code.
///
/// `register_kernel!(KernelDefBuilder::new("ZeroOut").type_constraint::<i32>("T"), ZeroOutOp)`
/// registers a type implementing [`CreateKernel`](crate::kernel::CreateKernel); `register_kernel!(def, fn = |ctx| ...)`
/// registers a factory closure returning `Result<Box<dyn OpKernel>>`.
#[macro_export]
macro_rules! register_kernel {
    ($def:expr, fn = $factory:expr $(,)?) => {
        $crate::inventory::submit! {
            $crate::registry::StaticRegistration::kernel(
                || $crate::kernel::KernelRegistration::with_factory($def, $factory), file!(), line!())
        }
    };
    ($def:expr, $kernel:ty $(,)?) => {
        $crate::inventory::submit! {
            $crate::registry::StaticRegistration::kernel(
                || $crate::kernel::KernelRegistration::of::<$kernel>($def), file!(), line!())
        }
    };
}

/// Registers a generic kernel once per element type (TensorFlow's
/// `TF_CALL_REAL_NUMBER_TYPES` idea): `register_kernel_for_types!("ZeroOut",
/// "T", ZeroOutOp, [f32, f64, i32])` registers `ZeroOutOp<f32>` for
/// `T = DT_FLOAT`, and so on.
#[macro_export]
macro_rules! register_kernel_for_types {
    ($op:expr, $attr:expr, $kernel:ident, [$($t:ty),* $(,)?]) => {
        $(
            $crate::register_kernel!(
                $crate::kernel::KernelDefBuilder::new($op).type_constraint::<$t>($attr),
                $kernel<$t>
            );
        )*
    };
}
