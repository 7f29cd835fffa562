// The AppBridge test host of `cargo xtask e2e`: a minimal MCP Apps host page built on the
// official ext-apps AppBridge and the TypeScript MCP client, with the gateway's aggregated
// `/mcp` as its one MCP server. The check drives it through `window.appbridgeHost`:
// `open({mcpUrl, token, sandboxUrl, tool})` connects (declaring the MCP Apps extension), lists
// the tools, calls `tool`, reads its UI resource through the URI `/mcp` advertises and renders
// the view in a sandbox proxy on another origin; `state()` says how far it got. AppBridge,
// given the client, forwards the view's own requests (`tools/call`, `resources/read`, ...) to
// it, so to `/mcp`: this file has no handler of its own for them.
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import {
  AppBridge,
  PostMessageTransport,
  RESOURCE_MIME_TYPE,
  getToolUiResourceUri,
} from "@modelcontextprotocol/ext-apps/app-bridge";

const UI_EXTENSION = "io.modelcontextprotocol/ui";
const HOST_INFO = { name: "mcpapp-e2e-appbridge-host", version: "0.1.0" };

// What the check reads back: how far the host got and what it saw.
const state = {
  step: "loaded",
  error: null,
  toolCount: 0,
  resourceUri: null,
  mimeType: null,
  toolResultText: null,
  viewInitialized: false,
};

function setStep(step) {
  state.step = step;
  document.getElementById("status").textContent = step;
}

// Resolves with the first `ui/notifications/sandbox-proxy-ready` the proxy frame posts (checked
// by source and origin, so no other frame can stand in for it).
function proxyReady(frame, sandboxOrigin) {
  return new Promise((resolve) => {
    const listener = (event) => {
      if (
        event.source === frame.contentWindow &&
        event.origin === sandboxOrigin &&
        event.data?.method === "ui/notifications/sandbox-proxy-ready"
      ) {
        window.removeEventListener("message", listener);
        resolve();
      }
    };
    window.addEventListener("message", listener);
  });
}

async function open({ mcpUrl, token, sandboxUrl, tool }) {
  setStep("connecting");
  const client = new Client(HOST_INFO, {
    capabilities: { extensions: { [UI_EXTENSION]: { mimeTypes: [RESOURCE_MIME_TYPE] } } },
  });
  const transport = new StreamableHTTPClientTransport(new URL(mcpUrl), {
    requestInit: { headers: { Authorization: `Bearer ${token}` } },
  });
  await client.connect(transport);

  setStep("listing tools");
  const { tools } = await client.listTools();
  state.toolCount = tools.length;
  const definition = tools.find((t) => t.name === tool);
  if (!definition) {
    throw new Error(`/mcp lists no tool ${tool}`);
  }
  const uri = getToolUiResourceUri(definition);
  if (!uri) {
    throw new Error(`${tool} names no UI resource`);
  }
  state.resourceUri = uri;

  // The call and the resource read run side by side, as a host does while the view loads.
  setStep("calling the tool");
  const args = {};
  const result = client.callTool({ name: tool, arguments: args });
  const resource = await client.readResource({ uri });
  const content = resource.contents.find((c) => c.uri === uri) ?? resource.contents[0];
  if (!content || typeof content.text !== "string") {
    throw new Error(`${uri} has no HTML text`);
  }
  state.mimeType = content.mimeType ?? null;
  const ui = content._meta?.ui ?? {};

  setStep("loading the sandbox");
  const sandboxOrigin = new URL(sandboxUrl).origin;
  const frame = document.createElement("iframe");
  frame.id = "view";
  frame.setAttribute("sandbox", "allow-scripts allow-same-origin allow-forms");
  const ready = proxyReady(frame, sandboxOrigin);
  frame.src = sandboxUrl;
  document.getElementById("slot").appendChild(frame);
  await ready;

  const bridge = new AppBridge(
    client,
    HOST_INFO,
    { openLinks: {}, serverTools: {}, serverResources: {}, logging: {} },
    { hostContext: { theme: "light", platform: "web", displayMode: "inline" } },
  );
  const initialized = new Promise((resolve) => bridge.addEventListener("initialized", resolve));
  await bridge.connect(new PostMessageTransport(frame.contentWindow, frame.contentWindow));
  await bridge.sendSandboxResourceReady({
    html: content.text,
    csp: ui.csp,
    permissions: ui.permissions,
  });

  setStep("initialising the view");
  await initialized;
  state.viewInitialized = true;
  await bridge.sendToolInput({ arguments: args });
  const outcome = await result;
  state.toolResultText = outcome.content?.find((c) => c.type === "text")?.text ?? null;
  await bridge.sendToolResult(outcome);
  setStep("rendered");
}

window.appbridgeHost = {
  open(config) {
    return open(config).catch((err) => {
      state.error = String(err?.stack ?? err);
      setStep("failed");
    });
  },
  state: () => structuredClone(state),
};
setStep("ready");
