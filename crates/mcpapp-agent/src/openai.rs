//! The OpenAI-compatible Chat Completions provider: streaming with tool calling, which OpenAI,
//! Ollama, vLLM, llama.cpp's server and most hosted APIs speak.

use std::collections::{BTreeMap, VecDeque};
use std::fmt;
use std::time::Duration;

use bytes::Bytes;
use futures::stream::{self, BoxStream, StreamExt};
use serde_json::{Value, json};

use crate::model::{
    ChatMessage, ChatModel, ChatRequest, FinishReason, ModelError, ModelEvent, ModelStream,
    ToolCall,
};
use crate::sse::SseDecoder;

/// The default base URL.
pub(crate) const DEFAULT_OPENAI_BASE_URL: &str = "https://api.openai.com/v1";

/// Environment variable with the base URL.
pub(crate) const ENV_BASE_URL: &str = "OPENAI_BASE_URL";
/// Environment variable with the API key.
pub(crate) const ENV_API_KEY: &str = "OPENAI_API_KEY";
/// Environment variable with the model name; without it no model is configured.
pub(crate) const ENV_MODEL: &str = "MCPAPP_MODEL";

/// How much of an error response body is read.
const MAX_ERROR_BODY_BYTES: usize = 64 * 1024;
/// How much of an error body is quoted when it has no recognisable message.
const MAX_ERROR_QUOTE_CHARS: usize = 500;

/// Configuration of an [`OpenAiModel`]. `Debug` never shows the API key.
#[derive(Clone)]
pub struct OpenAiConfig {
    /// The API root, such as `https://api.openai.com/v1` or `http://127.0.0.1:11434/v1`;
    /// requests go to `{base_url}/chat/completions`.
    pub base_url: String,
    /// The bearer token; `None` for local servers that need none.
    pub api_key: Option<String>,
    /// The model name.
    pub model: String,
    /// How long connecting may take.
    pub connect_timeout: Duration,
    /// How long the server may stay silent while a reply is expected (local models on a CPU
    /// can be slow to produce the first token).
    pub read_timeout: Duration,
}

impl fmt::Debug for OpenAiConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OpenAiConfig")
            .field("base_url", &redact_url(&self.base_url))
            .field("api_key", &self.api_key.as_ref().map(|_| "[redacted]"))
            .field("model", &self.model)
            .field("connect_timeout", &self.connect_timeout)
            .field("read_timeout", &self.read_timeout)
            .finish()
    }
}

impl OpenAiConfig {
    /// A configuration for `model` at the default base URL, without an API key.
    pub fn new(model: impl Into<String>) -> Self {
        Self {
            base_url: DEFAULT_OPENAI_BASE_URL.to_owned(),
            api_key: None,
            model: model.into(),
            connect_timeout: Duration::from_secs(30),
            read_timeout: Duration::from_secs(300),
        }
    }

    /// Sets the base URL.
    #[must_use]
    pub fn with_base_url(mut self, base_url: impl Into<String>) -> Self {
        self.base_url = base_url.into();
        self
    }

    /// Sets the API key.
    #[must_use]
    pub fn with_api_key(mut self, api_key: impl Into<String>) -> Self {
        self.api_key = Some(api_key.into());
        self
    }

    /// Reads `MCPAPP_MODEL`, `OPENAI_BASE_URL` and `OPENAI_API_KEY`. `None` when no model is
    /// named, so the caller falls back to the [`OfflineModel`](crate::OfflineModel).
    pub fn from_env() -> Option<Self> {
        Self::from_lookup(|name| std::env::var(name).ok())
    }

    /// Like [`from_env`](Self::from_env), with variables looked up by `lookup`. Blank values
    /// count as unset.
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Option<Self> {
        let get = |name: &str| {
            lookup(name)
                .map(|v| v.trim().to_owned())
                .filter(|v| !v.is_empty())
        };
        let mut config = Self::new(get(ENV_MODEL)?);
        if let Some(base_url) = get(ENV_BASE_URL) {
            config.base_url = base_url;
        }
        config.api_key = get(ENV_API_KEY);
        Some(config)
    }

