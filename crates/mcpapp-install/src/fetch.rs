//! HTTP for installing: registry metadata, documents and bundles, each bounded in size and
//! time, https only (plain http for loopback hosts, as tests and local mirrors use).

use std::time::Duration;

use url::Url;

use crate::error::InstallError;

/// Documents and metadata larger than this are refused (npm's full documents of popular
/// packages reach tens of megabytes; the abbreviated ones asked for are far smaller).
pub(crate) const MAX_DOCUMENT_BYTES: u64 = 64 * 1024 * 1024;

/// The HTTP client of the installer.
#[derive(Debug, Clone)]
pub(crate) struct Http {
    client: reqwest::Client,
}

/// A GET's outcome: the body, or the status when it is not a success.
pub(crate) enum Got {
    Body(Vec<u8>),
    Status(u16),
}

impl Http {
    pub(crate) fn new() -> Result<Self, InstallError> {
        let client = reqwest::Client::builder()
            .user_agent(concat!("mcpapp-install/", env!("CARGO_PKG_VERSION")))
            .connect_timeout(Duration::from_secs(15))
            .timeout(Duration::from_secs(300))
            .build()
            .map_err(|e| InstallError::Fetch {
                url: String::new(),
                reason: e.to_string(),
            })?;
        Ok(Self { client })
    }

    /// GETs a JSON document of at most [`MAX_DOCUMENT_BYTES`] and parses it; a 404 is the
    /// error `missing` makes (the caller names what was not found), another failure status a
    /// [`InstallError::Fetch`].
    pub(crate) async fn document<T: serde::de::DeserializeOwned>(
        &self,
        url: &str,
        accept: &str,
        missing: impl FnOnce() -> InstallError,
    ) -> Result<T, InstallError> {
        let body = match self.get(url, accept, MAX_DOCUMENT_BYTES).await? {
            Got::Body(body) => body,
            Got::Status(404) => return Err(missing()),
            Got::Status(status) => {
                return Err(InstallError::Fetch {
                    url: url.to_owned(),
                    reason: format!("HTTP status {status}"),
                });
            }
        };
        let text = String::from_utf8_lossy(&body);
        Ok(crate::json::parse(&text, url)?)
    }

    /// GETs `url` with `accept`, reading at most `limit` bytes.
    pub(crate) async fn get(
        &self,
        url: &str,
        accept: &str,
        limit: u64,
    ) -> Result<Got, InstallError> {
        let failed = |reason: String| InstallError::Fetch {
            url: url.to_owned(),
            reason,
        };
        let parsed = Url::parse(url).map_err(|e| failed(e.to_string()))?;
        crate::source::check_url(&parsed).map_err(failed)?;
        let mut response = self
            .client
            .get(parsed)
            .header(reqwest::header::ACCEPT, accept)
            .send()
            .await
            .map_err(|e| failed(without_url(e)))?;
        let status = response.status();
        if !status.is_success() {
            return Ok(Got::Status(status.as_u16()));
        }
        if response.content_length().is_some_and(|n| n > limit) {
            return Err(failed(format!("the answer is larger than {limit} bytes")));
        }
        let mut body = Vec::new();
        while let Some(chunk) = response.chunk().await.map_err(|e| failed(without_url(e)))? {
            if body.len() as u64 + chunk.len() as u64 > limit {
                return Err(failed(format!("the answer is larger than {limit} bytes")));
            }
            body.extend_from_slice(&chunk);
        }
        Ok(Got::Body(body))
    }

    /// GETs `url` and insists on a success.
    pub(crate) async fn get_ok(
        &self,
        url: &str,
        accept: &str,
        limit: u64,
    ) -> Result<Vec<u8>, InstallError> {
        match self.get(url, accept, limit).await? {
            Got::Body(body) => Ok(body),
            Got::Status(status) => Err(InstallError::Fetch {
                url: url.to_owned(),
                reason: format!("HTTP status {status}"),
            }),
        }
    }

    /// GETs a text document.
    pub(crate) async fn get_text(&self, url: &str, accept: &str) -> Result<String, InstallError> {
        let body = self.get_ok(url, accept, MAX_DOCUMENT_BYTES).await?;
        String::from_utf8(body).map_err(|_| InstallError::Fetch {
            url: url.to_owned(),
            reason: "the answer is not UTF-8 text".to_owned(),
        })
    }
}

/// reqwest's message and its causes, without the URL it repeats (the caller names it).
fn without_url(err: reqwest::Error) -> String {
    let err = err.without_url();
    let mut text = err.to_string();
    let mut source = std::error::Error::source(&err);
    while let Some(inner) = source {
        text.push_str(&format!(": {inner}"));
        source = inner.source();
    }
    text
}
