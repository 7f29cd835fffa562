//! OAuth on the HTTP link: every request of an app the gateway authorizes to carries its
//! access token, and every 401 or 403 goes to the app's authorizer, which decides what it
//! means (`mcpapp_oauth::Next`): a renewed token (the same bytes go once more), the user must
//! connect the app, more scope is needed, or an ordinary error. The link only sends; the
//! authorizer keeps the tokens and the state, and the app's task watches that state (an app
//! that needs the user waits in `NeedsAuthorization`).
//!
//! A link without an authorizer sends exactly what it sent before.

use bytes::Bytes;
use http::header::{AUTHORIZATION, HeaderMap};
use http::{Method, StatusCode};
use mcpapp_oauth::{AppAuthorizer, AuthorizeError, Next};
use tokio::sync::oneshot;

use super::{HandedOver, Inner, LegacyError, Response};

/// How a request ended on the wire.
pub(super) enum Sent {
    /// An answer, whatever its status (a rejection that is not an authorization matter
    /// included).
    Response(Response),
    /// The request could not be sent or answered.
    Failed(LegacyError),
    /// Authorization stopped the request; the text says why and what the user can do.
    Unauthorized(String),
}

impl Inner {
    /// Sends a request with `body` (none for GET and DELETE), with the app's token when it
    /// has one; `sent` says when the first attempt's body was handed over.
    pub(super) async fn send(
        &self,
        method: Method,
        headers: HeaderMap,
        body: Option<Bytes>,
        sent: Option<oneshot::Sender<()>>,
    ) -> Sent {
        let Some(auth) = self.spec.auth.as_ref() else {
            let request = self.request(method, headers, handed_over(body, sent));
            return match self.client.request(request).await {
                Ok(response) => Sent::Response(response),
                Err(err) => Sent::Failed(err),
            };
        };
        let mut sent = sent;
        let mut retried = false;
        loop {
            let mut headers = headers.clone();
            let used = match auth.bearer().await {
                Ok(bearer) => bearer,
                Err(err) => return Sent::Unauthorized(explain(auth, &err)),
            };
            if let Some(bearer) = &used {
                headers.insert(AUTHORIZATION, bearer.header_value());
            }
            let request = self.request(
                method.clone(),
                headers,
                handed_over(body.clone(), sent.take()),
            );
            let response = match self.client.request(request).await {
                Ok(response) => response,
                Err(err) => return Sent::Failed(err),
            };
            let status = response.status();
            if status.is_success() {
                if used.is_some() {
                    auth.on_success();
                }
                return Sent::Response(response);
            }
            if status != StatusCode::UNAUTHORIZED && status != StatusCode::FORBIDDEN {
                return Sent::Response(response);
            }
            match auth
                .on_rejected(used.as_ref(), status, response.headers())
                .await
            {
                // Once per request: a renewed token rejected again is the authorizer's to
                // judge on the next request, not a loop here.
                Next::Retry if !retried => retried = true,
                Next::Retry | Next::NotOAuth => return Sent::Response(response),
                Next::NeedsAuthorization { issuer } => {
                    return Sent::Unauthorized(needs_authorization(auth, &issuer));
                }
                Next::NeedsMoreScope { issuer, scopes } => {
                    return Sent::Unauthorized(format!(
                        "app '{app}' needs more access at {issuer} (scopes: {}): use \"Grant more \
                         access\" in the gateway's page or `mcpapp-gateway apps authorize {app}`, \
                         then try again",
                        scopes.join(" "),
                        app = auth.app()
                    ));
                }
                Next::Fail(err) => return Sent::Unauthorized(explain(auth, &err)),
            }
        }
    }
}

fn handed_over(body: Option<Bytes>, sent: Option<oneshot::Sender<()>>) -> HandedOver {
    match body {
        Some(data) => HandedOver {
            len: data.len() as u64,
            data: Some(data),
            sent,
        },
        None => {
            let mut empty = HandedOver::empty();
            empty.sent = sent;
            empty
        }
    }
}

fn needs_authorization(auth: &AppAuthorizer, issuer: &str) -> String {
    format!(
        "app '{app}' needs authorization at {issuer}: connect it in the gateway's page or with \
         `mcpapp-gateway apps authorize {app}`",
        app = auth.app()
    )
}

/// An authorizer's error as the failed request's message, with what to do where there is
/// something.
fn explain(auth: &AppAuthorizer, err: &AuthorizeError) -> String {
    match err {
        AuthorizeError::NeedsAuthorization { issuer, .. } => needs_authorization(auth, issuer),
        other => other.to_string(),
    }
}
