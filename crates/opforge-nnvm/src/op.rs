//! The registration API ([`NnvmOp`], MXNet's `NNVM_REGISTER_OP(name)...`),
//! static registration from several files or crates
//! ([`nnvm_register_op!`](crate::nnvm_register_op), [`register_static`]),
//! and the query API ([`Op`], [`OpMap`]).

use crate::attrs::{
    Argument, AttrParser, ComputeFn, Describe, NnvmAttr, NumInputs, NumOutputs, ParserInfo,
};
use opforge_core::op_attr::{ErasedAttr, OpAttr};
use opforge_core::origin::OwnerId;
use opforge_core::param::Parameter;
use opforge_core::registry::Registry;
use opforge_core::{OpDefBuilder, Result, Status};
use std::collections::BTreeMap;
use std::sync::Arc;

/// Puts an erased attribute back on an `OpDefBuilder` with its kind.
pub(crate) type Attach = fn(OpDefBuilder, &ErasedAttr) -> OpDefBuilder;

fn attach<A: OpAttr>(b: OpDefBuilder, attr: &ErasedAttr) -> OpDefBuilder {
    match attr.get::<A>() {
        Some(v) => b.set_attr::<A>(v),
        None => b,
    }
}

/// An op described by NNVM attributes, MXNet's `NNVM_REGISTER_OP(name)`:
///
/// ```
/// use opforge_nnvm::{NnvmOp, FInferShape, NodeAttrs, TShape};
/// use std::sync::Arc;
///
/// fn same_shape(_: &NodeAttrs<'_>, ins: &mut [TShape], outs: &mut [TShape]) -> opforge_core::Result<bool> {
///     outs[0].assign(&ins[0], "DocSquare: output 0")?;
///     Ok(outs[0].is_known())
/// }
///
/// let op = NnvmOp::new("DocSquare")
///     .describe("Squares its input, elementwise.")
///     .set_num_inputs(1)
///     .set_num_outputs(1)
///     .add_argument("data", "NDArray-or-Symbol", "The input.")
///     .set_attr::<FInferShape>(Arc::new(same_shape));
/// let registry = opforge_core::Registry::new();
/// op.finish(&registry).unwrap();
/// let def = registry.op_def("DocSquare").unwrap();
/// assert_eq!(def.input_arg[0].name, "data");
/// assert_eq!(def.output_arg[0].name, "output");
/// ```
///
/// [`finish`](Self::finish) synthesises the OpDef, shape function,
/// gradient and kernels (see the crate documentation for the rule) and
/// registers them with every attribute in a registry. The pieces of one op
/// may come from several files or crates: [`nnvm_register_op!`](crate::nnvm_register_op)
/// pieces are applied to one `NnvmOp` in source order by
/// [`register_static`]; or pass the builder through functions of each.
#[derive(Clone)]
pub struct NnvmOp {
    name: String,
    attrs: Vec<(ErasedAttr, Attach)>,
    computes: Vec<(&'static str, Arc<ComputeFn>)>,
    arguments: Vec<Argument>,
    errors: Vec<String>,
}

impl std::fmt::Debug for NnvmOp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NnvmOp")
            .field("name", &self.name)
            .field("attrs", &self.attr_names())
            .finish_non_exhaustive()
    }
}

impl NnvmOp {
    /// An op named `name` (CamelCase, as every opforge op: `"NnvmAbs"`).
    pub fn new(name: impl Into<String>) -> NnvmOp {
        NnvmOp {
            name: name.into(),
            attrs: Vec::new(),
            computes: Vec::new(),
            arguments: Vec::new(),
            errors: Vec::new(),
        }
    }

