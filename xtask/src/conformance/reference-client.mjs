// The known-good client for the conformance suite's client scenarios: the TypeScript SDK's
// own Client and Streamable HTTP transport doing what `conformance-client` does through the
// gateway (same tools, same arguments), so the report can set the gateway beside it.
// `cargo xtask conformance` writes this file into the kit's folder, where the SDK is
// installed, and the suite runs it as `node reference-client.mjs URL` with the scenario in
// MCP_CONFORMANCE_SCENARIO. It prints the tool result as JSON and exits 0 unless it is an error.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ElicitRequestSchema } from '@modelcontextprotocol/sdk/types.js';

const calls = {
  initialize: null,
  tools_call: ['add_numbers', { a: 5, b: 3 }],
  'elicitation-sep1034-client-defaults': ['test_client_elicitation_defaults', {}],
  'sse-retry': ['test_reconnection', {}],
};
const scenario = process.env.MCP_CONFORMANCE_SCENARIO;
if (!(scenario in calls)) {
  console.error(`reference-client: unknown scenario ${scenario}`);
  process.exit(2);
}
const client = new Client(
  { name: 'sdk-reference-client', version: '1.0.0' },
  // applyDefaults: the SDK fills omitted fields of an accepted form from the schema's defaults.
  { capabilities: { elicitation: { form: { applyDefaults: true } } } },
);
client.setRequestHandler(ElicitRequestSchema, async () => ({ action: 'accept', content: {} }));
await client.connect(new StreamableHTTPClientTransport(new URL(process.argv.at(-1))));
let ok = true;
const call = calls[scenario];
if (call) {
  const result = await client.callTool({ name: call[0], arguments: call[1] });
  ok = !result.isError;
  console.log(JSON.stringify(result));
}
await client.close();
process.exit(ok ? 0 : 1);
