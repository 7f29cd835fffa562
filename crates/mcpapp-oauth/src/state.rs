//! The authorization state of one app as a pure state machine: events in, state and a verdict
//! out, no I/O and no clock, unit-tested on its own. [`crate::AppAuthorizer`] feeds it what
//! happens on the wire and publishes the state.
//!
//! The supervisor's lifecycle needs one new state for it: an app whose [`AuthState`] is
//! [`AuthState::NeedsAuthorization`] or [`AuthState::Authorizing`] cannot run until the user
//! connects it, and [`AuthState::waiting_for`] names the authorization server to show.
//! Every other state leaves the lifecycle as it is (an authorized app runs; a refresh happens
//! under a running app; `Failed` is the app's `lastError`).

use serde::Serialize;

use crate::checks::union_scopes;

/// Authorizations in a row, without one request succeeding in between, after which a further
/// `insufficient_scope` answer is not met with another one. The MCP specification asks for "a
/// few attempts at most"; the conformance suite's `auth/scope-retry-limit` allows three
/// authorization requests in all (the first one included).
pub(crate) const MAX_AUTHORIZATIONS_WITHOUT_SUCCESS: u8 = 3;

/// Why an app needs the user to connect it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum NeedsReason {
    /// It was never connected (or was disconnected).
    NotConnected,
    /// Its grant ended: the token was rejected and could not be refreshed.
    Expired,
    /// Its server now names another authorization server; the old tokens are not used there.
    IssuerChanged,
}

/// Where one app stands with its authorization server.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "state", rename_all = "camelCase")]
pub enum AuthState {
    /// No tokens and no challenge: requests go out without a token (most apps need none).
    Anonymous,
    /// The app's server asked for authorization; the user must connect it.
    #[serde(rename_all = "camelCase")]
    NeedsAuthorization {
        /// The authorization server's issuer, to name to the user.
        issuer: String,
        /// Why.
        reason: NeedsReason,
    },
    /// An authorization URL was handed out and its redirect has not come back yet.
    Authorizing {
        /// The authorization server's issuer.
        issuer: String,
    },
    /// Tokens are held and sent.
    #[serde(rename_all = "camelCase")]
    Authorized {
        /// The issuer of the tokens.
        issuer: String,
        /// The scopes granted.
        scopes: Vec<String>,
        /// Set when the app asked for scopes the grant lacks (`insufficient_scope`): the
        /// scopes to ask for ("Grant more access"), the union of held and challenged ones.
        more_scope: Option<Vec<String>>,
    },
    /// The access token is being renewed; requests wait for it.
    #[serde(rename_all = "camelCase")]
    Refreshing {
        /// The issuer of the tokens.
        issuer: String,
        /// The scopes granted.
        scopes: Vec<String>,
        /// As in [`AuthState::Authorized`].
        more_scope: Option<Vec<String>>,
    },
    /// Authorization cannot go on without the operator: OAuth refused by the app's entry, no
    /// usable metadata, no PKCE, no way to register.
    Failed {
        /// What went wrong, for `lastError`.
        reason: String,
    },
}

impl AuthState {
    /// The issuer to name when the app waits for the user to connect it (the lifecycle's
    /// `NeedsAuthorization`), else `None`.
    pub fn waiting_for(&self) -> Option<&str> {
        match self {
            Self::NeedsAuthorization { issuer, .. } | Self::Authorizing { issuer } => Some(issuer),
            _ => None,
        }
    }

    /// The issuer of the tokens held, if any.
    pub fn issuer(&self) -> Option<&str> {
        match self {
            Self::NeedsAuthorization { issuer, .. }
            | Self::Authorizing { issuer }
            | Self::Authorized { issuer, .. }
            | Self::Refreshing { issuer, .. } => Some(issuer),
            Self::Anonymous | Self::Failed { .. } => None,
        }
    }
}

