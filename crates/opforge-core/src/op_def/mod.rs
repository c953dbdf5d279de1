//! The op definition language: spec strings, [`OpDefBuilder`], attr values
//! and OpDef validation, with TensorFlow 2.x semantics.

mod attr_value;
mod builder;
mod spec;
mod validate;

pub use crate::strings::c_escape;
pub use attr_value::{
    attr_value_has_type, attr_value_type, data_type_list_string, format_float, list_len,
    parse_attr_value, split_list_type, summarize_attr_value, summarize_shape, validate_attr_value,
    ATTR_BASE_TYPES,
};
pub use builder::{OpDefBuilder, WithoutKernel};
pub use spec::{
    is_valid_arg_name, is_valid_attr_name, parse_arg_spec, parse_attr_spec, ArgSpec, SpecError,
};
pub use validate::{is_valid_op_name, validate_op_def};

#[cfg(test)]
mod spec_tests;
