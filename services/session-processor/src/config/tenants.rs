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

use crate::names::{MAX_TENANT_NAME, valid_tenant_name};
use std::collections::{BTreeMap, BTreeSet};

use serde::Deserialize;

use super::{ConfigError, err, usd_to_nano};

/// Shortest accepted token: shorter ones are guessable.
pub const MIN_TOKEN_LEN: usize = 16;

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
    /// Sessions the tenant may hold; `server.max_sessions_per_tenant` when absent.
    #[serde(default)]
    pub max_sessions: Option<u64>,
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
    /// The sessions it may hold; `None`: `server.max_sessions_per_tenant`.
    pub max_sessions: Option<u64>,
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
            if t.max_sessions == Some(0) {
                return Err(err(key("max_sessions"), "must be at least 1"));
            }
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
                    max_sessions: t.max_sessions,
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
    let found = service_kit::auth::find_token(tokens.iter().map(|(t, _)| t), token)?;
    tokens.get(found).map(|(_, caller)| caller)
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

#[cfg(test)]
#[path = "tenants_tests.rs"]
mod tests;
