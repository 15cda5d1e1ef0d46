//! What a broker builds around the entry cache: the managed ledger and its cursors, the cursor
//! containers, the read flow, storage and the publish path's throttling. It imports from
//! [`crate::cache`], never from [`crate::lab`].

pub mod cursors;
pub mod ledger;
pub mod positions;
pub mod read_flow;
pub mod storage;
pub mod throttle;
