//! The bearer-token check both services make: parsing the `authorization` value and comparing tokens without
//! revealing, by timing, how much of a guess matched.

/// The credentials of an `authorization` value: RFC 9110's `<scheme> <credentials>`, the `Bearer` scheme matched in
/// any case, the spaces after it skipped. `None` when the scheme is another or the token is empty.
pub fn bearer(value: &str) -> Option<&str> {
    let (scheme, rest) = value.split_once(' ')?;
    let token = rest.trim_start_matches(' ');
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

/// What a gRPC call without a bearer token is told.
pub const MISSING_BEARER: &str = "missing `authorization: Bearer <token>` metadata";

/// The bearer token of a gRPC call's `authorization` metadata; `None` when it has none.
pub fn bearer_metadata(metadata: &tonic::metadata::MetadataMap) -> Option<&str> {
    metadata
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .and_then(bearer)
}

/// The position in `tokens` of the one `presented` equals. Every token is compared, each in constant time, so the
/// time taken does not tell which token, if any, matched or how much of one did.
pub fn find_token<T: AsRef<[u8]>>(
    tokens: impl IntoIterator<Item = T>,
    presented: &str,
) -> Option<usize> {
    let mut found = None;
    for (i, token) in tokens.into_iter().enumerate() {
        if constant_time_eq(token.as_ref(), presented.as_bytes()) {
            found = Some(i);
        }
    }
    found
}

/// Compares without an early exit on the first differing byte (a length difference is not hidden: token lengths
/// are not secret).
pub fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// What a client sends on every call: `authorization: Bearer <token>` (a tonic interceptor), for the command-line
/// clients of both services.
#[derive(Clone)]
pub struct BearerInterceptor(tonic::metadata::MetadataValue<tonic::metadata::Ascii>);

impl BearerInterceptor {
    /// The interceptor sending `token`; an error when the token cannot be a header value.
    pub fn new(token: &str) -> Result<Self, tonic::metadata::errors::InvalidMetadataValue> {
        Ok(BearerInterceptor(format!("Bearer {token}").parse()?))
    }
}

impl tonic::service::Interceptor for BearerInterceptor {
    fn call(&mut self, mut req: tonic::Request<()>) -> Result<tonic::Request<()>, tonic::Status> {
        req.metadata_mut().insert("authorization", self.0.clone());
        Ok(req)
    }
}

#[cfg(test)]
#[path = "auth_tests.rs"]
mod tests;
