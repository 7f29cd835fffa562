// mcpapp host page: the chat. Messages (typed, or sent by views with ui/message) queue behind a
// running turn; each turn POSTs /apps/chat with the pending UI events and model context and
// renders its event stream: text, tool calls (opening the view of a tool with a UI) and their
// results, errors. A new conversation tears every view down and starts a new session.
"use strict";

import { authHeaders, readEventStream } from "./api.js";
import { rebuildToolIndex } from "./catalog.js";
import { $, randomId } from "./dom.js";
import { showTokenForm } from "./notices.js";
import { state, record } from "./state.js";
import {
  assistantEntry,
  clearTranscript,
  errorEntry,
  scrollToEnd,
  toolEntry,
  userEntry,
} from "./transcript.js";
import {
  clearPending,
  modelContextText,
  renderComposerNotes,
  restoreAppEvents,
  takeAppEvents,
} from "./ui-events.js";
import { closeAllViews, closeClients, openView, setViewMessageSink } from "./views.js";

export function enqueueTurn(message, options) {
  state.queue.push({ message, options: options || {} });
  renderComposerNotes();
  if (!state.chatBusy) {
    runQueue();
  }
}

async function runQueue() {
  while (state.queue.length && !state.chatBusy) {
    const next = state.queue.shift();
    await chatTurn(next.message, next.options);
  }
}

function setBusy(busy) {
  state.chatBusy = busy;
  $("#chat-send").disabled = busy;
  $("#chat-form").setAttribute("aria-busy", String(busy));
}

/** Runs one chat turn and renders its events as they stream. */
async function chatTurn(message, options) {
  setBusy(true);
  userEntry(message, options.from);
  const appEvents = takeAppEvents();
  const modelContext = modelContextText();
  renderComposerNotes();
  const calls = new Map();
  let assistant = null;
  let sawText = false;
  const abort = new AbortController();
  state.chatAbort = abort;
  try {
    const body = { message, sessionId: state.sessionId };
    if (appEvents.length) {
      body.appEvents = appEvents;
    }
    if (modelContext) {
      body.modelContext = modelContext;
    }
    const response = await fetch("/apps/chat", {
      method: "POST",
      headers: authHeaders({ "Content-Type": "application/json", Accept: "text/event-stream" }),
      body: JSON.stringify(body),
      signal: abort.signal,
    });
    if (!response.ok) {
      restoreAppEvents(appEvents);
      let text = "HTTP " + response.status;
      try {
        const payload = await response.json();
        text = payload.error || text;
      } catch (_) {
        // Not JSON: keep the status.
      }
      if (response.status === 401) {
        showTokenForm(true);
      }
      errorEntry("The chat failed: " + text);
      return;
    }
    for await (const data of readEventStream(response)) {
      let event;
      try {
        event = JSON.parse(data);
      } catch (_) {
        continue;
      }
      record("chat", event.type);
      switch (event.type) {
        case "session":
          if (event.sessionId && event.sessionId !== state.sessionId) {
            state.sessionId = event.sessionId;
            showSession();
          }
          break;
        case "text":
          if (!assistant) {
            assistant = assistantEntry();
          }
          assistant.text.textContent += event.text;
          sawText = true;
          scrollToEnd();
          break;
        case "tool": {
          assistant = null;
          const entry = toolEntry(event.id, event.name, event.input);
          calls.set(event.id, entry);
          await attachChatView(entry, event);
          break;
        }
        case "tool_result": {
          const entry = calls.get(event.id);
          if (!entry) {
            break;
          }
          entry.finish(event.text, event.isError);
          if (entry.view) {
            const result = { content: [{ type: "text", text: event.text }], isError: Boolean(event.isError) };
            if (event.structuredContent !== undefined) {
              result.structuredContent = event.structuredContent;
            }
            entry.view.setToolResult(result);
          }
          break;
        }
        case "error":
          errorEntry(event.error);
          break;
        case "result":
          if (!sawText && event.text) {
            assistantEntry().text.textContent = event.text;
          }
          break;
        default:
          break;
      }
    }
  } catch (err) {
    if (!abort.signal.aborted) {
      errorEntry("The chat stream broke: " + err.message);
    }
  } finally {
    state.chatAbort = null;
    for (const entry of calls.values()) {
      if (!entry.done) {
        entry.finish("The turn ended before this tool call finished.", true);
        if (entry.view) {
          entry.view.cancel("the turn ended before the tool call finished");
        }
      }
    }
    setBusy(false);
    renderComposerNotes();
  }
}

async function attachChatView(entry, event) {
  let known = state.toolIndex.get(event.name);
  if (!known) {
    // A tool the page has not seen yet (an app just started, or its tools were registered
    // for the agent after the page read it): read the apps again, once.
    state.details.clear();
    known = (await rebuildToolIndex()).get(event.name);
  }
  if (known && known.tool.uiResourceUri) {
    entry.view = openView(entry.slot, {
      appId: known.appId,
      appName: known.appName,
      tool: known.tool,
      toolCallId: event.id,
      input: event.input,
    });
  }
}

export async function newConversation() {
  state.queue = [];
  if (state.chatAbort) {
    // Leaving the stream cancels the turn on the gateway.
    state.chatAbort.abort();
  }
  await closeAllViews("a new conversation started");
  closeClients();
  clearPending();
  state.queue = [];
  state.sessionId = randomId("page-");
  clearTranscript();
  showSession();
  renderComposerNotes();
  $("#chat-input").focus();
}

export function showSession() {
  document.documentElement.dataset.sessionId = state.sessionId;
  $("#session-id").textContent = "Session " + state.sessionId.slice(0, 13) + "…";
  $("#session-id").title = state.sessionId;
}

/** The composer, the new-conversation button, and messages from views. */
export function wireChat() {
  setViewMessageSink((view, text) => enqueueTurn(text, { from: (view.appName || view.appId) + " view" }));
  $("#new-chat").addEventListener("click", newConversation);
  $("#chat-form").addEventListener("submit", (event) => {
    event.preventDefault();
    const input = $("#chat-input");
    const message = input.value.trim();
    if (!message || state.chatBusy) {
      return;
    }
    input.value = "";
    enqueueTurn(message);
  });
  $("#chat-input").addEventListener("keydown", (event) => {
    if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
      event.preventDefault();
      $("#chat-form").requestSubmit();
    }
  });
}
