//! The attribute kinds, with MXNet's names, and the values they work on
//! ([`NodeAttrs`], [`TShape`]).
//!
//! Every kind is an [`OpAttr`] of opforge-core, so its values live in the
//! registry's per-op attribute tables (`registry.attr::<FInferShape>(op)`,
//! `registry.ops_with_attr::<FCompute>()`). MXNet's `FInplaceOption` and
//! `FInplaceIdentity` are core's own kinds
//! ([`opforge_core::kernel::FInplaceOption`],
//! [`opforge_core::kernel::FInplaceIdentity`]), re-exported by this crate.

use crate::compute::OpContext;
use opforge_core::attrs::{get_attr, AttrMap, FromAttrValue};
use opforge_core::autodiff::{Gradient, GradientContext, Sym};
use opforge_core::kernel::{FInplaceIdentity, FInplaceOption, OutputRequest};
use opforge_core::op_attr::OpAttr;
use opforge_core::param::Parameter;
use opforge_core::shape_inference::ShapeFn;
use opforge_core::{DataType, Result, Status, Tensor};
use std::any::Any;
use std::marker::PhantomData;
use std::sync::Arc;

/// A node's attributes as the NNVM functions see them (MXNet's
/// `nnvm::NodeAttrs`): the op, the node's name, its attrs and, when the op
/// has an attribute parser ([`NnvmOp::set_attr_parser`](crate::NnvmOp::set_attr_parser)),
/// the parsed parameter struct.
#[derive(Clone, Copy)]
pub struct NodeAttrs<'a> {
    op: &'a str,
    name: &'a str,
    attrs: &'a AttrMap,
    parsed: Option<&'a (dyn Any + Send + Sync)>,
}

impl std::fmt::Debug for NodeAttrs<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NodeAttrs")
            .field("op", &self.op)
            .field("name", &self.name)
            .field("attrs", &self.attrs.keys().collect::<Vec<_>>())
            .finish_non_exhaustive()
    }
}

impl<'a> NodeAttrs<'a> {
    /// The attributes of node `name` of op `op`; `parsed` is the parameter
    /// struct parsed from `attrs` once (a kernel's), if any.
    pub fn new(
        op: &'a str,
        name: &'a str,
        attrs: &'a AttrMap,
        parsed: Option<&'a (dyn Any + Send + Sync)>,
    ) -> NodeAttrs<'a> {
        NodeAttrs {
            op,
            name,
            attrs,
            parsed,
        }
    }

    /// The op's name.
    pub fn op(&self) -> &'a str {
        self.op
    }

    /// The node's name (the op's name where there is no node).
    pub fn name(&self) -> &'a str {
        self.name
    }

    /// The attrs (MXNet's `dict`, typed).
    pub fn attrs(&self) -> &'a AttrMap {
        self.attrs
    }

    /// Attr `name` as a `T` (`InvalidArgument` naming the op when it is
    /// missing or of another type).
    pub fn get_attr<T: FromAttrValue>(&self, name: &str) -> Result<T> {
        get_attr(self.op, self.attrs, name)
    }

    /// The attrs as parameter struct `P` (MXNet's `nnvm::get<P>(attrs.parsed)`):
    /// the struct parsed once when there is one of that type, else parsed
    /// now (defaults filling gaps, every value checked; errors name the op).
    pub fn params<P: Parameter + Clone + 'static>(&self) -> Result<P> {
        if let Some(p) = self.parsed.and_then(|p| p.downcast_ref::<P>()) {
            return Ok(p.clone());
        }
        P::from_op_attrs(self.op, self.attrs)
    }
}

/// A shape as the NNVM functions see it (MXNet's `mxnet::TShape`): unknown
/// rank, or a rank whose dims may be unknown (`-1`), as opforge's shape
/// inference writes partial shapes.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct TShape(Option<Vec<i64>>);

impl TShape {
    /// A shape of unknown rank.
    pub fn unknown() -> TShape {
        TShape(None)
    }

    /// A shape of known rank; `-1` marks an unknown dim.
    pub fn new(dims: &[i64]) -> TShape {
        TShape(Some(dims.to_vec()))
    }

