//! One error type for the JSON routes, turned into a status code and a JSON body in one place.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::json;

/// What a route answers when it cannot do what was asked.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ApiError {
    /// No such app (or other resource).
    #[error("{0}")]
    NotFound(String),
    /// The request conflicts with the app's state.
    #[error("{0}")]
    Conflict(String),
    /// Something is unavailable for now.
    #[error("{0}")]
    Unavailable(String),
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = match &self {
            Self::NotFound(_) => StatusCode::NOT_FOUND,
            Self::Conflict(_) => StatusCode::CONFLICT,
            Self::Unavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
        };
        (status, axum::Json(json!({ "error": self.to_string() }))).into_response()
    }
}
