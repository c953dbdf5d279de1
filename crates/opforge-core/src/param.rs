//! Typed op parameters (MXNet's `dmlc::Parameter`): a struct whose fields
//! are an op's attrs, with defaults, bounds, enumerations and
//! descriptions, declared once with `#[derive(Parameter)]`.
//!
//! From the struct:
//!
//! - the OpDef's attrs: [`OpDefBuilder::params`] adds one attr spec per
//!   field ([`ParamField::spec`], TensorFlow's syntax: `num_bits: int = 8`,
//!   `mode: {'clip', 'wrap'} = 'clip'`, `block_size: int >= 2`) and the
//!   fields' descriptions as the attrs' docs, which `opforge ops show` and
//!   the Python wrappers' docstrings print;
//! - the values: [`Parameter::from_attrs`] (a node's or call's attrs,
//!   defaults filling gaps; a kernel calls
//!   `OpKernelConstruction::params`) and [`Parameter::from_kwargs`]
//!   (MXNet's string keyword arguments: `"3"`, `"(2, 2)"`, `"True"`,
//!   `"0.5"`, `"clip"`), both checking types, bounds, minimums and
//!   enumerations with `InvalidArgument` errors that name the op (or the
//!   struct), the parameter, the value and what is allowed;
//! - the docs: [`Parameter::doc_table`], a markdown table.
//!
//! Bounds (`lower_bound`, `upper_bound`) are checked when parsing only:
//! TensorFlow's OpDef has no ranges, and the standard ops keep
//! TensorFlow's OpDefs exactly. `minimum` is TensorFlow's `>= N` and is
//! part of the OpDef. An `Option<T>` field may be absent (`None`; MXNet's
//! `"None"` in keyword arguments); an OpDef attr without a default is
//! required, so such a field is an OpDef attr only with a value that
//! stands for `None` (`#[param(none = -1)]`: `axis: int = -1`, and `-1`
//! reads back as `None`), else it serves keyword arguments only
//! ([`ParamField::spec`] refuses it). A `#[param(flatten)]` field is a nested parameter
//! struct whose fields take its place (a group of attrs several structs
//! share).
//!
//! ```
//! use opforge_core::param::{ParamEnum, Parameter};
//! use opforge_core::{attrs::AttrMap, attrs::IntoAttrValue, OpDefBuilder};
//!
//! #[derive(ParamEnum, Debug, PartialEq)]
//! enum Mode {
//!     #[param(rename = "clip")]
//!     Clip,
//!     #[param(rename = "wrap")]
//!     Wrap,
//! }
//!
//! #[derive(Parameter, Debug)]
//! struct TakeParam {
//!     /// The axis to take along.
//!     #[param(default = 0)]
//!     axis: i64,
//!     /// What to do with an out-of-range index.
//!     #[param(default = "clip")]
//!     mode: Mode,
//!     #[param(default = 1, lower_bound = 1, upper_bound = 8, describe = "Lanes per step.")]
//!     lanes: i32,
//! }
//!
//! let op = OpDefBuilder::new("MyTake")
//!     .input("x: float")
//!     .output("y: float")
//!     .params::<TakeParam>()
//!     .finalize()
//!     .unwrap();
//! assert_eq!(op.attr[1].name, "mode");
//! assert_eq!(op.attr[1].description, "What to do with an out-of-range index.");
//! assert_eq!(
//!     TakeParam::attr_specs().unwrap(),
//!     ["axis: int = 0", "mode: {'clip', 'wrap'} = 'clip'", "lanes: int = 1"]
//! );
//!
//! let p = TakeParam::from_kwargs(&[("mode", "wrap"), ("lanes", "4")]).unwrap();
//! assert_eq!((p.axis, p.mode, p.lanes), (0, Mode::Wrap, 4));
//! let err = TakeParam::from_kwargs(&[("lanes", "9")]).unwrap_err();
//! assert_eq!(
//!     err.message(),
//!     "TakeParam: invalid value 9 for parameter 'lanes': must be in [1, 8]"
//! );
//!
//! let mut attrs = AttrMap::new();
//! attrs.insert("mode".into(), "raise".into_attr_value());
//! let err = TakeParam::from_op_attrs("MyTake", &attrs).unwrap_err();
//! assert_eq!(
//!     err.message(),
//!     "MyTake: invalid value 'raise' for parameter 'mode': must be one of 'clip', 'wrap'"
//! );
//! assert!(TakeParam::doc_table().contains("| `lanes` | int | `1` | [1, 8] | Lanes per step. |"));
//! ```
//!
//! The derives live in the proc-macro crate `opforge-param-derive`, which
//! depends on nothing of opforge's; their generated code names this crate
//! as `::opforge_core` (a crate that uses the facade only writes
//! `#[param(crate = "::opforge")]` on the type, as serde's `crate`
//! attribute does). That crate's documentation lists the `#[param(...)]`
//! keys.

mod check;
mod parse;
mod types;

