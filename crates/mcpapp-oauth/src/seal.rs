//! Sealing the token store's files: AES-256-GCM (aws-lc-rs) with a fresh random 96-bit nonce
//! per write and the app id as associated data, so a file copied under another app's name does
//! not open. The 32-byte key comes from the caller (an environment variable) or from a key
//! file created with mode 0600 when absent.
//!
//! File layout: [`MAGIC`] (16 bytes) ‖ nonce (12) ‖ ciphertext ‖ tag (16).

use std::fs;
use std::io::{self, Write as _};
use std::path::{Path, PathBuf};

use aws_lc_rs::aead::{AES_256_GCM, Aad, NONCE_LEN, Nonce, RandomizedNonceKey};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;

use crate::error::StoreError;
use crate::secret::Secret;

/// The first bytes of every sealed file: format and version.
pub(crate) const MAGIC: &[u8; 16] = b"mcpapp-oauth-v1\n";
const KEY_LEN: usize = 32;

/// Where the store's key comes from.
#[derive(Debug, Clone)]
pub enum KeySource {
    /// The key itself: 32 bytes in standard base64 (as in [`crate::KEY_ENV`]).
    Text(Secret),
    /// A file holding the key in base64. When absent it is created with a new random key,
    /// mode 0600, and a warning is logged: losing it loses the stored tokens.
    File(PathBuf),
}

/// The AEAD key, with where it came from.
pub(crate) struct SealingKey {
    key: RandomizedNonceKey,
    /// Set when the key file was created by this call.
    pub(crate) created: Option<PathBuf>,
}

impl std::fmt::Debug for SealingKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SealingKey")
            .field("key", &"[redacted]")
            .field("created", &self.created)
            .finish()
    }
}

impl SealingKey {
    pub(crate) fn load(source: &KeySource) -> Result<Self, StoreError> {
        let (bytes, created) = match source {
            KeySource::Text(text) => (decode_key(text.expose(), None)?, None),
            KeySource::File(path) => read_or_create_key_file(path)?,
        };
        let key = RandomizedNonceKey::new(&AES_256_GCM, &bytes).map_err(|_| StoreError::Key {
            path: None,
            reason: "the AEAD rejected the key".into(),
        })?;
        Ok(Self { key, created })
    }

    /// Seals `plaintext` for `app`.
    pub(crate) fn seal(&self, app: &str, plaintext: &[u8]) -> Result<Vec<u8>, StoreError> {
        let mut in_out = plaintext.to_vec();
        let nonce = self
            .key
            .seal_in_place_append_tag(Aad::from(aad(app)), &mut in_out)
            .map_err(|_| StoreError::Seal)?;
        let mut sealed = Vec::with_capacity(MAGIC.len() + NONCE_LEN + in_out.len());
        sealed.extend_from_slice(MAGIC);
        sealed.extend_from_slice(nonce.as_ref());
        sealed.extend_from_slice(&in_out);
        Ok(sealed)
    }

    /// Opens what [`SealingKey::seal`] sealed for `app`; `None` when the bytes are not such a
    /// file, the key is another, the app is another or a byte was changed.
    pub(crate) fn open(&self, app: &str, sealed: &[u8]) -> Option<Vec<u8>> {
        let rest = sealed.strip_prefix(MAGIC.as_slice())?;
        if rest.len() < NONCE_LEN {
            return None;
        }
        let (nonce, ciphertext) = rest.split_at(NONCE_LEN);
        let nonce = Nonce::try_assume_unique_for_key(nonce).ok()?;
        let mut in_out = ciphertext.to_vec();
        let plaintext = self
            .key
            .open_in_place(nonce, Aad::from(aad(app)), &mut in_out)
            .ok()?;
        Some(plaintext.to_vec())
    }
}

fn aad(app: &str) -> Vec<u8> {
    let mut aad = b"mcpapp-oauth-v1\0".to_vec();
    aad.extend_from_slice(app.as_bytes());
    aad
}

fn decode_key(text: &str, path: Option<&Path>) -> Result<Vec<u8>, StoreError> {
    let bytes = STANDARD.decode(text.trim()).map_err(|_| StoreError::Key {
        path: path.map(Path::to_path_buf),
        reason: "it is not base64".into(),
    })?;
    if bytes.len() != KEY_LEN {
        return Err(StoreError::Key {
            path: path.map(Path::to_path_buf),
            reason: format!("it holds {} bytes, not {KEY_LEN}", bytes.len()),
        });
    }
    Ok(bytes)
}

