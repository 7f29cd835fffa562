// mcpapp host page: the light and dark themes, remembered in localStorage, and the style
// variables handed to views.
"use strict";

import { $ } from "./dom.js";
import { state } from "./state.js";

export const THEME_KEY = "mcpapp.theme";

/** Style variables handed to views; colours follow the view's colour scheme. */
export const STYLE_VARIABLES = {
  "--color-background-primary": "light-dark(#ffffff, #161a21)",
  "--color-background-secondary": "light-dark(#f3f5f8, #1e232b)",
  "--color-text-primary": "light-dark(#1b2230, #e6e9ef)",
  "--color-text-secondary": "light-dark(#5a6373, #a4acba)",
  "--color-border-primary": "light-dark(#d4d9e1, #343b47)",
  "--color-ring-primary": "light-dark(#2f6fe0, #7aa7ff)",
  "--font-sans": "system-ui, -apple-system, \"Segoe UI\", Roboto, sans-serif",
  "--font-mono": "ui-monospace, \"SFMono-Regular\", Menlo, Consolas, monospace",
  "--border-radius-sm": "4px",
  "--border-radius-md": "8px",
  "--border-radius-lg": "12px",
};

/** The saved theme, else the system's preference. */
export function initialTheme() {
  const saved = localStorage.getItem(THEME_KEY);
  if (saved === "light" || saved === "dark") {
    return saved;
  }
  return window.matchMedia && window.matchMedia("(prefers-color-scheme: dark)").matches ? "dark" : "light";
}

/** Applies `theme` to the page and every open view. */
export function applyTheme(theme) {
  state.theme = theme;
  document.documentElement.dataset.theme = theme;
  const button = $("#theme-toggle");
  button.setAttribute("aria-pressed", String(theme === "dark"));
  button.textContent = theme === "dark" ? "Light theme" : "Dark theme";
  for (const view of state.views) {
    view.setTheme(theme);
  }
}

/** The theme toggle. */
export function wireTheme() {
  $("#theme-toggle").addEventListener("click", () => {
    const theme = state.theme === "dark" ? "light" : "dark";
    localStorage.setItem(THEME_KEY, theme);
    applyTheme(theme);
  });
}
