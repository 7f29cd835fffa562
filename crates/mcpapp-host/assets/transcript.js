// mcpapp host page: the chat transcript's entries (the user's and the agent's messages,
// errors, and tool calls with their view slot and result).
"use strict";

import { $, el, pretty } from "./dom.js";

const transcript = () => $("#transcript");

export function scrollToEnd() {
  const box = $("#transcript-box");
  box.scrollTop = box.scrollHeight;
}

/** Appends `node` to the transcript and scrolls to it. */
export function addEntry(node) {
  $("#chat-empty").hidden = true;
  transcript().appendChild(node);
  scrollToEnd();
  return node;
}

/** Empties the transcript (a new conversation). */
export function clearTranscript() {
  transcript().textContent = "";
  $("#chat-empty").hidden = false;
}

export function userEntry(text, from) {
  return addEntry(
    el("li", { class: "msg msg-user" }, [
      el("div", { class: "msg-who", text: from ? "You, via " + from : "You" }),
      el("div", { class: "msg-text", text }),
    ]),
  );
}

export function assistantEntry() {
  const text = el("div", { class: "msg-text" });
  const node = addEntry(el("li", { class: "msg msg-assistant" }, [el("div", { class: "msg-who", text: "Agent" }), text]));
  return { node, text };
}

export function errorEntry(text) {
  return addEntry(el("li", { class: "msg msg-error", role: "alert", text }));
}

/** A tool call in the transcript: name, input, the view (if any) and the result. */
export function toolEntry(id, name, input, origin) {
  const status = el("span", { class: "tool-status", text: "running…" });
  const slot = el("div", { class: "tool-view-slot" });
  const result = el("pre", { class: "tool-result-text" });
  const resultBox = el("details", { class: "tool-io tool-result", hidden: true }, [el("summary", { text: "Result" }), result]);
  const node = addEntry(
    el("li", { class: "msg msg-tool", "data-tool-call-id": id, "data-tool-name": name }, [
      el("div", { class: "tool-head" }, [
        el("span", { class: "msg-who", text: origin || "Tool call" }),
        el("code", { text: name }),
        status,
      ]),
      el("details", { class: "tool-io" }, [el("summary", { text: "Input" }), el("pre", { text: pretty(input || {}) })]),
      slot,
      resultBox,
    ]),
  );
  return {
    node,
    slot,
    view: null,
    done: false,
    finish(text, isError) {
      this.done = true;
      status.textContent = isError ? "failed" : "done";
      status.className = "tool-status " + (isError ? "bad" : "ok");
      result.textContent = text;
      resultBox.hidden = false;
      node.dataset.status = isError ? "error" : "done";
      scrollToEnd();
    },
  };
}