    fn endpoint(&self) -> String {
        format!("{}/chat/completions", self.base_url.trim_end_matches('/'))
    }
}

/// A [`ChatModel`] that talks to an OpenAI-compatible `/chat/completions` endpoint with
/// `stream: true` and function tools.
///
/// Tool calls streamed in fragments are assembled by index and emitted complete when the
/// reply ends (`[DONE]`, or the end of the stream after a `finish_reason`). HTTP errors carry
/// the status and the provider's message; a stream that breaks or ends early is an error.
/// The API key is sent only in the `Authorization` header and is removed from any message
/// that quotes it.
#[derive(Debug, Clone)]
pub struct OpenAiModel {
    config: OpenAiConfig,
    label: String,
    client: reqwest::Client,
}

impl OpenAiModel {
    /// A client for `config`.
    ///
    /// # Errors
    ///
    /// [`ModelError::Config`] if the base URL is not an `http` or `https` URL or the HTTP
    /// client cannot be built.
    pub fn new(config: OpenAiConfig) -> Result<Self, ModelError> {
        let endpoint = config.endpoint();
        let parsed = reqwest::Url::parse(&endpoint).map_err(|e| ModelError::Config {
            message: format!("base URL '{}' is not a valid URL: {e}", config.base_url),
        })?;
        if !matches!(parsed.scheme(), "http" | "https") {
            return Err(ModelError::Config {
                message: format!("base URL '{}' must use http or https", config.base_url),
            });
        }
        let client = reqwest::Client::builder()
            .connect_timeout(config.connect_timeout)
            .read_timeout(config.read_timeout)
            .build()
            .map_err(|e| ModelError::Config {
                message: format!("cannot build the HTTP client: {}", e.without_url()),
            })?;
        let label = format!("openai:{}", config.model);
        Ok(Self {
            config,
            label,
            client,
        })
    }

    /// The configuration.
    pub fn config(&self) -> &OpenAiConfig {
        &self.config
    }

    fn body(&self, request: &ChatRequest) -> Value {
        let messages: Vec<Value> = request.messages.iter().map(wire_message).collect();
        let mut body = json!({
            "model": self.config.model,
            "stream": true,
            "messages": messages,
        });
        // Some servers reject an empty `tools` array, so it is left out when there are none.
        if !request.tools.is_empty() {
            let tools: Vec<Value> = request
                .tools
                .iter()
                .map(|t| {
                    json!({
                        "type": "function",
                        "function": {
                            "name": t.name,
                            "description": t.description,
                            "parameters": t.parameters,
                        }
                    })
                })
                .collect();
            body["tools"] = Value::Array(tools);
        }
        body
    }
}

impl ChatModel for OpenAiModel {
    fn label(&self) -> &str {
        &self.label
    }

    fn stream(&self, request: ChatRequest) -> ModelStream {
        let body = self.body(&request);
        let client = self.client.clone();
        let url = self.config.endpoint();
        let api_key = self.config.api_key.clone();
        let model = self.config.model.clone();
        let start = async move {
            tracing::debug!(url = %redact_url(&url), %model, "requesting a chat completion");
            let mut builder = client
                .post(&url)
                .header(reqwest::header::ACCEPT, "text/event-stream")
                .json(&body);
            if let Some(key) = &api_key {
                builder = builder.bearer_auth(key);
            }
            let redactor = Redactor(api_key);
            let response = match builder.send().await {
                Ok(response) => response,
                Err(e) => {
                    let error = ModelError::Connect {
                        url: redactor.clean(&redact_url(&url)),
                        message: redactor.clean(&e.without_url().to_string()),
                    };
                    return stream::iter([Err(error)]).boxed();
                }
            };
            let status = response.status();
            if !status.is_success() {
                let message = redactor.clean(&error_message(response).await);
                return stream::iter([Err(ModelError::Http {
                    status: status.as_u16(),
                    message,
                })])
                .boxed();
            }
            let is_json = response
                .headers()
                .get(reqwest::header::CONTENT_TYPE)
                .and_then(|v| v.to_str().ok())
                .is_some_and(|v| v.starts_with("application/json"));
            if is_json {
                // A server that ignores `stream: true` answers with one JSON completion.
                return stream::iter(whole_completion(response, &redactor).await).boxed();
            }
            Reply::new(response.bytes_stream().boxed(), redactor).into_stream()
        };
        stream::once(start).flatten().boxed()
    }
}

