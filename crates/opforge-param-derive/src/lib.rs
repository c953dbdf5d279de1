//! `#[derive(Parameter)]` and `#[derive(ParamEnum)]` for opforge-core's
//! `param` module (MXNet's `dmlc::Parameter`): a struct of op parameters
//! with defaults, bounds, enumerations and descriptions becomes the attrs
//! of an OpDef and is read back from a node's attrs or from string keyword
//! arguments.
//!
//! Use the derives through `opforge_core::param` (or `opforge::param`),
//! which re-exports them next to the traits of the same names, as serde
//! does; that module's documentation has a runnable example.
//!
//! # Field attributes: `#[param(...)]`
//!
//! - `default = LIT`: the default value: an integer or float literal
//!   (optionally negative) for numbers, `true`/`false`, a string literal for
//!   `String` fields and for enum fields (a variant's name), a variant of
//!   `DataType` (`default = Float`) for `DataType` fields, `[a, b]` for
//!   `Vec` fields and shapes. A field with neither a default nor an
//!   `Option` type is required.
//! - `none = LIT` (`Option` fields): the value that stands for `None`
//!   where a value must be given: the attr's default in the OpDef (an
//!   attr without a default is required), read back as `None`
//!   (`#[param(none = -1)] axis: Option<i64>` is `axis: int = -1`).
//! - `lower_bound = N`, `upper_bound = N`: an inclusive range, checked when
//!   a value is parsed (number fields only; not part of the OpDef, whose
//!   syntax has no ranges).
//! - `minimum = N`: TensorFlow's `>= N` on an `int` or `list(...)` attr (a
//!   length for lists): part of the OpDef and checked when parsing.
//! - `enumeration("a", "b")`: the allowed values of a `String` field (or
//!   type names of a `DataType` field, or of the elements of a `Vec` of
//!   them); an enum field's values are its variants' names.
//! - `describe = "..."`: the description; by default the field's doc
//!   comment.
//! - `name = "T"`: the attr's name when it is not the field's.
//! - `flatten` (alone): the field is a nested `Parameter` struct whose
//!   fields take its place among this struct's (shared groups of attrs).
//!
//! A struct attribute `#[param(crate = "path")]` names the path of
//! opforge-core's API in the generated code: `::opforge_core` by default,
//! `"::opforge"` for crates that use the facade only.
//!
//! Misuse (an unknown key, a default of the wrong kind, bounds on a field
//! that is not a number, a default outside the bounds or the enumeration,
//! ...) is a compile error pointing at the offending tokens.

use proc_macro::TokenStream;

/// The error for an unknown key of `#[param(...)]`: `place` is where it
/// was written ("" for a field), `takes` the keys allowed there.
fn unknown_key(meta: &syn::meta::ParseNestedMeta<'_>, place: &str, takes: &str) -> syn::Error {
    let key = meta
        .path
        .get_ident()
        .map(ToString::to_string)
        .unwrap_or_else(|| "?".into());
    meta.error(format!("unknown param key '{key}'{place}; {takes}"))
}

mod field;
mod kind;
mod param_enum;
mod parameter;
#[cfg(test)]
mod tests;

/// Implements `Parameter` for a struct with named fields; see the crate
/// documentation for the `#[param(...)]` keys.
#[proc_macro_derive(Parameter, attributes(param))]
pub fn derive_parameter(input: TokenStream) -> TokenStream {
    let input = syn::parse_macro_input!(input as syn::DeriveInput);
    parameter::expand(&input)
        .unwrap_or_else(syn::Error::into_compile_error)
        .into()
}

/// Implements `ParamEnum` (and `ParamType`) for an enum of unit variants:
/// a string attr whose values are the variants' names
/// (`#[param(rename = "NHWC")]` on a variant changes its name).
#[proc_macro_derive(ParamEnum, attributes(param))]
pub fn derive_param_enum(input: TokenStream) -> TokenStream {
    let input = syn::parse_macro_input!(input as syn::DeriveInput);
    param_enum::expand(&input)
        .unwrap_or_else(syn::Error::into_compile_error)
        .into()
}
