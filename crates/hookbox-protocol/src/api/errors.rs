//! The Google-RPC error body every refusal is sent as.

use serde::{Deserialize, Serialize};

/// The Google RPC error body: `{"error":{"code":404,"message":"…","status":"NOT_FOUND"}}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorBody {
    pub error: RpcStatus,
}

/// The inner object of [`ErrorBody`]; `code` is the HTTP status as an integer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RpcStatus {
    pub code: u16,
    pub message: String,
    pub status: String,
}
