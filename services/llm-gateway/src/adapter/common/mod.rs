//! What several protocol adapters share: the conversation as alternating, merged turns and the checked tool choice
//! ([`turns`]), the caller's provider options ([`options`]), the open content blocks of a Claude stream
//! ([`blocks`]), data URLs and media types ([`encoding`]), tool-call ids ([`ids`]), the output features a request
//! asks for ([`features`]), OpenAI strict schemas ([`strict`]) and what both OpenAI builders write alike
//! ([`openai`]).

pub(crate) mod blocks;
pub(crate) mod encoding;
pub(crate) mod features;
pub mod ids;
pub(crate) mod openai;
pub(crate) mod options;
pub mod strict;
pub(crate) mod turns;
