// Run by cargo xtask e2e inside a fixture view's frame (a WebDriver async script: the last
// argument is the callback). It makes the view call tools through the host, as a view that
// polls would: arguments[0] is a list of [toolName, arguments]; the answers come back keyed
// by request id.
const done = arguments[arguments.length - 1];
const calls = arguments[0];
const answers = {};
window.addEventListener('message', (event) => {
  const m = event.data;
  if (event.source !== window.parent || !m || typeof m.id !== 'string' || !m.id.startsWith('e2e-call-')) {
    return;
  }
  answers[m.id] = m;
  if (Object.keys(answers).length === calls.length) {
    done(answers);
  }
});
calls.forEach(([name, args], i) =>
  window.parent.postMessage(
    { jsonrpc: '2.0', id: 'e2e-call-' + i, method: 'tools/call', params: { name, arguments: args } },
    '*',
  ));
setTimeout(() => done(answers), 15000);
