//! Who may call: caller tokens, the tenants they belong to, and operator tokens.
//!
//! Three kinds of token authenticate a caller:
//! - a tenant's token (`[tenants.<name>] tokens`): the caller is that tenant and sees only its sessions;
//! - a token of `server.auth_tokens` / `PROCESSOR_AUTH_TOKENS`: the caller is the *unnamed tenant* (tenant `""`),
//!   isolated from every named tenant exactly as they are from each other. Without any `[tenants]` this is every
//!   caller (single-tenant mode, as before tenants existed);
//! - an operator token (`server.operator_tokens` / `PROCESSOR_OPERATOR_TOKENS`): may act on every tenant's
//!   sessions; every use is logged.
//!
//! A token is of exactly one kind, at least [`MIN_TOKEN_LEN`] characters long.

use std::collections::{BTreeMap, BTreeSet};

use serde::Deserialize;

use super::{ConfigError, err, usd_to_nano};

/// Shortest accepted token: shorter ones are guessable.
pub const MIN_TOKEN_LEN: usize = 16;
/// Longest tenant name (it is part of Redis keys and of workspace paths).
pub const MAX_TENANT_NAME: usize = 64;

/// `[tenants.<name>]`.
#[derive(Debug, Deserialize, Clone)]
#[serde(deny_unknown_fields)]
pub struct TenantFile {
    /// Caller tokens of this tenant; a caller presenting one is this tenant.
    pub tokens: Vec<String>,
    /// Spending limit in USD over every session of the tenant; none when absent.
    #[serde(default)]
    pub budget_usd: Option<f64>,
    /// Agents the tenant's sessions and prompts may select; every configured agent when absent.
    #[serde(default)]
    pub agents: Option<Vec<String>>,
}

/// A validated tenant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tenant {
    /// Its name (the `[tenants.<name>]` key).
    pub name: String,
    /// Its caller tokens.
    pub tokens: Vec<String>,
    /// Its budget in nano-USD; 0 means none.
    pub budget_nano_usd: i64,
    /// The agents it may select; `None` means every configured agent.
    pub agents: Option<BTreeSet<String>>,
}

/// Who presented a token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Caller {
    /// A tenant: `""` is the unnamed tenant of `server.auth_tokens` (and of unauthenticated local development).
    Tenant(String),
    /// An operator token: every tenant's sessions.
    Operator,
}

impl Caller {
    /// Whether this caller may see a session owned by `tenant`.
    pub fn sees(&self, tenant: &str) -> bool {
        match self {
            Caller::Operator => true,
            Caller::Tenant(own) => own == tenant,
        }
    }

    /// The tenant a session this caller creates belongs to: its own, and the unnamed tenant for an operator.
    pub fn owner(&self) -> &str {
        match self {
            Caller::Tenant(own) => own,
            Caller::Operator => "",
        }
    }
}