use crate::attrs::AttrMap;
use crate::op_attr::OpAttr;
use crate::op_def::OpDefBuilder;
use crate::proto::AttrValue;
use crate::Result;

pub use check::{display_value, parse_kwarg};
/// Derives [`ParamEnum`](trait@ParamEnum) and [`ParamType`] for an enum of
/// unit variants; `#[param(rename = "...")]` names a variant.
pub use opforge_param_derive::ParamEnum;
/// Derives [`Parameter`](trait@Parameter) for a struct with named fields
/// (see the [module documentation](self) and the `opforge-param-derive`
/// crate for the `#[param(...)]` keys).
pub use opforge_param_derive::Parameter;

/// An inclusive bound of a number parameter.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Bound {
    /// A bound of an integer parameter.
    Int(i64),
    /// A bound of a float parameter.
    Float(f64),
}

/// One field of a parameter struct: one attr of the ops that use it.
#[derive(Clone, Debug, PartialEq)]
pub struct ParamField {
    /// The attr's name.
    pub name: &'static str,
    /// The attr's type in TensorFlow's spec language: `int`, `float`,
    /// `bool`, `string`, `type`, `shape`, `list(int)`, ...
    pub attr_type: &'static str,
    /// Whether the field is an `Option` (absent means `None`).
    pub optional: bool,
    /// The default; `None` for a required or optional field.
    pub default: Option<AttrValue>,
    /// For an optional field: the value that stands for `None` where a
    /// value must be given (the attr's default in an OpDef), read back as
    /// `None`.
    pub none: Option<AttrValue>,
    /// The description (the field's doc comment or `describe = "..."`).
    pub description: &'static str,
    /// TensorFlow's `>= N` (a length for lists): in the OpDef, and checked.
    pub minimum: Option<i64>,
    /// The smallest allowed value, checked when parsing.
    pub lower_bound: Option<Bound>,
    /// The largest allowed value, checked when parsing.
    pub upper_bound: Option<Bound>,
    /// The allowed values of a string (or type-name) field; empty: any.
    pub enumeration: &'static [&'static str],
}

/// A struct of op parameters; derive it with `#[derive(Parameter)]`.
///
/// The required items are what the derive generates; the provided ones
/// are the parsing, checking and printing every struct shares.
pub trait Parameter: Sized {
    /// The struct's name, which errors name when no op is given.
    const NAME: &'static str;

    /// How many fields [`Parameter::fields`] gives (a flattened struct's
    /// count as its own).
    #[doc(hidden)]
    const FIELD_COUNT: usize;

    /// The fields, in declaration order (the order of the OpDef's attrs),
    /// a `#[param(flatten)]` field's nested struct's fields in its place.
    fn fields() -> Vec<ParamField>;

    /// Builds the struct from one checked value per field (`None`: absent),
    /// in the order of [`Parameter::fields`]. Called by the provided
    /// methods; `owner` names the op or struct in errors.
    #[doc(hidden)]
    fn from_values(owner: &str, values: &[Option<AttrValue>]) -> Result<Self>;

    /// Reads the struct from a node's or call's attrs: defaults fill the
    /// attrs that are missing, attrs of no field are ignored, and every
    /// value is checked. Errors name the struct.
    fn from_attrs(attrs: &AttrMap) -> Result<Self> {
        Self::from_op_attrs(Self::NAME, attrs)
    }

    /// As [`Parameter::from_attrs`], with errors naming `op`.
    fn from_op_attrs(op: &str, attrs: &AttrMap) -> Result<Self> {
        let values = check::values_from_attrs(op, &Self::fields(), attrs)?;
        Self::from_values(op, &values)
    }

    /// Reads the struct from string keyword arguments, as MXNet passes
    /// parameters (`("kernel", "(2, 2)")`, `("no_bias", "True")`): each
    /// string is parsed as its field's type ([`parse_kwarg`]), `"None"`
    /// leaves an `Option` field absent; an unknown or repeated name is an
    /// error. Errors name the struct.
    fn from_kwargs(kwargs: &[(&str, &str)]) -> Result<Self> {
        Self::from_op_kwargs(Self::NAME, kwargs)
    }

    /// As [`Parameter::from_kwargs`], with errors naming `op`.
    fn from_op_kwargs(op: &str, kwargs: &[(&str, &str)]) -> Result<Self> {
        let values = check::values_from_kwargs(op, &Self::fields(), kwargs)?;
        Self::from_values(op, &values)
    }

    /// The OpDef attr specs of the fields ([`ParamField::spec`]), in order.
    fn attr_specs() -> Result<Vec<String>> {
        Self::fields()
            .iter()
            .map(|f| f.spec().map_err(|e| e.prepend(format!("{}: ", Self::NAME))))
            .collect()
    }

    /// A markdown table of the parameters: name, type, default, what is
    /// allowed, description.
    fn doc_table() -> String {
        check::doc_table(&Self::fields())
    }
}

