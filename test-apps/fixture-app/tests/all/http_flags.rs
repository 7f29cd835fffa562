//! The HTTP flags that copy real-world Streamable HTTP servers, pinned on the wire with a raw
//! HTTP client: which stream carries what, event ids and `retry`, status codes and headers.

use futures::StreamExt as _;
use futures::stream::BoxStream;
use serde_json::{Value, json};

use mcpapp_testkit::{PATIENCE, eventually, within};

use crate::support::Fixture;

const PROTOCOL: &str = "2025-11-25";

/// One server-sent event.
#[derive(Debug, Clone, Default)]
struct Event {
    id: Option<String>,
    retry: Option<String>,
    data: Option<Value>,
}

/// Reads the events of one response as they arrive.
struct Events {
    chunks: BoxStream<'static, reqwest::Result<axum::body::Bytes>>,
    buffer: Vec<u8>,
}

impl Events {
    fn new(response: reqwest::Response) -> Self {
        assert!(
            response
                .headers()
                .get("content-type")
                .and_then(|v| v.to_str().ok())
                .is_some_and(|v| v.starts_with("text/event-stream")),
            "not an event stream: {:?}",
            response.headers()
        );
        Self {
            chunks: response.bytes_stream().boxed(),
            buffer: Vec::new(),
        }
    }

    /// The next event, or `None` when the stream ends.
    async fn next(&mut self) -> Option<Event> {
        loop {
            if let Some(end) = self.buffer.windows(2).position(|w| w == b"\n\n") {
                let raw: Vec<u8> = self.buffer.drain(..end + 2).collect();
                let mut event = Event::default();
                let mut data = Vec::new();
                for line in String::from_utf8(raw).unwrap().lines() {
                    let (name, value) = line.split_once(':').unwrap_or((line, ""));
                    let value = value.strip_prefix(' ').unwrap_or(value).to_owned();
                    match name {
                        "id" => event.id = Some(value),
                        "retry" => event.retry = Some(value),
                        "data" => data.push(value),
                        _ => {}
                    }
                }
                let data = data.join("\n");
                if !data.trim().is_empty() {
                    event.data = Some(serde_json::from_str(&data).unwrap());
                }
                return Some(event);
            }
            match within("the next chunk of an event stream", self.chunks.next()).await {
                Some(Ok(chunk)) => self.buffer.extend_from_slice(&chunk),
                Some(Err(e)) => panic!("the event stream broke: {e}"),
                None => return None,
            }
        }
    }

    /// The next event that carries a message.
    async fn next_message(&mut self) -> Option<Value> {
        loop {
            if let Some(data) = self.next().await?.data {
                return Some(data);
            }
        }
    }

    /// Every event until the stream ends.
    async fn rest(&mut self) -> Vec<Event> {
        let mut all = Vec::new();
        while let Some(event) = self.next().await {
            all.push(event);
        }
        all
    }
}

/// A raw Streamable HTTP client of one session.
struct Raw {
    http: reqwest::Client,
    url: String,
    session: Option<String>,
}

impl Raw {
    fn new(fixture: &Fixture) -> Self {
        Self {
            http: reqwest::Client::new(),
            url: fixture.mcp_url.clone(),
            session: None,
        }
    }

    fn with_session(&self, request: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        match &self.session {
            Some(session) => request
                .header("mcp-session-id", session)
                .header("mcp-protocol-version", PROTOCOL),
            None => request.header("mcp-protocol-version", PROTOCOL),
        }
    }

    async fn post(&self, message: &Value) -> reqwest::Response {
        let request = self
            .http
            .post(&self.url)
            .header("accept", "application/json, text/event-stream")
            .json(message);
        within("POST /mcp", self.with_session(request).send())
            .await
            .unwrap()
    }

    async fn get(&self, last_event: Option<&str>) -> reqwest::Response {
        let mut request = self
            .http
            .get(&self.url)
            .header("accept", "text/event-stream");
        if let Some(last) = last_event {
            request = request.header("last-event-id", last);
        }
        within("GET /mcp", self.with_session(request).send())
            .await
            .unwrap()
    }

