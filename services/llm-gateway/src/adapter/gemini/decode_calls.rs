//! Function-call parts of the Gemini stream: whole calls, and Vertex's streamed calls rebuilt from their
//! `partialArgs` fragments (docs/providers.md §4 "Vertex AI"). A child of `decode`, so it works on the decoder's
//! state directly.

use std::borrow::Cow;

use super::{FunctionCall, GeminiDecoder};
use crate::adapter::gemini::ReplayMetadata;
use crate::adapter::gemini::partial_args::Arguments;
use crate::error::ProviderError;
use crate::event::Event;

/// A Vertex function call whose arguments arrive in `partialArgs` fragments: its `ToolInputStart` is out, the rest
/// comes when the empty `functionCall` closes it.
#[derive(Debug)]
pub(super) struct StreamedCall {
    call_id: String,
    tool: String,
    provider_id: Option<String>,
    signature: Option<String>,
    args: Arguments,
}

impl GeminiDecoder {
    /// A `functionCall` part: a whole call (its four events at once), or one piece of a Vertex streamed call (the
    /// named first part opens it, `partialArgs` fill its arguments, a part without `willContinue` closes it).
    /// Shapes that cannot make a well-formed call (no name, a new call inside an open one, an id used twice,
    /// fragments that do not fit) fail the stream with a typed `provider_error`.
    pub(super) fn function_call(
        &mut self,
        call: FunctionCall<'_>,
        signature: Option<String>,
        out: &mut Vec<Event>,
    ) {
        if let Err(message) = self.try_function_call(call, signature, out) {
            self.fail(
                ProviderError::malformed(format!("malformed Gemini function call: {message}")),
                out,
            );
        }
    }

    fn try_function_call(
        &mut self,
        call: FunctionCall<'_>,
        signature: Option<String>,
        out: &mut Vec<Event>,
    ) -> Result<(), String> {
        let name = call.name.filter(|n| !n.is_empty());
        let provider_id = call.id.filter(|id| !id.is_empty()).map(Cow::into_owned);
        let continues = call.will_continue == Some(true);
        let fragments = call.partial_args.unwrap_or_default();
        let Some(mut open) = self.streamed.take() else {
            let tool = name.ok_or("a function call without a name")?.into_owned();
            let mut args = Arguments::with_args(call.args)?;
            for arg in fragments {
                args.apply(arg)?;
            }
            let call_id = self.open_call(provider_id.as_deref(), &tool, out)?;
            let streamed = Box::new(StreamedCall {
                call_id,
                tool,
                provider_id,
                signature,
                args,
            });
            if continues {
                out.push(Event::ToolInputStart {
                    call_id: streamed.call_id.clone(),
                    tool: streamed.tool.clone(),
                });
                self.streamed = Some(streamed);
            } else {
                self.close_call(*streamed, false, out);
            }
            return Ok(());
        };
        if name.is_some() {
            return Err("a new call began before the streamed one closed".into());
        }
        if provider_id.is_some() && provider_id != open.provider_id {
            return Err("a streamed call changed its id".into());
        }
        if call.args.as_ref().is_some_and(|a| !a.is_null()) {
            return Err("a streamed call sent whole arguments".into());
        }
        if open.signature.is_none() {
            open.signature = signature;
        }
        for arg in fragments {
            open.args.apply(arg)?;
        }
        if continues {
            self.streamed = Some(open);
        } else {
            self.close_call(*open, true, out);
        }
        Ok(())
    }

    /// Closes the open text and reasoning blocks and picks the id of a new call: Gemini's own when it sent one
    /// (refused when already used), else `call_<responseId>_<n>`.
    fn open_call(
        &mut self,
        provider_id: Option<&str>,
        tool: &str,
        out: &mut Vec<Event>,
    ) -> Result<String, String> {
        let n = self.calls;
        let call_id = match provider_id {
            Some(id) => id.to_string(),
            None if self.response.id.is_empty() => format!("call_{n}"),
            None => format!("call_{}_{n}", self.response.id),
        };
        if self.call_ids.contains(&call_id) {
            return Err(format!("call id `{call_id}` of `{tool}` used twice"));
        }
        self.close_text(out);
        self.close_reasoning(out);
        self.calls += 1;
        self.call_ids.push(call_id.clone());
        Ok(call_id)
    }

    /// A call's last events: `ToolInputStart` unless already out, the arguments as one delta, `ToolInputEnd`,
    /// `ToolCall` with the signature and Gemini's id as replay metadata.
    fn close_call(&mut self, call: StreamedCall, started: bool, out: &mut Vec<Event>) {
        let StreamedCall {
            call_id,
            tool,
            provider_id,
            signature,
            args,
        } = call;
        let input_json = args.finish();
        if !started {
            out.push(Event::ToolInputStart {
                call_id: call_id.clone(),
                tool: tool.clone(),
            });
        }
        out.push(Event::ToolInputDelta {
            call_id: call_id.clone(),
            delta: input_json.clone(),
        });
        out.push(Event::ToolInputEnd {
            call_id: call_id.clone(),
        });
        out.push(Event::ToolCall {
            call_id,
            tool,
            input_json,
            metadata: ReplayMetadata {
                thought_signature: signature,
                function_call_id: provider_id,
            }
            .to_json(),
        });
    }
}
