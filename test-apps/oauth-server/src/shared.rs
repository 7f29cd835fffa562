//! The state both servers share: options, clients, codes, tokens, and the record of every
//! request the tests read through `/admin/state`.

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde::Serialize;
use serde_json::Value;

use crate::{Iss, IssSupported, MetadataAt, PrmAt};

/// The servers' configuration, from the flags.
#[derive(Debug)]
pub(crate) struct Options {
    pub(crate) resource: String,
    pub(crate) mcp_url: String,
    pub(crate) app_origin: String,
    /// The first authorization server's issuer, and the second's with `--second-as`.
    pub(crate) issuers: Vec<String>,
    pub(crate) metadata_issuer: Option<String>,
    pub(crate) tenant: Option<String>,
    pub(crate) metadata_at: MetadataAt,
    pub(crate) prm_at: PrmAt,
    pub(crate) prm_in_header: bool,
    pub(crate) challenge: bool,
    pub(crate) challenge_scope: String,
    pub(crate) scopes_supported: Vec<String>,
    pub(crate) offline_access: bool,
    pub(crate) dcr: bool,
    pub(crate) cimd: bool,
    pub(crate) auth_methods: Vec<String>,
    pub(crate) expires_in: u64,
    pub(crate) refresh_tokens: bool,
    pub(crate) iss: Iss,
    pub(crate) iss_supported: IssSupported,
    pub(crate) pkce_methods: bool,
    pub(crate) withheld: Vec<String>,
    pub(crate) revocation: bool,
    pub(crate) deny: bool,
}

impl Options {
    /// The protected resource metadata's URL.
    pub(crate) fn prm_url(&self) -> String {
        let path = match self.prm_at {
            PrmAt::Path => "/.well-known/oauth-protected-resource/mcp",
            PrmAt::Root => "/.well-known/oauth-protected-resource",
            PrmAt::Custom | PrmAt::None => "/meta/resource.json",
        };
        format!("{}{path}", self.app_origin)
    }
}

/// A client the authorization server knows.
#[derive(Debug, Clone)]
pub(crate) struct Client {
    pub(crate) secret: Option<String>,
    /// `None`: any loopback redirect URI (pre-registered clients, metadata documents).
    pub(crate) redirect_uris: Option<Vec<String>>,
}

/// What a code or token was granted for.
#[derive(Debug, Clone)]
pub(crate) struct Grant {
    /// The authorization server that granted it.
    pub(crate) authority: usize,
    pub(crate) client_id: String,
    pub(crate) scopes: Vec<String>,
    pub(crate) resource: String,
}

#[derive(Debug)]
pub(crate) struct Code {
    pub(crate) grant: Grant,
    pub(crate) redirect_uri: String,
    pub(crate) challenge: String,
}

#[derive(Debug)]
pub(crate) struct AccessToken {
    pub(crate) grant: Grant,
    pub(crate) expires_at: Instant,
    pub(crate) revoked: bool,
}

#[derive(Debug)]
pub(crate) struct RefreshToken {
    pub(crate) grant: Grant,
    pub(crate) revoked: bool,
}

/// Everything seen, for `/admin/state`.
#[derive(Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Seen {
    pub(crate) authorize: Vec<Value>,
    pub(crate) token: Vec<Value>,
    pub(crate) register: Vec<Value>,
    pub(crate) revoke: Vec<Value>,
    pub(crate) mcp: Vec<Value>,
    pub(crate) secrets: Vec<String>,
}

#[derive(Debug, Default)]
pub(crate) struct Tables {
    /// By authorization server and client ID.
    pub(crate) clients: HashMap<(usize, String), Client>,
    pub(crate) codes: HashMap<String, Code>,
    pub(crate) access: HashMap<String, AccessToken>,
    pub(crate) refresh: HashMap<String, RefreshToken>,
    pub(crate) seen: Seen,
}

#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) options: Options,
    pub(crate) tables: Mutex<Tables>,
    /// The authorization server the app names now (`/admin/migrate` moves it to 1).
    pub(crate) active: AtomicUsize,
}

impl Shared {
    pub(crate) fn new(options: Options, clients: &[(String, Option<String>)]) -> Self {
        let mut tables = Tables::default();
        for index in 0..options.issuers.len() {
            for (id, secret) in clients {
                tables.clients.insert(
                    (index, id.clone()),
                    Client {
                        secret: secret.clone(),
                        redirect_uris: None,
                    },
                );
            }
        }
        Self {
            options,
            tables: Mutex::new(tables),
            active: AtomicUsize::new(0),
        }
    }

    pub(crate) fn tables(&self) -> std::sync::MutexGuard<'_, Tables> {
        self.tables
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The issuer the app names now.
    pub(crate) fn active_issuer(&self) -> &str {
        &self.options.issuers[self.active.load(Ordering::SeqCst)]
    }

    /// The grant of a live access token from the authorization server the app names now.
    pub(crate) fn check_access(&self, token: &str) -> Option<Grant> {
        let tables = self.tables();
        let found = tables.access.get(token)?;
        let live = !found.revoked
            && Instant::now() < found.expires_at
            && found.grant.resource == self.options.mcp_url
            && found.grant.authority == self.active.load(Ordering::SeqCst);
        live.then(|| found.grant.clone())
    }

    pub(crate) fn expires_in(&self) -> Duration {
        Duration::from_secs(self.options.expires_in)
    }
}

/// A random URL-safe string with a prefix saying what it is.
pub(crate) fn random(prefix: &str) -> String {
    let mut bytes = [0u8; 24];
    aws_lc_rs::rand::fill(&mut bytes).unwrap_or_default();
    format!("{prefix}-{}", URL_SAFE_NO_PAD.encode(bytes))
}

/// BASE64URL(SHA-256(verifier)), the S256 challenge.
pub(crate) fn s256(verifier: &str) -> String {
    let digest = aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, verifier.as_bytes());
    URL_SAFE_NO_PAD.encode(digest.as_ref())
}
