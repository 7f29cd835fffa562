// mcpapp host page: talking to the gateway. The bearer token (taken from ?token= once, kept in
// sessionStorage, never left in the address bar), JSON requests, and a reader for the
// text/event-stream replies of /apps/chat, /apps/mcp/{appId} and /apps/events.
"use strict";

import { withAffinity } from "./affinity.js";

const TOKEN_KEY = "mcpapp.token";

/** An HTTP error from the gateway, with the status and the gateway's own message. */
export class ApiError extends Error {
  constructor(status, message) {
    super(message);
    this.name = "ApiError";
    this.status = status;
  }
}

/**
 * Moves `?token=...` from the address bar into sessionStorage, so the token is neither
 * bookmarked, shared with the URL, nor shown on screen.
 */
export function captureToken() {
  const url = new URL(window.location.href);
  if (!url.searchParams.has("token")) {
    return;
  }
  const token = url.searchParams.get("token") || "";
  if (token) {
    sessionStorage.setItem(TOKEN_KEY, token);
  }
  url.searchParams.delete("token");
  const rest = url.searchParams.toString();
  window.history.replaceState(window.history.state, "", url.pathname + (rest ? "?" + rest : "") + url.hash);
}

/** Stores a token typed by the user (an empty one forgets it). */
export function setToken(token) {
  if (token) {
    sessionStorage.setItem(TOKEN_KEY, token);
  } else {
    sessionStorage.removeItem(TOKEN_KEY);
  }
}

/** The headers every gateway request carries (the token, the affinity key), plus `extra`. */
export function authHeaders(extra) {
  const headers = Object.assign({}, extra || {});
  const token = sessionStorage.getItem(TOKEN_KEY);
  if (token) {
    headers.Authorization = "Bearer " + token;
  }
  return withAffinity(headers);
}

/** Tells the page that the gateway wants a (different) token. */
export function reportUnauthorized() {
  window.dispatchEvent(new CustomEvent("mcpapp:unauthorized"));
}

/**
 * Sends a JSON request and returns the JSON reply. Throws ApiError with the gateway's error
 * text on an HTTP error (and reports 401s), or the network error as it is.
 */
export async function api(method, path, body) {
  const init = { method, headers: authHeaders({ Accept: "application/json" }) };
  if (body !== undefined) {
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  const response = await fetch(path, init);
  let payload = null;
  try {
    payload = await response.json();
  } catch (_) {
    payload = null;
  }
  if (!response.ok) {
    if (response.status === 401) {
      reportUnauthorized();
    }
    const message = payload && typeof payload.error === "string" ? payload.error : "HTTP " + response.status;
    throw new ApiError(response.status, message);
  }
  return payload;
}

/**
 * Yields the data of each event of a text/event-stream response, as the EventSource
 * algorithm defines it: `data:` lines joined with newlines, comments and other fields skipped,
 * an event dispatched at each blank line.
 */
export async function* readEventStream(response) {
  for await (const event of readEvents(response)) {
    yield event.data;
  }
}

/**
 * Yields each event of a text/event-stream response as `{id, event, data}`: `id` is the
 * event's own `id:` field (null without one), `event` its name ("message" without one), and
 * `data` its `data:` lines joined with newlines. Comments (keep-alives) are skipped.
 */
export async function* readEvents(response) {
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let partial = "";
  let data = [];
  let id = null;
  let name = "";
  const takeLine = function* (line) {
    if (line.endsWith("\r")) {
      line = line.slice(0, -1);
    }
    if (line === "") {
      if (data.length) {
        const event = { id, event: name || "message", data: data.join("\n") };
        yield event;
      }
      data = [];
      id = null;
      name = "";
      return;
    }
    if (line.startsWith(":")) {
      return;
    }
    const colon = line.indexOf(":");
    const field = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? "" : line.slice(colon + 1);
    if (value.startsWith(" ")) {
      value = value.slice(1);
    }
    if (field === "data") {
      data.push(value);
    } else if (field === "id") {
      id = value;
    } else if (field === "event") {
      name = value;
    }
  };
  let finished = false;
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) {
        finished = true;
        break;
      }
      partial += decoder.decode(value, { stream: true });
      let newline;
      while ((newline = partial.indexOf("\n")) >= 0) {
        const line = partial.slice(0, newline);
        partial = partial.slice(newline + 1);
        yield* takeLine(line);
      }
    }
    partial += decoder.decode();
    if (partial) {
      yield* takeLine(partial);
    }
    yield* takeLine("");
  } finally {
    if (finished) {
      reader.releaseLock();
    } else {
      // The reader stopped early (it found what it wanted): close the connection.
      reader.cancel().catch(() => {});
    }
  }
}
