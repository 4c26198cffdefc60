//! AWS Signature Version 4 request signing, written over `sha2` (docs/providers.md "Bedrock", docs/gateway.md
//! "AWS Bedrock": why not the `aws-sigv4` crate).
//!
//! Pure: the time, the credentials and the request are all inputs, so the published test vectors are unit tests.
//! The steps: a canonical request (method, canonical URI, sorted query, sorted lower-case headers, the signed header
//! names, the payload's SHA-256), a string to sign over its hash and the credential scope
//! (`date/region/service/aws4_request`), a signing key derived by chained HMACs from the secret, and the final HMAC.

use sha2::{Digest, Sha256};

/// The signing algorithm name, first word of the `authorization` header.
pub const ALGORITHM: &str = "AWS4-HMAC-SHA256";

/// What a request is signed for.
#[derive(Debug, Clone, Copy)]
pub struct Scope<'a> {
    /// e.g. `us-east-1`.
    pub region: &'a str,
    /// e.g. `bedrock`.
    pub service: &'a str,
    /// `YYYYMMDDTHHMMSSZ`, also sent as `x-amz-date`.
    pub amz_date: &'a str,
}

impl Scope<'_> {
    /// `YYYYMMDD/region/service/aws4_request`.
    pub fn credential_scope(&self) -> String {
        format!(
            "{}/{}/{}/aws4_request",
            self.date(),
            self.region,
            self.service
        )
    }

    fn date(&self) -> &str {
        self.amz_date.get(..8).unwrap_or(self.amz_date)
    }
}

/// The parts of an HTTP request that are signed.
#[derive(Debug, Clone, Copy)]
pub struct Request<'a> {
    pub method: &'a str,
    /// The path as sent on the wire (already percent-encoded where it needs to be).
    pub path: &'a str,
    /// The query string without `?`, empty when none.
    pub query: &'a str,
    /// Every header to sign, `host` and `x-amz-date` included; names in any case.
    pub headers: &'a [(&'a str, &'a str)],
    /// Hex SHA-256 of the body.
    pub payload_sha256: &'a str,
}

/// A computed signature.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Signed {
    /// `host;x-amz-date;…`
    pub signed_headers: String,
    /// Hex signature.
    pub signature: String,
    /// The full `authorization` header value.
    pub authorization: String,
}

/// Signs `req` for `scope` with the key pair.
pub fn sign(access_key_id: &str, secret: &str, scope: &Scope<'_>, req: &Request<'_>) -> Signed {
    let (canonical, signed_headers) = canonical_request(req);
    let to_sign = string_to_sign(scope, &canonical);
    let key = signing_key(secret, scope.date(), scope.region, scope.service);
    let signature = hex(&hmac_sha256(&key, to_sign.as_bytes()));
    let authorization = format!(
        "{ALGORITHM} Credential={access_key_id}/{}, SignedHeaders={signed_headers}, Signature={signature}",
        scope.credential_scope()
    );
    Signed {
        signed_headers,
        signature,
        authorization,
    }
}

/// The canonical request and its signed-header list.
pub fn canonical_request(req: &Request<'_>) -> (String, String) {
    let mut headers: Vec<(String, String)> = req
        .headers
        .iter()
        .map(|(n, v)| (n.to_ascii_lowercase(), collapse_spaces(v)))
        .collect();
    headers.sort_by(|a, b| a.0.cmp(&b.0));
    // Repeated names are signed once, their values joined with commas in order.
    let mut merged: Vec<(String, String)> = Vec::with_capacity(headers.len());
    for (name, value) in headers {
        match merged.last_mut() {
            Some((last, joined)) if *last == name => {
                joined.push(',');
                joined.push_str(&value);
            }
            _ => merged.push((name, value)),
        }
    }
    let signed_headers = merged
        .iter()
        .map(|(n, _)| n.as_str())
        .collect::<Vec<_>>()
        .join(";");
    let mut out = String::with_capacity(256);
    out.push_str(req.method);
    out.push('\n');
    out.push_str(&uri_encode(req.path, false));
    out.push('\n');
    out.push_str(&canonical_query(req.query));
    out.push('\n');
    for (name, value) in &merged {
        out.push_str(name);
        out.push(':');
        out.push_str(value);
        out.push('\n');
    }
    out.push('\n');
    out.push_str(&signed_headers);
    out.push('\n');
    out.push_str(req.payload_sha256);
    (out, signed_headers)
}