    /// The op's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The names of the attribute kinds set so far.
    pub fn attr_names(&self) -> Vec<&'static str> {
        self.attrs.iter().map(|(a, _)| a.name()).collect()
    }

    /// The value of kind `A`, if set.
    pub fn get<A: OpAttr>(&self) -> Option<Arc<A::Value>> {
        // `ErasedAttr::get` is `None` for every other kind, also those that
        // share the value's type (`NumInputs`/`NumOutputs`, the name lists).
        self.attrs.iter().find_map(|(a, _)| a.get::<A>())
    }

    fn put<A: OpAttr>(mut self, value: Arc<A::Value>) -> Self {
        let attr = ErasedAttr::new::<A>(value);
        if let Some((old, _)) = self.attrs.iter().find(|(a, _)| a.kind() == attr.kind()) {
            if !old.same_as(&attr) {
                let message = format!("op '{}': {} is set twice", self.name, attr.name());
                self.errors.push(message);
            }
            return self;
        }
        self.attrs.push((attr, attach::<A>));
        self
    }

    /// The op's description (MXNet's `describe`): the OpDef's summary and
    /// description (first paragraph, then the rest).
    pub fn describe(self, text: &str) -> Self {
        self.put::<Describe>(Arc::from(text))
    }

    /// The number of inputs (MXNet's `set_num_inputs`; 1 if never set).
    pub fn set_num_inputs(self, n: u32) -> Self {
        self.put::<NumInputs>(Arc::new(n))
    }

    /// The number of outputs, hidden ones included (MXNet's
    /// `set_num_outputs`; 1 if never set).
    pub fn set_num_outputs(self, n: u32) -> Self {
        self.put::<NumOutputs>(Arc::new(n))
    }

    /// Describes an argument (MXNet's `add_argument(name, type, description)`):
    /// an input's description goes into the OpDef's docs; parameters take
    /// theirs from the parameter struct.
    pub fn add_argument(mut self, name: &str, type_info: &str, description: &str) -> Self {
        self.arguments.push(Argument {
            name: name.to_string(),
            type_info: type_info.to_string(),
            description: description.to_string(),
        });
        self
    }

    /// The op's parameters are struct `P` (MXNet's
    /// `set_attr_parser(ParamParser<P>)`): its fields become the OpDef's
    /// attrs, and kernels parse them once per node
    /// ([`NodeAttrs::params`](crate::NodeAttrs::params)).
    pub fn set_attr_parser<P: Parameter + Send + Sync + 'static>(self) -> Self {
        self.put::<AttrParser>(Arc::new(ParserInfo::of::<P>()))
    }

    /// Sets attribute `A` (MXNet's `set_attr<A>(name, value)`; the name is
    /// the kind's). Setting a kind twice with different values is an error
    /// that [`finish`](Self::finish) reports.
    pub fn set_attr<A: NnvmAttr>(mut self, value: Arc<A::Value>) -> Self {
        if let (Some(device), Some(f)) = (A::compute_device(), A::as_compute(&value)) {
            if !self.computes.iter().any(|(d, _)| *d == device) {
                self.computes.push((device, f));
            }
        }
        self.put::<A>(value)
    }

    pub(crate) fn computes(&self) -> &[(&'static str, Arc<ComputeFn>)] {
        &self.computes
    }

    pub(crate) fn arguments(&self) -> &[Argument] {
        &self.arguments
    }

    pub(crate) fn erased(&self) -> &[(ErasedAttr, Attach)] {
        &self.attrs
    }

    /// Synthesises the op and registers it in `registry` (OpDef, every
    /// attribute, the shape function, the gradient, a kernel per
    /// [`FCompute`](crate::FCompute) device), all as code built into this
    /// binary, with the caller's `file:line` as the origin. Finishing the
    /// same op from the same place again is a no-op; a different OpDef
    /// under a taken name, or a different attribute or kernel, is
    /// `AlreadyExists`.
    #[track_caller]
    pub fn finish(self, registry: &Registry) -> Result<()> {
        let location = std::panic::Location::caller();
        self.finish_at(
            registry,
            &format!("{}:{}", location.file(), location.line()),
        )
    }

    pub(crate) fn finish_at(self, registry: &Registry, location: &str) -> Result<()> {
        if let Some(e) = self.errors.first() {
            return Err(Status::invalid_argument(e.clone()));
        }
        let synth = crate::synth::synthesize(&self)?;
        let registrar = registry.registrar(OwnerId::BUILTIN, location);
        registrar.op(synth.op)?;
        for k in synth.kernels {
            registrar.kernel(k)?;
        }
        Ok(())
    }
}

/// One piece of a static registration (what
/// [`nnvm_register_op!`](crate::nnvm_register_op) submits).
pub struct StaticPiece {
    op: &'static str,
    build: fn(NnvmOp) -> NnvmOp,
    file: &'static str,
    line: u32,
}

impl StaticPiece {
    /// A piece adding `build`'s settings to op `op`, written at `file:line`.
    pub const fn new(
        op: &'static str,
        build: fn(NnvmOp) -> NnvmOp,
        file: &'static str,
        line: u32,
    ) -> StaticPiece {
        StaticPiece {
            op,
            build,
            file,
            line,
        }
    }
}

opforge_core::inventory::collect!(StaticPiece);

/// Registers an op's NNVM attributes statically, next to their code, as
/// MXNet's `NNVM_REGISTER_OP(name)` does: `nnvm_register_op!("Name", |op|
/// op.describe(..).set_attr::<FInferShape>(..))`. Several pieces (from
/// several files or crates) may name one op; [`register_static`] applies
/// them to one [`NnvmOp`] in source order and finishes it.
#[macro_export]
macro_rules! nnvm_register_op {
    ($op:expr, $build:expr $(,)?) => {
        $crate::__inventory::submit! {
            $crate::StaticPiece::new($op, $build, file!(), line!())
        }
    };
}

