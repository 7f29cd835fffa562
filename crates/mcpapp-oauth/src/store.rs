//! The token store: per app, one sealed file (`seal.rs`) holding, per issuer, the client
//! registration and the tokens, plus which issuer is in use and for which server URL. Files
//! are written atomically (a 0600 temporary file, fsync, rename, fsync of the folder), read
//! once and then served from memory; a file that does not open (another key, tampering) is
//! moved aside as `*.unreadable` rather than overwritten, so nothing is lost.

use std::collections::{BTreeMap, HashMap};
use std::fs;
use std::io::{self, Write as _};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use mcpapp_manifest::AppId;
use rmcp::transport::auth::StoredCredentials;
use serde::{Deserialize, Serialize};

use crate::error::StoreError;
use crate::seal::{KeySource, SealingKey, create_private_dir, private_file};
use crate::secret::Secret;

/// The environment variable a gateway reads the store's key from (32 bytes, base64).
pub const KEY_ENV: &str = "MCPAPP_OAUTH_KEY";
/// The key file's name in the store's folder, used when [`KEY_ENV`] is not set.
pub const KEY_FILE_NAME: &str = "oauth.key";

/// How the gateway got the client ID it uses with an issuer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) enum ClientKind {
    /// `OAuth.ClientId` of the app's entry (its secret stays in the configuration).
    Configured,
    /// The gateway's client ID metadata document URL.
    MetadataDocument,
    /// Dynamic client registration (RFC 7591).
    Registered,
}

/// The client the gateway is to an issuer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ClientRecord {
    pub(crate) kind: ClientKind,
    pub(crate) client_id: String,
    /// A registered client's secret (never a configured one's).
    pub(crate) client_secret: Option<Secret>,
    /// The redirect URI it was registered with; another one needs a new registration.
    pub(crate) redirect_uri: String,
}

/// What the gateway holds for one app at one issuer.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct IssuerRecord {
    pub(crate) client: Option<ClientRecord>,
    /// rmcp's record of the tokens (its `Debug` hides them).
    pub(crate) credentials: Option<StoredCredentials>,
    /// RFC 7009 endpoint, for disconnecting.
    pub(crate) revocation_endpoint: Option<String>,
    /// `token_endpoint_auth_methods_supported`, for authenticating the revocation.
    #[serde(default)]
    pub(crate) auth_methods: Vec<String>,
}

/// Everything stored for one app.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct AppRecord {
    /// The app's MCP URL the tokens were issued for; tokens are never sent elsewhere.
    pub(crate) server_url: Option<String>,
    /// The issuer whose tokens are in use.
    pub(crate) active_issuer: Option<String>,
    #[serde(default)]
    pub(crate) issuers: BTreeMap<String, IssuerRecord>,
}

impl AppRecord {
    /// The credentials in use, with their issuer.
    pub(crate) fn active(&self) -> Option<(&str, &StoredCredentials)> {
        let issuer = self.active_issuer.as_deref()?;
        let credentials = self.issuers.get(issuer)?.credentials.as_ref()?;
        credentials.token_response.as_ref()?;
        Some((issuer, credentials))
    }
}

/// Encrypted storage of OAuth tokens and client registrations, per app and issuer, in a
/// folder the caller gives. Cheap to clone; clones share the cache.
#[derive(Debug, Clone)]
pub struct TokenStore {
    inner: Arc<StoreInner>,
}

#[derive(Debug)]
struct StoreInner {
    dir: PathBuf,
    key: SealingKey,
    records: Mutex<HashMap<AppId, AppRecord>>,
    /// Serializes read-modify-write cycles so two updates of one file never interleave.
    writing: tokio::sync::Mutex<()>,
}

impl TokenStore {
    /// Opens (creating it, mode 0700, when absent) the store in `dir` with the key from
    /// `key`.
    ///
    /// # Errors
    /// [`StoreError`] when the folder cannot be made or the key is unusable.
    pub fn open(dir: impl Into<PathBuf>, key: &KeySource) -> Result<Self, StoreError> {
        let dir = dir.into();
        create_private_dir(&dir).map_err(|source| StoreError::Io {
            path: dir.clone(),
            source,
        })?;
        let key = SealingKey::load(key)?;
        Ok(Self {
            inner: Arc::new(StoreInner {
                dir,
                key,
                records: Mutex::new(HashMap::new()),
                writing: tokio::sync::Mutex::new(()),
            }),
        })
    }