/// A Rust type a parameter field can have: its attr type and how it reads
/// an `AttrValue`. Implemented for integers, `f32`/`f64`, `bool`,
/// `String`, `DataType`, `TensorShapeProto`, `Vec`s of the scalar ones,
/// `Option` of any, and (by `#[derive(ParamEnum)]`) enums.
pub trait ParamType: Sized {
    /// The attr type (`int`, `list(float)`, ...).
    const ATTR_TYPE: &'static str;
    /// The allowed values the type itself implies (an enum's names).
    const ENUMERATION: &'static [&'static str] = &[];
    /// Whether the type may be absent (`Option`).
    const OPTIONAL: bool = false;

    /// The value of a checked `AttrValue` of [`Self::ATTR_TYPE`], or
    /// `None` when it does not fit (an `int` beyond `i32`).
    fn from_attr(value: &AttrValue) -> Option<Self>;

    /// The value of an absent parameter, if the type has one.
    fn absent() -> Option<Self> {
        None
    }
}

/// An enum parameter: a `string` attr whose values are the variants'
/// names. Derive it with `#[derive(ParamEnum)]`.
///
/// An enum field's default must name a variant, which the compiler
/// checks:
///
/// ```compile_fail
/// use opforge_core::param::{ParamEnum, Parameter};
/// #[derive(ParamEnum)]
/// enum Mode { Clip, Wrap }
/// #[derive(Parameter)]
/// struct P {
///     #[param(default = "Raise")]
///     mode: Mode,
/// }
/// ```
///
/// and so is the rest of `#[param(...)]` (here, bounds on a string):
///
/// ```compile_fail
/// use opforge_core::param::Parameter;
/// #[derive(Parameter)]
/// struct P {
///     #[param(lower_bound = 1)]
///     name: String,
/// }
/// ```
pub trait ParamEnum: Sized + 'static {
    /// The variants' names, in declaration order.
    const NAMES: &'static [&'static str];

    /// The variant named `name`.
    fn from_name(name: &str) -> Option<Self>;

    /// The variant's name.
    fn name(&self) -> &'static str;
}

impl OpDefBuilder {
    /// Adds the attrs of parameter struct `P` here, in field order (so
    /// attrs declared before and after keep their places), and the
    /// fields' descriptions as the attrs' docs (a `doc()` line for the
    /// same attr wins). A field that cannot be an attr (an `Option`)
    /// makes `finalize` fail naming it. The fields are also attached as
    /// the op's [`ParamFields`] attribute (appended to those of an
    /// earlier `params` call), for [`attrs_from_kwargs`].
    pub fn params<P: Parameter>(self) -> Self {
        let mut b = self;
        let mut fields: Vec<ParamField> = b
            .get_attr::<ParamFields>()
            .map(|f| f.to_vec())
            .unwrap_or_default();
        for field in P::fields() {
            match field.spec() {
                Ok(spec) => {
                    b = b.attr(spec);
                    if !field.description.is_empty() {
                        b = b.attr_doc(field.name, field.description);
                    }
                    fields.push(field);
                }
                Err(e) => {
                    let message = format!("{}: params {}: {}", b.name(), P::NAME, e.message());
                    b = b.error(message);
                }
            }
        }
        b.set_attr::<ParamFields>(fields.into())
    }
}

/// The per-op attribute [`OpDefBuilder::params`] attaches: the fields of
/// the op's parameter structs, so that code holding only the op's name
/// (`Registry::attr::<ParamFields>(op)`) can read MXNet-style string
/// keyword arguments with the checks an OpDef cannot carry (bounds), as
/// MXNet's `attr_parser` does ([`attrs_from_kwargs`]), or print the
/// parameter table ([`doc_table`]).
pub struct ParamFields;

impl OpAttr for ParamFields {
    type Value = [ParamField];
    const NAME: &'static str = "ParamFields";

    fn same(a: &std::sync::Arc<[ParamField]>, b: &std::sync::Arc<[ParamField]>) -> bool {
        a == b
    }
}

/// String keyword arguments of op `op` as attrs, each parsed as its field's
/// type and checked ([`Parameter::from_kwargs`]'s rules and messages);
/// only the given ones (running the op fills in the defaults).
pub fn attrs_from_kwargs(
    op: &str,
    fields: &[ParamField],
    kwargs: &[(&str, &str)],
) -> Result<AttrMap> {
    check::given_from_kwargs(op, fields, kwargs)
}

/// The markdown table of `fields` ([`Parameter::doc_table`] for a struct).
pub fn doc_table(fields: &[ParamField]) -> String {
    check::doc_table(fields)
}

/// What the derives' generated code calls; not an API.
#[doc(hidden)]
pub mod __private {
    pub use super::check::take;
    pub use super::types::{
        assert_listed, bool, bools, dtype, dtypes, enum_from_attr, float, floats, int, ints, shape,
        string, strings,
    };
}

#[cfg(test)]
mod tests;
