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
        wit::Error { code: e.code, message: cut(e.message) }
    }
}

/// An error message a plugin returns (and a `describe` refusal): the host takes no more.
pub const MAX_ERROR_MESSAGE: usize = 64 << 10;

/// `message` cut to at most [`MAX_ERROR_MESSAGE`] bytes, at a character boundary: a longer one
/// would be a fault of the plugin, and the start says what went wrong.
pub fn cut(message: String) -> String {
    cut_to(message, MAX_ERROR_MESSAGE)
}

/// `message` cut to at most `max` bytes, at a character boundary.
pub(crate) fn cut_to(mut message: String, max: usize) -> String {
    if message.len() > max {
        let mut end = max;
        while !message.is_char_boundary(end) {
            end -= 1;
        }
        message.truncate(end);
    }
    message
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_error_messages_are_cut_at_a_character_boundary() {
        assert_eq!(cut("short".into()), "short");
        assert_eq!(cut("x".repeat(MAX_ERROR_MESSAGE)).len(), MAX_ERROR_MESSAGE);
        assert_eq!(cut("x".repeat(MAX_ERROR_MESSAGE + 10)).len(), MAX_ERROR_MESSAGE);
        // 3-byte characters: 65536 is not a boundary, 65535 is.
        let cut = cut("€".repeat(30_000));
        assert_eq!(cut.len(), 65_535);
        assert!(cut.chars().all(|c| c == '€'));
    }
}
