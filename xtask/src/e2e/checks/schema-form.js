// Run by cargo xtask e2e in the host page (a WebDriver async script: the last argument is the
// callback). It opens an elicitation card with the page's own module, as an elicitation would,
// for the schema in arguments[0] (mode in arguments[1], URL in arguments[2]), and keeps what
// the card submits in window.__e2eAnswers[id] so the test can read it after clicking.
const done = arguments[arguments.length - 1];
const [schema, mode, url, id] = arguments;
import('/assets/elicitation.js').then((module) => {
  window.__e2eAnswers = window.__e2eAnswers || {};
  const params = mode === 'url'
    ? { mode: 'url', message: 'Sign in to continue', url, elicitationId: id }
    : { mode: 'form', message: 'Every kind of field', requestedSchema: schema };
  module.openElicitation({
    id,
    appId: 'e2e',
    appName: 'The e2e test',
    origin: 'in a test',
    params,
    submit: async (answer) => { window.__e2eAnswers[id] = answer; },
  });
  done(true);
}, (err) => done('import failed: ' + err.message));
