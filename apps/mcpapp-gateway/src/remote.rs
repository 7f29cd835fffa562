//! The client side of the commands that talk to a running gateway (`apps`, `call`, `reload`):
//! where the gateway is, its token, one HTTP client with a timeout, and what went wrong,
//! sorted into the exit codes those commands document.
//!
//! The token comes from `MCPAPP_TOKEN` only (never an argument, which other users could read
//! in the process list) and is never part of a message: errors name the URL and the cause.

use std::time::Duration;

use reqwest::StatusCode;
use serde_json::Value;

/// Where a gateway listens when neither `--url` nor `MCPAPP_URL` says otherwise.
pub(crate) const DEFAULT_URL: &str = "http://127.0.0.1:8787";

/// Exit status of a command whose operation failed (or whose tool returned an error result).
pub(crate) const EXIT_FAILED: u8 = 1;
/// Exit status of a usage error (clap's own, and bad arguments such as JSON that is not).
pub(crate) const EXIT_USAGE: u8 = 2;
/// Exit status when no gateway answers at the URL (refused, unresolvable, timed out).
pub(crate) const EXIT_UNREACHABLE: u8 = 3;
/// Exit status when the gateway refuses the token (or wants one and none is set).
pub(crate) const EXIT_UNAUTHORIZED: u8 = 4;
/// Exit status for an unknown app or tool.
pub(crate) const EXIT_NOT_FOUND: u8 = 5;

/// Why a command against a running gateway did not succeed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum RemoteError {
    /// Nothing answers at the URL.
    #[error("no gateway at {url}: is `mcpapp-gateway serve` running? ({cause})")]
    Unreachable {
        /// The gateway's base URL.
        url: String,
        /// The innermost cause, such as "Connection refused".
        cause: String,
    },
    /// The gateway did not answer in time.
    #[error("the gateway at {url} did not answer within {secs} s (see --timeout)")]
    TimedOut {
        /// The gateway's base URL.
        url: String,
        /// The timeout.
        secs: u64,
    },
    /// The gateway wants a token and the one given (if any) is not it.
    #[error("the gateway at {url} refused the request: {hint}")]
    Unauthorized {
        /// The gateway's base URL.
        url: String,
        /// What to do about it.
        hint: &'static str,
    },
    /// No such app (or tool).
    #[error("{0}")]
    NotFound(String),
    /// The arguments cannot be used.
    #[error("{0}")]
    Usage(String),
    /// The gateway refused or failed the operation; the message says why.
    #[error("{0}")]
    Failed(String),
    /// stdout could not be written (a closed pipe is not reported: see `commands::run`).
    #[error("cannot write the output: {0}")]
    Output(#[from] std::io::Error),
}

impl RemoteError {
    /// The exit status this error stands for.
    pub(crate) fn exit_code(&self) -> u8 {
        match self {
            Self::Unreachable { .. } | Self::TimedOut { .. } => EXIT_UNREACHABLE,
            Self::Unauthorized { .. } => EXIT_UNAUTHORIZED,
            Self::NotFound(_) => EXIT_NOT_FOUND,
            Self::Usage(_) => EXIT_USAGE,
            Self::Failed(_) | Self::Output(_) => EXIT_FAILED,
        }
    }
}

/// A running gateway's HTTP API.
#[derive(Debug, Clone)]
pub(crate) struct Remote {
    base: String,
    token: Option<String>,
    timeout: Duration,
    http: reqwest::Client,
}

impl Remote {
    /// The gateway at `url` (else `MCPAPP_URL`, else [`DEFAULT_URL`]), with the token from
    /// `MCPAPP_TOKEN` and `timeout` for each request.
    pub(crate) fn new(url: Option<&str>, timeout: Duration) -> Result<Self, RemoteError> {
        let from_env = std::env::var("MCPAPP_URL")
            .ok()
            .filter(|u| !u.trim().is_empty());
        let raw = url
            .map(str::to_owned)
            .or(from_env)
            .unwrap_or_else(|| DEFAULT_URL.to_owned());
        let base = raw.trim().trim_end_matches('/').to_owned();
        let parsed = reqwest::Url::parse(&base).map_err(|e| {
            RemoteError::Usage(format!(
                "--url '{base}' is not a URL such as {DEFAULT_URL}: {e}"
            ))
        })?;
        if !matches!(parsed.scheme(), "http" | "https") {
            return Err(RemoteError::Usage(format!(
                "--url '{base}' is not an http:// or https:// URL"
            )));
        }
        let token = std::env::var("MCPAPP_TOKEN")
            .ok()
            .filter(|t| !t.trim().is_empty());
        let mut builder = reqwest::Client::builder()
            .timeout(timeout)
            .user_agent(concat!("mcpapp-gateway/", env!("CARGO_PKG_VERSION")));
        // A proxy configured for the web has no business between us and a local gateway.
        if is_loopback(&parsed) {
            builder = builder.no_proxy();
        }
        let http = builder
            .build()
            .map_err(|e| RemoteError::Failed(format!("cannot make an HTTP client: {e}")))?;
        Ok(Self {
            base,
            token,
            timeout,
            http,
        })
    }

