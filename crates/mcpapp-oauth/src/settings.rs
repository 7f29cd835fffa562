//! The operator's OAuth settings for one app ([`AppSettings`], from the entry's `OAuth` with
//! the secret resolved) and the gateway's paths.

use mcpapp_manifest::OAuthEntryConfig;
use url::Url;

use crate::secret::Secret;

/// Where the authorization server sends the user's browser back: this path on the gateway's
/// origin. It needs no bearer token; a live, single-use `state` guards it.
pub const CALLBACK_PATH: &str = "/oauth/callback";

/// Where the gateway serves its client ID metadata document (when its origin is https).
pub const CLIENT_METADATA_PATH: &str = "/oauth/client-metadata.json";

/// The callback URL under a base URL (`https://gw.example.com` →
/// `https://gw.example.com/oauth/callback`); any path of `base` is replaced.
pub fn callback_url(base: &Url) -> Url {
    let mut url = base.clone();
    url.set_path(CALLBACK_PATH);
    url.set_query(None);
    url.set_fragment(None);
    url
}

/// How the gateway authorizes to one app: from its entry's `OAuth` settings, with
/// `ClientSecret` already resolved from its `env:` reference. The default allows OAuth with
/// no pre-registered client and the scopes the app asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AppSettings {
    pub(crate) enabled: bool,
    pub(crate) client_id: Option<String>,
    pub(crate) client_secret: Option<Secret>,
    pub(crate) client_issuer: Option<String>,
    pub(crate) scopes: Vec<String>,
    pub(crate) redirect_uri: Option<Url>,
}

impl Default for AppSettings {
    fn default() -> Self {
        Self {
            enabled: true,
            client_id: None,
            client_secret: None,
            client_issuer: None,
            scopes: Vec::new(),
            redirect_uri: None,
        }
    }
}

impl AppSettings {
    /// OAuth allowed, nothing pre-registered.
    pub fn new() -> Self {
        Self::default()
    }

    /// OAuth refused (`OAuth.Enabled: false`): a 401 is an error, never a prompt.
    pub fn refused() -> Self {
        Self {
            enabled: false,
            ..Self::default()
        }
    }

    /// From an entry's `OAuth` settings and its resolved `ClientSecret`.
    ///
    /// # Errors
    /// The entry's [`OAuthEntryConfig::problems`], joined, when there are any.
    pub fn from_entry(
        config: &OAuthEntryConfig,
        client_secret: Option<Secret>,
    ) -> Result<Self, String> {
        let problems = config.problems();
        if !problems.is_empty() {
            return Err(problems.join("; "));
        }
        let redirect_uri = config
            .redirect_base_url
            .as_deref()
            .map(|base| Url::parse(base).map(|url| callback_url(&url)))
            .transpose()
            .map_err(|err| format!("`OAuth.RedirectBaseUrl`: {err}"))?;
        Ok(Self {
            enabled: config.is_enabled(),
            client_id: config.client_id.clone(),
            client_secret,
            client_issuer: config.issuer.clone(),
            scopes: config.scopes.clone(),
            redirect_uri,
        })
    }

    /// A client registered out of band, with its secret for a confidential client.
    pub fn with_client(mut self, client_id: impl Into<String>, secret: Option<Secret>) -> Self {
        self.client_id = Some(client_id.into());
        self.client_secret = secret;
        self
    }

    /// The issuer the pre-registered client belongs to; another one is refused.
    pub fn with_client_issuer(mut self, issuer: impl Into<String>) -> Self {
        self.client_issuer = Some(issuer.into());
        self
    }

    /// Scopes to request instead of those the app names.
    pub fn with_scopes<I, S>(mut self, scopes: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.scopes = scopes.into_iter().map(Into::into).collect();
        self
    }

    /// This app's redirect URI, instead of the gateway's.
    pub fn with_redirect_uri(mut self, redirect_uri: Url) -> Self {
        self.redirect_uri = Some(redirect_uri);
        self
    }

    /// Whether OAuth is allowed.
    pub fn is_enabled(&self) -> bool {
        self.enabled
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entry_settings_become_app_settings() {
        let entry = OAuthEntryConfig {
            client_id: Some("gw".into()),
            client_secret: Some("env:GW_SECRET".into()),
            scopes: vec!["a".into()],
            redirect_base_url: Some("https://gw.example.com/".into()),
            ..Default::default()
        };
        let settings = AppSettings::from_entry(&entry, Some(Secret::new("resolved"))).unwrap();
        assert!(settings.is_enabled());
        assert_eq!(
            settings.redirect_uri.unwrap().as_str(),
            "https://gw.example.com/oauth/callback"
        );
        assert_eq!(settings.client_secret.unwrap().expose(), "resolved");
        let refused = OAuthEntryConfig {
            enabled: Some(false),
            ..Default::default()
        };
        assert!(
            !AppSettings::from_entry(&refused, None)
                .unwrap()
                .is_enabled()
        );
        let bad = OAuthEntryConfig {
            client_secret: Some("literal".into()),
            ..Default::default()
        };
        let err = AppSettings::from_entry(&bad, None).unwrap_err();
        assert!(err.contains("`OAuth.ClientSecret`"), "{err}");
        assert!(!err.contains("literal"), "{err}");
    }
}
