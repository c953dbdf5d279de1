//! Errors with TensorFlow's canonical codes: [`Code`], [`Status`],
//! [`Result`] and the [`ensure!`](crate::ensure) macro, as in opforge-core.

use core::fmt;
use opforge_abi::OpforgeCode;

/// A canonical status code (TensorFlow's `error::Code`), carried as the
/// integer of the ABI so that a code unknown to this SDK survives (rule R3).
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
#[repr(transparent)]
pub struct Code(pub OpforgeCode);

#[allow(non_upper_case_globals)]
impl Code {
    /// Not an error.
    pub const Ok: Code = Code(opforge_abi::OPFORGE_OK);
    /// The operation was cancelled.
    pub const Cancelled: Code = Code(opforge_abi::OPFORGE_CANCELLED);
    /// Unknown error.
    pub const Unknown: Code = Code(opforge_abi::OPFORGE_UNKNOWN);
    /// The caller gave an invalid argument.
    pub const InvalidArgument: Code = Code(opforge_abi::OPFORGE_INVALID_ARGUMENT);
    /// A deadline expired.
    pub const DeadlineExceeded: Code = Code(opforge_abi::OPFORGE_DEADLINE_EXCEEDED);
    /// Something requested was not found.
    pub const NotFound: Code = Code(opforge_abi::OPFORGE_NOT_FOUND);
    /// Something to be created already exists.
    pub const AlreadyExists: Code = Code(opforge_abi::OPFORGE_ALREADY_EXISTS);
    /// The caller may not do this.
    pub const PermissionDenied: Code = Code(opforge_abi::OPFORGE_PERMISSION_DENIED);
    /// A resource is exhausted.
    pub const ResourceExhausted: Code = Code(opforge_abi::OPFORGE_RESOURCE_EXHAUSTED);
    /// The system is not in a state the operation needs.
    pub const FailedPrecondition: Code = Code(opforge_abi::OPFORGE_FAILED_PRECONDITION);
    /// The operation was aborted.
    pub const Aborted: Code = Code(opforge_abi::OPFORGE_ABORTED);
    /// A value was out of range.
    pub const OutOfRange: Code = Code(opforge_abi::OPFORGE_OUT_OF_RANGE);
    /// Not implemented (also: a host slot newer than the host).
    pub const Unimplemented: Code = Code(opforge_abi::OPFORGE_UNIMPLEMENTED);
    /// An internal error (also: a caught panic).
    pub const Internal: Code = Code(opforge_abi::OPFORGE_INTERNAL);
    /// The service is unavailable.
    pub const Unavailable: Code = Code(opforge_abi::OPFORGE_UNAVAILABLE);
    /// Unrecoverable data loss or corruption.
    pub const DataLoss: Code = Code(opforge_abi::OPFORGE_DATA_LOSS);
    /// The caller is not authenticated.
    pub const Unauthenticated: Code = Code(opforge_abi::OPFORGE_UNAUTHENTICATED);

    /// TensorFlow's name of the code (`INVALID_ARGUMENT`), or `None` for a
    /// value outside 0..=16.
    pub const fn name(self) -> Option<&'static str> {
        Some(match self.0 {
            0 => "OK",
            1 => "CANCELLED",
            2 => "UNKNOWN",
            3 => "INVALID_ARGUMENT",
            4 => "DEADLINE_EXCEEDED",
            5 => "NOT_FOUND",
            6 => "ALREADY_EXISTS",
            7 => "PERMISSION_DENIED",
            8 => "RESOURCE_EXHAUSTED",
            9 => "FAILED_PRECONDITION",
            10 => "ABORTED",
            11 => "OUT_OF_RANGE",
            12 => "UNIMPLEMENTED",
            13 => "INTERNAL",
            14 => "UNAVAILABLE",
            15 => "DATA_LOSS",
            16 => "UNAUTHENTICATED",
            _ => return None,
        })
    }
}

impl fmt::Debug for Code {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl fmt::Display for Code {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.name() {
            Some(name) => f.write_str(name),
            None => write!(f, "code {}", self.0),
        }
    }
}

/// An error: a canonical [`Code`] and a message.
#[derive(Clone, PartialEq, Eq)]
pub struct Status {
    /// The code (never [`Code::Ok`] for an error made by this SDK).
    pub code: Code,
    /// The message.
    pub message: String,
}

macro_rules! constructors {
    ($($(#[$m:meta])* $fn:ident => $code:ident,)*) => {
        impl Status {
            $(
                $(#[$m])*
                pub fn $fn(message: impl Into<String>) -> Status {
                    Status::new(Code::$code, message)
                }
            )*
        }
    };
}

constructors! {
    /// An `INVALID_ARGUMENT` error.
    invalid_argument => InvalidArgument,
    /// A `NOT_FOUND` error.
    not_found => NotFound,
    /// An `ALREADY_EXISTS` error.
    already_exists => AlreadyExists,
    /// A `FAILED_PRECONDITION` error.
    failed_precondition => FailedPrecondition,
    /// An `OUT_OF_RANGE` error.
    out_of_range => OutOfRange,
    /// An `UNIMPLEMENTED` error.
    unimplemented => Unimplemented,
    /// An `INTERNAL` error.
    internal => Internal,
    /// A `RESOURCE_EXHAUSTED` error.
    resource_exhausted => ResourceExhausted,
    /// An `UNKNOWN` error.
    unknown => Unknown,
}

impl Status {
    /// An error of `code` with `message`.
    pub fn new(code: Code, message: impl Into<String>) -> Status {
        Status {
            code,
            message: message.into(),
        }
    }
}

impl fmt::Debug for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.code, self.message)
    }
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.code, self.message)
    }
}

impl std::error::Error for Status {}

/// The result of every fallible SDK call.
pub type Result<T> = core::result::Result<T, Status>;

/// Returns `Err(Status)` of the code `$code` (a [`Code`] constant name such
/// as `InvalidArgument`) with a formatted message unless `$cond` holds, as
/// opforge-core's `ensure!`:
///
/// ```
/// # use opforge_plugin::{ensure, Result};
/// fn check(i: i64) -> Result<()> {
///     ensure!(i >= 0, InvalidArgument, "Need preserve_index >= 0, got {}", i);
///     Ok(())
/// }
/// assert!(check(-1).is_err());
/// ```
#[macro_export]
macro_rules! ensure {
    ($cond:expr, $code:ident, $($fmt:tt)+) => {
        if !($cond) {
            return ::core::result::Result::Err($crate::Status::new(
                $crate::Code::$code,
                ::std::format!($($fmt)+),
            ));
        }
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_have_tensorflow_names() {
        assert_eq!(Code::InvalidArgument.to_string(), "INVALID_ARGUMENT");
        assert_eq!(Code(99).to_string(), "code 99");
        assert_eq!(
            Status::internal("boom").to_string(),
            "INTERNAL: boom".to_string()
        );
    }

    fn f(x: i32) -> Result<i32> {
        ensure!(x > 0, OutOfRange, "x is {}", x);
        Ok(x)
    }

    #[test]
    fn ensure_returns_the_code() {
        assert_eq!(f(1), Ok(1));
        let e = f(-2).unwrap_err();
        assert_eq!(e.code, Code::OutOfRange);
        assert_eq!(e.message, "x is -2");
    }
}
