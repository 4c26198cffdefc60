//! One stream on each path (direct HTTP, the floor relay, the gateway, the peers) timed frame by frame, and a round of them.

use super::*;

/// An OpenAI-compatible streaming endpoint, the headers each request carries and the request body.
pub(super) struct HttpTarget {
    pub(super) url: String,
    pub(super) headers: reqwest::header::HeaderMap,
    pub(super) body: Bytes,
    pub(super) dialect: Dialect,
}

/// The streaming protocol an HTTP target answers in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Dialect {
    /// OpenAI Chat Completions chunks, ended by `data: [DONE]`.
    Chat,
    /// OpenAI Responses typed events, ended by `response.completed`.
    Responses,
}

impl Dialect {
    /// Whether `frame` carries answer text.
    pub(super) fn is_content(self, frame: &[u8]) -> bool {
        match self {
            Dialect::Chat => is_content(frame),
            Dialect::Responses => find(frame, b"event: response.output_text.delta\n").is_some(),
        }
    }

    /// Whether `frame` ends a complete answer.
    pub(super) fn is_done(self, frame: &[u8]) -> bool {
        match self {
            Dialect::Chat => frame.starts_with(b"data: [DONE]"),
            Dialect::Responses => frame.starts_with(b"event: response.completed\n"),
        }
    }
}

