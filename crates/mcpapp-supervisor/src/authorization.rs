//! Which apps the gateway authorizes to with OAuth, and how. An HTTP app gets an
//! [`AppAuthorizer`] from the gateway's [`OAuthClient`] unless the gateway has none or the app
//! already sends an `Authorization` header (a static token in its headers, or credentials in
//! its URL: the operator chose those). Its entry's `OAuth` settings say how, with
//! `ClientSecret` resolved from its `env:` reference; `Enabled: false` gives an authorizer that
//! refuses, so a 401 becomes the app's `lastError` rather than a prompt.
//!
//! The client hands back the same authorizer while the app's URL and settings stay the same,
//! so a reload that leaves them alone keeps the app's tokens and state in memory.

use mcpapp_manifest::{AppSpec, Launch, OAuthEntryConfig};
use mcpapp_oauth::{AppAuthorizer, AppSettings, OAuthClient, Secret};

use crate::launch::EnvLookup;

/// The authorizer of `spec`'s app under its entry's `OAuth` settings, `None` when the gateway
/// does not authorize to it.
///
/// # Errors
/// A message naming the setting when the settings are unusable (a `ClientSecret` whose
/// variable is not set, a malformed entry) or the app's stored tokens cannot be read.
pub(crate) fn authorizer_for(
    oauth: Option<&OAuthClient>,
    spec: &AppSpec,
    entry: &OAuthEntryConfig,
    env: &EnvLookup,
) -> Result<Option<AppAuthorizer>, String> {
    let Some(oauth) = oauth else {
        return Ok(None);
    };
    let Launch::Http { url, headers } = &spec.launch else {
        return Ok(None);
    };
    let own_credentials = headers
        .keys()
        .any(|name| name.eq_ignore_ascii_case("authorization"))
        || !url.username().is_empty()
        || url.password().is_some();
    if own_credentials {
        return Ok(None);
    }
    let secret = entry
        .client_secret
        .as_deref()
        .and_then(|value| value.strip_prefix("env:"))
        .map(|name| {
            let name = name.trim();
            env(name).map(Secret::new).ok_or_else(|| {
                format!("environment variable {name} (for `OAuth.ClientSecret`) is not set")
            })
        })
        .transpose()?;
    let settings = AppSettings::from_entry(entry, secret)
        .map_err(|problems| format!("`McpApps.Entries.{}.OAuth`: {problems}", spec.id))?;
    let mut server_url = url.clone();
    server_url.set_fragment(None);
    oauth
        .app(spec.id.clone(), server_url, settings)
        .map(Some)
        .map_err(|err| err.to_string())
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::sync::Arc;

    use mcpapp_manifest::McpAppManifest;
    use mcpapp_oauth::{AuthState, KeySource, TokenStore};

    use super::*;

    fn spec(headers: &[(&str, &str)], url: &str) -> AppSpec {
        let manifest = McpAppManifest {
            id: Some("crm".to_owned()),
            transport: "http".to_owned(),
            url: Some(url.to_owned()),
            headers: headers
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect::<BTreeMap<_, _>>(),
            ..McpAppManifest::default()
        };
        manifest.validate().expect("a valid HTTP manifest")
    }

    fn client(dir: &std::path::Path) -> OAuthClient {
        let key = KeySource::Text(Secret::new("MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY="));
        let store = TokenStore::open(dir, &key).unwrap();
        let redirect = url::Url::parse("http://127.0.0.1:8787/oauth/callback").unwrap();
        OAuthClient::builder(store, redirect).build().unwrap()
    }

    #[test]
    fn http_apps_without_credentials_of_their_own_get_an_authorizer() {
        let dir = tempfile::tempdir().unwrap();
        let oauth = client(dir.path());
        let env: EnvLookup = Arc::new(|name| (name == "CRM_SECRET").then(|| "s3cret".to_owned()));
        let entry = OAuthEntryConfig::default();
        let plain = spec(&[], "https://mcp.example.com/mcp");
        let first = authorizer_for(Some(&oauth), &plain, &entry, &env).unwrap();
        assert_eq!(
            first.as_ref().map(|a| a.state()),
            Some(AuthState::Anonymous)
        );
        // Nothing without a client, with a static token, or with URL credentials.
        assert!(
            authorizer_for(None, &plain, &entry, &env)
                .unwrap()
                .is_none()
        );
        let token = spec(
            &[("Authorization", "Bearer x")],
            "https://mcp.example.com/mcp",
        );
        assert!(
            authorizer_for(Some(&oauth), &token, &entry, &env)
                .unwrap()
                .is_none()
        );
        let userinfo = spec(&[], "https://u:p@mcp.example.com/mcp");
        assert!(
            authorizer_for(Some(&oauth), &userinfo, &entry, &env)
                .unwrap()
                .is_none()
        );

        // A configured secret is read from its variable; a missing one names the setting.
        let with_secret = OAuthEntryConfig {
            client_id: Some("gw".into()),
            client_secret: Some("env:CRM_SECRET".into()),
            ..OAuthEntryConfig::default()
        };
        assert!(
            authorizer_for(Some(&oauth), &plain, &with_secret, &env)
                .unwrap()
                .is_some()
        );
        let missing = OAuthEntryConfig {
            client_secret: Some("env:NOT_SET".into()),
            ..with_secret
        };
        let err = authorizer_for(Some(&oauth), &plain, &missing, &env).unwrap_err();
        assert_eq!(
            err,
            "environment variable NOT_SET (for `OAuth.ClientSecret`) is not set"
        );
        let refused = OAuthEntryConfig {
            enabled: Some(false),
            ..OAuthEntryConfig::default()
        };
        let authorizer = authorizer_for(Some(&oauth), &plain, &refused, &env)
            .unwrap()
            .unwrap();
        assert!(!authorizer.is_enabled());
    }
}
