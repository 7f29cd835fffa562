// mcpapp host page: HTTP apps behind OAuth. Each app's `authorization` (from GET /apps) shows
// as a line with its authorization server and "Connect" (the app waits for the user),
// "Grant more access" (the app asked for scopes its grant lacks) or "Disconnect" (revoke and
// delete its tokens). Connect asks POST /apps/{id}/authorize for the authorization URL and
// opens it in a new window; the authorization server sends that window back to the gateway's
// /oauth/callback, whose page tells this one over a BroadcastChannel on the gateway's origin
// and closes itself. The page never sees a token: only the URL, the issuer and scopes.
"use strict";

import { api } from "./api.js";
import { el } from "./dom.js";
import { toast } from "./notices.js";

/** The channel the callback page announces an outcome on (same origin only). */
const CHANNEL = "mcpapp-oauth";

/** Only a web URL is ever opened (the gateway checks too: https, or http on loopback). */
function isWebUrl(text) {
  try {
    const url = new URL(text);
    return url.protocol === "https:" || url.protocol === "http:";
  } catch (_) {
    return false;
  }
}

/** The line under an app that shows its authorization, with its buttons. */
export function authorizationLine() {
  const root = el("div", { class: "app-auth", hidden: true });
  const text = el("span", { class: "app-auth-text" });
  const connect = el("button", { type: "button", class: "small primary", "data-action": "connect", text: "Connect" });
  const disconnect = el("button", { type: "button", class: "small", "data-action": "disconnect", text: "Disconnect" });
  root.append(text, connect, disconnect);
  const line = { root, text, connect, disconnect, appId: null };
  connect.addEventListener("click", () => startConnect(line));
  disconnect.addEventListener("click", () => startDisconnect(line));
  return line;
}

/** Shows an app's `authorization` (null: the gateway does not authorize to it). */
export function showAuthorization(line, app) {
  const auth = app.authorization;
  line.appId = app.id;
  line.root.hidden = !auth || !app.id;
  if (line.root.hidden) {
    return;
  }
  const issuer = auth.issuer || "its authorization server";
  const scopes = (list) => (Array.isArray(list) && list.length ? " (" + list.join(" ") + ")" : "");
  let text = "";
  let connect = null;
  let connected = false;
  switch (auth.state) {
    case "needsAuthorization":
      text = (auth.reason === "notConnected" ? "Not connected to " : "Needs authorization again at ") + issuer;
      connect = "Connect";
      break;
    case "authorizing":
      text = "Waiting for sign-in at " + issuer;
      connect = "Connect";
      break;
    case "authorized":
    case "refreshing":
      connected = true;
      text = "Connected to " + issuer + scopes(auth.scopes);
      if (Array.isArray(auth.moreScope)) {
        text += "; asks for more access" + scopes(auth.moreScope);
        connect = "Grant more access";
      }
      break;
    case "failed":
      text = "Authorization failed: " + (auth.reason || "unknown reason");
      break;
    default:
      text = String(auth.state || "");
  }
  line.root.dataset.state = auth.state || "";
  line.text.textContent = text;
  line.connect.hidden = !connect;
  line.connect.textContent = connect || "Connect";
  line.connect.dataset.action = connect === "Grant more access" ? "grant" : "connect";
  line.disconnect.hidden = !connected;
}

async function startConnect(line) {
  const appId = line.appId;
  // A window opened in the click itself is not blocked as a popup; it goes to the URL once
  // the gateway has made one, and loses its link to this page first.
  const win = window.open("", "_blank");
  if (win) {
    win.opener = null;
  }
  line.connect.disabled = true;
  try {
    const answer = await api("POST", "/apps/" + encodeURIComponent(appId) + "/authorize");
    if (!isWebUrl(answer.url)) {
      throw new Error("the gateway gave no web URL to open");
    }
    if (win) {
      win.location.href = answer.url;
    } else {
      window.open(answer.url, "_blank", "noopener");
    }
    toast("Sign in at " + answer.issuer + " in the new window to connect " + appId + ".");
  } catch (err) {
    if (win) {
      win.close();
    }
    toast("Could not connect " + appId + ": " + err.message, "error");
  } finally {
    line.connect.disabled = false;
  }
}

async function startDisconnect(line) {
  const appId = line.appId;
  line.disconnect.disabled = true;
  try {
    await api("POST", "/apps/" + encodeURIComponent(appId) + "/disconnect");
    toast("Disconnected " + appId + ": its tokens are revoked and deleted.");
  } catch (err) {
    toast("Could not disconnect " + appId + ": " + err.message, "error");
  } finally {
    line.disconnect.disabled = false;
  }
}

/** Listens for the callback page's outcome; `refresh` reads the apps again. */
export function wireConnect(refresh) {
  if (typeof BroadcastChannel !== "function") {
    return;
  }
  const channel = new BroadcastChannel(CHANNEL);
  channel.addEventListener("message", (event) => {
    const note = event.data || {};
    if (note.type !== CHANNEL) {
      return;
    }
    toast(String(note.message || ""), note.ok ? "info" : "error");
    refresh();
  });
}