    /// The gateway's base URL, without a trailing slash.
    pub(crate) fn base(&self) -> &str {
        &self.base
    }

    /// The token, for the MCP client of `call`.
    pub(crate) fn token(&self) -> Option<&str> {
        self.token.as_deref()
    }

    /// The HTTP client (no proxy for loopback, the user agent), for the MCP client of `call`.
    pub(crate) fn http(&self) -> reqwest::Client {
        self.http.clone()
    }

    /// The timeout of each request.
    pub(crate) fn timeout(&self) -> Duration {
        self.timeout
    }

    /// `GET path` as JSON.
    pub(crate) async fn get(&self, path: &str) -> Result<Value, RemoteError> {
        self.send(self.http.get(self.url(path))).await
    }

    /// `POST path` (no body) as JSON.
    pub(crate) async fn post(&self, path: &str) -> Result<Value, RemoteError> {
        self.send(self.http.post(self.url(path))).await
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    async fn send(&self, request: reqwest::RequestBuilder) -> Result<Value, RemoteError> {
        let request = match &self.token {
            Some(token) => request.bearer_auth(token),
            None => request,
        };
        let response = request.send().await.map_err(|e| self.transport_error(&e))?;
        let status = response.status();
        let body = response
            .bytes()
            .await
            .map_err(|e| self.transport_error(&e))?;
        let json: Option<Value> = serde_json::from_slice(&body).ok();
        if status.is_success() {
            return json.ok_or_else(|| {
                RemoteError::Failed(format!(
                    "the gateway at {} answered {status} with a body that is not JSON; is it an mcpapp gateway?",
                    self.base
                ))
            });
        }
        self.status_error(status, json.as_ref())
    }

    /// An error for a non-success status, with the message the gateway gave.
    pub(crate) fn status_error<T>(
        &self,
        status: StatusCode,
        body: Option<&Value>,
    ) -> Result<T, RemoteError> {
        let message = body
            .and_then(|b| b.get("error"))
            .and_then(Value::as_str)
            .map_or_else(|| status.to_string(), str::to_owned);
        Err(match status {
            StatusCode::UNAUTHORIZED => RemoteError::Unauthorized {
                url: self.base.clone(),
                hint: if self.token.is_some() {
                    "MCPAPP_TOKEN is not its token"
                } else {
                    "it needs a token: set MCPAPP_TOKEN"
                },
            },
            StatusCode::NOT_FOUND => RemoteError::NotFound(message),
            _ => RemoteError::Failed(format!(
                "the gateway at {} answered {status}: {message}",
                self.base
            )),
        })
    }

    /// An error for a request that got no answer.
    pub(crate) fn transport_error(&self, err: &reqwest::Error) -> RemoteError {
        if err.is_timeout() {
            return RemoteError::TimedOut {
                url: self.base.clone(),
                secs: self.timeout.as_secs(),
            };
        }
        RemoteError::Unreachable {
            url: self.base.clone(),
            cause: innermost(err),
        }
    }
}

/// The innermost cause of an error: "Connection refused (os error 111)" rather than
/// reqwest's "error sending request for url (...)".
pub(crate) fn innermost(err: &(dyn std::error::Error + 'static)) -> String {
    let mut current = err;
    while let Some(source) = current.source() {
        current = source;
    }
    current.to_string()
}

fn is_loopback(url: &reqwest::Url) -> bool {
    match url.host() {
        Some(url::Host::Domain(name)) => name.eq_ignore_ascii_case("localhost"),
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
        None => false,
    }
}

/// Everything but letters, digits, `.`, `_` and `-` is escaped in a path segment.
const SEGMENT: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
    .remove(b'.')
    .remove(b'_')
    .remove(b'-');

/// Percent-encodes an app id (or tool name) for one URL path segment.
pub(crate) fn segment(id: &str) -> String {
    percent_encoding::utf8_percent_encode(id, SEGMENT).to_string()
}
