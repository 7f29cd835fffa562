// mcpapp host page: the affinity key. Behind a balancer, everything of one conversation (its
// chat turns, the apps' MCP sessions of its views, their sandboxes, the elicitation answers)
// must reach the one replica that holds it. The key is the chat session id, sent as the
// Mcpapp-Affinity header on every request; docs/operations.md describes the scheme.
"use strict";

import { state } from "./state.js";

export const AFFINITY_HEADER = "Mcpapp-Affinity";

/**
 * Adds the affinity key to `headers` and returns them: the key of `sessionId` when given (an
 * app session keeps its conversation's key after a new conversation starts), else the
 * current conversation's. A key already in `headers` stays.
 */
export function withAffinity(headers, sessionId) {
  const key = sessionId || state.sessionId;
  if (key && !(AFFINITY_HEADER in headers)) {
    headers[AFFINITY_HEADER] = key;
  }
  return headers;
}
