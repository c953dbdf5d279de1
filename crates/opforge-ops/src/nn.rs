//! Neural-network ops.
