//! When a stream that follows a session's events ends: the rule, without I/O.
//!
//! `Subscribe` never ends on its own. A `Prompt` that started the loop ends at the first `done`: its run's. A
//! `Prompt` that was queued behind a running loop ends at the `done` of the run that answered it, which is not
//! always the first `done` it sees: a prompt queued after the running loop's last step boundary is delivered by the
//! run that follows, so the running loop's `done` comes first. At each `done` such a stream asks where its prompt is
//! ([`Delivery`]); the `done` ends the stream once the prompt's user message, or an answer to it (an assistant
//! message whose parent it is), came before it on the stream.

use llm_proto::sessions as pb;

use crate::event_wire::Outgoing;
use crate::store::Delivery;

/// When a stream ends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Until {
    /// Only when the caller leaves.
    Never,
    /// At the first `done`.
    Done,
    /// At the `done` of the run that answered the prompt queued with this tag.
    Answered(String),
}

/// What the stream does after delivering an event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Goes on.
    Go,
    /// Ends after this event.
    End,
    /// This is a `done`: it ends the stream if [`StreamEnd::answered`] says so for where the prompt with this tag
    /// is now.
    Ask(String),
}

/// A stream's end rule and what it has seen so far.
#[derive(Debug)]
pub struct StreamEnd {
    until: Until,
    /// The user messages seen, and the messages the assistant messages seen answer (only for [`Until::Answered`]).
    seen: Vec<String>,
}

impl StreamEnd {
    /// A stream that ends as `until` says.
    pub fn new(until: Until) -> StreamEnd {
        StreamEnd {
            until,
            seen: Vec::new(),
        }
    }

    /// Takes note of an event the stream delivers, and says what follows it.
    pub(crate) fn observe(&mut self, event: &Outgoing) -> Verdict {
        if event.is_done() {
            return match &self.until {
                Until::Never => Verdict::Go,
                Until::Done => Verdict::End,
                // A `done` that is not in the log (the log stayed unreadable) always ends the stream.
                Until::Answered(_) if event.unlogged() => Verdict::End,
                Until::Answered(tag) => Verdict::Ask(tag.clone()),
            };
        }
        if matches!(self.until, Until::Answered(_))
            && let Some(m) = event.message_updated()
        {
            self.note(&m);
        }
        Verdict::Go
    }

    /// Notes the prompt a message is (a user message) or answers (an assistant message).
    fn note(&mut self, m: &pb::Message) {
        let prompt = match m.role() {
            pb::Role::User => &m.id,
            pb::Role::Assistant => &m.parent_id,
            _ => return,
        };
        if !prompt.is_empty() && !self.seen.contains(prompt) {
            self.seen.push(prompt.clone());
        }
    }

    /// Whether the `done` just observed ends the stream, the prompt being where `delivery` says. A prompt neither
    /// queued nor delivered (its session was deleted, or a replica that predates queue tags delivered it) ends
    /// the stream: nothing would tell a later `done` apart.
    pub fn answered(&self, delivery: &Delivery) -> bool {
        match delivery {
            Delivery::Queued => false,
            Delivery::Delivered(message) => self.seen.contains(message),
            Delivery::Unknown => true,
        }
    }
}

#[cfg(test)]
#[path = "stream_end_tests.rs"]
mod tests;
