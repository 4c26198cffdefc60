//! The leaf types every part of the configuration uses: the error that names a key, and a redacted credential.
//! Modules below `config` (limits, hooks, Google and AWS credentials) take these without reaching up into it.

/// A configuration error, naming the key.
#[derive(Debug, thiserror::Error)]
#[error("{key}: {message}")]
pub struct ConfigError {
    /// Dotted path of the offending key (or `config` for the file as a whole).
    pub key: String,
    /// What is wrong.
    pub message: String,
}

impl From<service_kit::listen::KeyError> for ConfigError {
    fn from(e: service_kit::listen::KeyError) -> Self {
        ConfigError::new(e.key, e.message)
    }
}

impl ConfigError {
    pub(crate) fn new(key: impl Into<String>, message: impl Into<String>) -> Self {
        ConfigError {
            key: key.into(),
            message: message.into(),
        }
    }
}

/// A credential. `Debug` and `Display` print `[REDACTED]`.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// Wraps a value.
    pub fn new(v: impl Into<String>) -> Self {
        Secret(v.into())
    }
    /// The value, for the one place that sends it.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("[REDACTED]")
    }
}