/// `AWS4-HMAC-SHA256\n<date>\n<scope>\n<hex sha256 of the canonical request>`.
pub fn string_to_sign(scope: &Scope<'_>, canonical_request: &str) -> String {
    format!(
        "{ALGORITHM}\n{}\n{}\n{}",
        scope.amz_date,
        scope.credential_scope(),
        sha256_hex(canonical_request.as_bytes())
    )
}

/// `HMAC(HMAC(HMAC(HMAC("AWS4" + secret, date), region), service), "aws4_request")`.
pub fn signing_key(secret: &str, date: &str, region: &str, service: &str) -> [u8; 32] {
    let k_date = hmac_sha256(format!("AWS4{secret}").as_bytes(), date.as_bytes());
    let k_region = hmac_sha256(&k_date, region.as_bytes());
    let k_service = hmac_sha256(&k_region, service.as_bytes());
    hmac_sha256(&k_service, b"aws4_request")
}

/// HMAC-SHA256 (RFC 2104): `H((K ^ opad) || H((K ^ ipad) || m))`, the key hashed first when longer than a block.
pub fn hmac_sha256(key: &[u8], message: &[u8]) -> [u8; 32] {
    const BLOCK: usize = 64;
    let mut block = [0u8; BLOCK];
    if key.len() > BLOCK {
        block[..32].copy_from_slice(&Sha256::digest(key));
    } else {
        block[..key.len()].copy_from_slice(key);
    }
    let mut inner = Sha256::new();
    inner.update(block.map(|b| b ^ 0x36));
    inner.update(message);
    let mut outer = Sha256::new();
    outer.update(block.map(|b| b ^ 0x5c));
    outer.update(inner.finalize());
    outer.finalize().into()
}

/// Lower-case hex SHA-256.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

/// Lower-case hex.
pub fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        out.push(char::from(DIGITS[usize::from(b >> 4)]));
        out.push(char::from(DIGITS[usize::from(b & 0xf)]));
    }
    out
}

/// Percent-encodes every byte but the unreserved ones (`A-Z a-z 0-9 - _ . ~`), and `/` unless `slash` is set, with
/// upper-case hex, as SigV4 requires. Applied to a path that is already encoded on the wire, a `%` becomes `%25`:
/// every service but S3 signs the path encoded twice.
pub fn uri_encode(text: &str, slash: bool) -> String {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    let mut out = String::with_capacity(text.len());
    for &b in text.as_bytes() {
        if b.is_ascii_alphanumeric()
            || matches!(b, b'-' | b'_' | b'.' | b'~')
            || (b == b'/' && !slash)
        {
            out.push(char::from(b));
        } else {
            out.push('%');
            out.push(char::from(HEX[usize::from(b >> 4)]));
            out.push(char::from(HEX[usize::from(b & 0xf)]));
        }
    }
    out
}

/// The query's `name=value` pairs encoded and sorted by name, then value.
fn canonical_query(query: &str) -> String {
    if query.is_empty() {
        return String::new();
    }
    let mut pairs: Vec<(String, String)> = query
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            (
                uri_encode(&percent_decode(k), true),
                uri_encode(&percent_decode(v), true),
            )
        })
        .collect();
    pairs.sort();
    pairs
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join("&")
}

fn percent_decode(text: &str) -> String {
    let b = text.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex_at = |j: usize| b.get(j).and_then(|c| char::from(*c).to_digit(16));
        match (b[i], hex_at(i + 1), hex_at(i + 2)) {
            (b'%', Some(h), Some(l)) => {
                out.push((h * 16 + l) as u8);
                i += 3;
            }
            (c, _, _) => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Trims a header value and collapses inner runs of spaces to one.
fn collapse_spaces(value: &str) -> String {
    value.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// `YYYYMMDDTHHMMSSZ` for `secs` seconds since the Unix epoch (UTC).
pub fn amz_date(secs: u64) -> String {
    let days = i64::try_from(secs / 86_400).unwrap_or(0);
    let rem = secs % 86_400;
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}{month:02}{day:02}T{:02}{:02}{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

#[cfg(test)]
#[path = "sigv4_tests.rs"]
mod tests;
