//! The one structured error type of opforge: a [`Status`] with one of
//! TensorFlow's canonical error [`Code`]s and a message that says what went
//! wrong and, where it can, how to fix it.

use std::fmt;

/// TensorFlow's canonical error codes (the numbers of `tensorflow/core/protobuf/error_codes.proto`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(i32)]
pub enum Code {
    /// Not an error.
    Ok = 0,
    /// The operation was cancelled.
    Cancelled = 1,
    /// An error with no better code.
    Unknown = 2,
    /// The caller gave an invalid argument (a bad spec, attr, shape or value).
    InvalidArgument = 3,
    /// A deadline passed before the operation finished.
    DeadlineExceeded = 4,
    /// Something asked for (an op, a kernel, a resource) does not exist.
    NotFound = 5,
    /// Something being created already exists.
    AlreadyExists = 6,
    /// The caller may not do this.
    PermissionDenied = 7,
    /// Memory or another resource ran out.
    ResourceExhausted = 8,
    /// The system is not in a state the operation needs.
    FailedPrecondition = 9,
    /// The operation was aborted.
    Aborted = 10,
    /// A value was past the valid range.
    OutOfRange = 11,
    /// Not implemented or not supported.
    Unimplemented = 12,
    /// An invariant broke: a bug in opforge or in a kernel.
    Internal = 13,
    /// A service is unavailable for now.
    Unavailable = 14,
    /// Unrecoverable data loss or corruption.
    DataLoss = 15,
    /// The caller is not authenticated.
    Unauthenticated = 16,
}

impl Code {
    /// Every code, in numeric order.
    pub const ALL: [Code; 17] = [
        Code::Ok,
        Code::Cancelled,
        Code::Unknown,
        Code::InvalidArgument,
        Code::DeadlineExceeded,
        Code::NotFound,
        Code::AlreadyExists,
        Code::PermissionDenied,
        Code::ResourceExhausted,
        Code::FailedPrecondition,
        Code::Aborted,
        Code::OutOfRange,
        Code::Unimplemented,
        Code::Internal,
        Code::Unavailable,
        Code::DataLoss,
        Code::Unauthenticated,
    ];

    /// The name TensorFlow prints, e.g. `INVALID_ARGUMENT`.
    pub fn as_str(self) -> &'static str {
        match self {
            Code::Ok => "OK",
            Code::Cancelled => "CANCELLED",
            Code::Unknown => "UNKNOWN",
            Code::InvalidArgument => "INVALID_ARGUMENT",
            Code::DeadlineExceeded => "DEADLINE_EXCEEDED",
            Code::NotFound => "NOT_FOUND",
            Code::AlreadyExists => "ALREADY_EXISTS",
            Code::PermissionDenied => "PERMISSION_DENIED",
            Code::ResourceExhausted => "RESOURCE_EXHAUSTED",
            Code::FailedPrecondition => "FAILED_PRECONDITION",
            Code::Aborted => "ABORTED",
            Code::OutOfRange => "OUT_OF_RANGE",
            Code::Unimplemented => "UNIMPLEMENTED",
            Code::Internal => "INTERNAL",
            Code::Unavailable => "UNAVAILABLE",
            Code::DataLoss => "DATA_LOSS",
            Code::Unauthenticated => "UNAUTHENTICATED",
        }
    }

    /// The code with this number, if there is one.
    pub fn from_i32(value: i32) -> Option<Code> {
        Code::ALL.get(usize::try_from(value).ok()?).copied()
    }
}

impl fmt::Display for Code {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An error: a canonical [`Code`] and a message.
///
/// `Display` prints `CODE: message`, as TensorFlow's `Status::ToString` does.
///
/// ```
/// use opforge_core::{Code, Status};
/// let s = Status::invalid_argument("Shape must be rank 1 but is rank 2");
/// assert_eq!(s.code(), Code::InvalidArgument);
/// assert_eq!(s.to_string(), "INVALID_ARGUMENT: Shape must be rank 1 but is rank 2");
/// ```
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub struct Status {
    code: Code,
    message: String,
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.code, self.message)
    }
}