    /// `initialize` with `capabilities`; keeps the session id, if the server issued one.
    async fn initialize(&mut self, capabilities: Value) -> Value {
        let response = self
            .post(
                &json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
                "protocolVersion": PROTOCOL, "capabilities": capabilities,
                "clientInfo": {"name": "raw-http", "version": "1"}}}),
            )
            .await;
        assert_eq!(response.status(), 200);
        self.session = response
            .headers()
            .get("mcp-session-id")
            .map(|v| v.to_str().unwrap().to_owned());
        let answer = Events::new(response).next_message().await.unwrap();
        assert_eq!(answer["result"]["protocolVersion"], PROTOCOL, "{answer}");
        answer
    }

    async fn initialized(&self) {
        let response = self
            .post(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
            .await;
        assert_eq!(response.status(), 202);
    }

    /// Calls a tool and returns the events of its response stream.
    async fn call(&self, id: Value, name: &str, arguments: Value, meta: Option<Value>) -> Events {
        let mut params = json!({"name": name, "arguments": arguments});
        if let Some(meta) = meta {
            params["_meta"] = meta;
        }
        let response = self
            .post(&json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params}))
            .await;
        assert_eq!(response.status(), 200);
        Events::new(response)
    }

    /// The fixture's `http_counters`.
    async fn counters(&self) -> Value {
        let mut events = self
            .call(json!("counters"), "http_counters", json!({}), None)
            .await;
        let answer = events.next_message().await.unwrap();
        answer["result"]["structuredContent"].clone()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_requests_on_get_moves_elicitation_to_the_get_stream() {
    let fixture = Fixture::http(&["--server-requests-on-get"]).await;
    let mut raw = Raw::new(&fixture);
    raw.initialize(json!({"elicitation": {}})).await;
    raw.initialized().await;
    let get = raw.get(None).await;
    assert_eq!(get.status(), 200);
    let mut get = Events::new(get);

    let mut call = raw
        .call(json!(2), "elicit", json!({"message": "who?"}), None)
        .await;
    let asked = get
        .next_message()
        .await
        .expect("a request on the GET stream");
    assert_eq!(asked["method"], "elicitation/create", "{asked}");
    assert_eq!(asked["params"]["message"], "who?");
    let answer = raw
        .post(&json!({"jsonrpc": "2.0", "id": asked["id"],
                      "result": {"action": "accept", "content": {"name": "Ada", "agree": true}}}))
        .await;
    assert_eq!(answer.status(), 202);

    // The POST's stream carries the response and never the request.
    let messages: Vec<Value> = call
        .rest()
        .await
        .into_iter()
        .filter_map(|e| e.data)
        .collect();
    assert!(
        messages.iter().all(|m| m.get("method").is_none()),
        "{messages:?}"
    );
    let response = messages.last().unwrap();
    assert_eq!(response["id"], 2);
    let text = response["result"]["content"][0]["text"].as_str().unwrap();
    assert!(
        text.starts_with("accepted:") && text.contains("Ada"),
        "{text}"
    );
    assert_eq!(raw.counters().await["requestsMovedToGet"], 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_requests_wait_for_a_get_stream() {
    let fixture = Fixture::http(&["--server-requests-on-get"]).await;
    let mut raw = Raw::new(&fixture);
    raw.initialize(json!({"elicitation": {}})).await;
    raw.initialized().await;
    let mut call = raw
        .call(json!("early"), "elicit", json!({"message": "later"}), None)
        .await;
    // The request leaves the POST's stream before any GET is open...
    let priming = call.next().await.unwrap();
    assert!(priming.data.is_none(), "{priming:?}");
    assert!(
        eventually(
            PATIENCE,
            async || raw.counters().await["requestsMovedToGet"] == 1
        )
        .await,
        "the request was never moved to a GET stream"
    );
    // ...and the first GET stream gets it.
    let mut get = Events::new(raw.get(None).await);
    let asked = get.next_message().await.unwrap();
    assert_eq!(asked["params"]["message"], "later");
    raw.post(&json!({"jsonrpc": "2.0", "id": asked["id"], "result": {"action": "decline"}}))
        .await;
    let response = call.next_message().await.unwrap();
    assert_eq!(response["id"], "early");
    assert_eq!(response["result"]["content"][0]["text"], "declined");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resumable_after_ms_ends_the_stream_and_a_get_with_last_event_id_delivers_the_rest() {
    let fixture = Fixture::http(&["--resumable-after-ms", "100"]).await;
    let mut raw = Raw::new(&fixture);
    raw.initialize(json!({})).await;
    raw.initialized().await;

    // Three steps 300 ms apart: the response comes after at least 900 ms, well after 100.
    let mut call = raw
        .call(
            json!(5),
            "progress",
            json!({"steps": 3, "delayMs": 300}),
            Some(json!({"progressToken": "t"})),
        )
        .await;
    let before = call.rest().await;
    let priming = &before[0];
    assert_eq!(priming.retry.as_deref(), Some("200"), "{before:?}");
    assert!(
        priming.id.as_deref().is_some_and(|id| id.contains('/')),
        "{before:?}"
    );
    assert!(
        before
            .iter()
            .filter_map(|e| e.data.as_ref())
            .all(|m| m["method"] == "notifications/progress"),
        "the stream ended before the response: {before:?}"
    );
    let last = before.iter().rev().find_map(|e| e.id.clone()).unwrap();

    let resumed = raw.get(Some(&last)).await;
    assert_eq!(resumed.status(), 200);
    let after = Events::new(resumed).rest().await;
    let messages: Vec<Value> = before
        .iter()
        .chain(&after)
        .filter_map(|e| e.data.clone())
        .collect();
    let steps: Vec<&Value> = messages
        .iter()
        .filter(|m| m["method"] == "notifications/progress")
        .map(|m| &m["params"]["progress"])
        .collect();
    assert_eq!(
        steps,
        [1.0, 2.0, 3.0],
        "each step exactly once: {messages:?}"
    );
    let response = messages.last().unwrap();
    assert_eq!(response["id"], 5, "{messages:?}");
    assert_eq!(response["result"]["structuredContent"]["steps"], 3);
    // Every resumed event has an id after the last one seen.
    assert!(after.iter().all(|e| e.id.as_deref() != Some(last.as_str())));

    // A GET without Last-Event-ID is the standalone stream, as before.
    let standalone = raw.get(None).await;
    assert_eq!(standalone.status(), 200);
    drop(Events::new(standalone));
    // A quick call is not cut short.
    let mut quick = raw
        .call(json!(6), "echo", json!({"message": "fast"}), None)
        .await;
    assert_eq!(quick.next_message().await.unwrap()["id"], 6);
    let counters = raw.counters().await;
    assert_eq!(counters["streamsClosedEarly"], 1, "{counters}");
    assert_eq!(counters["streamsResumed"], 1, "{counters}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stateless_get_status_answers_every_get_and_issues_no_session() {
    for code in [404_u16, 405] {
        let fixture = Fixture::http(&["--stateless-get-status", &code.to_string()]).await;
        let mut raw = Raw::new(&fixture);
        raw.initialize(json!({})).await;
        assert_eq!(raw.session, None, "a stateless server issues no session id");
        raw.initialized().await;
        assert_eq!(raw.get(None).await.status(), code);
        assert_eq!(raw.get(Some("0")).await.status(), code);
        let mut call = raw
            .call(json!(1), "echo", json!({"message": "no session"}), None)
            .await;
        let answer = call.next_message().await.unwrap();
        assert_eq!(
            answer["result"]["structuredContent"]["message"],
            "no session"
        );
        assert_eq!(raw.counters().await["getsRefused"], 2);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn strict_lifecycle_refuses_requests_before_initialized_per_session() {
    let fixture = Fixture::http(&["--strict-lifecycle"]).await;
    let mut first = Raw::new(&fixture);
    first.initialize(json!({})).await;
    let list = json!({"jsonrpc": "2.0", "id": "early", "method": "tools/list"});
    let refused = first.post(&list).await;
    assert_eq!(refused.status(), 400);
    let error: Value = refused.json().await.unwrap();
    assert_eq!(error["id"], "early", "{error}");
    assert_eq!(error["error"]["code"], -32600, "{error}");
    assert_eq!(
        error["error"]["message"],
        "tools/list received before notifications/initialized"
    );
    // ping is allowed before initialized.
    let ping = first
        .post(&json!({"jsonrpc": "2.0", "id": "p", "method": "ping"}))
        .await;
    assert_eq!(ping.status(), 200);
    assert_eq!(
        Events::new(ping).next_message().await.unwrap()["result"],
        json!({})
    );
    first.initialized().await;
    let listed = first.post(&list).await;
    assert_eq!(listed.status(), 200);
    let listed = Events::new(listed).next_message().await.unwrap();
    assert!(listed["result"]["tools"].is_array(), "{listed}");

    // Another session is not initialized by the first one's notification.
    let mut second = Raw::new(&fixture);
    second.initialize(json!({})).await;
    assert_ne!(second.session, first.session);
    assert_eq!(second.post(&list).await.status(), 400);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_contradicting_meta_protocol_version_is_an_http_400_with_a_json_rpc_error() {
    let fixture = Fixture::http(&[]).await;
    let mut raw = Raw::new(&fixture);
    raw.initialize(json!({})).await;
    raw.initialized().await;
    let response = raw
        .post(
            &json!({"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": {
            "name": "echo", "arguments": {"message": "x"},
            "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}}}),
        )
        .await;
    assert_eq!(response.status(), 400);
    let error: Value = response.json().await.unwrap();
    assert_eq!(error["id"], 9, "{error}");
    assert_eq!(error["error"]["code"], -32020, "{error}");
    let message = error["error"]["message"].as_str().unwrap();
    assert!(message.contains("does not match"), "{message}");
}
