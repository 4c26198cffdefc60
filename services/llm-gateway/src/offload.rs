//! Request preparation off the async workers: validating, lowering schemas and building the body of a large
//! request is CPU work proportional to its size. Run inline it would hold a runtime worker, and every stream that
//! worker serves (all the sessions a processor multiplexes over one connection among them) would wait. A request
//! above [`LARGE_REQUEST_ITEMS`] tools and parts therefore runs that work on tokio's blocking pool; smaller ones stay
//! inline, where a thread hop would cost more than the work.

use llm_proto::gateway as pb;

/// Tools plus parts above which preparation leaves the async workers.
pub const LARGE_REQUEST_ITEMS: usize = 256;

/// True when `g` is large enough for [`run`] to move its preparation to the blocking pool.
pub fn is_large(g: &pb::Generation) -> bool {
    let parts: usize = g.messages.iter().map(|m| m.parts.len()).sum();
    g.tools.len() + parts > LARGE_REQUEST_ITEMS
}

/// Runs `work` on the blocking pool when `large`, else here. A panic in `work` is resumed on the caller's task, as
/// it would have been inline.
pub async fn run<R: Send + 'static>(large: bool, work: impl FnOnce() -> R + Send + 'static) -> R {
    if !large {
        return work();
    }
    match tokio::task::spawn_blocking(work).await {
        Ok(r) => r,
        Err(e) => std::panic::resume_unwind(e.into_panic()),
    }
}

#[cfg(test)]
#[path = "offload_tests.rs"]
mod tests;
