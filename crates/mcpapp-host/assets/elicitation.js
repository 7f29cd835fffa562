// mcpapp host page: elicitations with a face. When an app asks the user (elicitation/create),
// during the agent's call (the request arrives on the chat stream) or a view's call (it arrives
// on the page's MCP session with the app), a card in the transcript shows what it asks:
//
// - form mode: a form built from the requested schema: strings (email, uri, date and date-time
//   formats as the matching inputs, min/max length), numbers and integers (minimum/maximum),
//   booleans, single-select enums (legacy `enum` with `enumNames`, or `oneOf` of
//   `const`/`title`) and multi-select ones (`type: array` with `items.enum` or
//   `items.anyOf`/`oneOf`, min/max items), each pre-filled with its `default` (SEP-1034) and
//   titled by SEP-1330's titles; Accept checks it, Decline and Cancel send no content;
// - URL mode: the message and the URL as text, opened only when the user agrees (and only an
//   http(s) URL).
//
// The card hands the answer (an ElicitResult) to `submit`, which may refuse it with an error
// to show (the gateway checks answers too; an error marked `final` closes the card); it
// closes when `submit` succeeds, or when the request goes away (`close`).
"use strict";

import { el } from "./dom.js";
import { record } from "./state.js";
import { addEntry, scrollToEnd } from "./transcript.js";

const isObject = (v) => v !== null && typeof v === "object" && !Array.isArray(v);

/** The choices of an enum schema as `[{value, label}]`, or null when it is not an enum. */
function choicesOf(schema) {
  if (!isObject(schema)) {
    return null;
  }
  if (Array.isArray(schema.enum)) {
    const names = Array.isArray(schema.enumNames) ? schema.enumNames : [];
    return schema.enum.map((value, i) => ({ value: String(value), label: String(names[i] ?? value) }));
  }
  const options = Array.isArray(schema.oneOf) ? schema.oneOf : Array.isArray(schema.anyOf) ? schema.anyOf : null;
  if (!options) {
    return null;
  }
  return options
    .filter((o) => isObject(o) && o.const !== undefined)
    .map((o) => ({ value: String(o.const), label: String(o.title ?? o.const) }));
}

/** An RFC 3339 date-time as the value of a datetime-local input (local time), or "". */
function toLocalInput(value) {
  const date = new Date(String(value));
  if (Number.isNaN(date.getTime())) {
    return "";
  }
  const pad = (n) => String(n).padStart(2, "0");
  return (
    date.getFullYear() + "-" + pad(date.getMonth() + 1) + "-" + pad(date.getDate()) +
    "T" + pad(date.getHours()) + ":" + pad(date.getMinutes()) + ":" + pad(date.getSeconds())
  );
}

const INPUT_TYPES = { email: "email", uri: "url", date: "date", "date-time": "datetime-local" };

/**
 * One field of the form: its element and `read()`, which returns `{value}` (absent when an
 * optional field is left empty) or `{error}`.
 */