    /// From opforge's partial-shape form (`None` = unknown rank).
    pub fn from_partial(dims: Option<Vec<i64>>) -> TShape {
        TShape(dims)
    }

    /// The dims, if the rank is known (`-1` for unknown dims).
    pub fn dims(&self) -> Option<&[i64]> {
        self.0.as_deref()
    }

    /// The partial-shape form (`None` = unknown rank).
    pub fn as_partial(&self) -> Option<&[i64]> {
        self.0.as_deref()
    }

    /// The rank, if known.
    pub fn ndim(&self) -> Option<usize> {
        self.0.as_ref().map(Vec::len)
    }

    /// Whether rank and every dim are known (MXNet's `shape_is_known`).
    pub fn is_known(&self) -> bool {
        self.0.as_ref().is_some_and(|d| d.iter().all(|&x| x >= 0))
    }

    /// Whether nothing is known.
    pub fn is_unknown(&self) -> bool {
        self.0.is_none()
    }

    /// Merges `other` into `self` (MXNet's `SHAPE_ASSIGN_CHECK`): unknown
    /// parts take the other's values; a known rank or dim that differs is
    /// `InvalidArgument` naming `what` (such as "NnvmAbs: output 0") and
    /// both shapes.
    pub fn assign(&mut self, other: &TShape, what: &str) -> Result<()> {
        let Some(theirs) = &other.0 else {
            return Ok(());
        };
        let Some(mine) = &mut self.0 else {
            self.0 = Some(theirs.clone());
            return Ok(());
        };
        let conflict = mine.len() != theirs.len()
            || mine
                .iter()
                .zip(theirs)
                .any(|(&a, &b)| a >= 0 && b >= 0 && a != b);
        if conflict {
            return Err(Status::invalid_argument(format!(
                "{what}: shape {} is incompatible with shape {}",
                TShape(Some(mine.clone())),
                other
            )));
        }
        for (a, &b) in mine.iter_mut().zip(theirs) {
            if *a < 0 {
                *a = b;
            }
        }
        Ok(())
    }
}

impl std::fmt::Display for TShape {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.0 {
            None => f.write_str("?"),
            Some(dims) => {
                f.write_str("[")?;
                for (i, d) in dims.iter().enumerate() {
                    if i > 0 {
                        f.write_str(",")?;
                    }
                    if *d < 0 {
                        f.write_str("?")?;
                    } else {
                        write!(f, "{d}")?;
                    }
                }
                f.write_str("]")
            }
        }
    }
}

