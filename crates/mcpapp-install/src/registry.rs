//! A client of the MCP Registry API, version `v0.1`: search (`GET /v0.1/servers?search=`),
//! one version of a server (`…/servers/{name}/versions/{version|latest}`) and every version
//! (`…/versions`). Answers are `{server, _meta}` where `_meta` carries the registry's status
//! (active, deprecated, deleted).

use serde::{Deserialize, Serialize};

use crate::error::InstallError;
use crate::fetch::Http;
use crate::server_json::ServerDocument;

/// The `_meta` key under which the official registry (and compatible ones) put their data.
const OFFICIAL_META: &str = "io.modelcontextprotocol.registry/official";

/// One server version as a registry lists it.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RegistryEntry {
    /// The registry's name in `McpApps.Registries`.
    pub registry: String,
    /// Its base URL.
    pub registry_url: String,
    /// The server's name.
    pub name: String,
    /// Its title, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// Its description.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// This version.
    pub version: String,
    /// `active`, `deprecated` or `deleted` (`active` when the registry says nothing).
    pub status: String,
    /// Whether the registry marks it as the latest version.
    pub is_latest: bool,
    /// The kinds it can be installed as (`npm`, `pypi`, `mcpb`, `remote`, …).
    pub kinds: Vec<String>,
    /// The `server.json` document.
    #[serde(skip)]
    pub document: String,
}

#[derive(Debug, Deserialize)]
struct ListAnswer {
    #[serde(default)]
    servers: Vec<EntryAnswer>,
    #[serde(default)]
    metadata: Option<ListMetadata>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ListMetadata {
    #[serde(default)]
    next_cursor: Option<String>,
}

#[derive(Debug, Deserialize)]
struct EntryAnswer {
    server: serde_json::Value,
    #[serde(rename = "_meta", default)]
    meta: serde_json::Map<String, serde_json::Value>,
}

/// A page of search results.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SearchPage {
    /// The servers found.
    pub servers: Vec<RegistryEntry>,
    /// Where the next page starts, if there is one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
}

/// One configured registry.
#[derive(Debug, Clone)]
pub struct RegistryClient {
    name: String,
    base: String,
    http: Http,
}

impl RegistryClient {
    /// A client of the registry `name` at `base` (without `/v0.1`).
    ///
    /// # Errors
    /// [`InstallError::Fetch`] when no HTTP client can be made.
    pub fn new(name: &str, base: &str) -> Result<Self, InstallError> {
        Ok(Self {
            name: name.to_owned(),
            base: base.trim_end_matches('/').to_owned(),
            http: Http::new()?,
        })
    }

    /// The registry's base URL.
    pub fn base(&self) -> &str {
        &self.base
    }

    /// Searches server names for `query`; `cursor` continues a search.
    ///
    /// # Errors
    /// [`InstallError::Fetch`] or [`InstallError::Format`] naming the URL.
    pub async fn search(
        &self,
        query: &str,
        limit: u32,
        cursor: Option<&str>,
    ) -> Result<SearchPage, InstallError> {
        let mut url = url::Url::parse(&format!("{}/v0.1/servers", self.base)).map_err(|e| {
            InstallError::Fetch {
                url: self.base.clone(),
                reason: e.to_string(),
            }
        })?;
        {
            let mut pairs = url.query_pairs_mut();
            if !query.is_empty() {
                pairs.append_pair("search", query);
            }
            pairs.append_pair("limit", &limit.clamp(1, 100).to_string());
            pairs.append_pair("version", "latest");
            if let Some(cursor) = cursor {
                pairs.append_pair("cursor", cursor);
            }
        }
        let url = url.to_string();
        let text = self.http.get_text(&url, "application/json").await?;
        let answer: ListAnswer = crate::json::parse(&text, &url)?;
        Ok(SearchPage {
            servers: answer
                .servers
                .into_iter()
                .filter_map(|entry| self.entry(&entry, &url).ok())
                .collect(),
            next_cursor: answer.metadata.and_then(|m| m.next_cursor),
        })
    }

    /// One version of server `name` (`None`: the latest).
    ///
    /// # Errors
    /// [`InstallError::NotFound`] when the registry has no such server or version.
    pub async fn get(
        &self,
        name: &str,
        version: Option<&str>,
    ) -> Result<RegistryEntry, InstallError> {
        let url = format!(
            "{}/v0.1/servers/{}/versions/{}",
            self.base,
            encode(name),
            encode(version.unwrap_or("latest"))
        );
        let answer: EntryAnswer = self
            .http
            .document(&url, "application/json", || InstallError::NotFound {
                what: match version {
                    Some(v) => format!("version {v} of server {name}"),
                    None => format!("server {name}"),
                },
                registry: format!("registry {} ({})", self.name, self.base),
                hint: String::new(),
            })
            .await?;
        self.entry(&answer, &url)
    }

    /// Every version of server `name`, as the registry lists them.
    ///
    /// # Errors
    /// [`InstallError::NotFound`] when the registry has no such server.
    pub async fn versions(&self, name: &str) -> Result<Vec<RegistryEntry>, InstallError> {
        let url = format!("{}/v0.1/servers/{}/versions", self.base, encode(name));
        let answer: ListAnswer = self
            .http
            .document(&url, "application/json", || InstallError::NotFound {
                what: format!("server {name}"),
                registry: format!("registry {} ({})", self.name, self.base),
                hint: String::new(),
            })
            .await?;
        answer
            .servers
            .into_iter()
            .map(|entry| self.entry(&entry, &url))
            .collect()
    }

    fn entry(&self, answer: &EntryAnswer, url: &str) -> Result<RegistryEntry, InstallError> {
        let document = serde_json::to_string_pretty(&answer.server).unwrap_or_default();
        let parsed = ServerDocument::parse(&document, url)?;
        let official = answer.meta.get(OFFICIAL_META);
        let status = official
            .and_then(|m| m.get("status"))
            .and_then(|s| s.as_str())
            .unwrap_or("active")
            .to_owned();
        let is_latest = official
            .and_then(|m| m.get("isLatest"))
            .and_then(serde_json::Value::as_bool)
            .unwrap_or(false);
        let server = &parsed.server;
        let mut kinds: Vec<String> = server
            .packages
            .iter()
            .map(|p| p.registry_type.to_ascii_lowercase())
            .collect();
        if !server.remotes.is_empty() {
            kinds.push("remote".to_owned());
        }
        kinds.dedup();
        Ok(RegistryEntry {
            registry: self.name.clone(),
            registry_url: self.base.clone(),
            name: server.name.clone(),
            title: server.title.clone(),
            description: server.description.clone(),
            version: server.version.clone(),
            status,
            is_latest,
            kinds,
            document,
        })
    }
}

/// A path segment, `/` included, percent-encoded.
fn encode(segment: &str) -> String {
    percent_encoding::utf8_percent_encode(segment, percent_encoding::NON_ALPHANUMERIC).to_string()
}
