//! The crate's one error type. The Python bindings map each variant to an exception class rooted at
//! `ledgercache.LedgerCacheError` (see `src/python/errors.rs`).

use std::fmt;

/// Every failure the core reports. Variants carry enough context for a one-line message that names
/// the offending argument or object.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// An argument is out of range or malformed; `name` is the argument's name as the caller spelled it.
    #[error("invalid {name}: {reason}")]
    InvalidArgument { name: &'static str, reason: String },
    /// A settings key that does not exist.
    #[error("unknown setting {key:?}{}", suggestion(.hint))]
    UnknownSetting { key: String, hint: Option<String> },
    /// A feature is configured but this object cannot provide it.
    #[error("{0}")]
    Unsupported(String),
    /// An object was used after it was closed or removed.
    #[error("{0} is closed")]
    Closed(String),
}

fn suggestion(hint: &Option<String>) -> String {
    match hint {
        Some(h) => format!(" (did you mean {h:?}?)"),
        None => String::new(),
    }
}

impl Error {
    pub fn invalid(name: &'static str, reason: impl fmt::Display) -> Self {
        Error::InvalidArgument {
            name,
            reason: reason.to_string(),
        }
    }
}

pub type Result<T> = std::result::Result<T, Error>;
