// mcpapp host page: what the page knows about each app's tools, read from GET /apps/{id} and
// cached until the app's lifecycle or tool count changes: the detail of an app, and the index
// from registered (agent) tool names to app and tool.
"use strict";

import { api } from "./api.js";
import { state } from "./state.js";

/** The detail of an app (`GET /apps/{id}`), cached; a failed read is forgotten. */
export async function appDetail(appId) {
  if (!state.details.has(appId)) {
    const promise = api("GET", "/apps/" + encodeURIComponent(appId)).catch((err) => {
      state.details.delete(appId);
      throw err;
    });
    state.details.set(appId, promise);
  }
  return state.details.get(appId);
}

/** registeredName → {appId, appName, tool}, from every running app's detail. */
export async function rebuildToolIndex() {
  const index = new Map();
  await Promise.all(
    state.apps
      .filter((app) => app.id && app.lifecycle === "Running")
      .map(async (app) => {
        try {
          const detail = await appDetail(app.id);
          for (const tool of detail.tools || []) {
            if (tool.registeredName) {
              index.set(tool.registeredName, { appId: app.id, appName: app.name, tool });
            }
          }
        } catch (_) {
          // The app may just have stopped; the next refresh tries again.
        }
      }),
  );
  state.toolIndex = index;
  return index;
}

/** The registered (agent) name of an app's tool, if the agent has it. */
export function findRegistered(appId, toolName) {
  for (const [registered, entry] of state.toolIndex) {
    if (entry.appId === appId && entry.tool.name === toolName) {
      return registered;
    }
  }
  return null;
}