impl HttpTarget {
    pub(super) fn new(url: String, headers: &[(&'static str, String)], body: &Bytes) -> HttpTarget {
        let mut map = reqwest::header::HeaderMap::new();
        map.insert(
            reqwest::header::CONTENT_TYPE,
            reqwest::header::HeaderValue::from_static("application/json"),
        );
        for (name, value) in headers {
            map.insert(*name, value.parse().expect("header value"));
        }
        HttpTarget {
            url,
            headers: map,
            body: body.clone(),
            dialect: Dialect::Chat,
        }
    }

    /// The same target answering in `dialect`.
    pub(super) fn speaking(self, dialect: Dialect) -> HttpTarget {
        HttpTarget { dialect, ..self }
    }
}

/// What the streams need: clients and the request bodies.
pub(super) struct Ctx {
    pub(super) http: reqwest::Client,
    pub(super) direct: HttpTarget,
    pub(super) gateway_http: HttpTarget,
    pub(super) gateway_responses: HttpTarget,
    pub(super) litellm: Option<HttpTarget>,
    pub(super) portkey: Option<HttpTarget>,
    pub(super) floor: Vec<GatewayServiceClient<Channel>>,
    pub(super) gateway: Vec<GatewayServiceClient<Channel>>,
    pub(super) auth: MetadataValue<Ascii>,
    pub(super) chunks: usize,
    pub(super) stream_timeout: Duration,
}

/// One stream's timings, in nanoseconds.
pub(super) struct StreamRec {
    pub(super) ttft: u64,
    pub(super) gaps: Vec<u64>,
}

/// Records text-delta arrivals.
pub(super) struct Clock {
    pub(super) sent: Instant,
    pub(super) last: Option<Instant>,
    pub(super) ttft: u64,
    pub(super) gaps: Vec<u64>,
    pub(super) deltas: usize,
}

impl Clock {
    pub(super) fn new(chunks: usize) -> Clock {
        Clock {
            sent: Instant::now(),
            last: None,
            ttft: 0,
            gaps: Vec::with_capacity(chunks),
            deltas: 0,
        }
    }

    pub(super) fn delta(&mut self, at: Instant) {
        match self.last {
            None => self.ttft = nanos(at - self.sent),
            Some(prev) => self.gaps.push(nanos(at - prev)),
        }
        self.last = Some(at);
        self.deltas += 1;
    }

    pub(super) fn finish(self, done: bool, chunks: usize) -> Result<StreamRec, String> {
        if !done || self.deltas != chunks {
            return Err(format!(
                "incomplete stream: {} of {chunks} text deltas, end marker {}",
                self.deltas,
                if done { "seen" } else { "missing" }
            ));
        }
        Ok(StreamRec {
            ttft: self.ttft,
            gaps: self.gaps,
        })
    }
}

pub(super) fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

pub(super) fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// An OpenAI chunk with answer text: a `delta` whose `content` is not empty. The role chunk (`"delta":{"role":
/// "assistant","content":""}`, or with `content` first as LiteLLM writes it) and the finish chunk (`"delta":{}`) are
/// not.
pub(super) fn is_content(frame: &[u8]) -> bool {
    const NEEDLE: &[u8] = br#""content":""#;
    let Some(delta) = find(frame, br#""delta":{"#) else {
        return false;
    };
    let rest = &frame[delta..];
    find(rest, NEEDLE).is_some_and(|at| rest.get(at + NEEDLE.len()).is_some_and(|&b| b != b'"'))
}

/// A frame reporting an error instead of a chunk (how a relay reports a failed upstream mid-stream).
pub(super) fn is_error(frame: &[u8]) -> bool {
    find(frame, br#""error""#).is_some()
}

/// The length of the first SSE frame in `buf` (through its blank line, LF or CRLF line ends), if it is complete.
pub(super) fn frame_len(buf: &[u8]) -> Option<usize> {
    let lf = find(buf, b"\n\n").map(|at| at + 2);
    let crlf = find(buf, b"\r\n\r\n").map(|at| at + 4);
    match (lf, crlf) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// The start of a response body or frame, for an error message.
pub(super) fn excerpt(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(bytes);
    let text = text.trim();
    match text.char_indices().nth(300) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_owned(),
    }
}

/// One stream over HTTP: direct to the provider, through the gateway's door or through a peer. A stream counts only
/// when every text delta and the dialect's end marker arrived; otherwise the error says what came instead.
pub(super) async fn http_stream(ctx: &Ctx, target: &HttpTarget) -> Result<StreamRec, String> {
    let mut clock = Clock::new(ctx.chunks);
    let mut response = ctx
        .http
        .post(&target.url)
        .headers(target.headers.clone())
        .body(target.body.clone())
        .send()
        .await
        .map_err(|e| format!("request: {e}"))?;
    if !response.status().is_success() {
        let status = response.status();
        let body = response.bytes().await.unwrap_or_default();
        return Err(format!("HTTP {status}: {}", excerpt(&body)));
    }
    let mut buf = BytesMut::with_capacity(4096);
    let mut done = false;
    let mut error_frame = None;
    while let Some(chunk) = response.chunk().await.map_err(|e| format!("body: {e}"))? {
        let now = Instant::now();
        buf.extend_from_slice(&chunk);
        while let Some(len) = frame_len(&buf) {
            let frame = buf.split_to(len);
            if target.dialect.is_content(&frame) {
                clock.delta(now);
            } else if target.dialect.is_done(&frame) {
                done = true;
            } else if error_frame.is_none() && is_error(&frame) {
                error_frame = Some(excerpt(&frame));
            }
        }
    }
    clock
        .finish(done, ctx.chunks)
        .map_err(|e| match error_frame {
            Some(frame) => format!("{e}; error frame: {frame}"),
            None => e,
        })
}

pub(super) async fn grpc_stream(ctx: &Ctx, path: Route, i: usize) -> Result<StreamRec, String> {
    let clients = if path == Route::Gateway {
        &ctx.gateway
    } else {
        &ctx.floor
    };
    let mut client = clients[i % clients.len()].clone();
    let request = bench::procs::stream_request(&ctx.auth);
    let mut clock = Clock::new(ctx.chunks);
    let mut stream = client
        .stream(request)
        .await
        .map_err(|s| format!("{:?}: {}", s.code(), s.message()))?
        .into_inner();
    let mut done = false;
    use pb::stream_response::Event as E;
    while let Some(msg) = stream
        .message()
        .await
        .map_err(|s| format!("{:?}: {}", s.code(), s.message()))?
    {
        let now = Instant::now();
        match (path, msg.event) {
            // The floor forwards every frame's data unparsed.
            (Route::Floor, Some(E::TextDelta(d))) => {
                if is_content(d.delta.as_bytes()) {
                    clock.delta(now);
                } else if d.delta == "[DONE]" {
                    done = true;
                }
            }
            (_, Some(E::TextDelta(_))) => clock.delta(now),
            (_, Some(E::StepFinish(_))) => done = true,
            (_, Some(E::Error(e))) => return Err(format!("error event: {}", e.message)),
            _ => {}
        }
    }
    clock.finish(done, ctx.chunks)
}

pub(super) async fn one_stream(ctx: &Ctx, path: Route, i: usize) -> Result<StreamRec, String> {
    let run = async {
        match path {
            Route::Direct => http_stream(ctx, &ctx.direct).await,
            Route::GatewayHttp => http_stream(ctx, &ctx.gateway_http).await,
            Route::GatewayResponses => http_stream(ctx, &ctx.gateway_responses).await,
            Route::Litellm | Route::Portkey => {
                let target = if path == Route::Litellm {
                    ctx.litellm.as_ref()
                } else {
                    ctx.portkey.as_ref()
                };
                match target {
                    Some(target) => http_stream(ctx, target).await,
                    None => Err(format!("{} was not started", path.name())),
                }
            }
            Route::Floor | Route::Gateway => grpc_stream(ctx, path, i).await,
        }
    };
    tokio::time::timeout(ctx.stream_timeout, run)
        .await
        .unwrap_or_else(|_| Err("stream timed out".into()))
}

/// Everything measured for one path at one concurrency, over all its rounds.
#[derive(Default)]
pub(super) struct Agg {
    pub(super) streams: usize,
    pub(super) completed: usize,
    pub(super) errors: usize,
    pub(super) error_samples: Vec<String>,
    pub(super) ttft: Vec<u64>,
    pub(super) gaps: Vec<u64>,
    /// CPU nanoseconds per process ([`Procs`] order) during this path's rounds.
    pub(super) cpu: Vec<u64>,
    /// Peak RSS in KiB per process during this path's rounds.
    pub(super) rss_peak: Vec<u64>,
    /// Wall time of this path's rounds, nanoseconds.
    pub(super) wall: u64,
}

pub(super) async fn round(
    ctx: &Arc<Ctx>,
    procs: &Procs,
    path: Route,
    c: usize,
    per_worker: usize,
    ramp: Duration,
    agg: &mut Agg,
) {
    let n = procs.len();
    agg.cpu.resize(n, 0);
    agg.rss_peak.resize(n, 0);
    // A peer's process tree is read once per round: workers it forks at start-up are there by then.
    let sets = procs.pid_sets();
    let stop = Arc::new(AtomicBool::new(false));
    let sampler = {
        let stop = Arc::clone(&stop);
        let sets = sets.clone();
        tokio::spawn(async move {
            let mut peak = vec![0u64; sets.len()];
            loop {
                for (slot, set) in peak.iter_mut().zip(&sets) {
                    *slot = (*slot).max(rss_of(set));
                }
                if stop.load(Ordering::Relaxed) {
                    return peak;
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
    };
    let cpu_before: Vec<u64> = sets.iter().map(|s| cpu_of(s)).collect();
    let start = tokio::time::Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..c {
        let ctx = Arc::clone(ctx);
        let at = start + ramp.mul_f64(i as f64 / c as f64);
        tasks.spawn(async move {
            tokio::time::sleep_until(at).await;
            let mut results = Vec::with_capacity(per_worker);
            for _ in 0..per_worker {
                results.push(one_stream(&ctx, path, i).await);
            }
            results
        });
    }
    let mut results = Vec::new();
    while let Some(joined) = tasks.join_next().await {
        match joined {
            Ok(r) => results.extend(r),
            Err(e) => results.push(Err(format!("task: {e}"))),
        }
    }
    for result in results {
        agg.streams += 1;
        match result {
            Ok(rec) => {
                agg.completed += 1;
                agg.ttft.push(rec.ttft);
                agg.gaps.extend(rec.gaps);
            }
            Err(e) => {
                agg.errors += 1;
                if agg.error_samples.len() < 5 && !agg.error_samples.contains(&e) {
                    agg.error_samples.push(e);
                }
            }
        }
    }
    agg.wall += nanos(start.elapsed());
    let cpu_after: Vec<u64> = sets.iter().map(|s| cpu_of(s)).collect();
    stop.store(true, Ordering::Relaxed);
    let peak = sampler.await.unwrap_or_default();
    for k in 0..n {
        agg.cpu[k] += cpu_after[k].saturating_sub(cpu_before[k]);
        agg.rss_peak[k] = agg.rss_peak[k].max(peak.get(k).copied().unwrap_or(0));
    }
}

pub(super) async fn channels(addr: &str, n: usize) -> Vec<GatewayServiceClient<Channel>> {
    let mut out = Vec::new();
    for _ in 0..n.max(1) {
        let channel = tonic::transport::Endpoint::from_shared(format!("http://{addr}"))
            .expect("endpoint")
            .tcp_nodelay(true)
            .connect()
            .await
            .expect("connect");
        out.push(GatewayServiceClient::new(channel).max_decoding_message_size(usize::MAX));
    }
    out
}
