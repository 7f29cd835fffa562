// mcpapp host page: the state every part of the page shares, its limits, and the page's own
// protocol log (read by the debug hook and the browser tests).
"use strict";

import { randomId } from "./dom.js";

export const HOST_INFO = { name: "mcpapp", version: "0.1.0" };
/** The first wait before the apps panel reconnects to /apps/events; it doubles up to the cap. */
export const EVENTS_RETRY_MS = 500;
/** The longest wait before the apps panel reconnects to /apps/events. */
export const EVENTS_RETRY_MAX_MS = 30000;
/** UI events kept for the next chat turn, at most. */
export const MAX_APP_EVENTS = 20;
/** Messages from views waiting for the chat, at most. */
export const MAX_QUEUED_MESSAGES = 5;
const LOG_LIMIT = 500;

export const state = {
  sessionId: randomId("page-"),
  theme: "light",
  apps: [],
  appsSignature: "",
  details: new Map(),
  toolIndex: new Map(),
  clients: new Map(),
  views: new Set(),
  closedViews: [],
  appEvents: [],
  modelContexts: new Map(),
  chatBusy: false,
  chatAbort: null,
  queue: [],
  log: [],
  unauthorized: false,
  // The warnings and errors of the last reload (from /apps/events), shown with the apps.
  reloadDiagnostics: [],
  // The /apps/events stream: whether it is open, and the id of the last event seen.
  events: { connected: false, lastEventId: null },
};

/** Adds a line to the page's protocol log (bounded). */
export function record(kind, text) {
  state.log.push({ at: new Date().toISOString(), kind, text });
  if (state.log.length > LOG_LIMIT) {
    state.log.splice(0, state.log.length - LOG_LIMIT);
  }
}
