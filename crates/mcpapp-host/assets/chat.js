// mcpapp host page: the chat. Messages (typed, or sent by views with ui/message) queue behind a
// running turn; each turn POSTs /apps/chat with the pending UI events and model context and
// renders its event stream: text, tool calls (opening the view of a tool with a UI, which gets
// the app's whole result) and their results, elicitations of the agent's calls (answered on
// POST /apps/chat/elicitation/{id}), errors. A new conversation tears every view down and
// starts a new session.
"use strict";

import { ApiError, api, authHeaders, readEventStream } from "./api.js";
import { rebuildToolIndex } from "./catalog.js";
import { $, randomId } from "./dom.js";
import { openElicitation } from "./elicitation.js";
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
  wireShape,
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
  const asks = new Map();
  let assistant = null;
  let sawText = false;
  const abort = new AbortController();
  state.chatAbort = abort;
  try {
    const body = { message, sessionId: state.sessionId };
    if (appEvents.length) {
      body.appEvents = wireShape(appEvents);
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
            entry.view.setToolResult(viewResult(event));
          }
          break;
        }
        case "elicitation": {
          const app = state.apps.find((a) => a.id === event.appId);
          asks.set(
            event.id,
            openElicitation({
              id: event.id,
              appId: event.appId,
              appName: app && app.name,
              origin: "during the agent's call",
              params: event.params || {},
              submit: (answer) => answerAgentElicitation(event.id, answer),
            }),
          );
          break;
        }
        case "elicitation_closed": {
          const card = asks.get(event.id);
          if (card) {
            card.close("The app stopped waiting: " + (event.reason || "no reason given") + ".");
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
    // An elicitation lives only as long as the turn that caused it.
    for (const card of asks.values()) {
      card.close("The turn ended.");
    }
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

/** Sends the page's answer to an elicitation of the agent's call. */
async function answerAgentElicitation(id, answer) {
  try {
    await api("POST", "/apps/chat/elicitation/" + encodeURIComponent(id), answer);
  } catch (err) {
    if (err instanceof ApiError && err.status === 404) {
      const gone = new Error("The app no longer waits for this answer.");
      gone.final = true;
      throw gone;
    }
    throw err;
  }
}

/**
 * What a chat-opened view receives: the app's CallToolResult as it sent it, which the gateway
 * passes on for tools with a UI. Only when there is none (the call failed before the app
 * answered) is one made from the event's text.
 */
function viewResult(event) {
  if (event.callToolResult && typeof event.callToolResult === "object") {
    return event.callToolResult;
  }
  const result = { content: [{ type: "text", text: event.text }], isError: Boolean(event.isError) };
  if (event.structuredContent !== undefined) {
    result.structuredContent = event.structuredContent;
  }
  return result;
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
