// Run by cargo xtask e2e inside the dashboard's view frame (a WebDriver async script: the
// last argument is the callback). It sends requests the dashboard never makes through the
// sandbox and hands back every answer, keyed by request id.
const done = arguments[arguments.length - 1];
const calls = [
  ['ping', {}],
  ['tools/list', {}],
  ['ui/request-display-mode', { mode: 'fullscreen' }],
  ['ui/open-link', { url: 'javascript:alert(1)' }],
  ['ui/update-model-context', { content: [{ type: 'text', text: 'first context' }] }],
  ['ui/update-model-context', { content: [{ type: 'text', text: 'Store 2 is selected' }],
    structuredContent: { storeId: 2 } }],
  ['no/such-method', {}],
];
const answers = {};
const expected = calls.length + 1;
window.addEventListener('message', (event) => {
  const m = event.data;
  if (event.source !== window.parent || !m || typeof m.id !== 'string' || !m.id.startsWith('e2e-')) {
    return;
  }
  answers[m.id] = m;
  if (Object.keys(answers).length === expected) {
    done(answers);
  }
});
calls.forEach(([method, params], i) =>
  window.parent.postMessage({ jsonrpc: '2.0', id: 'e2e-' + i, method, params }, '*'));
window.parent.postMessage({ jsonrpc: '2.0', id: 'e2e-bad' }, '*');
setTimeout(() => done(answers), 10000);