function field(name, schema, required) {
  const id = "elicit-" + Math.random().toString(36).slice(2) + "-" + name.replace(/[^\w-]/g, "_");
  const title = (isObject(schema) && schema.title) || name;
  const label = el("label", { for: id, class: "elicit-label" }, [title, required ? el("span", { class: "required", text: " *", "aria-hidden": "true" }) : null]);
  const hint = isObject(schema) && schema.description ? el("p", { class: "elicit-hint", text: schema.description }) : null;
  const type = isObject(schema) ? schema.type : undefined;
  const wrap = (control, extra) =>
    el("div", { class: "elicit-field", "data-field": name, "data-type": String(type || "any") }, [label, control, hint, extra || null]);

  if (type === "boolean") {
    const box = el("input", { id, type: "checkbox", name });
    box.checked = schema.default === true;
    const row = el("div", { class: "elicit-check" }, [box, label]);
    return {
      node: el("div", { class: "elicit-field", "data-field": name, "data-type": "boolean" }, [row, hint]),
      read: () => ({ value: box.checked }),
    };
  }

  if (type === "array") {
    const choices = choicesOf(schema.items) || [];
    const chosen = new Set(Array.isArray(schema.default) ? schema.default.map(String) : []);
    const boxes = choices.map((choice) => {
      const box = el("input", { type: "checkbox", value: choice.value, name });
      box.checked = chosen.has(choice.value);
      return { box, node: el("label", { class: "elicit-choice" }, [box, " " + choice.label]) };
    });
    const group = el("fieldset", { id, class: "elicit-multi" }, [el("legend", { text: title }), ...boxes.map((b) => b.node)]);
    return {
      node: el("div", { class: "elicit-field", "data-field": name, "data-type": "array" }, [group, hint]),
      read: () => {
        const values = boxes.filter((b) => b.box.checked).map((b) => b.box.value);
        if (Number.isInteger(schema.minItems) && values.length < schema.minItems) {
          return { error: title + ": choose at least " + schema.minItems };
        }
        if (Number.isInteger(schema.maxItems) && values.length > schema.maxItems) {
          return { error: title + ": choose at most " + schema.maxItems };
        }
        if (!values.length && !required && !Array.isArray(schema.default)) {
          return {};
        }
        return { value: values };
      },
    };
  }

  const choices = type === "string" || type === undefined ? choicesOf(schema) : null;
  if (choices) {
    const select = el("select", { id, name, required: required || undefined }, [
      el("option", { value: "", text: required ? "Choose…" : "(none)" }),
      ...choices.map((c) => el("option", { value: c.value, text: c.label })),
    ]);
    if (isObject(schema) && schema.default !== undefined) {
      select.value = String(schema.default);
    }
    return {
      node: wrap(select),
      read: () => (select.value === "" ? {} : { value: select.value }),
    };
  }

  if (type === "number" || type === "integer") {
    const input = el("input", {
      id,
      name,
      type: "number",
      step: type === "integer" ? "1" : "any",
      min: Number.isFinite(schema.minimum) ? String(schema.minimum) : undefined,
      max: Number.isFinite(schema.maximum) ? String(schema.maximum) : undefined,
      required: required || undefined,
    });
    if (Number.isFinite(schema.default)) {
      input.value = String(schema.default);
    }
    return {
      node: wrap(input),
      read: () => {
        if (input.value === "") {
          return {};
        }
        const value = Number(input.value);
        if (!Number.isFinite(value) || (type === "integer" && !Number.isInteger(value))) {
          return { error: title + ": " + (type === "integer" ? "a whole number" : "a number") + " is needed" };
        }
        return { value };
      },
    };
  }

  // Strings, and any type the schemas do not define (taken as text).
  const format = isObject(schema) ? schema.format : undefined;
  const input = el("input", {
    id,
    name,
    type: INPUT_TYPES[format] || "text",
    step: format === "date-time" ? "1" : undefined,
    minlength: isObject(schema) && Number.isInteger(schema.minLength) ? String(schema.minLength) : undefined,
    maxlength: isObject(schema) && Number.isInteger(schema.maxLength) ? String(schema.maxLength) : undefined,
    required: required || undefined,
    autocomplete: "off",
  });
  if (isObject(schema) && schema.default !== undefined) {
    input.value = format === "date-time" ? toLocalInput(schema.default) : String(schema.default);
  }
  return {
    node: wrap(input),
    read: () => {
      if (input.value === "") {
        return {};
      }
      if (format === "date-time") {
        const date = new Date(input.value);
        return Number.isNaN(date.getTime()) ? { error: title + ": not a date and time" } : { value: date.toISOString() };
      }
      return { value: input.value };
    },
  };
}

/** Only http(s) links are opened, in a new tab without a window reference. */
function openableUrl(text) {
  try {
    const url = new URL(String(text));
    return url.protocol === "http:" || url.protocol === "https:" ? url.href : null;
  } catch (_) {
    return null;
  }
}

/**
 * Shows the elicitation `params` of app `appName` in the transcript. `origin` says where it
 * comes from ("during the agent's call", "from its view"); `submit(answer)` delivers the
 * ElicitResult and may reject with an Error whose message the card shows. Returns
 * `{id, close(reason)}`.
 */
