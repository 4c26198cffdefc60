//! Pages that fit one response: lists are cut by count (the page size) and by bytes, so no response exceeds
//! [`MAX_RESPONSE_BYTES`], the gRPC default most clients receive. Pure: the handlers fetch, these decide.
//!
//! A message too large for one page comes in pieces: the page holds the message with the parts that fit, its
//! token points inside the message (`<message id>:<part id>`), and the next page starts with the same message (same
//! id and head) carrying the parts after that one. A single part is bounded by the request limits
//! ([`super::validate`]), so it always fits.

use llm_proto::sessions as pb;

/// The largest response the sessions API sends (the gRPC default receive limit of most clients).
pub const MAX_RESPONSE_BYTES: usize = 4 * 1024 * 1024;
/// What a page's items may take: the response less room for the next page token.
pub const PAGE_BYTES: usize = MAX_RESPONSE_BYTES - 4 * 1024;

/// Bytes an item takes as an element of a repeated message field (tag, length, body).
fn entry_len(item: &impl prost::Message) -> usize {
    prost::encoding::message::encoded_len(1, item)
}

/// Keeps the longest prefix of `items` (each with the cursor that resumes after it) that fits `budget` bytes, at
/// least one item. Returns the page and its next cursor: the last kept item's when any was left out, else `next`
/// (the store's cursor after the whole fetch).
pub fn fit<T: prost::Message>(
    items: Vec<(String, T)>,
    next: Option<String>,
    budget: usize,
) -> (Vec<T>, Option<String>) {
    let mut used = 0usize;
    let mut page = Vec::with_capacity(items.len());
    let mut cursor: Option<String> = None;
    let total = items.len();
    for (c, item) in items {
        let cost = entry_len(&item);
        if !page.is_empty() && used + cost > budget {
            return (page, cursor);
        }
        used += cost;
        page.push(item);
        cursor = Some(c);
    }
    debug_assert_eq!(page.len(), total);
    (page, next)
}

/// Builds one `ListMessages` page from `messages` (the first may be the rest of a message a previous page cut) of
/// at most `size` messages and `budget` bytes; `next` is the store's cursor after the last fetched message.
/// Returns the page and its next token.
pub fn fit_messages(
    messages: Vec<pb::Message>,
    next: Option<String>,
    size: usize,
    budget: usize,
) -> (Vec<pb::Message>, Option<String>) {
    let fetched = messages.len();
    let mut page: Vec<pb::Message> = Vec::new();
    let mut used = 0usize;
    for message in messages {
        if page.len() == size {
            break;
        }
        let cost = entry_len(&message);
        if used + cost <= budget {
            used += cost;
            page.push(message);
            continue;
        }
        if !page.is_empty() {
            break;
        }
        // Alone and still too large: the parts that fit, the rest on the next page.
        let (head, token) = split(message, budget);
        page.push(head);
        return (page, Some(token));
    }
    if page.len() == fetched {
        (page, next)
    } else {
        let token = page.last().map(|m| m.id.clone());
        (page, token)
    }
}

/// The head of `message` with as many of its parts as fit `budget` (at least one), and the token after the last.
fn split(mut message: pb::Message, budget: usize) -> (pb::Message, String) {
    let parts = std::mem::take(&mut message.parts);
    let mut used = entry_len(&message);
    let mut kept = Vec::new();
    for part in parts {
        let cost = prost::encoding::message::encoded_len(14, &part);
        // The body's length prefix grows with the body; a few bytes of slack keep the sum an upper bound.
        if !kept.is_empty() && used + cost + 8 > budget {
            break;
        }
        used += cost;
        kept.push(part);
    }
    let token = match kept.last() {
        Some(p) => format!("{}:{}", message.id, p.id),
        None => message.id.clone(),
    };
    message.parts = kept;
    (message, token)
}

/// The parts of `message` after `part_id` (ids sort in creation order): the rest of a message a previous page cut.
pub fn rest_of(mut message: pb::Message, part_id: &str) -> pb::Message {
    message.parts.retain(|p| p.id.as_str() > part_id);
    message
}

#[cfg(test)]
#[path = "paging_tests.rs"]
mod tests;
