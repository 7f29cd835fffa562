// mcpapp host page: what the next chat turn carries besides the message: the UI events (tool
// calls made in views or with the "run" action) and the model context views set, and the note
// near the input that says so.
"use strict";

import { $ } from "./dom.js";
import { MAX_APP_EVENTS, state } from "./state.js";

/** Keeps a tool call made outside the agent for the next chat turn. */
export function addAppEvent(event) {
  state.appEvents.push(event);
  if (state.appEvents.length > MAX_APP_EVENTS) {
    state.appEvents.splice(0, state.appEvents.length - MAX_APP_EVENTS);
  }
  renderComposerNotes();
}

/** Takes the UI events for a turn (they leave the queue). */
export function takeAppEvents() {
  return state.appEvents.splice(0);
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

/** Forgets everything pending (a new conversation). */
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

/** The note near the input: what goes with the next message, and what waits. */
export function renderComposerNotes() {
  const notes = [];
  if (state.modelContexts.size) {
    const names = Array.from(state.modelContexts.keys(), (v) => v.appName || v.appId);
    notes.push("Context from " + names.join(", ") + " goes with your next message.");
  }
  if (state.appEvents.length) {
    notes.push(state.appEvents.length + " action(s) taken in app views will be reported to the agent.");
  }
  if (state.queue.length) {
    notes.push(state.queue.length + " message(s) waiting.");
  }
  const box = $("#composer-notes");
  box.textContent = notes.join(" ");
  box.hidden = notes.length === 0;
}
