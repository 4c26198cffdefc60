//! One prompt through session-processor, or one `Stream` call straight to llm-gateway, timed delta by delta.

use super::*;

/// Clients and what the streams need.
pub(super) struct Ctx {
    pub(super) gateway: Vec<GatewayServiceClient<Channel>>,
    pub(super) processor: Vec<SessionServiceClient<Channel>>,
    pub(super) gateway_auth: MetadataValue<Ascii>,
    pub(super) processor_auth: MetadataValue<Ascii>,
    /// The reply text every stream must deliver (learnt from a first direct stream).
    pub(super) expected: String,
    pub(super) stream_timeout: Duration,
}

/// One stream's timings, in nanoseconds, and how many text events carried its text.
pub(super) struct StreamRec {
    pub(super) ttft: u64,
    pub(super) gaps: Vec<u64>,
    pub(super) last: u64,
    pub(super) events: usize,
}

/// Records text-event arrivals and the text they carry.
pub(super) struct Clock {
    pub(super) sent: Instant,
    pub(super) last: Option<Instant>,
    pub(super) ttft: u64,
    pub(super) gaps: Vec<u64>,
    pub(super) events: usize,
    pub(super) text: String,
}

impl Clock {
    pub(super) fn new() -> Clock {
        Clock {
            sent: Instant::now(),
            last: None,
            ttft: 0,
            gaps: Vec::with_capacity(64),
            events: 0,
            text: String::new(),
        }
    }

    pub(super) fn text(&mut self, at: Instant, delta: &str) {
        match self.last {
            None => self.ttft = nanos(at - self.sent),
            Some(prev) => self.gaps.push(nanos(at - prev)),
        }
        self.last = Some(at);
        self.events += 1;
        self.text.push_str(delta);
    }

    /// How far the stream got, for errors.
    pub(super) fn progress(&self) -> String {
        format!(
            "{} text events, {} bytes of text",
            self.events,
            self.text.len()
        )
    }

    /// The record, if the end marker arrived and the text is the expected one (`None`: anything non-empty).
    pub(super) fn finish(
        self,
        done: bool,
        expected: Option<&str>,
    ) -> Result<(StreamRec, String), String> {
        let complete = match expected {
            Some(e) => self.text == e,
            None => !self.text.is_empty(),
        };
        if !done || !complete {
            return Err(format!(
                "incomplete stream: {} text events, {} of {} bytes of text, end marker {}",
                self.events,
                self.text.len(),
                expected.map_or(0, str::len),
                if done { "seen" } else { "missing" }
            ));
        }
        let last = self.last.map_or(0, |l| nanos(l - self.sent));
        Ok((
            StreamRec {
                ttft: self.ttft,
                gaps: self.gaps,
                last,
                events: self.events,
            },
            self.text,
        ))
    }
}

pub(super) fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

pub(super) fn status(s: &tonic::Status) -> String {
    format!("{:?}: {}", s.code(), s.message())
}

/// One `Stream` call straight to the gateway; `expected` `None` accepts any text (the first probe).
pub(super) async fn direct_stream(
    ctx: &Ctx,
    i: usize,
    expected: Option<&str>,
) -> Result<(StreamRec, String), String> {
    let mut client = ctx.gateway[i % ctx.gateway.len()].clone();
    let request = bench::procs::stream_request(&ctx.gateway_auth);
    let mut clock = Clock::new();
    let mut stream = client
        .stream(request)
        .await
        .map_err(|s| status(&s))?
        .into_inner();
    let mut done = false;
    use gw::stream_response::Event as E;
    let deadline = tokio::time::Instant::now() + ctx.stream_timeout;
    loop {
        let Ok(next) = tokio::time::timeout_at(deadline, stream.message()).await else {
            return Err(format!(
                "gateway stream timed out after {:?}: {}",
                ctx.stream_timeout,
                clock.progress()
            ));
        };
        let Some(msg) = next.map_err(|s| status(&s))? else {
            break;
        };
        let now = Instant::now();
        match msg.event {
            Some(E::TextDelta(d)) => clock.text(now, &d.delta),
            Some(E::StepFinish(_)) => done = true,
            Some(E::Error(e)) => return Err(format!("error event: {}", e.message)),
            _ => {}
        }
    }
    clock.finish(done, expected)
}

/// Creates a session for a session worker.
pub(super) async fn create_session(ctx: &Ctx, i: usize) -> Result<String, String> {
    let mut client = ctx.processor[i % ctx.processor.len()].clone();
    let mut request = tonic::Request::new(spb::CreateSessionRequest::default());
    request
        .metadata_mut()
        .insert("authorization", ctx.processor_auth.clone());
    let session = client
        .create_session(request)
        .await
        .map_err(|s| format!("CreateSession: {}", status(&s)))?
        .into_inner()
        .session
        .ok_or_else(|| "CreateSession returned no session".to_owned())?;
    Ok(session.id)
}

