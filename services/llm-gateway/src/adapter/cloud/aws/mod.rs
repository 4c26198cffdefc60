//! AWS: the credentials and region of a Bedrock provider ([`auth`]) and the Signature Version 4 signer
//! ([`sigv4`]) the transport calls once a request's body bytes are known (the signature covers the exact body).

pub mod auth;
pub mod sigv4;
