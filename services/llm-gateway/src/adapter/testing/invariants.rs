//! The unified stream's invariants, as one function every decoder's output can be checked with (the tests replay
//! the fixtures through it; fuzz targets can call it on any bytes): block ids unique, every block opened before its
//! deltas and closed once, tool calls with a name and an id used once, and exactly one terminal event, last.

use std::collections::{HashMap, HashSet};

use crate::event::Event;

#[derive(PartialEq)]
enum Block {
    Open,
    Closed,
}

/// `Ok` when `events` is a well-formed unified stream, else what is wrong and at which event.
pub fn check(events: &[Event]) -> Result<(), String> {
    let mut blocks: HashMap<(&str, &str), Block> = HashMap::new();
    let mut calls: HashSet<&str> = HashSet::new();
    for (i, ev) in events.iter().enumerate() {
        let at = |what: &str| format!("event {i}: {what}");
        let terminal = matches!(ev, Event::Finish(_) | Event::Error(_));
        if terminal && i + 1 != events.len() {
            return Err(at("a terminal event is not the last"));
        }
        let (kind, id, step) = match ev {
            Event::TextStart { id } => ("text", id.as_str(), 0),
            Event::TextDelta { id, .. } => ("text", id.as_str(), 1),
            Event::TextEnd { id } => ("text", id.as_str(), 2),
            Event::ReasoningStart { id } => ("reasoning", id.as_str(), 0),
            Event::ReasoningDelta { id, .. } => ("reasoning", id.as_str(), 1),
            Event::ReasoningEnd { id, .. } => ("reasoning", id.as_str(), 2),
            Event::ToolInputStart { call_id, tool } => {
                if tool.is_empty() {
                    return Err(at("tool input with an empty name"));
                }
                ("tool", call_id.as_str(), 0)
            }
            Event::ToolInputDelta { call_id, .. } => ("tool", call_id.as_str(), 1),
            Event::ToolInputEnd { call_id } => ("tool", call_id.as_str(), 2),
            Event::ToolCall { call_id, tool, .. } => {
                if tool.is_empty() || call_id.is_empty() {
                    return Err(at("a tool call with an empty name or id"));
                }
                if !calls.insert(call_id) {
                    return Err(at("a tool-call id used twice"));
                }
                continue;
            }
            Event::Finish(_) | Event::Error(_) | Event::KeepAlive => continue,
        };
        match (step, blocks.get(&(kind, id))) {
            (0, None) => {
                blocks.insert((kind, id), Block::Open);
            }
            (0, Some(_)) => return Err(at("a block id opened twice")),
            (1, Some(Block::Open)) => {}
            (1, _) => return Err(at("a delta outside an open block")),
            (_, Some(Block::Open)) => {
                blocks.insert((kind, id), Block::Closed);
            }
            (_, _) => return Err(at("a block closed that is not open")),
        }
    }
    match events.last() {
        Some(Event::Finish(_) | Event::Error(_)) => Ok(()),
        _ => Err("no terminal event".into()),
    }
}

#[cfg(test)]
#[path = "invariants_tests.rs"]
mod tests;