/// What happened, as the machine hears it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum AuthEvent {
    /// Tokens for `issuer` were found in the store at start.
    Restored {
        issuer: String,
        scopes: Vec<String>,
    },
    /// The server wants authorization that the gateway cannot supply by itself.
    Challenged {
        issuer: String,
        reason: NeedsReason,
    },
    /// Authorization cannot proceed.
    Unusable {
        reason: String,
    },
    /// An authorization URL was handed out.
    FlowStarted {
        issuer: String,
    },
    /// A redirect came back refused (bad `iss`, denied, failed exchange).
    FlowFailed,
    /// Tokens were obtained by an authorization.
    Granted {
        issuer: String,
        scopes: Vec<String>,
    },
    RefreshStarted,
    Refreshed {
        scopes: Vec<String>,
    },
    /// A refresh failed for a reason that may pass (the old token is kept meanwhile).
    RefreshFailed,
    /// A 403 `insufficient_scope` named these scopes.
    ScopeChallenged {
        scopes: Vec<String>,
    },
    /// A request with the token went through.
    Succeeded,
    /// The user disconnected the app: tokens revoked and deleted.
    Disconnected,
}

/// The machine's answer to an event, beyond the new state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// Nothing more to do.
    Done,
    /// Ask the user for these scopes (the union of the held and the challenged ones).
    StepUp { scopes: Vec<String> },
    /// Too many authorizations without a success: stop asking.
    StepUpExhausted { scopes: Vec<String> },
    /// The event does not apply in this state.
    Ignored,
}

/// The state plus the count the step-up bound needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct AuthMachine {
    state: AuthState,
    authorizations_without_success: u8,
}

impl Default for AuthMachine {
    fn default() -> Self {
        Self {
            state: AuthState::Anonymous,
            authorizations_without_success: 0,
        }
    }
}

impl AuthMachine {
    pub(crate) fn state(&self) -> &AuthState {
        &self.state
    }

    /// Applies `event`.
    pub(crate) fn apply(&mut self, event: AuthEvent) -> Verdict {
        use AuthState as S;
        match event {
            AuthEvent::Restored { issuer, scopes } => {
                self.state = S::Authorized {
                    issuer,
                    scopes,
                    more_scope: None,
                };
            }
            AuthEvent::Challenged { issuer, reason } => {
                self.state = S::NeedsAuthorization { issuer, reason };
            }
            AuthEvent::Unusable { reason } => self.state = S::Failed { reason },
            AuthEvent::FlowStarted { issuer } => match &self.state {
                // A step-up runs beside a working grant: the app keeps running.
                S::Authorized { .. } | S::Refreshing { .. } => return Verdict::Ignored,
                _ => self.state = S::Authorizing { issuer },
            },
            AuthEvent::FlowFailed => match &self.state {
                S::Authorizing { issuer } => {
                    self.state = S::NeedsAuthorization {
                        issuer: issuer.clone(),
                        reason: NeedsReason::NotConnected,
                    };
                }
                _ => return Verdict::Ignored,
            },
            AuthEvent::Granted { issuer, scopes } => {
                self.authorizations_without_success =
                    self.authorizations_without_success.saturating_add(1);
                self.state = S::Authorized {
                    issuer,
                    scopes,
                    more_scope: None,
                };
            }
            AuthEvent::RefreshStarted => match &self.state {
                S::Authorized {
                    issuer,
                    scopes,
                    more_scope,
                } => {
                    self.state = S::Refreshing {
                        issuer: issuer.clone(),
                        scopes: scopes.clone(),
                        more_scope: more_scope.clone(),
                    };
                }
                _ => return Verdict::Ignored,
            },
            AuthEvent::Refreshed { scopes } => return self.end_refresh(Some(scopes)),
            AuthEvent::RefreshFailed => return self.end_refresh(None),
            AuthEvent::ScopeChallenged { scopes } => return self.scope_challenged(scopes),
            AuthEvent::Succeeded => self.authorizations_without_success = 0,
            AuthEvent::Disconnected => *self = Self::default(),
        }
        Verdict::Done
    }

