//! The open content blocks of a Claude stream, Anthropic's Messages API and Bedrock's Converse alike: both number
//! their blocks by index, stream text, reasoning and tool input as deltas into them, and end each with a stop (or
//! leave it open until the message stops). This is the bookkeeping they share; each decoder reads its own wire.

use std::collections::{BTreeMap, BTreeSet};

use crate::event::Event;

/// An open content block.
#[derive(Debug)]
pub(crate) enum Block {
    Text,
    /// Reasoning, with what replaying it takes: the signature, or the encrypted data of a redacted block.
    Reasoning {
        signature: String,
        redacted: String,
    },
    Tool {
        id: String,
        name: String,
        input: String,
    },
    /// A block type the decoder does not translate (server tools, future types): its deltas are ignored.
    Other,
}

impl Block {
    /// A reasoning block before its first delta.
    pub(crate) fn reasoning() -> Block {
        Block::Reasoning {
            signature: String::new(),
            redacted: String::new(),
        }
    }
}

/// Open blocks by index, ordered so that closing all of them at the message's end closes them in stream order.
/// A block's id in the unified events is its index.
#[derive(Debug)]
pub(crate) struct OpenBlocks {
    open: BTreeMap<u64, Block>,
    /// Every index opened so far: a block's id is its index, so an index opened again after its stop would reuse an
    /// id the stream already ended.
    opened: BTreeSet<u64>,
    /// The key of a redacted block's data in its replay metadata (each protocol's request builder reads its own).
    redacted_key: &'static str,
    saw_tool_call: bool,
}

impl OpenBlocks {
    /// No block open yet; `redacted_key` names a redacted reasoning block's data in its replay metadata.
    pub(crate) fn new(redacted_key: &'static str) -> Self {
        OpenBlocks {
            open: BTreeMap::new(),
            opened: BTreeSet::new(),
            redacted_key,
            saw_tool_call: false,
        }
    }

    pub(crate) fn get_mut(&mut self, index: u64) -> Option<&mut Block> {
        self.open.get_mut(&index)
    }

    pub(crate) fn contains(&self, index: u64) -> bool {
        self.open.contains_key(&index)
    }

    pub(crate) fn insert(&mut self, index: u64, block: Block) {
        self.opened.insert(index);
        self.open.insert(index, block);
    }

    /// Whether block `index` was opened and has stopped: opening it again would reuse its id.
    pub(crate) fn stopped(&self, index: u64) -> bool {
        !self.open.contains_key(&index) && self.opened.contains(&index)
    }

    /// Block `index`, opened with `open` (which emits its start event) when it is not open yet. The caller checks
    /// [`OpenBlocks::stopped`] first.
    pub(crate) fn get_or_open(&mut self, index: u64, open: impl FnOnce() -> Block) -> &mut Block {
        self.opened.insert(index);
        self.open.entry(index).or_insert_with(open)
    }

    /// Whether a tool block has been closed, i.e. the message called a tool.
    pub(crate) fn saw_tool_call(&self) -> bool {
        self.saw_tool_call
    }

    /// Closes block `index` if it is open: its end event, with the replay metadata of a reasoning block (none without
    /// a signature or redacted data: such a block cannot be replayed), and the complete call of a tool block.
    pub(crate) fn close(&mut self, index: u64, out: &mut Vec<Event>) {
        let Some(block) = self.open.remove(&index) else {
            return;
        };
        let id = index.to_string();
        match block {
            Block::Text => out.push(Event::TextEnd { id }),
            Block::Reasoning {
                signature,
                redacted,
            } => {
                let metadata = if !redacted.is_empty() {
                    Some(serde_json::json!({ self.redacted_key: redacted }).to_string())
                } else {
                    (!signature.is_empty())
                        .then(|| serde_json::json!({ "signature": signature }).to_string())
                };
                out.push(Event::ReasoningEnd { id, metadata });
            }
            Block::Tool { id, name, input } => {
                self.saw_tool_call = true;
                Event::end_tool_call(id, name, input, out);
            }
            Block::Other => {}
        }
    }

    /// Closes every open block, in index order: at the message's end a block left open is complete, so a tool call
    /// is never lost.
    pub(crate) fn close_all(&mut self, out: &mut Vec<Event>) {
        while let Some((&index, _)) = self.open.first_key_value() {
            self.close(index, out);
        }
    }
}

#[cfg(test)]
#[path = "blocks_tests.rs"]
mod tests;
