// mcpapp host page: a small Streamable HTTP MCP client for the gateway's per-app endpoint
// /apps/mcp/{appId}?sessionId=<chat session>. The page sends app views' tools/call and
// resources/read through it, so they share the app's upstream session with the agent and are
// attributed to the chat session. JSON-RPC errors are returned, not thrown, so they can be
// relayed to a view as they are. The session declares form and URL elicitation: a server
// request that arrives on a request's event stream (an app asking the user during a view's
// call) goes to `onServerRequest`, and its answer is POSTed back on the same session.
"use strict";

import { withAffinity } from "./affinity.js";
import { authHeaders, readEventStream, reportUnauthorized } from "./api.js";

/** The MCP protocol version the page asks the gateway for. */
const MCP_PROTOCOL_VERSION = "2025-11-25";
const ACCEPT = "application/json, text/event-stream";

/** A JSON-RPC error object for failures that never reached the app. */
function localError(message, code) {
  return { jsonrpc: "2.0", error: { code: code === undefined ? -32603 : code, message } };
}

export class McpProxyClient {
  /**
   * @param {string} appId the app whose endpoint to use
   * @param {string} sessionId the chat session view calls are attributed to
   * @param {object} info `{name, version}` of the page
   */
  constructor(appId, sessionId, info) {
    this.appId = appId;
    this.sessionId = sessionId;
    this.url =
      "/apps/mcp/" + encodeURIComponent(appId) + "?sessionId=" + encodeURIComponent(sessionId);
    this.info = info;
    this.session = null;
    this.protocolVersion = null;
    this.starting = null;
    this.nextId = 1;
    this.closed = false;
    /**
     * Answers a server request: `(message, {signal, context}) => Promise<result>`; a rejection
     * with `{code, message}` becomes a JSON-RPC error. Without one, only ping is answered.
     */
    this.onServerRequest = null;
  }

  /** A fresh request id (callers that need the id up front, e.g. for toolInfo, take one). */
  allocateId() {
    return "page-" + this.nextId++;
  }

  /**
   * Sends one request and returns the JSON-RPC response object (`{result}` or `{error}`).
   * Starts the MCP session first when needed, and once more if the app restarted and the
   * gateway forgot it.
   */
  async request(method, params, options) {
    const opts = options || {};
    const id = opts.id || this.allocateId();
    for (let attempt = 0; ; attempt++) {
      if (this.closed) {
        return localError("the page closed this connection");
      }
      try {
        await this.ensureSession(opts.signal);
      } catch (err) {
        return localError("could not open an MCP session with app '" + this.appId + "': " + err.message);
      }
      const message = { jsonrpc: "2.0", id, method };
      if (params !== undefined) {
        message.params = params;
      }
      const reply = await this.post(message, opts.signal, false, opts);
      if (reply.sessionGone && attempt === 0) {
        this.session = null;
        continue;
      }
      return reply.message || localError("the gateway sent no answer");
    }
  }

  /** Answers a request the server sent on a response stream, on this session. */
  async answerServerRequest(request, options) {
    let answer;
    try {
      if (request.method === "ping") {
        answer = { result: {} };
      } else if (this.onServerRequest) {
        answer = { result: await this.onServerRequest(request, options) };
      } else {
        answer = { error: { code: -32601, message: "the host page does not handle " + request.method } };
      }
    } catch (err) {
      const code = err && Number.isInteger(err.code) ? err.code : -32603;
      answer = { error: { code, message: (err && err.message) || String(err) } };
    }
    if (this.closed || !this.session) {
      return;
    }
    await this.post(Object.assign({ jsonrpc: "2.0", id: request.id }, answer));
  }

  /** Ends the MCP session (best effort). */
  close() {
    this.closed = true;
    const session = this.session;
    this.session = null;
    if (session) {
      fetch(this.url, {
        method: "DELETE",
        headers: authHeaders(withAffinity({ "Mcp-Session-Id": session }, this.sessionId)),
        keepalive: true,
      }).catch(() => {});
    }
  }

  async ensureSession(signal) {
    if (this.session) {
      return;
    }
    if (!this.starting) {
      this.starting = this.initialize(signal).finally(() => {
        this.starting = null;
      });
    }
    await this.starting;
  }

  async initialize(signal) {
    const reply = await this.post(
      {
        jsonrpc: "2.0",
        id: this.allocateId(),
        method: "initialize",
        params: {
          protocolVersion: MCP_PROTOCOL_VERSION,
          capabilities: {
            elicitation: { form: {}, url: {} },
            extensions: {
              "io.modelcontextprotocol/ui": { mimeTypes: ["text/html;profile=mcp-app"] },
            },
          },
          clientInfo: this.info,
        },
      },
      signal,
      true,
    );
    const message = reply.message;
    if (!message || message.error || !reply.session) {
      throw new Error((message && message.error && message.error.message) || "initialize failed");
    }
    this.session = reply.session;
    this.protocolVersion = message.result && message.result.protocolVersion;
    await this.post({ jsonrpc: "2.0", method: "notifications/initialized" }, signal);
  }

  /**
   * POSTs one message. Returns `{message, session}` (message null for 202), or
   * `{sessionGone: true}` when the gateway no longer knows the session.
   */
  async post(message, signal, initializing, opts) {
    const headers = authHeaders(
      withAffinity({ "Content-Type": "application/json", Accept: ACCEPT }, this.sessionId),
    );
    if (!initializing && this.session) {
      headers["Mcp-Session-Id"] = this.session;
      if (this.protocolVersion) {
        headers["MCP-Protocol-Version"] = this.protocolVersion;
      }
    }
    let response;
    try {
      response = await fetch(this.url, {
        method: "POST",
        headers,
        body: JSON.stringify(message),
        signal,
      });
    } catch (err) {
      return { message: localError("the gateway could not be reached: " + err.message) };
    }
    if (response.status === 401) {
      reportUnauthorized();
      return { message: localError("the gateway wants a valid token", -32001) };
    }
    if (response.status === 202) {
      return { message: null };
    }
    const type = (response.headers.get("content-type") || "").toLowerCase();
    if (type.startsWith("text/event-stream")) {
      try {
        for await (const data of readEventStream(response)) {
          let event;
          try {
            event = JSON.parse(data);
          } catch (_) {
            continue;
          }
          // Progress, notifications and the server's own requests may come first; the answer
          // ends the stream.
          if (event && event.id === message.id && ("result" in event || "error" in event)) {
            return { message: event };
          }
          if (event && typeof event.method === "string" && "id" in event) {
            this.answerServerRequest(event, { signal, context: opts && opts.context });
          }
        }
      } catch (err) {
        return { message: localError("the answer stream broke: " + err.message) };
      }
      return { message: localError("the answer stream ended without an answer") };
    }
    let body = null;
    try {
      body = await response.json();
    } catch (_) {
      body = null;
    }
    if (
      response.status === 404 &&
      !initializing &&
      body &&
      body.error &&
      body.error.code === -32001
    ) {
      return { sessionGone: true };
    }
    if (body && typeof body === "object" && ("result" in body || "error" in body)) {
      return { message: body, session: response.headers.get("mcp-session-id") };
    }
    return { message: localError("the gateway answered HTTP " + response.status) };
  }
}
