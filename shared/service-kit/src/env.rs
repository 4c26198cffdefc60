//! Where a service's environment variables come from: the process, or (in tests) a fixed list, so configuration
//! loading is a pure function of the file and an [`Env`].

/// Environment lookup, injectable for tests.
pub trait Env {
    /// The variable's value when set and not empty.
    fn var(&self, name: &str) -> Option<String>;
}

/// The process environment.
pub struct ProcessEnv;

impl Env for ProcessEnv {
    fn var(&self, name: &str) -> Option<String> {
        std::env::var(name).ok().filter(|v| !v.is_empty())
    }
}

/// A fixed list of variables (tests and tools): an empty value counts as unset, as in the process environment.
impl<const N: usize> Env for [(&str, &str); N] {
    fn var(&self, name: &str) -> Option<String> {
        self.iter()
            .find(|(k, _)| *k == name)
            .map(|(_, v)| v.to_string())
            .filter(|v| !v.is_empty())
    }
}
