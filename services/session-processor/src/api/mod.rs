//! The edge of the sessions API: every handler in [`crate::server`] validates its request here ([`validate`]),
//! checks the caller's tenant against the session it names ([`access`]), then delegates to the engine. Errors carry
//! rich details ([`status`]); lists page by count and bytes ([`paging`]); tonic's own refusals are mapped to the
//! caller's mistake ([`edge`]); a new session's model is checked against the gateway's catalog ([`catalog`]).

pub mod access;
pub mod catalog;
pub mod edge;
pub mod paging;
pub mod status;
pub mod stream_end;
pub mod stream_slots;
pub mod validate;