    /// The key file this store created because it had none (the gateway may tell the
    /// operator), or `None`.
    pub fn created_key_file(&self) -> Option<&Path> {
        self.inner.key.created.as_deref()
    }

    /// The store's folder.
    pub fn dir(&self) -> &Path {
        &self.inner.dir
    }

    /// The file holding `app`'s record: the id in hex, so case-insensitive file systems keep
    /// `App` and `app` apart.
    pub fn file_of(&self, app: &AppId) -> PathBuf {
        let hex: String = app.as_str().bytes().map(|b| format!("{b:02x}")).collect();
        self.inner.dir.join(format!("app-{hex}.oauth"))
    }

    /// Whether anything is stored for `app`.
    ///
    /// # Errors
    /// [`StoreError`] when its file cannot be read.
    pub fn has(&self, app: &AppId) -> Result<bool, StoreError> {
        Ok(!self.record(app)?.issuers.is_empty())
    }

    /// Deletes everything stored for `app`; true when there was something.
    ///
    /// # Errors
    /// [`StoreError`] when the file cannot be removed.
    pub async fn remove_app(&self, app: &AppId) -> Result<bool, StoreError> {
        let _writing = self.inner.writing.lock().await;
        self.cache().remove(app);
        let path = self.file_of(app);
        let removed = tokio::task::spawn_blocking(move || match fs::remove_file(&path) {
            Ok(()) => Ok(true),
            Err(err) if err.kind() == io::ErrorKind::NotFound => Ok(false),
            Err(source) => Err(StoreError::Io { path, source }),
        })
        .await
        .map_err(|err| StoreError::Io {
            path: self.file_of(app),
            source: io::Error::other(err.to_string()),
        })??;
        if removed {
            tracing::info!(app = %app, "removed the stored OAuth tokens and registrations");
        }
        Ok(removed)
    }

    fn cache(&self) -> std::sync::MutexGuard<'_, HashMap<AppId, AppRecord>> {
        self.inner
            .records
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The record of `app` (empty when none is stored).
    pub(crate) fn record(&self, app: &AppId) -> Result<AppRecord, StoreError> {
        if let Some(record) = self.cache().get(app) {
            return Ok(record.clone());
        }
        let record = self.read(app)?;
        self.cache().insert(app.clone(), record.clone());
        Ok(record)
    }

    /// Changes `app`'s record with `change` and writes it; returns what `change` returns.
    pub(crate) async fn update<R>(
        &self,
        app: &AppId,
        change: impl FnOnce(&mut AppRecord) -> R,
    ) -> Result<R, StoreError> {
        let _writing = self.inner.writing.lock().await;
        let mut record = self.record(app)?;
        let result = change(&mut record);
        let json = serde_json::to_vec(&record).map_err(|err| StoreError::Encode {
            app: app.clone(),
            message: err.to_string(),
        })?;
        let sealed = self.inner.key.seal(app.as_str(), &json)?;
        let path = self.file_of(app);
        tokio::task::spawn_blocking(move || write_atomically(&path, &sealed))
            .await
            .map_err(|err| StoreError::Io {
                path: self.file_of(app),
                source: io::Error::other(err.to_string()),
            })??;
        self.cache().insert(app.clone(), record);
        Ok(result)
    }

    fn read(&self, app: &AppId) -> Result<AppRecord, StoreError> {
        let path = self.file_of(app);
        let sealed = match fs::read(&path) {
            Ok(bytes) => bytes,
            Err(err) if err.kind() == io::ErrorKind::NotFound => return Ok(AppRecord::default()),
            Err(source) => return Err(StoreError::Io { path, source }),
        };
        let record = self
            .inner
            .key
            .open(app.as_str(), &sealed)
            .and_then(|json| serde_json::from_slice::<AppRecord>(&json).ok());
        match record {
            Some(record) => Ok(record),
            None => {
                let aside = path.with_extension("oauth.unreadable");
                let moved = fs::rename(&path, &aside);
                tracing::warn!(
                    app = %app,
                    path = %path.display(),
                    moved_to = %aside.display(),
                    moved = moved.is_ok(),
                    "the stored OAuth record does not open with this key (another key, or the file \
                     was changed); it was moved aside and the app starts unauthorized"
                );
                Ok(AppRecord::default())
            }
        }
    }
}

