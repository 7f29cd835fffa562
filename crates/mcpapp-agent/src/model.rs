//! The [`ChatModel`] trait that model providers implement, and the conversation, tool and
//! stream types it speaks.

use futures::stream::BoxStream;

/// A stream of model output, ending after [`ModelEvent::Finish`] or an error.
///
/// Part of the [`ChatModel`] extension point.
pub type ModelStream = BoxStream<'static, Result<ModelEvent, ModelError>>;

/// A language model that streams a reply to a conversation and may ask for tool calls.
///
/// The agent calls [`stream`](Self::stream) once per step and reads it to the end, or drops it
/// when the turn is cancelled; providers should stop their work (close the HTTP response) when
/// the stream is dropped. Tool names in a request and in the reply are the safe model names
/// (`^[A-Za-z0-9_-]{1,64}$`); the agent maps them back to registered names.
///
/// Extension point: the host implements it for a test model or another provider; its
/// vocabulary is [`ChatRequest`], [`ChatMessage`], [`ToolSpec`], [`ModelStream`],
/// [`ModelEvent`], [`ToolCall`], [`FinishReason`] and [`ModelError`].
pub trait ChatModel: Send + Sync + 'static {
    /// A short label for logs, such as `offline` or `openai:gpt-4o-mini`. Never a secret.
    fn label(&self) -> &str;

    /// Streams the reply to `request`.
    fn stream(&self, request: ChatRequest) -> ModelStream;
}

/// What a model is asked: the conversation so far and the tools it may call.
///
/// Part of the [`ChatModel`] extension point.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ChatRequest {
    /// The conversation, oldest first, starting with the system prompt.
    pub messages: Vec<ChatMessage>,
    /// The tools the model may call, sorted by registered name.
    pub tools: Vec<ToolSpec>,
}

/// One message of a conversation.
///
/// Part of the [`ChatModel`] extension point.
#[derive(Debug, Clone, PartialEq)]
pub enum ChatMessage {
    /// Instructions for the model.
    System {
        /// The text.
        content: String,
    },
    /// What the user said (with UI events written in, see [`TurnRequest::prompt`](crate::TurnRequest::prompt)).
    User {
        /// The text.
        content: String,
    },
    /// The model's reply: text, tool calls, or both.
    Assistant {
        /// The text (may be empty when the reply is only tool calls).
        content: String,
        /// The tool calls the model asked for.
        tool_calls: Vec<ToolCall>,
    },
    /// The result of one tool call.
    Tool {
        /// The id of the [`ToolCall`] this answers.
        tool_call_id: String,
        /// The result text given to the model.
        content: String,
    },
}

/// A complete tool call from the model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolCall {
    /// The provider's call id, used to match the result to the call.
    pub id: String,
    /// The safe model name of the tool.
    pub name: String,
    /// The arguments as JSON text, exactly as the model produced them.
    pub arguments: String,
}

/// A tool as offered to a model.
///
/// Part of the [`ChatModel`] extension point.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolSpec {
    /// The safe model name; this is what providers send to the model.
    pub name: String,
    /// The name the tool is registered under (for display, for example by the offline model).
    pub registered_name: String,
    /// The description.
    pub description: String,
    /// The JSON Schema of the arguments object.
    pub parameters: serde_json::Value,
}

/// One piece of a streamed reply.
///
/// Part of the [`ChatModel`] extension point.
#[derive(Debug, Clone, PartialEq)]
pub enum ModelEvent {
    /// More reply text.
    TextDelta(String),
    /// A complete tool call (providers assemble streamed fragments before emitting it).
    ToolCall(ToolCall),
    /// The reply is complete.
    Finish(FinishReason),
}

/// Why a reply ended.
///
/// Part of the [`ChatModel`] extension point.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FinishReason {
    /// The model finished its answer.
    Stop,
    /// The model wants the tool calls it emitted to be run.
    ToolCalls,
    /// The reply was cut at the token limit.
    Length,
    /// The provider withheld content.
    ContentFilter,
    /// Another reason, as the provider named it.
    Other(String),
}

impl FinishReason {
    /// Maps an OpenAI-style `finish_reason` string.
    pub fn from_wire(reason: &str) -> Self {
        match reason {
            "stop" => FinishReason::Stop,
            "tool_calls" | "function_call" => FinishReason::ToolCalls,
            "length" => FinishReason::Length,
            "content_filter" => FinishReason::ContentFilter,
            other => FinishReason::Other(other.to_owned()),
        }
    }
}

/// Why a model could not produce a reply. Messages never contain API keys.
///
/// Part of the [`ChatModel`] extension point.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ModelError {
    /// The model configuration cannot be used (for example a base URL that does not parse).
    #[error("invalid model configuration: {message}")]
    Config {
        /// What is wrong.
        message: String,
    },
    /// The provider could not be reached.
    #[error("cannot reach the model provider at {url}: {message}")]
    Connect {
        /// The endpoint (without credentials).
        url: String,
        /// The transport error.
        message: String,
    },
    /// The provider answered with an HTTP error status.
    #[error("the model provider answered HTTP {status}: {message}")]
    Http {
        /// The status code.
        status: u16,
        /// The provider's error message, or the start of the response body.
        message: String,
    },
    /// The provider reported an error inside the stream.
    #[error("the model provider reported an error: {message}")]
    Provider {
        /// The provider's message.
        message: String,
    },
    /// The response stream broke or ended before the reply was complete.
    #[error("the model provider's stream broke: {message}")]
    Stream {
        /// What happened.
        message: String,
    },
    /// The provider sent something that is not a valid reply.
    #[error("the model provider sent an invalid reply: {message}")]
    Protocol {
        /// What was wrong.
        message: String,
    },
}