export function openElicitation({ id, appId, appName, origin, params, submit }) {
  const mode = params && params.mode === "url" ? "url" : "form";
  const errorLine = el("p", { class: "form-error elicit-error", role: "alert" });
  const status = el("p", { class: "elicit-status muted" });
  const buttons = el("div", { class: "dialog-actions elicit-actions" });
  const form = el("form", { class: "elicit-form", novalidate: true });
  const card = el(
    "li",
    { class: "msg msg-elicitation", "data-elicitation-id": id, "data-app-id": appId, "data-mode": mode, "data-state": "open" },
    [
      el("div", { class: "msg-who", text: (appName || appId) + " asks you " + origin }),
      el("p", { class: "elicit-message", text: String((params && params.message) || "") }),
      form,
      status,
    ],
  );
  let closed = false;
  // While an answer is on its way, a close from outside (the turn ended because the answer
  // arrived) waits for it, so the card says what the user did.
  let sending = false;
  let closeLater = null;
  const close = (reason, state) => {
    if (closed) {
      return;
    }
    closed = true;
    card.dataset.state = state || "closed";
    for (const control of card.querySelectorAll("input, select, button")) {
      control.disabled = true;
    }
    status.textContent = reason;
    record("elicitation", (appName || appId) + " " + (state || "closed") + ": " + reason);
  };
  const send = async (answer, summary) => {
    errorLine.textContent = "";
    for (const button of buttons.querySelectorAll("button")) {
      button.disabled = true;
    }
    sending = true;
    try {
      await submit(answer);
      close(summary, answer.action);
    } catch (err) {
      if (err && err.final) {
        // Nothing waits for an answer any more: the form is over.
        close(err.message, "closed");
      } else if (closeLater) {
        close(closeLater, "closed");
      } else {
        errorLine.textContent = err.message || String(err);
        for (const button of buttons.querySelectorAll("button")) {
          button.disabled = false;
        }
      }
    } finally {
      sending = false;
    }
  };
  const button = (action, text, primary) =>
    el("button", { type: action === "accept" ? "submit" : "button", class: primary ? "primary" : "", "data-action": action, text });

  if (mode === "url") {
    const url = String(params.url || "");
    const href = openableUrl(url);
    form.append(el("p", { class: "elicit-url" }, ["The app wants to open ", el("code", { text: url })]));
    if (!href) {
      form.append(el("p", { class: "form-error", text: "This page opens only http and https links." }));
    }
    form.append(errorLine, buttons);
    const open = button("accept", "Open the link", true);
    open.disabled = !href;
    buttons.append(button("decline", "Decline"), button("cancel", "Cancel"), open);
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      if (!href) {
        return;
      }
      // Opened only now, after the user agreed; noopener gives the site no hold on this page.
      window.open(href, "_blank", "noopener,noreferrer");
      send({ action: "accept" }, "You opened the link.");
    });
  } else {
    const schema = isObject(params && params.requestedSchema) ? params.requestedSchema : {};
    const properties = isObject(schema.properties) ? schema.properties : {};
    const required = new Set(Array.isArray(schema.required) ? schema.required : []);
    const fields = Object.entries(properties).map(([name, property]) => ({ name, ...field(name, property, required.has(name)) }));
    for (const f of fields) {
      form.appendChild(f.node);
    }
    form.append(errorLine, buttons);
    buttons.append(button("decline", "Decline"), button("cancel", "Cancel"), button("accept", "Accept", true));
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      if (!form.reportValidity()) {
        return;
      }
      const content = {};
      for (const f of fields) {
        const read = f.read();
        if (read.error) {
          errorLine.textContent = read.error;
          return;
        }
        if ("value" in read) {
          content[f.name] = read.value;
        }
      }
      send({ action: "accept", content }, "You answered.");
    });
  }
  buttons.querySelector('[data-action="decline"]').addEventListener("click", () => send({ action: "decline" }, "You declined."));
  buttons.querySelector('[data-action="cancel"]').addEventListener("click", () => send({ action: "cancel" }, "You cancelled."));
  addEntry(card);
  scrollToEnd();
  const first = form.querySelector("input, select, button:not([disabled])");
  if (first) {
    first.focus({ preventScroll: true });
  }
  return {
    id,
    close: (reason) => {
      if (sending) {
        closeLater = reason;
      } else {
        close(reason, "closed");
      }
    },
  };
}

/**
 * Asks the user for an `elicitation/create` that arrived on the page's MCP session with app
 * `appId` (caused by a view's call or the run action); resolves with the ElicitResult. If
 * `signal` aborts (the view closed), the card closes and the answer is "cancel".
 */
export function askForView({ appId, appName, origin, params, signal }) {
  return new Promise((resolve) => {
    const card = openElicitation({
      id: "view-" + Math.random().toString(36).slice(2),
      appId,
      appName,
      origin: origin || "from its view",
      params,
      submit: async (answer) => resolve(answer),
    });
    if (signal) {
      signal.addEventListener("abort", () => {
        card.close("The view that asked is gone.");
        resolve({ action: "cancel" });
      });
    }
  });
}
