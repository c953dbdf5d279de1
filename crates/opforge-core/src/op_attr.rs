//! Per-op attributes, NNVM style: typed values attached to an op by name
//! (TensorFlow's shape function and gradient are two of them).
//!
//! An attribute *kind* is a type implementing [`OpAttr`]: it names the kind
//! and gives the type of its values. Any crate can add a kind (a cost model,
//! MXNet's `FInferShape`, a Python kernel, ...) without editing opforge-core;
//! the [`Registry`](crate::registry::Registry) keeps one table per kind.
//!
//! ```
//! use opforge_core::op_attr::OpAttr;
//! use opforge_core::registry::Registry;
//! use std::sync::Arc;
//!
//! /// How many floating-point operations one output element costs.
//! struct FlopsPerElement;
//! impl OpAttr for FlopsPerElement {
//!     type Value = u64;
//!     const NAME: &'static str = "FlopsPerElement";
//! }
//!
//! let registry = Registry::new();
//! registry.register_op(opforge_core::OpDefBuilder::new("Twice").input("x: float").output("y: float")).unwrap();
//! registry.set_attr::<FlopsPerElement>("Twice", Arc::new(1)).unwrap();
//! assert_eq!(*registry.attr::<FlopsPerElement>("Twice").unwrap(), 1);
//! assert!(registry.attr::<FlopsPerElement>("Other").is_none());
//! ```

use std::any::{Any, TypeId};
use std::sync::Arc;

/// A kind of per-op attribute: its name and the type of its values.
///
/// Values are shared (`Arc<Self::Value>`), and may be unsized, such as a
/// `dyn Fn` closure.
pub trait OpAttr: 'static {
    /// The type of the values (`dyn Fn(...) + Send + Sync` for callables).
    type Value: ?Sized + Send + Sync + 'static;
    /// The kind's name, for messages and listings (`"ShapeFn"`, `"Gradient"`).
    const NAME: &'static str;

    /// Whether two values are the same registration (re-registering the
    /// same value is a no-op; a different one under a taken op is
    /// `AlreadyExists`). By default: the same allocation.
    fn same(a: &Arc<Self::Value>, b: &Arc<Self::Value>) -> bool {
        Arc::ptr_eq(a, b)
    }
}

type AnyValue = dyn Any + Send + Sync;

/// A per-op attribute value with its kind erased, as an
/// [`OpDefBuilder`](crate::OpDefBuilder) carries it until the op is
/// registered.
#[derive(Clone)]
pub struct ErasedAttr {
    kind: TypeId,
    name: &'static str,
    /// An `Arc<A::Value>`.
    value: Arc<AnyValue>,
    same: fn(&AnyValue, &AnyValue) -> bool,
}

impl std::fmt::Debug for ErasedAttr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ErasedAttr({})", self.name)
    }
}

impl ErasedAttr {
    /// A value of kind `A`.
    pub fn new<A: OpAttr>(value: Arc<A::Value>) -> ErasedAttr {
        ErasedAttr {
            kind: TypeId::of::<A>(),
            name: A::NAME,
            value: Arc::new(value),
            same: same_erased::<A>,
        }
    }

    /// The kind's type id.
    pub fn kind(&self) -> TypeId {
        self.kind
    }

    /// The kind's name.
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// The value, if it is of kind `A` (the kind, not only the value type:
    /// two kinds may share one).
    pub fn get<A: OpAttr>(&self) -> Option<Arc<A::Value>> {
        if self.kind != TypeId::of::<A>() {
            return None;
        }
        self.value.downcast_ref::<Arc<A::Value>>().cloned()
    }

    /// Whether `self` and `other` are the same registration (see [`OpAttr::same`]).
    pub fn same_as(&self, other: &ErasedAttr) -> bool {
        self.kind == other.kind && (self.same)(&*self.value, &*other.value)
    }
}

fn same_erased<A: OpAttr>(a: &AnyValue, b: &AnyValue) -> bool {
    match (
        a.downcast_ref::<Arc<A::Value>>(),
        b.downcast_ref::<Arc<A::Value>>(),
    ) {
        (Some(a), Some(b)) => A::same(a, b),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Cost;
    impl OpAttr for Cost {
        type Value = u32;
        const NAME: &'static str = "Cost";
    }
    /// Another kind with `Cost`'s value type.
    struct Weight;
    impl OpAttr for Weight {
        type Value = u32;
        const NAME: &'static str = "Weight";
    }
    struct Named;
    impl OpAttr for Named {
        type Value = dyn Fn() -> String + Send + Sync;
        const NAME: &'static str = "Named";
    }

    #[test]
    fn erased_values_keep_kind_and_identity() {
        let v = Arc::new(7u32);
        let a = ErasedAttr::new::<Cost>(v.clone());
        let b = ErasedAttr::new::<Cost>(v);
        let c = ErasedAttr::new::<Cost>(Arc::new(7));
        assert_eq!(a.name(), "Cost");
        assert_eq!(*a.get::<Cost>().unwrap(), 7);
        assert!(a.get::<Named>().is_none());
        assert!(a.get::<Weight>().is_none(), "same value type, another kind");
        assert!(a.same_as(&b));
        assert!(!a.same_as(&c));
        let f: Arc<dyn Fn() -> String + Send + Sync> = Arc::new(|| "x".to_string());
        let n = ErasedAttr::new::<Named>(f);
        assert_eq!((n.get::<Named>().unwrap())(), "x");
        assert!(!n.same_as(&a));
        assert_eq!(n.kind(), TypeId::of::<Named>());
    }
}