    fn end_refresh(&mut self, new_scopes: Option<Vec<String>>) -> Verdict {
        let AuthState::Refreshing {
            issuer,
            scopes,
            more_scope,
        } = &self.state
        else {
            return Verdict::Ignored;
        };
        self.state = AuthState::Authorized {
            issuer: issuer.clone(),
            scopes: new_scopes.unwrap_or_else(|| scopes.clone()),
            more_scope: more_scope.clone(),
        };
        Verdict::Done
    }

    fn scope_challenged(&mut self, challenged: Vec<String>) -> Verdict {
        let (AuthState::Authorized {
            scopes, more_scope, ..
        }
        | AuthState::Refreshing {
            scopes, more_scope, ..
        }) = &mut self.state
        else {
            return Verdict::Ignored;
        };
        let held = more_scope.as_deref().unwrap_or(scopes);
        let union = union_scopes(held, challenged);
        if self.authorizations_without_success >= MAX_AUTHORIZATIONS_WITHOUT_SUCCESS {
            *more_scope = None;
            return Verdict::StepUpExhausted { scopes: union };
        }
        *more_scope = Some(union.clone());
        Verdict::StepUp { scopes: union }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scopes(list: &str) -> Vec<String> {
        list.split_whitespace().map(str::to_owned).collect()
    }

    fn granted(machine: &mut AuthMachine, list: &str) {
        let verdict = machine.apply(AuthEvent::Granted {
            issuer: "https://as".into(),
            scopes: scopes(list),
        });
        assert_eq!(verdict, Verdict::Done);
    }

    #[test]
    fn a_challenge_then_a_flow_then_a_grant() {
        let mut m = AuthMachine::default();
        assert_eq!(m.state(), &AuthState::Anonymous);
        assert_eq!(m.state().waiting_for(), None);
        m.apply(AuthEvent::Challenged {
            issuer: "https://as".into(),
            reason: NeedsReason::NotConnected,
        });
        assert_eq!(m.state().waiting_for(), Some("https://as"));
        m.apply(AuthEvent::FlowStarted {
            issuer: "https://as".into(),
        });
        assert_eq!(
            m.state(),
            &AuthState::Authorizing {
                issuer: "https://as".into()
            }
        );
        assert_eq!(m.state().waiting_for(), Some("https://as"));
        m.apply(AuthEvent::FlowFailed);
        assert!(matches!(
            m.state(),
            AuthState::NeedsAuthorization {
                reason: NeedsReason::NotConnected,
                ..
            }
        ));
        m.apply(AuthEvent::FlowStarted {
            issuer: "https://as".into(),
        });
        granted(&mut m, "mcp:read");
        assert_eq!(
            m.state(),
            &AuthState::Authorized {
                issuer: "https://as".into(),
                scopes: scopes("mcp:read"),
                more_scope: None
            }
        );
        assert_eq!(m.state().waiting_for(), None);
    }

    #[test]
    fn refreshing_is_seen_and_ends_in_authorized_either_way() {
        let mut m = AuthMachine::default();
        m.apply(AuthEvent::Restored {
            issuer: "https://as".into(),
            scopes: scopes("a"),
        });
        assert_eq!(m.apply(AuthEvent::RefreshStarted), Verdict::Done);
        assert!(matches!(m.state(), AuthState::Refreshing { .. }));
        m.apply(AuthEvent::Refreshed {
            scopes: scopes("a b"),
        });
        assert!(matches!(m.state(), AuthState::Authorized { scopes, .. } if scopes == &["a", "b"]));
        m.apply(AuthEvent::RefreshStarted);
        m.apply(AuthEvent::RefreshFailed);
        assert!(matches!(m.state(), AuthState::Authorized { scopes, .. } if scopes == &["a", "b"]));
        assert_eq!(m.apply(AuthEvent::RefreshFailed), Verdict::Ignored);
        m.apply(AuthEvent::Challenged {
            issuer: "https://as".into(),
            reason: NeedsReason::Expired,
        });
        assert_eq!(m.apply(AuthEvent::RefreshStarted), Verdict::Ignored);
        assert!(matches!(
            m.state(),
            AuthState::NeedsAuthorization {
                reason: NeedsReason::Expired,
                ..
            }
        ));
    }

    #[test]
    fn step_up_asks_for_the_union_and_keeps_the_app_authorized() {
        let mut m = AuthMachine::default();
        granted(&mut m, "mcp:basic");
        m.apply(AuthEvent::Succeeded);
        let verdict = m.apply(AuthEvent::ScopeChallenged {
            scopes: scopes("mcp:write"),
        });
        assert_eq!(
            verdict,
            Verdict::StepUp {
                scopes: scopes("mcp:basic mcp:write")
            }
        );
        assert!(matches!(
            m.state(),
            AuthState::Authorized { more_scope: Some(more), .. } if more == &["mcp:basic", "mcp:write"]
        ));
        // A second challenge before the user acts widens the request further.
        let verdict = m.apply(AuthEvent::ScopeChallenged {
            scopes: scopes("mcp:admin"),
        });
        assert_eq!(
            verdict,
            Verdict::StepUp {
                scopes: scopes("mcp:basic mcp:write mcp:admin")
            }
        );
        // A step-up flow does not take the app out of Authorized.
        assert_eq!(
            m.apply(AuthEvent::FlowStarted {
                issuer: "https://as".into()
            }),
            Verdict::Ignored
        );
        granted(&mut m, "mcp:basic mcp:write mcp:admin");
        assert!(matches!(
            m.state(),
            AuthState::Authorized {
                more_scope: None,
                ..
            }
        ));
    }

    #[test]
    fn step_up_stops_after_three_authorizations_without_a_success() {
        let mut m = AuthMachine::default();
        granted(&mut m, "mcp:basic");
        for _ in 1..MAX_AUTHORIZATIONS_WITHOUT_SUCCESS {
            let verdict = m.apply(AuthEvent::ScopeChallenged {
                scopes: scopes("mcp:admin"),
            });
            assert!(matches!(verdict, Verdict::StepUp { .. }), "{verdict:?}");
            granted(&mut m, "mcp:basic");
        }
        let verdict = m.apply(AuthEvent::ScopeChallenged {
            scopes: scopes("mcp:admin"),
        });
        assert_eq!(
            verdict,
            Verdict::StepUpExhausted {
                scopes: scopes("mcp:basic mcp:admin")
            }
        );
        assert!(matches!(
            m.state(),
            AuthState::Authorized {
                more_scope: None,
                ..
            }
        ));
        // One success starts the count again.
        m.apply(AuthEvent::Succeeded);
        assert!(matches!(
            m.apply(AuthEvent::ScopeChallenged {
                scopes: scopes("mcp:admin")
            }),
            Verdict::StepUp { .. }
        ));
    }

    #[test]
    fn a_scope_challenge_without_a_grant_is_ignored_and_disconnect_resets() {
        let mut m = AuthMachine::default();
        assert_eq!(
            m.apply(AuthEvent::ScopeChallenged {
                scopes: scopes("x")
            }),
            Verdict::Ignored
        );
        m.apply(AuthEvent::Unusable {
            reason: "no PKCE".into(),
        });
        assert_eq!(m.state().issuer(), None);
        granted(&mut m, "x");
        m.apply(AuthEvent::Disconnected);
        assert_eq!(m, AuthMachine::default());
    }

    #[test]
    fn the_state_serializes_for_api_answers() {
        let state = AuthState::NeedsAuthorization {
            issuer: "https://as".into(),
            reason: NeedsReason::IssuerChanged,
        };
        assert_eq!(
            serde_json::to_string(&state).unwrap(),
            r#"{"state":"needsAuthorization","issuer":"https://as","reason":"issuerChanged"}"#
        );
    }
}
