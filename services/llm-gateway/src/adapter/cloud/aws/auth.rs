//! AWS credentials and the request signer of the Bedrock provider (docs/gateway.md "AWS Bedrock").
//!
//! Credentials are resolved once per configuration load, in the order the AWS SDKs use for static credentials:
//! 1. `AWS_ACCESS_KEY_ID` + `AWS_SECRET_ACCESS_KEY` (+ `AWS_SESSION_TOKEN`);
//! 2. the profile (`aws.profile`, else `AWS_PROFILE`, else `default`) of the shared credentials file
//!    (`AWS_SHARED_CREDENTIALS_FILE`, else `~/.aws/credentials`);
//! 3. the same profile in the shared config file (`AWS_CONFIG_FILE`, else `~/.aws/config`, where it is written
//!    `[profile name]` except for `default`).
//!
//! The region is `aws.region`, else `AWS_REGION`, else `AWS_DEFAULT_REGION`, else the profile's `region` in the
//! config file. Finding the files and reading the environment is the caller's edge ([`load`]); everything else is
//! pure ([`resolve`], [`parse_ini`]).

use std::time::SystemTime;

use http::{HeaderName, HeaderValue};

use super::sigv4;
use crate::adapter::transport::RequestSigner;
use crate::error::{ErrorKind, ProviderError};
use crate::settings::Secret;
use service_kit::env::Env;

/// The SigV4 service name of the Bedrock runtime.
pub const SERVICE: &str = "bedrock";

/// A resolved key pair, with the session token of temporary credentials.
#[derive(Clone, PartialEq, Eq)]
pub struct Credentials {
    pub access_key_id: String,
    pub secret_access_key: Secret,
    pub session_token: Option<Secret>,
    /// Where they came from (`environment`, `credentials file profile default`), for logs.
    pub source: String,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Credentials")
            .field("access_key_id", &self.access_key_id)
            .field("source", &self.source)
            .finish_non_exhaustive()
    }
}

/// What `[providers.<id>.aws]` sets.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AwsFile {
    /// Region, e.g. `us-east-1`.
    pub region: Option<String>,
    /// Profile of the shared files.
    pub profile: Option<String>,
}

/// The contents of the two shared files, when they exist.
#[derive(Debug, Clone, Default)]
pub struct SharedFiles {
    pub credentials: Option<String>,
    pub config: Option<String>,
}

/// Credentials and region of one provider: what signs its requests.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AwsSigner {
    pub credentials: Credentials,
    pub region: String,
}

/// Reads the shared files the environment points at (or the default ones under `HOME`), then [`resolve`]s.
pub fn load(file: &AwsFile, env: &dyn Env) -> Result<AwsSigner, String> {
    let home = env.var("HOME");
    let read = |var: &str, default: &str| {
        let path = env
            .var(var)
            .or_else(|| home.as_ref().map(|h| format!("{h}/.aws/{default}")))?;
        std::fs::read_to_string(path).ok()
    };
    let files = SharedFiles {
        credentials: read("AWS_SHARED_CREDENTIALS_FILE", "credentials"),
        config: read("AWS_CONFIG_FILE", "config"),
    };
    resolve(file, env, &files)
}

/// Picks the credentials and region from the environment and the shared files' contents.
pub fn resolve(file: &AwsFile, env: &dyn Env, files: &SharedFiles) -> Result<AwsSigner, String> {
    let profile = file
        .profile
        .clone()
        .or_else(|| env.var("AWS_PROFILE"))
        .unwrap_or_else(|| "default".to_string());
    let config_section = if profile == "default" {
        "default".to_string()
    } else {
        format!("profile {profile}")
    };
    let cred_file = files.credentials.as_deref().map(parse_ini);
    let conf_file = files.config.as_deref().map(parse_ini);
    let lookup = |ini: &Option<Vec<Entry>>, section: &str, key: &str| {
        ini.as_ref().and_then(|e| value(e, section, key))
    };

    let credentials = match (
        env.var("AWS_ACCESS_KEY_ID"),
        env.var("AWS_SECRET_ACCESS_KEY"),
    ) {
        (Some(id), Some(secret)) => Some(Credentials {
            access_key_id: id,
            secret_access_key: Secret::new(secret),
            session_token: env.var("AWS_SESSION_TOKEN").map(Secret::new),
            source: "environment".into(),
        }),
        _ => None,
    };
    let from_ini = |ini: &Option<Vec<Entry>>, section: &str, source: &str| {
        let id = lookup(ini, section, "aws_access_key_id")?;
        let secret = lookup(ini, section, "aws_secret_access_key")?;
        Some(Credentials {
            access_key_id: id,
            secret_access_key: Secret::new(secret),
            session_token: lookup(ini, section, "aws_session_token").map(Secret::new),
            source: format!("{source} profile {profile}"),
        })
    };
    let credentials = credentials
        .or_else(|| from_ini(&cred_file, &profile, "credentials file"))
        .or_else(|| from_ini(&conf_file, &config_section, "config file"))
        .ok_or_else(|| {
            format!(
                "no AWS credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or give profile `{profile}` \
                 aws_access_key_id and aws_secret_access_key in the shared credentials or config file"
            )
        })?;
    let region = file
        .region
        .clone()
        .or_else(|| env.var("AWS_REGION"))
        .or_else(|| env.var("AWS_DEFAULT_REGION"))
        .or_else(|| lookup(&conf_file, &config_section, "region"))
        .ok_or_else(|| {
            "no AWS region: set aws.region, AWS_REGION or the profile's region".to_string()
        })?;
    if region.is_empty()
        || !region
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-')
    {
        return Err(format!("`{region}` is not an AWS region"));
    }
    Ok(AwsSigner {
        credentials,
        region,
    })
}