/// Replaces `path` with `bytes` so a crash leaves the old or the new file, never half of one.
fn write_atomically(path: &Path, bytes: &[u8]) -> Result<(), StoreError> {
    let io_error = |source: io::Error| StoreError::Io {
        path: path.to_path_buf(),
        source,
    };
    let mut suffix = [0u8; 8];
    aws_lc_rs::rand::fill(&mut suffix).map_err(|_| StoreError::Seal)?;
    let suffix: String = suffix.iter().map(|b| format!("{b:02x}")).collect();
    let temporary = path.with_extension(format!("tmp-{suffix}"));
    let written = private_file(&temporary, true).and_then(|mut file| {
        file.write_all(bytes)?;
        file.sync_all()
    });
    if let Err(err) = written.and_then(|()| fs::rename(&temporary, path)) {
        let _ = fs::remove_file(&temporary);
        return Err(io_error(err));
    }
    // The rename is durable once the folder is synced.
    if let Some(dir) = path.parent()
        && let Ok(dir) = fs::File::open(dir)
    {
        let _ = dir.sync_all();
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use base64::Engine as _;

    use super::*;

    fn key(byte: u8) -> KeySource {
        KeySource::Text(Secret::new(
            base64::engine::general_purpose::STANDARD.encode([byte; 32]),
        ))
    }

    fn app(id: &str) -> AppId {
        AppId::new(id).unwrap()
    }

    #[tokio::test]
    async fn a_record_survives_a_new_store_and_is_sealed_on_disk() {
        let dir = tempfile::tempdir().unwrap();
        let store = TokenStore::open(dir.path(), &key(1)).unwrap();
        let crm = app("crm");
        store
            .update(&crm, |record| {
                record.active_issuer = Some("https://as".into());
                record
                    .issuers
                    .entry("https://as".into())
                    .or_default()
                    .client = Some(ClientRecord {
                    kind: ClientKind::Registered,
                    client_id: "client-1".into(),
                    client_secret: Some(Secret::new("very-secret-value")),
                    redirect_uri: "http://127.0.0.1/oauth/callback".into(),
                });
            })
            .await
            .unwrap();
        let bytes = fs::read(store.file_of(&crm)).unwrap();
        assert!(!String::from_utf8_lossy(&bytes).contains("very-secret-value"));
        assert!(!String::from_utf8_lossy(&bytes).contains("client-1"));
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            let mode = fs::metadata(store.file_of(&crm))
                .unwrap()
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o600);
        }

        let again = TokenStore::open(dir.path(), &key(1)).unwrap();
        let record = again.record(&crm).unwrap();
        let client = record.issuers["https://as"].client.clone().unwrap();
        assert_eq!(client.client_secret.unwrap().expose(), "very-secret-value");
        assert!(again.has(&crm).unwrap());
        assert!(!again.has(&app("other")).unwrap());
        let shown = format!("{record:?}");
        assert!(!shown.contains("very-secret-value"), "{shown}");

        assert!(again.remove_app(&crm).await.unwrap());
        assert!(!again.remove_app(&crm).await.unwrap());
        assert!(!store.file_of(&crm).exists());
        assert!(!again.has(&crm).unwrap());
    }

    #[tokio::test]
    async fn a_record_under_another_key_is_moved_aside_not_lost() {
        let dir = tempfile::tempdir().unwrap();
        let crm = app("crm");
        let store = TokenStore::open(dir.path(), &key(1)).unwrap();
        store
            .update(&crm, |record| {
                record.active_issuer = Some("https://as".into())
            })
            .await
            .unwrap();
        let other = TokenStore::open(dir.path(), &key(2)).unwrap();
        assert!(!other.has(&crm).unwrap());
        let aside = store.file_of(&crm).with_extension("oauth.unreadable");
        assert!(aside.exists());
        assert!(!store.file_of(&crm).exists());
    }

    #[test]
    fn app_files_keep_ids_that_differ_in_case_apart() {
        let dir = tempfile::tempdir().unwrap();
        let store = TokenStore::open(dir.path(), &key(1)).unwrap();
        assert_ne!(store.file_of(&app("App")), store.file_of(&app("app")));
        assert_eq!(
            store.file_of(&app("a.b")).file_name().unwrap(),
            "app-612e62.oauth"
        );
    }
}