/// Removes the API key from text that might quote it (some providers echo part of a wrong key;
/// a server might echo all of it).
#[derive(Clone)]
struct Redactor(Option<String>);

impl Redactor {
    fn clean(&self, text: &str) -> String {
        match &self.0 {
            Some(key) if !key.is_empty() => text.replace(key.as_str(), "[redacted]"),
            _ => text.to_owned(),
        }
    }
}

/// The URL without user information, for messages and logs.
pub(crate) fn redact_url(url: &str) -> String {
    match reqwest::Url::parse(url) {
        Ok(mut parsed) => {
            let _ = parsed.set_username("");
            let _ = parsed.set_password(None);
            parsed.to_string()
        }
        Err(_) => url.to_owned(),
    }
}

/// The message of an error response: `error.message`, `error` as a string, `message`, or the
/// start of the body.
async fn error_message(mut response: reqwest::Response) -> String {
    let mut body = Vec::new();
    // A broken body ends the read; what arrived so far is still worth quoting.
    while let Ok(Some(chunk)) = response.chunk().await {
        body.extend_from_slice(&chunk);
        if body.len() >= MAX_ERROR_BODY_BYTES {
            body.truncate(MAX_ERROR_BODY_BYTES);
            break;
        }
    }
    let text = String::from_utf8_lossy(&body);
    if let Ok(value) = serde_json::from_str::<Value>(&text)
        && let Some(message) = json_error_message(&value)
    {
        return message;
    }
    let trimmed = text.trim();
    if trimmed.is_empty() {
        return response
            .status()
            .canonical_reason()
            .unwrap_or("no message")
            .to_owned();
    }
    match trimmed.char_indices().nth(MAX_ERROR_QUOTE_CHARS) {
        Some((i, _)) => format!("{}…", &trimmed[..i]),
        None => trimmed.to_owned(),
    }
}

/// The message in an error object, in the shapes providers use.
fn json_error_message(value: &Value) -> Option<String> {
    let error = value.get("error").unwrap_or(value);
    if let Some(message) = error.as_str() {
        return Some(message.to_owned());
    }
    error
        .get("message")
        .and_then(Value::as_str)
        .map(str::to_owned)
}

