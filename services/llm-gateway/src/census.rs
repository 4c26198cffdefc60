//! Counting what `[limits]` bounds in a request (messages, parts, tools, schema bytes) from its protobuf bytes,
//! before they are decoded.
//!
//! A large request is handed over by the codec still encoded ([`crate::offload::Incoming`]); this census reads it
//! in one pass without allocating, so a request over a limit (100 000 tools, say) is refused for the price of
//! reading its bytes once, and only a request within the limits is decoded (on the blocking pool). The counts
//! follow protobuf's merge rules, so they equal those of the decoded message: repeated fields add up over every
//! occurrence of their parent, and a singular field (a tool's schema) counts its last occurrence.

use std::fmt;

use llm_proto::gateway as pb;

/// The counts `[limits]` bounds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Census {
    /// `generation.messages`.
    pub messages: usize,
    /// Parts over all messages.
    pub parts: usize,
    /// `generation.tools`.
    pub tools: usize,
    /// Bytes of every tool's `input_schema_json` together.
    pub schema_bytes: usize,
}

impl Census {
    /// The census of a decoded generation.
    pub fn of(g: &pb::Generation) -> Census {
        Census {
            messages: g.messages.len(),
            parts: g.messages.iter().map(|m| m.parts.len()).sum(),
            tools: g.tools.len(),
            schema_bytes: g.tools.iter().map(|t| t.input_schema_json.len()).sum(),
        }
    }
}

/// Bytes that are not protobuf's wire format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WireError {
    /// A field or a length runs past the end of its message.
    Truncated,
    /// A varint longer than ten bytes.
    Varint,
    /// Field number 0, or wire type 6 or 7.
    BadTag,
    /// A group's end does not match its start, or groups nest too deep.
    Group,
}

impl fmt::Display for WireError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            WireError::Truncated => "a field runs past the end of its message",
            WireError::Varint => "a varint longer than ten bytes",
            WireError::BadTag => "an invalid field tag",
            WireError::Group => "unbalanced or too deeply nested groups",
        })
    }
}

/// Field numbers of the path the census walks (gateway.proto).
const GENERATION: u32 = 1; // StreamRequest.generation, GenerateRequest.generation
const MESSAGES: u32 = 3; // Generation.messages
const TOOLS: u32 = 4; // Generation.tools
const PARTS: u32 = 2; // Message.parts
const INPUT_SCHEMA_JSON: u32 = 3; // Tool.input_schema_json

/// Groups nested deeper than this are refused (prost's own recursion limit).
const MAX_GROUP_DEPTH: u32 = 100;

/// The census of an encoded `StreamRequest` or `GenerateRequest` (both hold the generation as field 1).
pub fn of_request(bytes: &[u8]) -> Result<Census, WireError> {
    let mut census = Census::default();
    let mut fields = Fields::new(bytes);
    while let Some((number, value)) = fields.next()? {
        if let (GENERATION, Value::Len(g)) = (number, value) {
            generation(g, &mut census)?;
        }
    }
    Ok(census)
}

fn generation(bytes: &[u8], census: &mut Census) -> Result<(), WireError> {
    let mut fields = Fields::new(bytes);
    while let Some((number, value)) = fields.next()? {
        match (number, value) {
            (MESSAGES, Value::Len(m)) => {
                census.messages += 1;
                census.parts += count(m, PARTS)?;
            }
            (TOOLS, Value::Len(t)) => {
                census.tools += 1;
                census.schema_bytes += last_len(t, INPUT_SCHEMA_JSON)?;
            }
            _ => {}
        }
    }
    Ok(())
}

/// How many times field `wanted` occurs in `bytes`.
fn count(bytes: &[u8], wanted: u32) -> Result<usize, WireError> {
    let mut fields = Fields::new(bytes);
    let mut n = 0;
    while let Some((number, _)) = fields.next()? {
        n += usize::from(number == wanted);
    }
    Ok(n)
}

/// The length of the last occurrence of length-delimited field `wanted` in `bytes` (0 when absent).
fn last_len(bytes: &[u8], wanted: u32) -> Result<usize, WireError> {
    let mut fields = Fields::new(bytes);
    let mut len = 0;
    while let Some((number, value)) = fields.next()? {
        if let (true, Value::Len(v)) = (number == wanted, value) {
            len = v.len();
        }
    }
    Ok(len)
}

/// A field's value, as far as the census needs it.
#[derive(Debug, Clone, Copy)]
enum Value<'a> {
    /// A varint, fixed32, fixed64 or a whole group: skipped.
    Other,
    /// A length-delimited value.
    Len(&'a [u8]),
}

/// The fields of one message, in order.
struct Fields<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Fields<'a> {
    fn new(bytes: &'a [u8]) -> Fields<'a> {
        Fields { bytes, at: 0 }
    }

    fn next(&mut self) -> Result<Option<(u32, Value<'a>)>, WireError> {
        if self.at == self.bytes.len() {
            return Ok(None);
        }
        let (number, wire_type) = self.tag()?;
        let value = match wire_type {
            3 => {
                self.skip_group(number, 1)?;
                Value::Other
            }
            4 => return Err(WireError::Group), // an end of group with no start
            other => self.value(other)?,
        };
        Ok(Some((number, value)))
    }

    fn tag(&mut self) -> Result<(u32, u8), WireError> {
        let key = self.varint()?;
        let number = u32::try_from(key >> 3).map_err(|_| WireError::BadTag)?;
        let wire_type = (key & 7) as u8;
        if number == 0 || number > 0x1FFF_FFFF || wire_type > 5 {
            return Err(WireError::BadTag);
        }
        Ok((number, wire_type))
    }

    /// A value of wire type 0, 1, 2 or 5.
    fn value(&mut self, wire_type: u8) -> Result<Value<'a>, WireError> {
        match wire_type {
            0 => self.varint().map(|_| Value::Other),
            1 => self.skip(8).map(|_| Value::Other),
            5 => self.skip(4).map(|_| Value::Other),
            _ => {
                let len = usize::try_from(self.varint()?).map_err(|_| WireError::Truncated)?;
                self.skip(len).map(Value::Len)
            }
        }
    }

    /// Skips a group's fields up to the end of group numbered `number`.
    fn skip_group(&mut self, number: u32, depth: u32) -> Result<(), WireError> {
        if depth > MAX_GROUP_DEPTH {
            return Err(WireError::Group);
        }
        loop {
            if self.at == self.bytes.len() {
                return Err(WireError::Truncated);
            }
            let (inner, wire_type) = self.tag()?;
            match wire_type {
                3 => self.skip_group(inner, depth + 1)?,
                4 if inner == number => return Ok(()),
                4 => return Err(WireError::Group),
                other => {
                    self.value(other)?;
                }
            }
        }
    }

    fn skip(&mut self, n: usize) -> Result<&'a [u8], WireError> {
        let end = self.at.checked_add(n).ok_or(WireError::Truncated)?;
        let out = self.bytes.get(self.at..end).ok_or(WireError::Truncated)?;
        self.at = end;
        Ok(out)
    }

    fn varint(&mut self) -> Result<u64, WireError> {
        let mut value = 0u64;
        for i in 0..10 {
            let byte = *self.bytes.get(self.at).ok_or(WireError::Truncated)?;
            self.at += 1;
            value |= u64::from(byte & 0x7f) << (7 * i);
            if byte < 0x80 {
                return Ok(value);
            }
        }
        Err(WireError::Varint)
    }
}

#[cfg(test)]
#[path = "census_tests.rs"]
mod tests;
