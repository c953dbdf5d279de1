//! Matrix products.
