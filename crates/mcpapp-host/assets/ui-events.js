// mcpapp host page: what the next chat turn carries besides the message. UI events are the tool
// calls made in views or with the "run" action, reported only when they concern the model: a
// call of a tool the model cannot see (visibility without "model", such as a view's polling
// tool) is left out, and identical repeats (same tool, arguments and outcome) collapse into
// one event with a count. Model contexts are what views set with ui/update-model-context.
// The panel near the input lists both and lets the user clear them.
"use strict";

import { appDetail, findRegistered } from "./catalog.js";
import { $, el } from "./dom.js";
import { MAX_APP_EVENTS, record, state } from "./state.js";

/** The longest result text an event keeps. */
const MAX_EVENT_TEXT = 2000;

/** JSON with object keys sorted, so equal arguments give equal text whatever their order. */
function canonical(value) {
  if (Array.isArray(value)) {
    return "[" + value.map(canonical).join(",") + "]";
  }
  if (value !== null && typeof value === "object") {
    return "{" + Object.keys(value).sort().map((k) => JSON.stringify(k) + ":" + canonical(value[k])).join(",") + "}";
  }
  return JSON.stringify(value === undefined ? null : value);
}

/**
 * Reports a tool call made outside the agent: `appId`'s tool `toolName` called with `args`,
 * answered with `resultText` (`isError` for a failed call). Left out unless the model can see
 * the tool; a repeat of a pending event counts on it instead of adding another.
 */
export async function reportToolCall(appId, toolName, args, resultText, isError) {
  let tool = null;
  try {
    const detail = await appDetail(appId);
    tool = (detail.tools || []).find((t) => t.name === toolName) || null;
  } catch (_) {
    // Without the app's listing the tool's visibility is unknown: fail closed, as the bridge.
  }
  const visibility = (tool && tool.visibility) || {};
  if (!tool || !visibility.model || visibility.malformed) {
    record("ui-event", "not reported: " + appId + "/" + toolName + " is not visible to the model");
    return;
  }
  const name = tool.registeredName || findRegistered(appId, toolName) || appId + "/" + toolName;
  let text = String(resultText || "").slice(0, MAX_EVENT_TEXT);
  if (isError) {
    text = "Error: " + text;
  }
  const key = name + "\u0000" + canonical(args || {}) + "\u0000" + text;
  const index = state.appEvents.findIndex((e) => e.key === key);
  let count = 1;
  if (index >= 0) {
    // The repeat takes the place of the latest occurrence, so the order stays the order of
    // the most recent calls.
    count = state.appEvents[index].count + 1;
    state.appEvents.splice(index, 1);
  }
  state.appEvents.push({ key, tool: name, args: args || {}, resultText: text, count });
  if (state.appEvents.length > MAX_APP_EVENTS) {
    state.appEvents.splice(0, state.appEvents.length - MAX_APP_EVENTS);
  }
  renderComposerNotes();
}

/** Takes the UI events for a turn, in the wire shape (they leave the queue). */
export function takeAppEvents() {
  return state.appEvents.splice(0);
}

/** The wire shape of taken events: `{tool, args, resultText, count?}`. */
export function wireShape(events) {
  return events.map((e) => {
    const event = { tool: e.tool, args: e.args, resultText: e.resultText };
    if (e.count > 1) {
      event.count = e.count;
    }
    return event;
  });
}

/** Puts back the UI events of a turn that could not be sent. */
export function restoreAppEvents(events) {
  state.appEvents.unshift(...events);
  renderComposerNotes();
}

/** Sets (or, with null, forgets) the model context of a view. */
export function setModelContext(view, context) {
  if (context) {
    state.modelContexts.set(view, context);
  } else {
    state.modelContexts.delete(view);
  }
  renderComposerNotes();
}

/** Forgets everything pending (a new conversation, or the panel's Clear button). */
export function clearPending() {
  state.appEvents = [];
  state.modelContexts.clear();
  renderComposerNotes();
}

/** The model context of every view, as the text of one system message. */
export function modelContextText() {
  const parts = [];
  for (const [view, context] of state.modelContexts) {
    const lines = ["Context from the " + (view.appName || view.appId) + " view (" + view.tool.name + "):"];
    if (context.text) {
      lines.push(context.text);
    }
    if (context.structuredContent) {
      lines.push(JSON.stringify(context.structuredContent));
    }
    parts.push(lines.join("\n"));
  }
  return parts.join("\n\n");
}

function shorten(text, max) {
  return text.length > max ? text.slice(0, max - 1) + "…" : text;
}

/** The panel near the input: a summary, what goes with the next message, and Clear. */
export function renderComposerNotes() {
  const notes = [];
  if (state.modelContexts.size) {
    const names = Array.from(state.modelContexts.keys(), (v) => v.appName || v.appId);
    notes.push("Context from " + names.join(", ") + " goes with your next message.");
  }
  if (state.appEvents.length) {
    const calls = state.appEvents.reduce((n, e) => n + e.count, 0);
    notes.push(
      state.appEvents.length + " UI event(s) (" + calls + " call(s) in app views) will be reported to the agent.",
    );
  }
  if (state.queue.length) {
    notes.push(state.queue.length + " message(s) waiting.");
  }
  $("#composer-notes").textContent = notes.join(" ");
  const list = $("#pending-list");
  list.textContent = "";
  for (const event of state.appEvents) {
    list.appendChild(
      el("li", { class: "pending-event", "data-tool": event.tool, "data-count": String(event.count) }, [
        el("code", { text: event.tool }),
        " " + shorten(canonical(event.args), 80) + " → " + shorten(event.resultText || "(no text)", 120),
        event.count > 1 ? el("span", { class: "badge", text: "×" + event.count }) : null,
      ]),
    );
  }
  for (const [view, context] of state.modelContexts) {
    const text = context.text || (context.structuredContent ? JSON.stringify(context.structuredContent) : "");
    list.appendChild(
      el("li", { class: "pending-context", "data-app-id": view.appId }, [
        el("strong", { text: "Context from " + (view.appName || view.appId) + ": " }),
        shorten(text, 160),
      ]),
    );
  }
  const pending = state.appEvents.length > 0 || state.modelContexts.size > 0;
  list.hidden = !pending;
  $("#pending-clear").hidden = !pending;
  $("#pending").hidden = notes.length === 0;
}

/** The Clear button. */
export function wirePending() {
  $("#pending-clear").addEventListener("click", () => {
    record("ui-event", "the user cleared " + state.appEvents.length + " UI event(s) and " + state.modelContexts.size + " model context(s)");
    clearPending();
  });
}
