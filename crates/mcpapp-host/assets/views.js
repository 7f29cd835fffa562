// mcpapp host page: app views. Each view is a ViewBridge (view-bridge.js) in the transcript;
// this module opens and closes them, gives them the page's side (theme, logging, UI events,
// messages, model context) and the per-app MCP sessions their calls go through.
"use strict";

import { api } from "./api.js";
import { askForView } from "./elicitation.js";
import { McpProxyClient } from "./mcp-client.js";
import { HOST_INFO, MAX_QUEUED_MESSAGES, state, record } from "./state.js";
import { STYLE_VARIABLES } from "./theme.js";
import { reportToolCall, setModelContext } from "./ui-events.js";
import { RpcError, ViewBridge, htmlFromRead } from "./view-bridge.js";

/** Who takes a view's ui/message: the chat sets it (views cannot import the chat). */
let messageSink = () => ({ accepted: false, reason: "the chat is not ready" });

/** Sets what turns a view's ui/message into a chat turn: `(view, text) => void`. */
export function setViewMessageSink(sink) {
  messageSink = sink;
}

/** The page's MCP session with an app's `/apps/mcp/{appId}`, shared by its views. */
export function clientFor(appId) {
  let client = state.clients.get(appId);
  if (!client) {
    client = new McpProxyClient(appId, state.sessionId, { name: "mcpapp-host-page", version: HOST_INFO.version });
    client.onServerRequest = (request, options) => serverRequest(appId, request, options);
    state.clients.set(appId, client);
  }
  return client;
}

/**
 * What the app asks on the page's session during a call the page made: `context` is the
 * view whose call it was, or "run" for the run action.
 */
async function serverRequest(appId, request, { signal, context }) {
  if (request.method !== "elicitation/create") {
    throw new RpcError(-32601, "the host page does not handle " + request.method);
  }
  const app = state.apps.find((a) => a.id === appId);
  return askForView({
    appId,
    appName: (context && context.appName) || (app && app.name) || appId,
    origin: context === "run" ? "during the tool you ran" : "from its view",
    params: request.params || {},
    signal,
  });
}

/** Ends every app session (a new conversation, or the page going away). */
export function closeClients() {
  for (const client of state.clients.values()) {
    client.close();
  }
  state.clients.clear();
}

const viewHost = {
  hostInfo: HOST_INFO,
  theme: () => state.theme,
  styleVariables: () => Object.assign({}, STYLE_VARIABLES),
  log(view, level, text) {
    record("view", view.appId + "/" + view.tool.name + " " + level + ": " + text);
    if (level === "error" || level === "warn" || level === "warning") {
      console.warn("[view " + view.appId + "/" + view.tool.name + "]", text);
    } else if (level !== "debug") {
      console.info("[view " + view.appId + "/" + view.tool.name + "]", text);
    }
  },
  appEvent(view, event) {
    reportToolCall(view.appId, event.tool, event.args, event.resultText, event.isError);
  },
  message(view, text) {
    if (state.queue.length >= MAX_QUEUED_MESSAGES) {
      return { accepted: false, reason: "too many messages are waiting for the agent" };
    }
    messageSink(view, text);
    return { accepted: true };
  },
  modelContext(view, context) {
    setModelContext(view, context);
  },
  close(view, reason) {
    closeView(view, reason);
  },
  stateChanged() {},
};

/** Tears a view down and keeps its record for the debug hook. */
export async function closeView(view, reason) {
  setModelContext(view, null);
  await view.teardown(reason);
  state.views.delete(view);
  state.closedViews.push(view.describe());
  if (state.closedViews.length > 20) {
    state.closedViews.shift();
  }
  record("view", "closed " + view.appId + "/" + view.tool.name + " (" + view.teardownOutcome + ")");
}

/** Closes every open view. */
export async function closeAllViews(reason) {
  await Promise.all(Array.from(state.views, (v) => closeView(v, reason)));
}

/**
 * Creates the view for a tool call at once (so a result that arrives early is kept) and loads
 * it in the background: the sandbox from the gateway, the HTML through the app's session.
 */
export function openView(slot, { appId, appName, tool, toolCallId, input }) {
  const view = new ViewBridge({
    host: viewHost,
    appId,
    appName,
    tool,
    toolCallId,
    toolInput: input,
    client: clientFor(appId),
  });
  state.views.add(view);
  slot.appendChild(view.element);
  record("view", "opening " + appId + "/" + tool.name + " for call " + toolCallId);
  (async () => {
    const uri = tool.uiResourceUri;
    const [prepared, read] = await Promise.all([
      api("POST", "/apps/" + encodeURIComponent(appId) + "/views", { uri }),
      view.client.request("resources/read", { uri }),
    ]);
    if (read.error) {
      throw new Error("resources/read failed: " + read.error.message);
    }
    await view.start(prepared, htmlFromRead(read.result, uri));
  })().catch((err) => {
    if (!view.closed) {
      view.fail("The view could not be shown: " + err.message);
    }
  });
  return view;
}

/** Routes a message event to the view whose outer frame sent it; others are ignored. */
export function routeMessage(event) {
  for (const view of state.views) {
    if (view.iframe && event.source === view.iframe.contentWindow) {
      view.receive(event);
      return;
    }
  }
}

/** Escape leaves fullscreen. */
export function leaveFullscreen() {
  for (const view of state.views) {
    if (view.displayMode === "fullscreen") {
      view.setDisplayMode("inline");
    }
  }
}
