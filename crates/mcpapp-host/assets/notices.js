// mcpapp host page: short notices (toasts) and the token form shown when the gateway wants a
// token.
"use strict";

import { $, el } from "./dom.js";
import { state } from "./state.js";

/** A notice that disappears after a few seconds; `kind` "error" makes it an alert. */
export function toast(text, kind) {
  const box = $("#toasts");
  const node = el("p", { class: "toast " + (kind || ""), role: kind === "error" ? "alert" : "status", text });
  box.appendChild(node);
  setTimeout(() => node.remove(), 6000);
}

/** Shows or hides the token form (focusing it when it appears). */
export function showTokenForm(show) {
  const appearing = show && !state.unauthorized;
  state.unauthorized = show;
  $("#token-banner").hidden = !show;
  if (appearing) {
    $("#token-input").focus();
  }
}