/// The value of [`FInferShape`].
pub type InferShapeFn =
    dyn Fn(&NodeAttrs<'_>, &mut [TShape], &mut [TShape]) -> Result<bool> + Send + Sync;
/// The value of [`FInferType`].
pub type InferTypeFn = dyn Fn(&NodeAttrs<'_>, &mut [Option<DataType>], &mut [Option<DataType>]) -> Result<bool>
    + Send
    + Sync;
/// The value of [`FCompute`].
pub type ComputeFn = dyn Fn(&NodeAttrs<'_>, &OpContext<'_, '_>, &[Tensor], &[OutputRequest], &mut [Tensor]) -> Result<()>
    + Send
    + Sync;
/// The value of [`FResourceRequest`].
pub type ResourceFn = dyn Fn(&NodeAttrs<'_>) -> Vec<ResourceRequest> + Send + Sync;
/// The value of [`FGradient`].
pub type FGradientFn =
    dyn Fn(&mut GradientContext<'_>, &[Sym]) -> Result<Vec<Option<Sym>>> + Send + Sync;

/// MXNet's `FInferShape`: given the node's attrs and what is known of the
/// input and output shapes (all outputs, hidden ones too), fills in what it
/// can, outputs and unknown inputs alike, and answers whether every shape
/// is now known. A shape it cannot accept is an error naming the op, the
/// argument and what was expected.
pub struct FInferShape;
impl OpAttr for FInferShape {
    type Value = InferShapeFn;
    const NAME: &'static str = "FInferShape";
}

/// MXNet's `FInferType`: [`FInferShape`] for dtypes (`None` = unknown).
/// The OpDef synthesis probes it to decide the op's type attrs (see the
/// crate documentation).
pub struct FInferType;
impl OpAttr for FInferType {
    type Value = InferTypeFn;
    const NAME: &'static str = "FInferType";
}

/// A device type an [`FCompute`] is registered for (MXNet's `cpu`/`gpu`
/// template argument).
pub trait DeviceKind: Send + Sync + 'static {
    /// opforge's device type (`"CPU"`, the kernel definitions' device).
    const DEVICE_TYPE: &'static str;
    /// The attribute's name for this device (`"FCompute<cpu>"`).
    const FCOMPUTE_NAME: &'static str;
}

/// The CPU (MXNet's `cpu`).
pub struct Cpu;
impl DeviceKind for Cpu {
    const DEVICE_TYPE: &'static str = "CPU";
    const FCOMPUTE_NAME: &'static str = "FCompute<cpu>";
}

/// MXNet's `FCompute<xpu>`: the computation on device `D`,
/// `(attrs, ctx, inputs, req, outputs)`.
///
/// The kernel adapter ([`crate::compute`]) sizes the outputs with the op's
/// [`FInferShape`] on the inputs' shapes, and passes one request per output
/// (all outputs, hidden ones too): for [`OutputRequest::Write`] the output
/// is freshly allocated; for [`OutputRequest::Add`] it holds the
/// accumulator, to add into; for [`OutputRequest::Null`] it is an empty
/// placeholder that must be left alone. `InPlace` is never asked (the
/// adapter does not declare it: the runtime asks `Write` instead).
pub struct FCompute<D: DeviceKind = Cpu>(PhantomData<D>);
impl<D: DeviceKind> OpAttr for FCompute<D> {
    type Value = ComputeFn;
    const NAME: &'static str = D::FCOMPUTE_NAME;
}

/// MXNet's `FGradient`: given the forward node (the context: inputs,
/// outputs, attrs, and the op-calling interface) and one gradient per
/// output (zeros where none flows), returns the gradient entries of the
/// inputs, built from other ops: one per input, `None` where none flows.
pub struct FGradient;
impl OpAttr for FGradient {
    type Value = FGradientFn;
    const NAME: &'static str = "FGradient";
}

/// A resource an op asks for ([`FResourceRequest`]; MXNet's
/// `ResourceRequest`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ResourceRequest {
    /// Temporary workspace (MXNet's `kTempSpace`): the compute function
    /// allocates it with [`OpContext::requested_temp`].
    TempSpace,
}

/// MXNet's `FResourceRequest`: the resources the compute function uses.
pub struct FResourceRequest;
impl OpAttr for FResourceRequest {
    type Value = ResourceFn;
    const NAME: &'static str = "FResourceRequest";
}

/// MXNet's `FListInputNames`: the inputs' names.
pub struct FListInputNames;
impl OpAttr for FListInputNames {
    type Value = dyn Fn(&NodeAttrs<'_>) -> Vec<String> + Send + Sync;
    const NAME: &'static str = "FListInputNames";
}

/// MXNet's `FListOutputNames`: the outputs' names.
pub struct FListOutputNames;
impl OpAttr for FListOutputNames {
    type Value = dyn Fn(&NodeAttrs<'_>) -> Vec<String> + Send + Sync;
    const NAME: &'static str = "FListOutputNames";
}

/// MXNet's `FNumVisibleOutputs`: how many of the outputs (the first ones)
/// callers see; the rest are hidden (kept for the compute function only).
pub struct FNumVisibleOutputs;
impl OpAttr for FNumVisibleOutputs {
    type Value = dyn Fn(&NodeAttrs<'_>) -> u32 + Send + Sync;
    const NAME: &'static str = "FNumVisibleOutputs";
}

/// MXNet's `FMutateInputs`: the inputs the op writes (kept for queries;
/// an op with any is synthesised stateful).
pub struct FMutateInputs;
impl OpAttr for FMutateInputs {
    type Value = dyn Fn(&NodeAttrs<'_>) -> Vec<u32> + Send + Sync;
    const NAME: &'static str = "FMutateInputs";
}

/// MXNet's `TIsBackward`: whether the op is a backward op (a gradient
/// computation of another op).
pub struct TIsBackward;
impl OpAttr for TIsBackward {
    type Value = bool;
    const NAME: &'static str = "TIsBackward";
    fn same(a: &Arc<bool>, b: &Arc<bool>) -> bool {
        a == b
    }
}

/// An argument's description (MXNet's `add_argument(name, type, description)`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Argument {
    /// The argument's name.
    pub name: String,
    /// Its type string (`"NDArray-or-Symbol"`, `"int"`, ...).
    pub type_info: String,
    /// What it is.
    pub description: String,
}

/// The description an op was given with
/// [`NnvmOp::describe`](crate::NnvmOp::describe).
pub struct Describe;
impl OpAttr for Describe {
    type Value = str;
    const NAME: &'static str = "Describe";
    fn same(a: &Arc<str>, b: &Arc<str>) -> bool {
        a == b
    }
}

/// The arguments an op was given with
/// [`NnvmOp::add_argument`](crate::NnvmOp::add_argument).
pub struct Arguments;
impl OpAttr for Arguments {
    type Value = [Argument];
    const NAME: &'static str = "Arguments";
    fn same(a: &Arc<[Argument]>, b: &Arc<[Argument]>) -> bool {
        a == b
    }
}

/// The number of inputs ([`NnvmOp::set_num_inputs`](crate::NnvmOp::set_num_inputs)).
pub struct NumInputs;
impl OpAttr for NumInputs {
    type Value = u32;
    const NAME: &'static str = "NumInputs";
    fn same(a: &Arc<u32>, b: &Arc<u32>) -> bool {
        a == b
    }
}

/// The number of outputs, hidden ones included
/// ([`NnvmOp::set_num_outputs`](crate::NnvmOp::set_num_outputs)).
pub struct NumOutputs;
impl OpAttr for NumOutputs {
    type Value = u32;
    const NAME: &'static str = "NumOutputs";
    fn same(a: &Arc<u32>, b: &Arc<u32>) -> bool {
        a == b
    }
}

/// How an op's attrs are parsed ([`NnvmOp::set_attr_parser`](crate::NnvmOp::set_attr_parser)):
/// the parameter struct's name, how its fields become OpDef attrs, and how
/// a node's attrs become the struct.
pub struct AttrParser;
impl OpAttr for AttrParser {
    type Value = ParserInfo;
    const NAME: &'static str = "AttrParser";
    fn same(a: &Arc<ParserInfo>, b: &Arc<ParserInfo>) -> bool {
        a.name == b.name
    }
}

/// A parsed parameter struct, type-erased.
pub type Parsed = Arc<dyn Any + Send + Sync>;

/// The value of [`AttrParser`].
#[derive(Clone, Copy)]
pub struct ParserInfo {
    /// The parameter struct's name.
    pub name: &'static str,
    /// Adds the struct's fields to an OpDef as attrs.
    pub add_attrs: fn(opforge_core::OpDefBuilder) -> opforge_core::OpDefBuilder,
    /// Parses a node's attrs (op name, attrs).
    pub parse: fn(&str, &AttrMap) -> Result<Parsed>,
}

impl std::fmt::Debug for ParserInfo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ParserInfo({})", self.name)
    }
}

impl ParserInfo {
    /// The parser of parameter struct `P`.
    pub fn of<P: Parameter + Send + Sync + 'static>() -> ParserInfo {
        ParserInfo {
            name: P::NAME,
            add_attrs: |b| b.params::<P>(),
            parse: |op, attrs| Ok(Arc::new(P::from_op_attrs(op, attrs)?) as Parsed),
        }
    }
}

/// An attribute kind [`NnvmOp::set_attr`](crate::NnvmOp::set_attr) takes:
/// every kind of this crate, core's `FInplaceOption`/`FInplaceIdentity`,
/// and core's `ShapeFn` and `Gradient` (the TensorFlow-style forms, which
/// the synthesis uses as they are).
pub trait NnvmAttr: OpAttr {
    /// The device an [`FCompute`] value computes on; `None` for other kinds.
    fn compute_device() -> Option<&'static str> {
        None
    }
    /// The value as a compute function (only [`FCompute`]'s is one).
    fn as_compute(value: &Arc<Self::Value>) -> Option<Arc<ComputeFn>> {
        let _ = value;
        None
    }
}

impl<D: DeviceKind> NnvmAttr for FCompute<D> {
    fn compute_device() -> Option<&'static str> {
        Some(D::DEVICE_TYPE)
    }
    fn as_compute(value: &Arc<ComputeFn>) -> Option<Arc<ComputeFn>> {
        Some(value.clone())
    }
}

macro_rules! plain_nnvm_attr {
    ($($kind:ty),* $(,)?) => { $(impl NnvmAttr for $kind {})* };
}
plain_nnvm_attr!(
    FInferShape,
    FInferType,
    FGradient,
    FResourceRequest,
    FListInputNames,
    FListOutputNames,
    FNumVisibleOutputs,
    FMutateInputs,
    TIsBackward,
    FInplaceOption,
    FInplaceIdentity,
    ShapeFn,
    Gradient,
);

#[cfg(test)]
mod tests {
    use super::*;
    use opforge_core::Code;

    #[test]
    fn tshape_assign_fills_unknowns_and_refuses_conflicts() {
        let mut s = TShape::unknown();
        s.assign(&TShape::new(&[2, -1]), "X: input 0").unwrap();
        assert_eq!(s.dims(), Some(&[2, -1][..]));
        assert!(!s.is_known());
        s.assign(&TShape::new(&[-1, 3]), "X: input 0").unwrap();
        assert_eq!(s, TShape::new(&[2, 3]));
        assert!(s.is_known());
        let e = s.assign(&TShape::new(&[2, 4]), "X: input 0").unwrap_err();
        assert_eq!(e.code(), Code::InvalidArgument);
        assert_eq!(
            e.message(),
            "X: input 0: shape [2,3] is incompatible with shape [2,4]"
        );
        let e = s.assign(&TShape::new(&[2]), "X: output 1").unwrap_err();
        assert!(e.message().contains("[2,3] is incompatible with shape [2]"));
        assert_eq!(TShape::unknown().to_string(), "?");
        assert_eq!(TShape::new(&[-1, 5]).to_string(), "[?,5]");
    }

    #[derive(Parameter, Clone, Debug, PartialEq)]
    struct Factor {
        #[param(default = 1.0)]
        factor: f32,
    }

    #[test]
    fn params_come_from_the_parsed_struct_else_from_the_attrs() {
        use opforge_core::attrs::IntoAttrValue;
        let mut attrs = AttrMap::new();
        attrs.insert("factor".into(), 3.0f32.into_attr_value());
        let parsed = Factor { factor: 7.0 };
        let with = NodeAttrs::new("Op", "n", &attrs, Some(&parsed));
        assert_eq!(with.params::<Factor>().unwrap().factor, 7.0);
        let without = NodeAttrs::new("Op", "n", &attrs, None);
        assert_eq!(without.params::<Factor>().unwrap().factor, 3.0);
        assert_eq!(without.get_attr::<f32>("factor").unwrap(), 3.0);
        let e = without.get_attr::<f32>("missing").unwrap_err();
        assert_eq!(e.code(), Code::InvalidArgument);
        assert!(e.message().contains("Op"), "{e}");
        assert_eq!((without.op(), without.name()), ("Op", "n"));
    }

    #[test]
    fn fcompute_names_its_device() {
        assert_eq!(<FCompute<Cpu> as OpAttr>::NAME, "FCompute<cpu>");
        assert_eq!(<FCompute as NnvmAttr>::compute_device(), Some("CPU"));
        assert_eq!(<FInferShape as NnvmAttr>::compute_device(), None);
    }
}
