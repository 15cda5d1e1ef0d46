//! Why a replay stops short: a failed event, or one naming a cursor only named later.

use super::super::trace::{Names, Op};
use crate::error::Error;

/// Why a replay stopped short of the events it was given.
#[derive(Debug)]
pub(crate) enum Stopped {
    Failed(Error),
    /// An event on a cursor its topic never opened; the error names the cursor, once the names
    /// are at hand ([`Stopped::named`]).
    UnknownCursor {
        row: u64,
        op: Op,
        cursor: u32,
    },
    /// An open of a cursor id that belongs to another topic: the error names both topics and the
    /// cursor ([`Stopped::named`]). (Only hand-built events can do this; [`Replay::run`] refuses
    /// them against their names before the engine, which knows an id's topic from its first open
    /// only.)
    ///
    /// [`Replay::run`]: super::Replay::run
    CursorOfAnotherTopic {
        row: u64,
        cursor: u32,
        /// The topic the id belongs to: its names' topic ([`Replay::run`]), or the one that opened
        /// it first (the engine).
        ///
        /// [`Replay::run`]: super::Replay::run
        of: u32,
        /// The row's topic.
        named_by: u32,
    },
}

impl From<Error> for Stopped {
    fn from(e: Error) -> Self {
        Stopped::Failed(e)
    }
}

impl Stopped {
    /// The error, with the cursor's name from `names` (which have interned every cursor of the
    /// events replayed so far).
    pub(crate) fn named(self, names: &Names) -> Error {
        let cursor_name = |id: u32| names.cursors.get(id as usize).map_or("?", |c| c.1.as_str());
        let topic_name = |id: u32| names.topics.get(id as usize).map_or("?", String::as_str);
        match self {
            Stopped::Failed(e) => e,
            Stopped::CursorOfAnotherTopic {
                row,
                cursor,
                of,
                named_by,
            } => Error::invalid(
                "trace",
                format!(
                    "row {row}: cursor {:?} (id {cursor}) is a cursor of topic {:?}, not of the \
                     row's topic {:?}",
                    cursor_name(cursor),
                    topic_name(of),
                    topic_name(named_by)
                ),
            ),
            Stopped::UnknownCursor { row, op, cursor } => {
                let cursor = cursor_name(cursor);
                Error::invalid(
                    "trace",
                    format!(
                        "row {row}: {:?} on cursor {cursor:?}, which was never opened (or not \
                         since its topic was unloaded: an `open` row first)",
                        op.name()
                    ),
                )
            }
        }
    }
}
