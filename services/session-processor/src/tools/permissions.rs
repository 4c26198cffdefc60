//! Permission rules: whether a tool call is allowed, needs the caller's approval, or is denied.
//!
//! An agent's rules are an ordered list checked first to last; the first rule whose tool and pattern both match
//! decides. The built-in defaults (read, list, grep allowed; write, edit asked; bash denied) always follow the
//! configured rules, so configuration only has to state exceptions. A call no rule matches (a tool that is not
//! built in, with no rule for it) is asked.
//!
//! A rule's `pattern` is a glob on the call's primary argument: the `path` of read, write, edit, list and grep
//! (`list` and `grep` without a path mean `.`), or the `command` of bash. Paths are normalized lexically first
//! (`./src//a/../b.rs` is matched as `src/b.rs`) so spelling cannot dodge a rule; symbolic links are not resolved
//! here, so a deny pattern on `secret/**` does not cover a link to it. Path globs keep `*` inside one component
//! (`src/*.rs`), `**` spans directories (`src/**`). Command globs let `*` match anything (`git *`). Tools with no
//! primary argument (client tools) only match rules without a pattern.
//!
//! Shell commands chain: `git *` would also match `git status; rm -rf ~`. So a pattern rule that *allows* bash
//! only applies to commands without shell control characters (`;`, `&`, `|`, `` ` ``, `$(`, `<`, `>`, line
//! breaks); such commands fall through to the next rules. Deny and ask patterns apply to every command, since
//! matching more there is the safe direction.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::glob::{Glob, GlobKind};

/// What happens to a tool call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Decision {
    /// Run it.
    Allow,
    /// Ask the caller first (a permission request event; no answer in time means deny).
    Ask,
    /// Refuse it; the model gets a tool error.
    Deny,
}

impl Decision {
    fn parse(text: &str) -> Option<Decision> {
        match text {
            "allow" => Some(Decision::Allow),
            "ask" => Some(Decision::Ask),
            "deny" => Some(Decision::Deny),
            _ => None,
        }
    }
}

/// One permission rule as written in the agent's configuration.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RuleConfig {
    /// Tool name, `*` for every tool (a glob, so `mcp_*` works too).
    pub tool: String,
    /// Glob on the primary argument (path or command); absent means any input.
    #[serde(default)]
    pub pattern: Option<String>,
    /// `allow`, `ask` or `deny`.
    pub decision: String,
}

/// A compiled rule.
#[derive(Debug, Clone)]
struct Rule {
    tool: Glob,
    /// The pattern compiled both ways, because a `*` rule may meet a path or a command.
    pattern: Option<(Glob, Glob)>,
    decision: Decision,
}

/// An agent's ordered permission rules followed by the defaults; see the module docs.
#[derive(Debug, Clone)]
pub struct PermissionRules {
    rules: Vec<Rule>,
}

/// The primary argument of a call, which rule patterns are matched against.
enum Primary {
    Path(String),
    Command(String),
    None,
}

const DEFAULT_RULES: [(&str, Decision); 6] = [
    ("read", Decision::Allow),
    ("list", Decision::Allow),
    ("grep", Decision::Allow),
    ("write", Decision::Ask),
    ("edit", Decision::Ask),
    ("bash", Decision::Deny),
];

/// What an unmatched call gets.
const FALLBACK: Decision = Decision::Ask;

impl PermissionRules {
    /// Compiles an agent's rules (then the defaults). Errors name the offending rule by its 1-based position.
    pub fn from_config(rules: &[RuleConfig]) -> Result<PermissionRules, String> {
        let mut compiled = Vec::with_capacity(rules.len() + DEFAULT_RULES.len());
        for (index, rule) in rules.iter().enumerate() {
            let position = index + 1;
            let decision = Decision::parse(&rule.decision).ok_or_else(|| {
                format!(
                    "permission rule {position}: decision `{}` is not one of allow, ask, deny",
                    rule.decision
                )
            })?;
            if rule.tool.is_empty() {
                return Err(format!("permission rule {position}: `tool` is empty"));
            }
            let tool = Glob::new(&rule.tool, GlobKind::Text)
                .map_err(|e| format!("permission rule {position}: {e}"))?;
            let pattern = match &rule.pattern {
                Some(pattern) => {
                    let path = Glob::new(pattern, GlobKind::Path)
                        .map_err(|e| format!("permission rule {position}: {e}"))?;
                    let text = Glob::new(pattern, GlobKind::Text)
                        .map_err(|e| format!("permission rule {position}: {e}"))?;
                    Some((path, text))
                }
                None => None,
            };
            compiled.push(Rule {
                tool,
                pattern,
                decision,
            });
        }
        compiled.extend(default_rules());
        Ok(PermissionRules { rules: compiled })
    }

