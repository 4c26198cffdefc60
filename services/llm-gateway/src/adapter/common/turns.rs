//! The conversation as alternating turns, for the builders whose provider wants `user` and `assistant` (`model`)
//! turns taking turns: Anthropic, Bedrock and Gemini. Each builder translates a part into its own block type; this
//! module owns what they share (docs/providers.md §6):
//! - user and tool messages are user turns; parts the protocol does not keep are dropped, then messages left empty;
//! - consecutive turns of the same role are merged, since the APIs refuse two in a row;
//! - a conversation that opens with the assistant gets a minimal user turn in front ([`lead_with_user`]);
//! - tool results can be put first in their user turn ([`results_first`]), a final assistant text (a prefill) loses
//!   its trailing whitespace ([`trim_prefill`]), and Claude's rule on the turn that opens a tool loop is checked by
//!   [`loop_opens_with`].

use crate::adapter::{BuildError, pb};
use pb::part::Kind;

/// The side of the conversation a turn is on: the caller's (user and tool messages) or the model's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Role {
    User,
    Assistant,
}

impl Role {
    /// The role's name on the Messages and Converse APIs (Gemini calls the assistant `model`).
    pub(crate) fn name(self) -> &'static str {
        match self {
            Role::User => "user",
            Role::Assistant => "assistant",
        }
    }
}

/// One turn, its blocks in the protocol's own type.
#[derive(Debug)]
pub(crate) struct Turn<B> {
    pub(crate) role: Role,
    pub(crate) blocks: Vec<B>,
}

/// The messages of `g` as turns: `block` translates one part (`None` drops it) given the message's role, the part
/// and the part's field path for errors; a part with no content is dropped like empty text. Messages left without
/// blocks are skipped and consecutive turns of one role merged.
pub(crate) fn merged<'a, B>(
    g: &'a pb::Generation,
    mut block: impl FnMut(pb::Role, &'a Kind, &str) -> Result<Option<B>, BuildError>,
) -> Result<Vec<Turn<B>>, BuildError> {
    let mut turns: Vec<Turn<B>> = Vec::new();
    for (i, m) in g.messages.iter().enumerate() {
        let role = match m.role() {
            pb::Role::User | pb::Role::Tool => Role::User,
            pb::Role::Assistant => Role::Assistant,
            pb::Role::Unspecified => {
                return Err(BuildError::new(
                    format!("generation.messages[{i}].role"),
                    "the role must be user, assistant or tool",
                ));
            }
        };
        let mut blocks = Vec::with_capacity(m.parts.len());
        for (j, p) in m.parts.iter().enumerate() {
            let Some(kind) = &p.kind else { continue };
            let field = format!("generation.messages[{i}].parts[{j}]");
            blocks.extend(block(m.role(), kind, &field)?);
        }
        if blocks.is_empty() {
            continue;
        }
        match turns.last_mut() {
            Some(last) if last.role == role => last.blocks.append(&mut blocks),
            _ => turns.push(Turn { role, blocks }),
        }
    }
    Ok(turns)
}

/// The error for a part whose kind a message of `role` may not hold.
pub(crate) fn not_allowed(field: &str, role: pb::Role) -> BuildError {
    BuildError::new(
        field,
        format!(
            "this kind of part is not allowed in a {} message",
            role.as_str_name()
        ),
    )
}

/// Puts the blocks `is_result` picks first in every user turn (the APIs want tool results right after the turn that
/// called the tools), keeping the order within each group.
pub(crate) fn results_first<B>(turns: &mut [Turn<B>], is_result: impl Fn(&B) -> bool) {
    for t in turns.iter_mut().filter(|t| t.role == Role::User) {
        t.blocks.sort_by_key(|b| !is_result(b));
    }
}

/// A conversation must open with the user: one that opens with the assistant (a greeting, a resumed or truncated
/// conversation, a first user turn that had only empty text) gets a user turn of the single block `leading` makes
/// ([`crate::adapter::common::encoding::LEADING_USER_TEXT`]) in front. Nothing is dropped.
pub(crate) fn lead_with_user<B>(turns: &mut Vec<Turn<B>>, leading: impl FnOnce() -> B) {
    if turns.first().is_some_and(|t| t.role == Role::Assistant) {
        turns.insert(
            0,
            Turn {
                role: Role::User,
                blocks: vec![leading()],
            },
        );
    }
}

/// The APIs refuse trailing whitespace at the end of a final assistant turn (a prefill): the text of its last block
/// (`text` finds it, `None` for a block that is not text) is trimmed, and a block or turn left empty is dropped.
pub(crate) fn trim_prefill<B>(
    turns: &mut Vec<Turn<B>>,
    text: impl Fn(&mut B) -> Option<&mut String>,
) {
    let Some(last) = turns.last_mut().filter(|t| t.role == Role::Assistant) else {
        return;
    };
    let Some(block) = last.blocks.last_mut() else {
        return;
    };
    if let Some(text) = text(block) {
        let trimmed = text.trim_end().len();
        text.truncate(trimmed);
        if text.is_empty() {
            last.blocks.pop();
        }
    }
    if last.blocks.is_empty() {
        turns.pop();
    }
}

/// Claude's rule with thinking on: the assistant turn that opens the current tool loop (the first assistant turn
/// after the last user turn that is more than tool results) must start with a block `opens` accepts (a thinking
/// block). True when there is no such turn.
pub(crate) fn loop_opens_with<B>(
    turns: &[Turn<B>],
    is_result: impl Fn(&B) -> bool,
    opens: impl Fn(&B) -> bool,
) -> bool {
    let start = turns
        .iter()
        .rposition(|t| t.role == Role::User && !t.blocks.iter().all(&is_result))
        .map_or(0, |i| i + 1);
    match turns.get(start) {
        Some(t) if t.role == Role::Assistant => t.blocks.first().is_some_and(opens),
        _ => true,
    }
}

/// The caller's tool choice, checked against the request's tools; each builder writes it in its own shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ToolChoice<'a> {
    /// No choice given: the provider's default.
    Default,
    Auto,
    None,
    /// Some tool must be called (there is at least one).
    Required,
    /// This tool (one of the request's) must be called.
    Tool(&'a str),
}

/// `g.tool_choice` checked: REQUIRED needs a tool, TOOL one of the request's.
pub(crate) fn tool_choice(g: &pb::Generation) -> Result<ToolChoice<'_>, BuildError> {
    use pb::tool_choice::Mode;
    let Some(tc) = &g.tool_choice else {
        return Ok(ToolChoice::Default);
    };
    Ok(match tc.mode() {
        Mode::Unspecified => ToolChoice::Default,
        Mode::Auto => ToolChoice::Auto,
        Mode::None => ToolChoice::None,
        Mode::Required if g.tools.is_empty() => {
            return Err(BuildError::new(
                "generation.tool_choice.mode",
                "REQUIRED needs at least one tool in generation.tools",
            ));
        }
        Mode::Required => ToolChoice::Required,
        Mode::Tool if !g.tools.iter().any(|t| t.name == tc.tool_name) => {
            return Err(BuildError::new(
                "generation.tool_choice.tool_name",
                format!("`{}` is not in generation.tools", tc.tool_name),
            ));
        }
        Mode::Tool => ToolChoice::Tool(&tc.tool_name),
    })
}

#[cfg(test)]
#[path = "turns_tests.rs"]
mod tests;
