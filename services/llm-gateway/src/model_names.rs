//! Model names as callers write them (docs/gateway.md "Model names"): a catalog id (`openai/gpt-4.1-mini`), an
//! alias the operator configured (`[aliases]`, a public name for a model and its fallbacks), or a bare provider
//! name (`gpt-4.1-mini`, what snippets and SDK defaults send) that resolves to the one catalog model of that name.
//!
//! Pure: [`ModelNames::lookup`] decides what a name stands for from the catalog and the aliases, without I/O; the
//! core then resolves the catalog id to its provider as before.

use std::collections::BTreeMap;

use serde::Deserialize;

use crate::catalog::{Catalog, ModelInfo};
use crate::settings::ConfigError;

/// Longest alias name, and most fallbacks an alias may name (as a request's `fallback_models`).
const MAX_ALIAS_BYTES: usize = 256;
const MAX_ALIAS_FALLBACKS: usize = 4;

/// An `[aliases]` entry as written: the model it names, or a table with its fallbacks.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum AliasFile {
    /// `fast = "openai/gpt-4o-mini"`.
    Model(String),
    /// `fast = { model = "openai/gpt-4o-mini", fallbacks = ["anthropic/claude-haiku-4-5"] }`.
    Table(AliasTable),
}

/// The table form of an alias.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AliasTable {
    /// The catalog model the alias serves.
    pub model: String,
    /// Models tried, in order, when `model` fails before any output; replaces the model's own catalog fallbacks.
    #[serde(default)]
    pub fallbacks: Vec<String>,
}

/// One validated alias.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Alias {
    /// The catalog id (or `provider/name` of a provider serving unlisted models) it names.
    pub model: String,
    /// Its fallbacks; empty means the model's own from the catalog.
    pub fallbacks: Vec<String>,
}

/// What a requested model name stands for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Named<'a> {
    /// A model id to resolve against the catalog and providers (which may still not serve it).
    Id(&'a str),
    /// An alias.
    Alias(&'a Alias),
}

/// A bare name more than one catalog model has: the caller must say which.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ambiguous {
    /// The catalog ids that have the name.
    pub candidates: Vec<String>,
}

/// The aliases, and the rules that turn a requested name into a model.
#[derive(Debug, Clone, Default)]
pub struct ModelNames {
    aliases: BTreeMap<String, Alias>,
}

/// One entry of the served-model list: a catalog model under its id, or one under an alias.
#[derive(Debug, Clone, Copy)]
pub struct Listed<'a> {
    /// The name callers use.
    pub id: &'a str,
    /// The model it serves.
    pub model: &'a ModelInfo,
    /// For an alias, the catalog id it names.
    pub alias_of: Option<&'a str>,
}

impl ModelNames {
    /// Validates `[aliases]`: each name printable, at most 256 bytes, not a catalog id; each model and fallback
    /// one that `serves` accepts, at most 4 fallbacks.
    pub fn compile(
        file: &BTreeMap<String, AliasFile>,
        catalog: &Catalog,
        serves: impl Fn(&str) -> bool,
    ) -> Result<ModelNames, ConfigError> {
        let mut aliases = BTreeMap::new();
        for (name, entry) in file {
            let key = |field: &str| format!("aliases.\"{name}\"{field}");
            if name.is_empty()
                || name.len() > MAX_ALIAS_BYTES
                || name.chars().any(char::is_control)
                || name.trim() != name
            {
                return Err(ConfigError::new(
                    key(""),
                    "an alias is 1 to 256 bytes of printable text without surrounding spaces",
                ));
            }
            if catalog.get(name).is_some() {
                return Err(ConfigError::new(
                    key(""),
                    "is a catalog model id; an alias cannot shadow it",
                ));
            }
            let alias = match entry {
                AliasFile::Model(model) => Alias {
                    model: model.clone(),
                    fallbacks: Vec::new(),
                },
                AliasFile::Table(t) => Alias {
                    model: t.model.clone(),
                    fallbacks: t.fallbacks.clone(),
                },
            };
            if !serves(&alias.model) {
                let message = format!("`{}` is not a model this gateway serves", alias.model);
                return Err(ConfigError::new(key(".model"), message));
            }
            if alias.fallbacks.len() > MAX_ALIAS_FALLBACKS {
                return Err(ConfigError::new(key(".fallbacks"), "at most 4 fallbacks"));
            }
            for (i, fallback) in alias.fallbacks.iter().enumerate() {
                if !serves(fallback) {
                    let message = format!("`{fallback}` is not a model this gateway serves");
                    return Err(ConfigError::new(key(&format!(".fallbacks[{i}]")), message));
                }
            }
            aliases.insert(name.clone(), alias);
        }
        Ok(ModelNames { aliases })
    }

    /// What `requested` stands for, in this order: a catalog id; an alias; `provider/…` of a configured provider
    /// (left to that provider, which may serve unlisted models); the one catalog model whose provider-side name it
    /// is; else the name itself (which the core reports as not served). A bare name several catalog models share
    /// is [`Ambiguous`].
    pub fn lookup<'a>(
        &'a self,
        catalog: &'a Catalog,
        is_provider: impl Fn(&str) -> bool,
        requested: &'a str,
    ) -> Result<Named<'a>, Ambiguous> {
        if catalog.get(requested).is_some() {
            return Ok(Named::Id(requested));
        }
        if let Some(alias) = self.aliases.get(requested) {
            return Ok(Named::Alias(alias));
        }
        if requested
            .split_once('/')
            .is_some_and(|(provider, _)| is_provider(provider))
        {
            return Ok(Named::Id(requested));
        }
        match catalog.named(requested) {
            [] => Ok(Named::Id(requested)),
            [one] => Ok(Named::Id(one.as_str())),
            several => Err(Ambiguous {
                candidates: several.to_vec(),
            }),
        }
    }

    /// The alias `name`, if there is one.
    pub fn alias(&self, name: &str) -> Option<&Alias> {
        self.aliases.get(name)
    }

    /// Every served name in id order: the catalog's models and the aliases (an alias whose model is not in the
    /// catalog, one of a provider serving unlisted models, is listed under the catalog entry it would get only when
    /// there is one, so it is left out).
    pub fn listed<'a>(&'a self, catalog: &'a Catalog) -> Vec<Listed<'a>> {
        let mut out: Vec<Listed<'a>> = catalog
            .iter()
            .map(|model| Listed {
                id: &model.id,
                model,
                alias_of: None,
            })
            .collect();
        out.extend(self.aliases.iter().filter_map(|(name, alias)| {
            catalog.get(&alias.model).map(|model| Listed {
                id: name,
                model,
                alias_of: Some(&alias.model),
            })
        }));
        out.sort_by(|a, b| a.id.cmp(b.id));
        out
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
#[path = "model_names_tests.rs"]
mod tests;
