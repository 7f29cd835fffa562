// mcpapp host page: the entry module. It wires the parts together and starts them: the apps
// panel (apps-panel.js), the chat (chat.js), app views (views.js, with the view protocol in
// view-bridge.js), what the next turn carries (ui-events.js), elicitation forms
// (elicitation.js), the theme (theme.js) and the token (api.js, notices.js); then it follows
// the apps' events and exposes a read-only debug hook.
"use strict";

import { captureToken, setToken } from "./api.js";
import { followAppEvents, reconnectAppEvents, refreshApps, wireAppsPanel } from "./apps-panel.js";
import { showSession, wireChat } from "./chat.js";
import { $ } from "./dom.js";
import { wireExtensions } from "./extensions.js";
import { showTokenForm } from "./notices.js";
import { state } from "./state.js";
import { applyTheme, initialTheme, wireTheme } from "./theme.js";
import { wirePending, wireShape } from "./ui-events.js";
import { closeClients, leaveFullscreen, routeMessage } from "./views.js";

function wire() {
  // Views talk to the page only by postMessage; views.js checks which frame sent it.
  window.addEventListener("message", routeMessage);
  window.addEventListener("mcpapp:unauthorized", () => showTokenForm(true));
  window.addEventListener("pagehide", closeClients);
  document.addEventListener("keydown", (event) => {
    if (event.key === "Escape") {
      leaveFullscreen();
    }
  });
  $("#token-form").addEventListener("submit", (event) => {
    event.preventDefault();
    setToken($("#token-input").value.trim());
    $("#token-input").value = "";
    state.details.clear();
    refreshApps();
    reconnectAppEvents();
  });
  wireTheme();
  wireAppsPanel();
  wireChat();
  wirePending();
  wireExtensions();
}

function follow() {
  // The stream's `ready` event reads the apps, and every change after it does again.
  followAppEvents();
  document.addEventListener("visibilitychange", () => {
    // A stream may have died quietly while the page was in the background (a suspended
    // laptop): a visible page opens it again without waiting for the backoff.
    if (!document.hidden && !state.events.connected) {
      reconnectAppEvents();
    }
  });
}

captureToken();
wire();
applyTheme(initialTheme());
showSession();
follow();

// A read-only window on the page's state for debugging and the browser tests.
Object.defineProperty(window, "mcpappHost", {
  value: Object.freeze({
    sessionId: () => state.sessionId,
    views: () => state.closedViews.concat(Array.from(state.views, (v) => v.describe())),
    log: () => state.log.slice(),
    toolIndex: () => Array.from(state.toolIndex.keys()),
    pendingEvents: () => wireShape(state.appEvents),
    appsEvents: () => ({ connected: state.events.connected, lastEventId: state.events.lastEventId }),
  }),
});