/// Finishes every op whose pieces [`nnvm_register_op!`](crate::nnvm_register_op)
/// submitted (in this binary) into `registry`: the op names, sorted. Their
/// origin is the first piece's `file:line`, so running it again into the
/// same registry changes nothing. Errors name the op; the first one is
/// returned after every op was tried.
pub fn register_static(registry: &Registry) -> Result<Vec<String>> {
    let mut pieces: Vec<&StaticPiece> = opforge_core::inventory::iter::<StaticPiece>
        .into_iter()
        .collect();
    pieces.sort_by_key(|p| (p.file, p.line));
    let mut ops: BTreeMap<&str, (NnvmOp, String)> = BTreeMap::new();
    for p in pieces {
        let (op, _) = ops
            .entry(p.op)
            .or_insert_with(|| (NnvmOp::new(p.op), format!("{}:{}", p.file, p.line)));
        let taken = std::mem::replace(op, NnvmOp::new(p.op));
        *op = (p.build)(taken);
    }
    let mut first_error = None;
    let mut names = Vec::new();
    for (name, (op, location)) in ops {
        match op.finish_at(registry, &location) {
            Ok(()) => names.push(name.to_string()),
            Err(e) => {
                first_error.get_or_insert(e);
            }
        }
    }
    match first_error {
        Some(e) => Err(e),
        None => Ok(names),
    }
}

/// A registered op, for queries (MXNet's `nnvm::Op::Get(name)`).
#[derive(Clone, Copy, Debug)]
pub struct Op<'r> {
    registry: &'r Registry,
    name: &'r str,
}

impl<'r> Op<'r> {
    /// Op `name` of `registry` (`NotFound` with the registry's message if
    /// there is none).
    pub fn get(registry: &'r Registry, name: &'r str) -> Result<Op<'r>> {
        registry.lookup(name)?;
        Ok(Op { registry, name })
    }

    /// The op's name.
    pub fn name(&self) -> &'r str {
        self.name
    }

    /// The op's attribute of kind `A` (MXNet's `Op::GetAttr<A>(..)[op]`).
    pub fn get_attr<A: OpAttr>(&self) -> Option<Arc<A::Value>> {
        self.registry.attr::<A>(self.name)
    }

    /// Whether the op has an attribute of kind `A` (MXNet's `OpMap::count`).
    pub fn has_attr<A: OpAttr>(&self) -> bool {
        self.get_attr::<A>().is_some()
    }

    /// The attribute kinds the op has, sorted.
    pub fn attr_names(&self) -> Vec<&'static str> {
        self.registry.attr_names(self.name)
    }
}

/// Every op's attribute of kind `A` (MXNet's `Op::GetAttr<A>(name)`): a
/// snapshot of the registry's table.
pub struct OpMap<A: OpAttr> {
    values: BTreeMap<String, Arc<A::Value>>,
}

impl<A: OpAttr> OpMap<A> {
    /// The table of kind `A` in `registry`, now.
    pub fn of(registry: &Registry) -> OpMap<A> {
        let values = registry
            .ops_with_attr::<A>()
            .into_iter()
            .filter_map(|op| registry.attr::<A>(&op).map(|v| (op, v)))
            .collect();
        OpMap { values }
    }

    /// Op `op`'s value.
    pub fn get(&self, op: &str) -> Option<&Arc<A::Value>> {
        self.values.get(op)
    }

    /// Whether op `op` has a value.
    pub fn contains(&self, op: &str) -> bool {
        self.values.contains_key(op)
    }

    /// The ops that have a value, sorted (the registry's `ops_with_attr`).
    pub fn ops(&self) -> Vec<&str> {
        self.values.keys().map(String::as_str).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::attrs::{FInferShape, NodeAttrs, TIsBackward, TShape};

    fn shape(_: &NodeAttrs<'_>, _: &mut [TShape], _: &mut [TShape]) -> Result<bool> {
        Ok(true)
    }

    #[test]
    fn the_same_value_twice_is_one_setting_a_different_one_an_error() {
        let f: Arc<crate::InferShapeFn> = Arc::new(shape);
        let op = NnvmOp::new("X")
            .set_attr::<FInferShape>(f.clone())
            .set_attr::<FInferShape>(f)
            .set_num_inputs(1)
            .set_num_inputs(1);
        assert!(op.errors.is_empty());
        assert_eq!(op.attr_names(), ["FInferShape", "NumInputs"]);
        assert_eq!(op.get::<NumInputs>().as_deref(), Some(&1));
        assert!(
            op.get::<NumOutputs>().is_none(),
            "NumInputs is not NumOutputs"
        );
        let op = op.set_num_inputs(2);
        assert_eq!(op.errors, ["op 'X': NumInputs is set twice"]);
    }

    #[test]
    fn queries_read_the_registry_tables() {
        let r = Registry::new();
        NnvmOp::new("QueryA")
            .set_attr::<TIsBackward>(Arc::new(true))
            .finish(&r)
            .unwrap();
        NnvmOp::new("QueryB").finish(&r).unwrap();
        let map = OpMap::<TIsBackward>::of(&r);
        assert_eq!(map.ops(), ["QueryA"]);
        assert_eq!(map.get("QueryA").map(|v| **v), Some(true));
        assert!(!map.contains("QueryB"));
        let b = Op::get(&r, "QueryB").unwrap();
        assert_eq!(b.name(), "QueryB");
        assert!(!b.has_attr::<TIsBackward>());
        assert!(b.attr_names().is_empty(), "nothing set, no attribute");
        let e = Op::get(&r, "QueryC").unwrap_err();
        assert_eq!(e.code(), opforge_core::Code::NotFound);
    }
}
