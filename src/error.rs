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
    /// No such cursor, ledger or entry; `what` says which kind.
    #[error("unknown {what} {name:?}")]
    NotFound { what: &'static str, name: String },
    /// The storage backend failed (I/O, or the user's loader).
    #[error("storage: {0}")]
    Storage(String),
    /// A segment file is damaged from `offset` on; entries before it are intact.
    #[error("corrupt segment file {file}: {reason} at byte {offset}")]
    CorruptSegment {
        file: String,
        offset: u64,
        reason: String,
    },
    /// A workload (or other input) would need more memory than its budget; the message names the
    /// estimate and the setting or flag that makes it fit. Checked before anything is allocated.
    #[error("{0}")]
    ResourceLimit(String),
    /// A read started while the cursor's epoch was being increased (PIP-269).
    #[error("cursor {0:?} is being modified (an epoch increase is running)")]
    CursorModifying(String),
    /// A second epoch increase was started while one was running (PIP-269).
    #[error("cursor {0:?} already has an epoch increase running")]
    CursorEpochConflict(String),
    /// A long run was stopped by its caller's interrupt check (the Python bindings raise the
    /// caller's own exception, e.g. `KeyboardInterrupt`, instead).
    #[error("interrupted")]
    Interrupted,
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

    pub fn not_found(what: &'static str, name: impl fmt::Display) -> Self {
        Error::NotFound {
            what,
            name: name.to_string(),
        }
    }

    pub fn storage(context: impl fmt::Display, err: impl fmt::Display) -> Self {
        Error::Storage(format!("{context}: {err}"))
    }
}

pub type Result<T> = std::result::Result<T, Error>;
