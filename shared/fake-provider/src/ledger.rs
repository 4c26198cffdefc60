//! The bookkeeping of a fake token issuer (Google's token endpoint and metadata server, Microsoft Entra ID's token
//! endpoint): the tokens issued and when they expire, the lifetimes to hand out, and why requests were refused.
//! [`GoogleTokens`](crate::GoogleTokens) and [`EntraTokens`](crate::EntraTokens) dereference to it, so a test asks
//! either the same questions.

use std::collections::VecDeque;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::lock;

/// Tokens issued by one fake issuer.
pub struct IssuedTokens {
    /// Tokens that are valid, with their expiry.
    issued: Mutex<Vec<(String, Instant)>>,
    /// Every token ever issued, in order.
    history: Mutex<Vec<String>>,
    lifetimes: Mutex<VecDeque<u64>>,
    refusals: Mutex<Vec<String>>,
    counter: AtomicU64,
    /// The lifetime of a token when none is queued, in seconds.
    default_lifetime: u64,
}

impl IssuedTokens {
    /// A ledger whose tokens live `default_lifetime` seconds unless told otherwise.
    pub(crate) fn new(default_lifetime: u64) -> IssuedTokens {
        IssuedTokens {
            issued: Mutex::new(Vec::new()),
            history: Mutex::new(Vec::new()),
            lifetimes: Mutex::new(VecDeque::new()),
            refusals: Mutex::new(Vec::new()),
            counter: AtomicU64::new(0),
            default_lifetime,
        }
    }

    /// The next token issued lives `secs` seconds (`expires_in`); later ones use the next queued lifetime, then
    /// the issuer's default (3599, as Google and Entra answer).
    pub fn next_lifetime(&self, secs: u64) {
        lock(&self.lifetimes).push_back(secs);
    }

    /// Every token issued so far, in order (revoked ones included).
    pub fn issued(&self) -> Vec<String> {
        lock(&self.history).clone()
    }

    /// Why each refused token request or bearer token was refused.
    pub fn refusals(&self) -> Vec<String> {
        lock(&self.refusals).clone()
    }

    /// Notes a refusal.
    pub(crate) fn refuse(&self, why: String) {
        lock(&self.refusals).push(why);
    }

    /// Revokes every token issued so far: requests carrying one are refused from now on.
    pub fn revoke_all(&self) {
        lock(&self.issued).clear();
    }

    /// Whether `token` was issued here, is not revoked and has not expired.
    pub fn accepts(&self, token: &str) -> bool {
        let now = Instant::now();
        lock(&self.issued)
            .iter()
            .any(|(t, until)| t == token && *until > now)
    }

    /// Issues the next token, `make(n)` for the n-th (from 1); returns it and its lifetime in seconds.
    pub(crate) fn issue(&self, make: impl FnOnce(u64) -> String) -> (String, u64) {
        let n = self.counter.fetch_add(1, Ordering::Relaxed) + 1;
        let lifetime = lock(&self.lifetimes)
            .pop_front()
            .unwrap_or(self.default_lifetime);
        let token = make(n);
        let until = Instant::now() + Duration::from_secs(lifetime);
        lock(&self.issued).push((token.clone(), until));
        lock(&self.history).push(token.clone());
        (token, lifetime)
    }
}