macro_rules! status_constructors {
    ($($(#[$doc:meta])* $fn_name:ident => $code:ident),* $(,)?) => {
        $(
            $(#[$doc])*
            pub fn $fn_name(message: impl Into<String>) -> Status {
                Status::new(Code::$code, message)
            }
        )*
    };
}

impl Status {
    /// A status with this code and message.
    pub fn new(code: Code, message: impl Into<String>) -> Status {
        Status {
            code,
            message: message.into(),
        }
    }

    status_constructors! {
        /// An `InvalidArgument` error.
        invalid_argument => InvalidArgument,
        /// A `NotFound` error.
        not_found => NotFound,
        /// An `AlreadyExists` error.
        already_exists => AlreadyExists,
        /// An `Unimplemented` error.
        unimplemented => Unimplemented,
        /// A `ResourceExhausted` error.
        resource_exhausted => ResourceExhausted,
        /// A `FailedPrecondition` error.
        failed_precondition => FailedPrecondition,
        /// An `OutOfRange` error.
        out_of_range => OutOfRange,
        /// An `Internal` error.
        internal => Internal,
        /// An `Unknown` error.
        unknown => Unknown,
        /// A `DataLoss` error.
        data_loss => DataLoss,
        /// A `Cancelled` error.
        cancelled => Cancelled,
        /// An `Aborted` error.
        aborted => Aborted,
        /// An `Unavailable` error.
        unavailable => Unavailable,
    }

    /// A file-system error: `cannot ACTION PATH: ERROR`, its code from the
    /// error's kind (`NotFound`, `PermissionDenied`, `InvalidArgument` for
    /// invalid data, else `Unknown`).
    ///
    /// ```
    /// use opforge_core::{Code, Status};
    /// let err = std::fs::read("/no/such/file").unwrap_err();
    /// let s = Status::io("read", std::path::Path::new("/no/such/file"), &err);
    /// assert_eq!(s.code(), Code::NotFound);
    /// assert!(s.message().starts_with("cannot read /no/such/file: "));
    /// ```
    pub fn io(action: &str, path: &std::path::Path, err: &std::io::Error) -> Status {
        let code = match err.kind() {
            std::io::ErrorKind::NotFound => Code::NotFound,
            std::io::ErrorKind::PermissionDenied => Code::PermissionDenied,
            std::io::ErrorKind::InvalidData => Code::InvalidArgument,
            _ => Code::Unknown,
        };
        Status::new(code, format!("cannot {action} {}: {err}", path.display()))
    }

    /// The error code.
    pub fn code(&self) -> Code {
        self.code
    }

    /// The message, without the code.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The same error with `context` appended to the message on a new,
    /// indented line (TensorFlow's `AppendToMessage`).
    pub fn with_context(mut self, context: impl fmt::Display) -> Status {
        self.message = format!("{}\n\t{}", self.message, context);
        self
    }

    /// The same error with `text` appended to the message as it is.
    pub fn append(mut self, text: impl fmt::Display) -> Status {
        use fmt::Write;
        let _ = write!(self.message, "{text}");
        self
    }

    /// The same error with `text` put in front of the message.
    pub fn prepend(mut self, text: impl fmt::Display) -> Status {
        self.message = format!("{text}{}", self.message);
        self
    }
}

/// The result type of every fallible opforge call.
pub type Result<T, E = Status> = std::result::Result<T, E>;

/// Builds a [`Status`] with a code and a `format!` message:
/// `status!(InvalidArgument, "bad value {}", v)`.
#[macro_export]
macro_rules! status {
    ($code:ident, $($arg:tt)+) => {
        $crate::Status::new($crate::Code::$code, format!($($arg)+))
    };
}

/// Returns `Err(status!(code, ...))` from the enclosing function unless `cond`
/// holds: `ensure!(n >= 0, InvalidArgument, "n must be >= 0, got {}", n)`.
#[macro_export]
macro_rules! ensure {
    ($cond:expr, $code:ident, $($arg:tt)+) => {
        if !($cond) {
            return Err($crate::status!($code, $($arg)+).into());
        }
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_round_trip_through_numbers() {
        for c in Code::ALL {
            assert_eq!(Code::from_i32(c as i32), Some(c));
        }
        assert_eq!(Code::from_i32(17), None);
        assert_eq!(Code::from_i32(-1), None);
    }

    #[test]
    fn display_and_context() {
        let s = Status::not_found("Op type not registered 'Foo'").with_context("while importing");
        assert_eq!(
            s.to_string(),
            "NOT_FOUND: Op type not registered 'Foo'\n\twhile importing"
        );
        let s = status!(InvalidArgument, "x = {}", 3)
            .prepend("Op A: ")
            .append(".");
        assert_eq!(s.message(), "Op A: x = 3.");
    }

    #[test]
    fn ensure_returns_early() {
        fn f(n: i64) -> Result<i64> {
            ensure!(n >= 0, OutOfRange, "n must be >= 0, got {}", n);
            Ok(n)
        }
        assert_eq!(f(2), Ok(2));
        assert_eq!(f(-1).unwrap_err().code(), Code::OutOfRange);
    }
}