/// True for a tenant name: 1 to [`MAX_TENANT_NAME`] characters of `[A-Za-z0-9._-]`, starting with a letter or
/// digit (so never `.` or `..`, and safe as a directory name and inside a Redis key).
pub fn valid_tenant_name(name: &str) -> bool {
    name.len() <= MAX_TENANT_NAME
        && name.starts_with(|c: char| c.is_ascii_alphanumeric())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

/// The validated tokens and tenants.
#[derive(Debug, Clone, Default)]
pub struct Access {
    /// Tenants by name.
    pub tenants: BTreeMap<String, Tenant>,
    /// Every accepted token and who presents it.
    pub tokens: Vec<(String, Caller)>,
}

impl Access {
    /// Validates the tokens and tenants. `unnamed` are `server.auth_tokens` plus `PROCESSOR_AUTH_TOKENS`,
    /// `operators` `server.operator_tokens` plus `PROCESSOR_OPERATOR_TOKENS`; `agents` the configured agents' names.
    pub fn from_config(
        unnamed: &[String],
        operators: &[String],
        files: &BTreeMap<String, TenantFile>,
        agents: &BTreeSet<String>,
        allow_unauthenticated: bool,
    ) -> Result<Access, ConfigError> {
        let mut access = Access::default();
        access.add(
            unnamed,
            "server.auth_tokens",
            &Caller::Tenant(String::new()),
        )?;
        access.add(operators, "server.operator_tokens", &Caller::Operator)?;
        for (name, t) in files {
            let key = |k: &str| format!("tenants.{name}.{k}");
            if !valid_tenant_name(name) {
                return Err(err(
                    format!("tenants.{name}"),
                    format!(
                        "tenant names are 1 to {MAX_TENANT_NAME} characters of [A-Za-z0-9._-], starting with a letter or digit"
                    ),
                ));
            }
            if t.tokens.is_empty() {
                return Err(err(key("tokens"), "at least one token is required"));
            }
            let budget_nano_usd = match t.budget_usd {
                None => 0,
                Some(usd) => usd_to_nano(usd)
                    .filter(|n| *n > 0)
                    .ok_or_else(|| err(key("budget_usd"), "must be a positive amount of USD"))?,
            };
            let allowed = match &t.agents {
                None => None,
                Some(list) => {
                    if let Some(unknown) = list.iter().find(|a| !agents.contains(*a)) {
                        return Err(err(key("agents"), format!("unknown agent `{unknown}`")));
                    }
                    Some(list.iter().cloned().collect())
                }
            };
            access.add(&t.tokens, &key("tokens"), &Caller::Tenant(name.clone()))?;
            access.tenants.insert(
                name.clone(),
                Tenant {
                    name: name.clone(),
                    tokens: t.tokens.clone(),
                    budget_nano_usd,
                    agents: allowed,
                },
            );
        }
        if access.tokens.is_empty() && !allow_unauthenticated {
            return Err(err(
                "server.auth_tokens",
                "no caller tokens configured: set PROCESSOR_AUTH_TOKENS (or server.allow_unauthenticated = true)",
            ));
        }
        Ok(access)
    }

    fn add(&mut self, tokens: &[String], key: &str, caller: &Caller) -> Result<(), ConfigError> {
        for token in tokens {
            if token.chars().count() < MIN_TOKEN_LEN {
                return Err(err(
                    key,
                    format!("tokens must be at least {MIN_TOKEN_LEN} characters"),
                ));
            }
            if self.tokens.iter().any(|(t, _)| t == token) {
                return Err(err(
                    key,
                    "a token is of one kind only: one tenant's, server.auth_tokens or server.operator_tokens",
                ));
            }
            self.tokens.push((token.clone(), caller.clone()));
        }
        Ok(())
    }
}

/// Who presents `token`, compared in constant time against every accepted token (the time taken does not depend
/// on which token, if any, matched or how much of one did).
pub fn caller<'a>(tokens: &'a [(String, Caller)], token: &str) -> Option<&'a Caller> {
    let mut found = None;
    for (t, caller) in tokens {
        if constant_time_eq(t.as_bytes(), token.as_bytes()) {
            found = Some(caller);
        }
    }
    found
}

/// Whether `caller` may select `agent` (which exists): operators and the unnamed tenant any, a tenant those of its
/// `agents` list (every agent without one).
pub fn agent_allowed(tenants: &BTreeMap<String, Tenant>, caller: &Caller, agent: &str) -> bool {
    match caller {
        Caller::Operator => true,
        Caller::Tenant(name) => tenants
            .get(name)
            .and_then(|t| t.agents.as_ref())
            .is_none_or(|list| list.contains(agent)),
    }
}

