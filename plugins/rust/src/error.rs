//! The error a controller returns, and the codes the host's calls fail with.

use std::fmt;

use crate::bindings::kubewasm::controller::types as wit;

pub use wit::ErrorCode;

/// A failed host call or reconcile: a code to branch on and a message for humans. Returning one
/// from `reconcile` retries the key with backoff and records a Warning Event with the message
/// (except for [`ErrorCode::Conflict`], which only retries).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    pub code: ErrorCode,
    pub message: String,
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Error { code, message: message.into() }
    }

    /// An error of code `other` from anything printable: `.map_err(Error::other)`.
    pub fn other(message: impl fmt::Display) -> Self {
        Error::new(ErrorCode::Other, message.to_string())
    }

    pub fn is_not_found(&self) -> bool {
        self.code == ErrorCode::NotFound
    }

    pub fn is_conflict(&self) -> bool {
        self.code == ErrorCode::Conflict
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}: {}", self.code, self.message)
    }
}

impl From<serde_json::Error> for Error {
    fn from(e: serde_json::Error) -> Self {
        Error::new(ErrorCode::Invalid, e.to_string())
    }
}

impl From<wit::Error> for Error {
    fn from(e: wit::Error) -> Self {
        Error { code: e.code, message: e.message }
    }
}

/// What a call returns to the host: the message cut to the 64 KiB the host takes (a longer one
/// would be a fault).
impl From<Error> for wit::Error {
    fn from(e: Error) -> Self {
        wit::Error { code: e.code, message: crate::bounds::cut(e.message) }
    }
}