/// One `key = value` of an INI file, with its section.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub section: String,
    pub key: String,
    pub value: String,
}

/// The AWS shared-file dialect of INI: `[section]` headers, `key = value` lines, `#` and `;` comments; indented
/// lines (nested sub-settings) are skipped.
pub fn parse_ini(text: &str) -> Vec<Entry> {
    let mut section = String::new();
    let mut out = Vec::new();
    for line in text.lines() {
        if line.starts_with([' ', '\t']) {
            continue;
        }
        let line = line.trim();
        if line.is_empty() || line.starts_with(['#', ';']) {
            continue;
        }
        if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            section = name.split_whitespace().collect::<Vec<_>>().join(" ");
        } else if let Some((k, v)) = line.split_once('=') {
            out.push(Entry {
                section: section.clone(),
                key: k.trim().to_ascii_lowercase(),
                value: v.trim().to_string(),
            });
        }
    }
    out
}

fn value(entries: &[Entry], section: &str, key: &str) -> Option<String> {
    entries
        .iter()
        .rev()
        .find(|e| e.section == section && e.key == key && !e.value.is_empty())
        .map(|e| e.value.clone())
}

impl AwsSigner {
    /// The default endpoint of the Bedrock runtime in this signer's region.
    pub fn default_endpoint(&self) -> String {
        format!("https://bedrock-runtime.{}.amazonaws.com", self.region)
    }

    /// The credential values that must never appear in an error or log.
    pub fn secrets(&self) -> Vec<String> {
        let mut out = vec![self.credentials.secret_access_key.expose().to_string()];
        if let Some(t) = &self.credentials.session_token {
            out.push(t.expose().to_string());
        }
        out
    }

    /// The auth headers for a POST of `body` to `url` at `secs` since the epoch (pure, for tests).
    pub fn sign_at(
        &self,
        url: &str,
        content_type: &str,
        body: &[u8],
        secs: u64,
    ) -> Result<Vec<(&'static str, String)>, String> {
        let (host, path, query) = split_url(url).ok_or("the request URL has no host")?;
        let amz_date = sigv4::amz_date(secs);
        let payload = sigv4::sha256_hex(body);
        let token = self.credentials.session_token.as_ref().map(Secret::expose);
        let mut headers: Vec<(&str, &str)> = vec![
            ("content-type", content_type),
            ("host", host),
            ("x-amz-content-sha256", &payload),
            ("x-amz-date", &amz_date),
        ];
        if let Some(t) = token {
            headers.push(("x-amz-security-token", t));
        }
        let scope = sigv4::Scope {
            region: &self.region,
            service: SERVICE,
            amz_date: &amz_date,
        };
        let req = sigv4::Request {
            method: "POST",
            path,
            query,
            headers: &headers,
            payload_sha256: &payload,
        };
        let signed = sigv4::sign(
            &self.credentials.access_key_id,
            self.credentials.secret_access_key.expose(),
            &scope,
            &req,
        );
        let mut out = vec![
            ("authorization", signed.authorization),
            ("x-amz-content-sha256", payload.clone()),
            ("x-amz-date", amz_date.clone()),
        ];
        if let Some(t) = token {
            out.push(("x-amz-security-token", t.to_string()));
        }
        Ok(out)
    }
}

/// `(host[:port], path, query)` of an absolute URL; the default port of the scheme is dropped, as clients send it.
pub fn split_url(url: &str) -> Option<(&str, &str, &str)> {
    let (scheme, rest) = url.split_once("://")?;
    let (authority, tail) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    let host = match (scheme, authority.rsplit_once(':')) {
        ("https", Some((h, "443"))) | ("http", Some((h, "80"))) => h,
        _ => authority,
    };
    if host.is_empty() {
        return None;
    }
    let (path, query) = tail.split_once('?').unwrap_or((tail, ""));
    Some((host, path, query))
}

impl RequestSigner for AwsSigner {
    fn sign(
        &self,
        url: &str,
        content_type: &str,
        body: &[u8],
    ) -> Result<Vec<(HeaderName, HeaderValue)>, ProviderError> {
        let secs = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0);
        let headers = self
            .sign_at(url, content_type, body, secs)
            .map_err(|m| ProviderError::new(ErrorKind::Auth, format!("signing failed: {m}")))?;
        headers
            .into_iter()
            .map(|(name, value)| {
                let mut value = HeaderValue::from_str(&value).map_err(|_| {
                    ProviderError::new(
                        ErrorKind::Auth,
                        format!("the AWS credentials make an invalid {name} header"),
                    )
                })?;
                value.set_sensitive(true);
                Ok((HeaderName::from_static(name), value))
            })
            .collect()
    }

    fn secrets(&self) -> Vec<String> {
        AwsSigner::secrets(self)
    }
}

#[cfg(test)]
#[path = "auth_tests.rs"]
mod tests;
