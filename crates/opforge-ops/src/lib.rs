//! The standard opforge op library.
#![warn(missing_docs)]
