// The sandbox proxy of the AppBridge test host: the outer of the two frames the MCP Apps spec
// asks a web host for, served from its own origin. It creates the inner frame, writes the
// view's HTML into it when the host sends `ui/notifications/sandbox-resource-ready`, and
// relays every other message both ways. Messages of the `ui/notifications/sandbox-` family are
// between host and proxy only and never reach the view.
"use strict";

(function () {
  const SANDBOX_PREFIX = "ui/notifications/sandbox-";
  const DEFAULT_FLAGS = "allow-scripts allow-same-origin allow-forms";

  // Framed by the host page or nothing: run at the top, this page would talk to itself.
  if (window.parent === window) {
    document.body.textContent = "The sandbox proxy runs only inside a host page.";
    return;
  }
  // The host's origin is pinned from the referrer: replies go to it and nowhere else.
  let hostOrigin;
  try {
    hostOrigin = new URL(document.referrer).origin;
  } catch (err) {
    document.body.textContent = "The sandbox proxy needs its host page's origin.";
    return;
  }

  const inner = document.createElement("iframe");
  inner.setAttribute("sandbox", DEFAULT_FLAGS);
  inner.title = "MCP App view";
  document.body.appendChild(inner);

  const isSandboxMessage = (data) =>
    data && typeof data.method === "string" && data.method.startsWith(SANDBOX_PREFIX);

  function load(params) {
    if (!params || typeof params.html !== "string") {
      return;
    }
    if (typeof params.sandbox === "string") {
      inner.setAttribute("sandbox", params.sandbox);
    }
    // Written into the inner frame's own document (same origin as this proxy, which the spec
    // requires of the view), so it inherits this page's Content-Security-Policy header.
    const doc = inner.contentDocument;
    doc.open();
    doc.write(params.html);
    doc.close();
  }

  window.addEventListener("message", (event) => {
    const data = event.data;
    if (event.source === window.parent) {
      if (event.origin !== hostOrigin) {
        return;
      }
      if (isSandboxMessage(data)) {
        if (data.method === SANDBOX_PREFIX + "resource-ready") {
          load(data.params);
        }
        return;
      }
      inner.contentWindow.postMessage(data, window.location.origin);
    } else if (event.source === inner.contentWindow) {
      if (event.origin !== window.location.origin || isSandboxMessage(data)) {
        return;
      }
      window.parent.postMessage(data, hostOrigin);
    }
  });

  window.parent.postMessage(
    { jsonrpc: "2.0", method: SANDBOX_PREFIX + "proxy-ready", params: {} },
    hostOrigin,
  );
})();