    /// The defaults alone: read, list, grep allowed; write, edit asked; bash denied; anything else asked.
    pub fn defaults() -> PermissionRules {
        PermissionRules {
            rules: default_rules(),
        }
    }

    /// The decision for calling `tool` with `input` (the parsed tool input; any JSON, it need not be valid for
    /// the tool): the first matching rule's, or ask when none matches.
    pub fn decide(&self, tool: &str, input: &Value) -> Decision {
        let primary = primary_argument(tool, input);
        self.rules
            .iter()
            .find(|rule| rule.matches(tool, &primary))
            .map_or(FALLBACK, |rule| rule.decision)
    }

    /// False when every call of `tool` would be denied whatever its input, so the run loop can leave the tool
    /// out of the request instead of letting the model try it (this is how bash is off by default).
    pub fn tool_enabled(&self, tool: &str) -> bool {
        for rule in self.rules.iter().filter(|rule| rule.tool.is_match(tool)) {
            match (&rule.pattern, rule.decision) {
                // Some input could match this rule and be allowed or asked.
                (Some(_), Decision::Allow | Decision::Ask) => return true,
                // Only some inputs are denied here; later rules decide the rest.
                (Some(_), Decision::Deny) => {}
                // Matches every input: this decides.
                (None, decision) => return decision != Decision::Deny,
            }
        }
        FALLBACK != Decision::Deny
    }
}

fn default_rules() -> Vec<Rule> {
    DEFAULT_RULES
        .iter()
        .filter_map(|(tool, decision)| {
            Glob::new(tool, GlobKind::Text).ok().map(|tool| Rule {
                tool,
                pattern: None,
                decision: *decision,
            })
        })
        .collect()
}

impl Rule {
    fn matches(&self, tool: &str, primary: &Primary) -> bool {
        if !self.tool.is_match(tool) {
            return false;
        }
        let Some((path_glob, text_glob)) = &self.pattern else {
            return true;
        };
        match primary {
            Primary::Path(path) => path_glob.is_match(path),
            Primary::Command(command) => {
                if self.decision == Decision::Allow && has_shell_control(command) {
                    return false;
                }
                text_glob.is_match(command)
            }
            Primary::None => false,
        }
    }
}

fn primary_argument(tool: &str, input: &Value) -> Primary {
    let field = |name: &str| input.get(name).and_then(Value::as_str);
    match tool {
        "read" | "write" | "edit" => {
            field("path").map_or(Primary::None, |path| Primary::Path(normalize(path)))
        }
        "list" | "grep" => Primary::Path(normalize(field("path").unwrap_or("."))),
        "bash" => field("command").map_or(Primary::None, |command| {
            Primary::Command(command.to_owned())
        }),
        _ => Primary::None,
    }
}

/// Lexical normalization for matching: drops `.` and empty components and applies `..`. A path that climbs above
/// the root or is absolute is kept as given; the tool refuses it anyway, and matching it literally can only make
/// a deny or ask pattern more likely to apply.
fn normalize(path: &str) -> String {
    if path.starts_with('/') {
        return path.to_owned();
    }
    let mut parts: Vec<&str> = Vec::new();
    for part in path.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                if parts.pop().is_none() {
                    return path.to_owned();
                }
            }
            name => parts.push(name),
        }
    }
    if parts.is_empty() {
        ".".to_owned()
    } else {
        parts.join("/")
    }
}

/// Characters that let one command line run further commands or redirect files.
fn has_shell_control(command: &str) -> bool {
    command.contains([';', '&', '|', '`', '<', '>', '\n', '\r']) || command.contains("$(")
}

#[cfg(test)]
#[path = "permissions_tests.rs"]
mod tests;
