//! Request preparation off the async workers: validating, lowering schemas and building the body of a large
//! request is CPU work proportional to its size. Run inline it would hold a runtime worker, and every stream that
//! worker serves (all the sessions a processor multiplexes over one connection among them) would wait. A request
//! above [`LARGE_REQUEST_ITEMS`] tools and parts therefore runs that work on tokio's blocking pool, and a huge one
//! (above [`HUGE_REQUEST_ITEMS`], or [`HUGE_REQUEST_BYTES`] encoded) on the preparation threads
//! ([`crate::prep_pool`]), which yield the CPU to every stream; smaller ones stay inline, where a thread hop would
//! cost more than the work. Only huge requests yield: on a machine busy with streams, a long conversation (hundreds
//! of parts) must not wait for idle CPU, while a request of thousands of tools may.
//!
//! Decoding is part of that work: a request of 40 000 tools is 3 MB of protobuf and some 120 000 strings to
//! allocate. The gRPC codec therefore hands a request of [`LARGE_REQUEST_BYTES`] or more over still encoded
//! ([`Incoming::Encoded`]); [`generation`] counts it against `[limits]` from its bytes ([`crate::census`]), so a
//! request over a limit is refused without being decoded, and decodes and validates one within the limits, off the
//! async workers.

use bytes::Bytes;
use llm_proto::gateway as pb;
use tonic::Status;

use crate::limits::Limits;
use crate::status;

/// Tools plus parts above which preparation leaves the async workers.
pub const LARGE_REQUEST_ITEMS: usize = 256;

/// Tools plus parts above which preparation yields to everything else ([`Where::Idle`]): far beyond a long
/// conversation's hundreds of parts, where only a tool list of thousands takes a request.
pub const HUGE_REQUEST_ITEMS: usize = 4096;

/// Encoded bytes at or above which a request's preparation yields to everything else ([`Where::Idle`]).
pub const HUGE_REQUEST_BYTES: usize = 1024 * 1024;

/// Where a request's preparation runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Where {
    /// On the calling task: a thread hop would cost more than the work.
    Inline,
    /// On tokio's blocking pool, at normal priority: large, but the size of real conversations, which must not
    /// wait behind a busy machine's streams.
    Blocking,
    /// On the preparation threads under `SCHED_IDLE` ([`crate::prep_pool`]): thousands of tools or megabytes, a
    /// request that yields the CPU to every stream.
    Idle,
}

impl Where {
    /// For a request of `items` tools and parts.
    pub fn for_items(items: usize) -> Where {
        if items > HUGE_REQUEST_ITEMS {
            Where::Idle
        } else if items > LARGE_REQUEST_ITEMS {
            Where::Blocking
        } else {
            Where::Inline
        }
    }

    /// For a request of `bytes` encoded bytes: huge ones on the idle-priority threads, those over the caller's own
    /// `large_over` (a count of bytes, which differs between the gRPC and HTTP front doors) on the blocking pool.
    pub fn for_bytes(bytes: usize, large_over: usize) -> Where {
        if bytes >= HUGE_REQUEST_BYTES {
            Where::Idle
        } else if bytes > large_over {
            Where::Blocking
        } else {
            Where::Inline
        }
    }
}

/// Where [`run`] prepares `g`.
pub fn placement(g: &pb::Generation) -> Where {
    let parts: usize = g.messages.iter().map(|m| m.parts.len()).sum();
    Where::for_items(g.tools.len() + parts)
}

/// Encoded requests of this many bytes or more leave the codec undecoded (a request of a few hundred tools and a
/// short history stays under it and is decoded inline, where a thread hop would cost more).
pub const LARGE_REQUEST_BYTES: usize = 64 * 1024;

/// A request as the gRPC codec hands it over: decoded when small, its bytes when large.
#[derive(Debug)]
pub enum Incoming<M> {
    /// Decoded by the codec.
    Decoded(M),
    /// [`LARGE_REQUEST_BYTES`] or more, decoded by [`generation`] once counted.
    Encoded(Bytes),
}

/// A request message whose payload is one generation (`StreamRequest`, `GenerateRequest`).
pub trait CarriesGeneration: prost::Message + Default + Send + 'static {
    /// The generation, if the caller sent one.
    fn into_generation(self) -> Option<pb::Generation>;
}

impl CarriesGeneration for pb::StreamRequest {
    fn into_generation(self) -> Option<pb::Generation> {
        self.generation
    }
}

impl CarriesGeneration for pb::GenerateRequest {
    fn into_generation(self) -> Option<pb::Generation> {
        self.generation
    }
}

/// The request's generation, decoded if it came encoded, and validated; an encoded one is first counted against
/// the size limits from its bytes, so an oversized request is refused before anything is decoded.
pub async fn generation<M: CarriesGeneration>(
    incoming: Incoming<M>,
    limits: &Limits,
) -> Result<pb::Generation, Status> {
    let bytes = match incoming {
        Incoming::Decoded(m) => return validated(m.into_generation(), limits).await,
        Incoming::Encoded(bytes) => bytes,
    };
    // Counting walks every byte (megabytes), off the async workers but at normal priority: a request over a limit
    // is refused promptly even on a busy machine, before anything is decoded.
    let counted = bytes.clone();
    let census = run(Where::Blocking, move || crate::census::of_request(&counted))
        .await
        .map_err(|e| not_the_message(&e))?;
    crate::validate::counts(&census, limits)?;
    let limits = *limits;
    run(Where::for_bytes(bytes.len(), 0), move || {
        let m = M::decode(bytes).map_err(|e| not_the_message(&e))?;
        let g = m
            .into_generation()
            .ok_or_else(|| status::invalid("generation", "required"))?;
        crate::validate::validate(Some(&g), &limits)?;
        Ok(g)
    })
    .await
}

/// Validates a decoded request's generation and hands it over by value: the gateway edits it in place (hooks)
/// instead of copying a request that may be megabytes long.
///
/// The size limits are counted here first, so an oversized request is refused at once; a large request that passes
/// them is checked on the preparation threads.
pub async fn validated(
    generation: Option<pb::Generation>,
    limits: &Limits,
) -> Result<pb::Generation, Status> {
    let g = generation.ok_or_else(|| status::invalid("generation", "required"))?;
    crate::validate::sizes(&g, limits)?;
    let limits = *limits;
    run(placement(&g), move || {
        crate::validate::validate(Some(&g), &limits)?;
        Ok(g)
    })
    .await
}

/// The status of a request whose bytes are not the method's message: the caller's mistake.
pub fn not_the_message(e: &dyn std::fmt::Display) -> Status {
    status::invalid(
        "request",
        &format!("not a valid protobuf message of this method: {e}"),
    )
}

/// Runs `work` where `place` says. A panic in `work` is resumed on the caller's task, as it would have been inline.
pub async fn run<R: Send + 'static>(place: Where, work: impl FnOnce() -> R + Send + 'static) -> R {
    match place {
        Where::Inline => work(),
        Where::Blocking => match tokio::task::spawn_blocking(work).await {
            Ok(r) => r,
            Err(e) => std::panic::resume_unwind(e.into_panic()),
        },
        Where::Idle => crate::prep_pool::run(work).await,
    }
}

#[cfg(test)]
#[path = "offload_tests.rs"]
mod tests;