/// Reads a non-streamed completion into events.
async fn whole_completion(
    response: reqwest::Response,
    redactor: &Redactor,
) -> Vec<Result<ModelEvent, ModelError>> {
    let value: Value = match response.json().await {
        Ok(value) => value,
        Err(e) => {
            return vec![Err(ModelError::Protocol {
                message: redactor.clean(&e.without_url().to_string()),
            })];
        }
    };
    if value.get("error").is_some_and(|e| !e.is_null()) {
        let message = json_error_message(&value).unwrap_or_else(|| value["error"].to_string());
        return vec![Err(ModelError::Provider {
            message: redactor.clean(&message),
        })];
    }
    let choice = &value["choices"][0];
    let message = &choice["message"];
    let mut events = Vec::new();
    if let Some(text) = message["content"].as_str().filter(|t| !t.is_empty()) {
        events.push(Ok(ModelEvent::TextDelta(text.to_owned())));
    }
    let mut calls = Vec::new();
    for (index, call) in message["tool_calls"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
    {
        let name = call["function"]["name"].as_str().unwrap_or("").to_owned();
        let arguments = match &call["function"]["arguments"] {
            Value::String(s) => s.clone(),
            Value::Null => String::new(),
            other => other.to_string(),
        };
        let id = call["id"].as_str().unwrap_or("").to_owned();
        calls.push((
            index,
            PartialCall {
                id,
                name,
                arguments,
            },
        ));
    }
    let has_calls = !calls.is_empty();
    for (index, call) in calls {
        events.push(call.finish(index));
    }
    let reason = choice["finish_reason"]
        .as_str()
        .map(FinishReason::from_wire)
        .unwrap_or(if has_calls {
            FinishReason::ToolCalls
        } else {
            FinishReason::Stop
        });
    events.push(Ok(ModelEvent::Finish(reason)));
    events
}

/// A tool call being assembled from streamed fragments.
#[derive(Debug, Default)]
struct PartialCall {
    id: String,
    name: String,
    arguments: String,
}

impl PartialCall {
    fn finish(self, index: usize) -> Result<ModelEvent, ModelError> {
        if self.name.is_empty() {
            return Err(ModelError::Protocol {
                message: format!("tool call #{index} has no function name"),
            });
        }
        let id = if self.id.is_empty() {
            format!("call_{}", uuid::Uuid::new_v4().simple())
        } else {
            self.id
        };
        Ok(ModelEvent::ToolCall(ToolCall {
            id,
            name: self.name,
            arguments: self.arguments,
        }))
    }
}

/// The state of a streamed reply.
struct Reply {
    body: BoxStream<'static, reqwest::Result<Bytes>>,
    decoder: SseDecoder,
    pending: VecDeque<Result<ModelEvent, ModelError>>,
    calls: BTreeMap<usize, PartialCall>,
    finish: Option<FinishReason>,
    /// Set once the reply is complete or failed; the body is not read further.
    ended: bool,
    redactor: Redactor,
}

impl Reply {
    fn new(body: BoxStream<'static, reqwest::Result<Bytes>>, redactor: Redactor) -> Self {
        Self {
            body,
            decoder: SseDecoder::default(),
            pending: VecDeque::new(),
            calls: BTreeMap::new(),
            finish: None,
            ended: false,
            redactor,
        }
    }

    fn into_stream(self) -> ModelStream {
        stream::unfold(self, |mut reply| async move {
            loop {
                if let Some(event) = reply.pending.pop_front() {
                    return Some((event, reply));
                }
                if reply.ended {
                    return None;
                }
                reply.read().await;
            }
        })
        .boxed()
    }

    /// Reads the next chunk of the body and queues what it completes.
    async fn read(&mut self) {
        match self.body.next().await {
            Some(Ok(bytes)) => match self.decoder.push(&bytes) {
                Ok(payloads) => {
                    for payload in payloads {
                        if self.ended {
                            break;
                        }
                        self.payload(&payload);
                    }
                }
                Err(_) => self.fail(ModelError::Protocol {
                    message: format!(
                        "an event line is longer than {} bytes",
                        crate::sse::MAX_LINE_BYTES
                    ),
                }),
            },
            Some(Err(e)) => self.fail(ModelError::Stream {
                message: self.redactor.clean(&e.without_url().to_string()),
            }),
            None => {
                if let Some(payload) = self.decoder.finish() {
                    self.payload(&payload);
                }
                if !self.ended {
                    if self.finish.is_some() {
                        // Some servers end the stream after the finish reason without `[DONE]`.
                        self.complete();
                    } else {
                        self.fail(ModelError::Stream {
                            message: "the stream ended before the reply was complete".to_owned(),
                        });
                    }
                }
            }
        }
    }

    /// Handles one event's data.
    fn payload(&mut self, payload: &str) {
        let payload = payload.trim();
        if payload == "[DONE]" {
            self.complete();
            return;
        }
        if payload.is_empty() {
            return;
        }
        let chunk: Value = match serde_json::from_str(payload) {
            Ok(chunk) => chunk,
            Err(e) => {
                self.fail(ModelError::Protocol {
                    message: format!("a stream chunk is not JSON: {e}"),
                });
                return;
            }
        };
        if chunk.get("error").is_some_and(|e| !e.is_null()) {
            let message = json_error_message(&chunk).unwrap_or_else(|| chunk["error"].to_string());
            let message = self.redactor.clean(&message);
            self.fail(ModelError::Provider { message });
            return;
        }
        let Some(choice) = chunk["choices"].get(0) else {
            // Usage-only chunks and keep-alives carry no choices.
            return;
        };
        let delta = &choice["delta"];
        if let Some(text) = delta["content"].as_str().filter(|t| !t.is_empty()) {
            self.pending
                .push_back(Ok(ModelEvent::TextDelta(text.to_owned())));
        }
        if let Some(fragments) = delta["tool_calls"].as_array() {
            for (position, fragment) in fragments.iter().enumerate() {
                let index = fragment["index"]
                    .as_u64()
                    .and_then(|i| usize::try_from(i).ok())
                    .unwrap_or(position);
                let call = self.calls.entry(index).or_default();
                if let Some(id) = fragment["id"].as_str().filter(|id| !id.is_empty()) {
                    id.clone_into(&mut call.id);
                }
                let function = &fragment["function"];
                if let Some(name) = function["name"].as_str() {
                    call.name.push_str(name);
                }
                match &function["arguments"] {
                    Value::String(s) => call.arguments.push_str(s),
                    Value::Null => {}
                    // A few servers send the arguments as an object rather than text.
                    other => call.arguments.push_str(&other.to_string()),
                }
            }
        }
        if let Some(reason) = choice["finish_reason"].as_str() {
            self.finish = Some(FinishReason::from_wire(reason));
        }
    }

    /// The reply is complete: queue the assembled tool calls and the finish.
    fn complete(&mut self) {
        let calls = std::mem::take(&mut self.calls);
        let has_calls = !calls.is_empty();
        for (index, call) in calls {
            let event = call.finish(index);
            let failed = event.is_err();
            self.pending.push_back(event);
            if failed {
                self.ended = true;
                return;
            }
        }
        let reason = self.finish.take().unwrap_or(if has_calls {
            FinishReason::ToolCalls
        } else {
            FinishReason::Stop
        });
        self.pending.push_back(Ok(ModelEvent::Finish(reason)));
        self.ended = true;
    }

    fn fail(&mut self, error: ModelError) {
        self.pending.push_back(Err(error));
        self.ended = true;
    }
}

/// One message in the Chat Completions wire format.
fn wire_message(message: &ChatMessage) -> Value {
    match message {
        ChatMessage::System { content } => json!({"role": "system", "content": content}),
        ChatMessage::User { content } => json!({"role": "user", "content": content}),
        ChatMessage::Assistant {
            content,
            tool_calls,
        } => {
            let mut value = json!({"role": "assistant", "content": content});
            if !tool_calls.is_empty() {
                if content.is_empty() {
                    value["content"] = Value::Null;
                }
                value["tool_calls"] = tool_calls
                    .iter()
                    .map(|c| {
                        json!({
                            "id": c.id,
                            "type": "function",
                            // Providers expect JSON text here; a call without arguments
                            // is sent as an empty object.
                            "function": {
                                "name": c.name,
                                "arguments": if c.arguments.trim().is_empty() { "{}" } else { c.arguments.as_str() },
                            },
                        })
                    })
                    .collect();
            }
            value
        }
        ChatMessage::Tool {
            tool_call_id,
            content,
        } => json!({"role": "tool", "tool_call_id": tool_call_id, "content": content}),
    }
}