/// One `Prompt` through the processor, read up to its `done` event.
pub(super) async fn session_prompt(
    ctx: &Ctx,
    i: usize,
    session_id: &str,
) -> Result<StreamRec, String> {
    let mut client = ctx.processor[i % ctx.processor.len()].clone();
    let mut request = tonic::Request::new(spb::PromptRequest {
        session_id: session_id.into(),
        parts: vec![spb::PromptPart {
            kind: Some(spb::prompt_part::Kind::Text(PROMPT.into())),
        }],
        ..Default::default()
    });
    request
        .metadata_mut()
        .insert("authorization", ctx.processor_auth.clone());
    let mut clock = Clock::new();
    let mut stream = client
        .prompt(request)
        .await
        .map_err(|s| format!("Prompt: {}", status(&s)))?
        .into_inner();
    let mut done = false;
    use spb::session_event::Event as E;
    let deadline = tokio::time::Instant::now() + ctx.stream_timeout;
    // The kinds of the last few events, for a stream that stalls.
    let mut recent: Vec<&'static str> = Vec::new();
    loop {
        let Ok(next) = tokio::time::timeout_at(deadline, stream.message()).await else {
            return Err(format!(
                "Prompt stream of session {session_id} timed out after {:?}: {}, no `done`; last events: {}",
                ctx.stream_timeout,
                clock.progress(),
                if recent.is_empty() {
                    "none".to_owned()
                } else {
                    recent.join(", ")
                }
            ));
        };
        let Some(msg) = next.map_err(|s| status(&s))? else {
            break;
        };
        let now = Instant::now();
        let event = msg.event.and_then(|e| e.event);
        if recent.len() == 4 {
            recent.remove(0);
        }
        recent.push(event_name(event.as_ref()));
        match event {
            Some(E::PartDelta(d)) => clock.text(now, &d.delta),
            Some(E::Error(e)) => return Err(format!("session error: {:?} {}", e.kind, e.message)),
            Some(E::Done(_)) => {
                done = true;
                break;
            }
            _ => {}
        }
    }
    clock.finish(done, Some(&ctx.expected)).map(|(rec, _)| rec)
}

/// What the processor says about a session whose prompt stalled: its status and its messages.
pub(super) async fn session_state(ctx: &Ctx, i: usize, session_id: &str) -> String {
    let mut client = ctx.processor[i % ctx.processor.len()].clone();
    let mut get = tonic::Request::new(spb::GetSessionRequest {
        session_id: session_id.into(),
    });
    get.metadata_mut()
        .insert("authorization", ctx.processor_auth.clone());
    let state = match client.get_session(get).await {
        Ok(r) => r
            .into_inner()
            .session
            .and_then(|s| s.status)
            .map_or("no status".to_owned(), |st| {
                format!("status {:?}", st.kind())
            }),
        Err(s) => format!("GetSession: {}", status(&s)),
    };
    let mut list = tonic::Request::new(spb::ListMessagesRequest {
        session_id: session_id.into(),
        ..Default::default()
    });
    list.metadata_mut()
        .insert("authorization", ctx.processor_auth.clone());
    let messages = match client.list_messages(list).await {
        Ok(r) => {
            let roles: Vec<String> = r
                .into_inner()
                .messages
                .iter()
                .map(|m| {
                    let role = if m.role == spb::Role::User as i32 {
                        "user"
                    } else {
                        "assistant"
                    };
                    if m.completed_at.is_some() {
                        format!("{role} (completed)")
                    } else {
                        role.to_owned()
                    }
                })
                .collect();
            format!("messages: [{}]", roles.join(", "))
        }
        Err(s) => format!("ListMessages: {}", status(&s)),
    };
    format!("session {state}, {messages}")
}

/// A session event's kind, as the proto names it.
pub(super) fn event_name(event: Option<&spb::session_event::Event>) -> &'static str {
    use spb::session_event::Event as E;
    match event {
        None => "empty",
        Some(E::MessageUpdated(_)) => "message_updated",
        Some(E::PartUpdated(_)) => "part_updated",
        Some(E::PartDelta(_)) => "part_delta",
        Some(E::Status(_)) => "status",
        Some(E::Error(_)) => "error",
        Some(E::ToolCallAwaiting(_)) => "tool_call_awaiting",
        Some(E::PermissionAsked(_)) => "permission_asked",
        Some(E::Done(_)) => "done",
    }
}

pub(super) async fn with_timeout<T>(
    limit: Duration,
    f: impl Future<Output = Result<T, String>>,
) -> Result<T, String> {
    tokio::time::timeout(limit, f)
        .await
        .unwrap_or_else(|_| Err(format!("timed out after {limit:?}")))
}

/// A session worker: one session, `per_worker` prompts back to back.
pub(super) async fn session_worker(
    ctx: &Ctx,
    i: usize,
    per_worker: usize,
) -> Vec<Result<StreamRec, String>> {
    let id = match with_timeout(ctx.stream_timeout, create_session(ctx, i)).await {
        Ok(id) => id,
        Err(e) => return (0..per_worker).map(|_| Err(e.clone())).collect(),
    };
    let mut out = Vec::with_capacity(per_worker);
    for n in 0..per_worker {
        // The stream enforces its own deadline (and says how far it got); this is the backstop.
        let limit = ctx.stream_timeout + Duration::from_secs(5);
        let r = with_timeout(limit, session_prompt(ctx, i, &id)).await;
        let r = match r {
            Err(e) if e.contains("timed out") => Err(format!(
                "prompt {} of {per_worker}: {e}; {}",
                n + 1,
                session_state(ctx, i, &id).await
            )),
            other => other,
        };
        out.push(r);
    }
    out
}

/// A direct worker: `per_worker` gateway streams back to back.
pub(super) async fn direct_worker(
    ctx: &Ctx,
    i: usize,
    per_worker: usize,
) -> Vec<Result<StreamRec, String>> {
    let mut out = Vec::with_capacity(per_worker);
    for _ in 0..per_worker {
        let limit = ctx.stream_timeout + Duration::from_secs(5);
        let r = with_timeout(limit, direct_stream(ctx, i, Some(&ctx.expected))).await;
        out.push(r.map(|(rec, _)| rec));
    }
    out
}

pub(super) async fn connect(addr: &str) -> Channel {
    tonic::transport::Endpoint::from_shared(format!("http://{addr}"))
        .expect("endpoint")
        .tcp_nodelay(true)
        .connect()
        .await
        .unwrap_or_else(|e| panic!("connect to {addr}: {e}"))
}
