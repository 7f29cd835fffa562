//! rmcp's `CredentialStore` (one store per `AuthorizationManager`, no key) bound to one
//! (app, issuer) record of the [`TokenStore`], so rmcp's exchange and refresh save straight
//! into the encrypted store under the right key.

use mcpapp_manifest::AppId;
use rmcp::transport::auth::{AuthError, CredentialStore, StoredCredentials};

use crate::store::TokenStore;

/// The credentials of `app` at `issuer`.
#[derive(Debug, Clone)]
pub(crate) struct BoundStore {
    pub(crate) store: TokenStore,
    pub(crate) app: AppId,
    pub(crate) issuer: String,
}

#[async_trait::async_trait]
impl CredentialStore for BoundStore {
    async fn load(&self) -> Result<Option<StoredCredentials>, AuthError> {
        let record = self
            .store
            .record(&self.app)
            .map_err(|err| AuthError::CredentialStoreError(err.to_string()))?;
        Ok(record
            .issuers
            .get(&self.issuer)
            .and_then(|issuer| issuer.credentials.clone()))
    }

    async fn save(&self, credentials: StoredCredentials) -> Result<(), AuthError> {
        let issuer = self.issuer.clone();
        self.store
            .update(&self.app, move |record| {
                record.active_issuer = Some(issuer.clone());
                record.issuers.entry(issuer).or_default().credentials = Some(credentials);
            })
            .await
            .map_err(|err| AuthError::CredentialStoreError(err.to_string()))
    }

    async fn clear(&self) -> Result<(), AuthError> {
        let issuer = self.issuer.clone();
        self.store
            .update(&self.app, move |record| {
                if let Some(entry) = record.issuers.get_mut(&issuer) {
                    entry.credentials = None;
                }
            })
            .await
            .map_err(|err| AuthError::CredentialStoreError(err.to_string()))
    }
}
