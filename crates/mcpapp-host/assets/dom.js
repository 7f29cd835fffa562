// mcpapp host page: small DOM and formatting helpers every module uses.
"use strict";

export const $ = (selector) => document.querySelector(selector);

/** Creates `tag` with attributes (`text` and `class` are special) and children. */
export function el(tag, attrs, children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) {
      continue;
    }
    if (key === "text") {
      node.textContent = value;
    } else if (key === "class") {
      node.className = value;
    } else {
      node.setAttribute(key, value === true ? "" : value);
    }
  }
  for (const child of children || []) {
    if (child !== null && child !== undefined && child !== false) {
      node.appendChild(typeof child === "string" ? document.createTextNode(child) : child);
    }
  }
  return node;
}

/** `prefix` and 32 random hex digits. */
export function randomId(prefix) {
  const bytes = new Uint8Array(16);
  crypto.getRandomValues(bytes);
  return prefix + Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
}

/** JSON (or JSON text) indented for reading; other text as it is. */
export function pretty(value) {
  if (typeof value === "string") {
    try {
      return JSON.stringify(JSON.parse(value), null, 2);
    } catch (_) {
      return value;
    }
  }
  return JSON.stringify(value, null, 2);
}