/// Compares without an early exit on the first differing byte.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn agents() -> BTreeSet<String> {
        ["default", "coder"].into_iter().map(String::from).collect()
    }

    fn file(tokens: &[&str], agents: Option<&[&str]>) -> TenantFile {
        TenantFile {
            tokens: tokens.iter().map(|t| t.to_string()).collect(),
            budget_usd: None,
            agents: agents.map(|a| a.iter().map(|s| s.to_string()).collect()),
        }
    }

    fn strings(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn tokens_name_their_caller() {
        let files = BTreeMap::from([(
            "acme".to_string(),
            file(&["acme-token-0123456789"], Some(&["coder"])),
        )]);
        let a = Access::from_config(
            &strings(&["plain-token-0123456789"]),
            &strings(&["operator-token-0123456789"]),
            &files,
            &agents(),
            false,
        )
        .unwrap();
        let who = |t: &str| caller(&a.tokens, t).cloned();
        assert_eq!(
            who("acme-token-0123456789"),
            Some(Caller::Tenant("acme".into()))
        );
        assert_eq!(
            who("plain-token-0123456789"),
            Some(Caller::Tenant(String::new()))
        );
        assert_eq!(who("operator-token-0123456789"), Some(Caller::Operator));
        assert_eq!(who("acme-token-012345678"), None);
        assert_eq!(who(""), None);
        let acme = Caller::Tenant("acme".into());
        assert!(agent_allowed(&a.tenants, &acme, "coder"));
        assert!(!agent_allowed(&a.tenants, &acme, "default"));
        assert!(agent_allowed(
            &a.tenants,
            &Caller::Tenant(String::new()),
            "default"
        ));
        assert!(agent_allowed(&a.tenants, &Caller::Operator, "default"));
    }

    #[test]
    fn callers_see_their_own_tenant_and_operators_every_one() {
        let acme = Caller::Tenant("acme".into());
        assert!(acme.sees("acme"));
        assert!(!acme.sees("evil"));
        assert!(!acme.sees(""));
        assert!(!Caller::Tenant(String::new()).sees("acme"));
        assert!(Caller::Operator.sees("acme") && Caller::Operator.sees(""));
        assert_eq!(Caller::Operator.owner(), "");
        assert_eq!(acme.owner(), "acme");
    }

    #[test]
    fn tenant_names_are_safe_path_and_key_parts() {
        for ok in ["acme", "a", "Acme-2.prod_x", &"a".repeat(64)] {
            assert!(valid_tenant_name(ok), "{ok}");
        }
        for bad in [
            "",
            ".",
            "..",
            ".hidden",
            "-x",
            "a/b",
            "a{b}",
            "a b",
            "é",
            &"a".repeat(65),
        ] {
            assert!(!valid_tenant_name(bad), "{bad}");
        }
    }

    type Case = (
        Vec<String>,
        Vec<String>,
        BTreeMap<String, TenantFile>,
        &'static str,
    );

    #[test]
    fn bad_access_names_the_key() {
        let none = BTreeMap::new();
        let cases: Vec<Case> = vec![
            (
                strings(&["short"]),
                vec![],
                none.clone(),
                "server.auth_tokens",
            ),
            (
                vec![],
                strings(&["short"]),
                none.clone(),
                "server.operator_tokens",
            ),
            (
                strings(&["same-token-0123456789"]),
                strings(&["same-token-0123456789"]),
                none.clone(),
                "server.operator_tokens",
            ),
            (
                vec![],
                strings(&["same-token-0123456789"]),
                BTreeMap::from([("a".into(), file(&["same-token-0123456789"], None))]),
                "tenants.a.tokens",
            ),
            (
                strings(&["plain-token-0123456789"]),
                vec![],
                BTreeMap::from([(
                    "a".into(),
                    file(&["acme-token-0123456789"], Some(&["nope"])),
                )]),
                "tenants.a.agents",
            ),
            (
                strings(&["plain-token-0123456789"]),
                vec![],
                BTreeMap::from([("..".into(), file(&["acme-token-0123456789"], None))]),
                "tenants...",
            ),
            (vec![], vec![], none.clone(), "server.auth_tokens"),
        ];
        for (unnamed, operators, files, key) in cases {
            let e =
                Access::from_config(&unnamed, &operators, &files, &agents(), false).unwrap_err();
            assert_eq!(e.key, key, "{e}");
        }
        assert!(
            Access::from_config(&[], &[], &none, &agents(), true)
                .unwrap()
                .tokens
                .is_empty()
        );
    }
}