fn read_or_create_key_file(path: &Path) -> Result<(Vec<u8>, Option<PathBuf>), StoreError> {
    let io_error = |source: io::Error| StoreError::Io {
        path: path.to_path_buf(),
        source,
    };
    match fs::read_to_string(path) {
        Ok(text) => {
            warn_if_readable_by_others(path);
            Ok((decode_key(&text, Some(path))?, None))
        }
        Err(err) if err.kind() == io::ErrorKind::NotFound => {
            let mut bytes = vec![0u8; KEY_LEN];
            aws_lc_rs::rand::fill(&mut bytes).map_err(|_| StoreError::Key {
                path: Some(path.to_path_buf()),
                reason: "the system random generator failed".into(),
            })?;
            if let Some(parent) = path.parent() {
                create_private_dir(parent).map_err(io_error)?;
            }
            match private_file(path, true) {
                Ok(mut file) => {
                    file.write_all(format!("{}\n", STANDARD.encode(&bytes)).as_bytes())
                        .and_then(|()| file.sync_all())
                        .map_err(io_error)?;
                    tracing::warn!(
                        path = %path.display(),
                        "created a new key for the OAuth token store; keep this file (mode 0600) \
                         or set MCPAPP_OAUTH_KEY: without it the stored tokens cannot be read"
                    );
                    Ok((bytes, Some(path.to_path_buf())))
                }
                // Another process created it first: use theirs.
                Err(err) if err.kind() == io::ErrorKind::AlreadyExists => {
                    let text = fs::read_to_string(path).map_err(io_error)?;
                    Ok((decode_key(&text, Some(path))?, None))
                }
                Err(err) => Err(io_error(err)),
            }
        }
        Err(err) => Err(io_error(err)),
    }
}

#[cfg(unix)]
fn warn_if_readable_by_others(path: &Path) {
    use std::os::unix::fs::PermissionsExt as _;
    if let Ok(meta) = fs::metadata(path)
        && meta.permissions().mode() & 0o077 != 0
    {
        tracing::warn!(
            path = %path.display(),
            mode = format!("{:o}", meta.permissions().mode() & 0o777),
            "the OAuth token store's key file is readable by others; it should be mode 0600"
        );
    }
}

#[cfg(not(unix))]
fn warn_if_readable_by_others(_path: &Path) {}

/// Opens a new file only its owner can read and write (0600 on Unix); `exclusive` fails when
/// it exists.
pub(crate) fn private_file(path: &Path, exclusive: bool) -> io::Result<fs::File> {
    let mut options = fs::OpenOptions::new();
    options.write(true);
    if exclusive {
        options.create_new(true);
    } else {
        options.create(true).truncate(true);
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt as _;
        options.mode(0o600);
    }
    options.open(path)
}

/// Creates a folder (and its parents) only its owner can enter (0700 on Unix) when it does
/// not exist; an existing folder is left as it is.
pub(crate) fn create_private_dir(path: &Path) -> io::Result<()> {
    if path.as_os_str().is_empty() || path.is_dir() {
        return Ok(());
    }
    let mut builder = fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::DirBuilderExt as _;
        builder.mode(0o700);
    }
    builder.create(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key() -> SealingKey {
        SealingKey::load(&KeySource::Text(Secret::new(STANDARD.encode([7u8; 32])))).unwrap()
    }

    #[test]
    fn sealed_bytes_open_only_for_the_same_app_key_and_content() {
        let key = key();
        let sealed = key.seal("crm", b"{\"token\":\"at-1\"}").unwrap();
        assert!(sealed.starts_with(MAGIC));
        assert!(!sealed.windows(4).any(|w| w == b"at-1"));
        assert_eq!(key.open("crm", &sealed).unwrap(), b"{\"token\":\"at-1\"}");
        assert_eq!(key.open("other", &sealed), None);
        let mut tampered = sealed.clone();
        *tampered.last_mut().unwrap() ^= 1;
        assert_eq!(key.open("crm", &tampered), None);
        let other =
            SealingKey::load(&KeySource::Text(Secret::new(STANDARD.encode([8u8; 32])))).unwrap();
        assert_eq!(other.open("crm", &sealed), None);
        assert_eq!(key.open("crm", b"garbage"), None);
        assert_eq!(key.open("crm", MAGIC), None);
    }

    #[test]
    fn every_write_has_a_fresh_nonce() {
        let key = key();
        let a = key.seal("crm", b"same").unwrap();
        let b = key.seal("crm", b"same").unwrap();
        assert_ne!(
            a[MAGIC.len()..MAGIC.len() + NONCE_LEN],
            b[MAGIC.len()..MAGIC.len() + NONCE_LEN]
        );
    }

    #[test]
    fn a_bad_key_text_is_a_clear_error_without_the_value() {
        let err = SealingKey::load(&KeySource::Text(Secret::new("c2hvcnQ="))).unwrap_err();
        assert_eq!(
            err.to_string(),
            "the OAuth token store key is unusable: it holds 5 bytes, not 32"
        );
        let err = SealingKey::load(&KeySource::Text(Secret::new("not base64!"))).unwrap_err();
        assert!(err.to_string().contains("not base64"), "{err}");
    }

    #[cfg(unix)]
    #[test]
    fn the_key_file_is_created_0600_once_and_then_reused() {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state").join("oauth.key");
        let first = SealingKey::load(&KeySource::File(path.clone())).unwrap();
        assert_eq!(first.created.as_deref(), Some(path.as_path()));
        let mode = fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        let again = SealingKey::load(&KeySource::File(path)).unwrap();
        assert_eq!(again.created, None);
        let sealed = first.seal("a", b"x").unwrap();
        assert_eq!(again.open("a", &sealed).unwrap(), b"x");
    }
}
