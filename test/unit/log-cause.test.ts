import { describe, expect, test } from '@jest/globals';
import { capLog, MAX_LOG_BYTES, TRUNCATED_NOTICE } from '../../functions/core/logs.js';
import { failureMessage, leadingCause, logsPath } from '../../functions/ports/runtime/log-cause.js';

/** What Node 20 prints for `require('./missing-config.json')` (the case of issue 15). */
const NODE_MISSING_MODULE = `reading config
node:internal/modules/cjs/loader:1228
  throw err;
  ^

Error: Cannot find module './missing-config.json'
Require stack:
- /work/acme/shop/build.js
    at Module._resolveFilename (node:internal/modules/cjs/loader:1225:15)
    at Module._load (node:internal/modules/cjs/loader:1051:27)
    at Module.require (node:internal/modules/cjs/loader:1311:19)
    at require (node:internal/modules/helpers:179:18)
    at Object.<anonymous> (/work/acme/shop/build.js:2:16) {
  code: 'MODULE_NOT_FOUND',
  requireStack: [ '/work/acme/shop/build.js' ]
}

Node.js v20.20.2
`;

describe('leadingCause', () => {
  test.each([
    [
      'a Node crash (CommonJS): the Error line, not the footer',
      NODE_MISSING_MODULE,
      "Error: Cannot find module './missing-config.json'",
    ],
    [
      'a Node crash (ESM), with its code in brackets',
      "node:internal/errors:496\n    ErrorCaptureStackTrace(err);\n    ^\n\nError [ERR_MODULE_NOT_FOUND]: Cannot find package 'express' imported from /app/server.mjs\n    at new NodeError (node:internal/errors:405:5) {\n  code: 'ERR_MODULE_NOT_FOUND'\n}\n\nNode.js v20.20.2",
      "Error [ERR_MODULE_NOT_FOUND]: Cannot find package 'express' imported from /app/server.mjs",
    ],
    [
      'a Python traceback: the exception line that ends it',
      'Starting\nTraceback (most recent call last):\n  File "/app/main.py", line 3, in <module>\n    import flask\nModuleNotFoundError: No module named \'flask\'\n',
      "ModuleNotFoundError: No module named 'flask'",
    ],
    [
      'npm: the real error before its ERR! lines',
      "> build\n> tsc\n\nsrc/index.ts(3,7): error TS2322: Type 'string' is not assignable to type 'number'.\nnpm ERR! code 2\nnpm ERR! A complete log of this run can be found in: /root/.npm/_logs/x.log\n",
      "src/index.ts(3,7): error TS2322: Type 'string' is not assignable to type 'number'.",
    ],
    [
      'git',
      "Cloning…\nfatal: repository 'https://x/y' not found\n",
      "fatal: repository 'https://x/y' not found",
    ],
    [
      'a Go panic',
      'listening\npanic: runtime error: index out of range [3] with length 2\n\ngoroutine 1 [running]:',
      'panic: runtime error: index out of range [3] with length 2',
    ],
    ['a shell', 'sh: 1: yarn: not found\n', 'sh: 1: yarn: not found'],
    ['ANSI colours removed', '\u001b[31mError: boom\u001b[39m\n', 'Error: boom'],
    [
      'a strong sign wins over an earlier weak one',
      'npm ERR! x\nTypeError: y is not a function\n',
      'TypeError: y is not a function',
    ],
  ])('%s', (_name, output, cause) => {
    expect(leadingCause(output)).toBe(cause);
  });

  test('nothing error-looking: undefined; the runtime headers are not causes', () => {
    expect(leadingCause('--- 2026-01-01T00:00:00.000Z build abc (generation 1) ---\nboom - left-pad\n')).toBe(
      undefined,
    );
    expect(leadingCause('')).toBeUndefined();
  });

  test('a long cause is capped', () => {
    const cause = leadingCause(`Error: ${'x'.repeat(1000)}`)!;
    expect(cause.length).toBe(300);
    expect(cause.endsWith('…')).toBe(true);
  });
});

describe('failureMessage', () => {
  const where = { target: { repoFullName: 'acme/shop', prNumber: 7 }, app: 'web', source: 'build' as const };
  test('leads with the cause, then what failed, then where the full log is', () => {
    expect(
      failureMessage('app web: build `node build.js` failed (exit code 1)', NODE_MISSING_MODULE, 'x', where),
    ).toBe(
      "Error: Cannot find module './missing-config.json' (app web: build `node build.js` failed (exit code 1)); " +
        'full log: GET /v1/preview/environments/acme/shop/7/apps/web/logs?source=build',
    );
  });
  test('no cause: what failed, the last lines, where the full log is', () => {
    expect(failureMessage('app web exited (exit code 1)', 'bye\n', 'bye', { ...where, source: 'app' })).toBe(
      'app web exited (exit code 1); last output: bye; full log: GET /v1/preview/environments/acme/shop/7/apps/web/logs',
    );
  });
  test('logsPath', () => {
    expect(logsPath({ repoFullName: 'a/b', prNumber: 0 }, 'api', 'app')).toBe(
      '/v1/preview/environments/a/b/0/apps/api/logs',
    );
  });
});

describe('capLog', () => {
  test('the last `tail` lines; under the cap nothing else changes', () => {
    expect(capLog('a\nb\nc\n', 2)).toBe('b\nc\n');
    expect(capLog('a\nb', 5)).toBe('a\nb\n');
    expect(capLog('', 5)).toBe('');
  });
  test('over 1 MB: whole lines from the end under the notice, at most 1 MB in all', () => {
    const line = 'y'.repeat(999);
    const text = Array.from({ length: 2000 }, (_, i) => `${i} ${line}`).join('\n');
    const out = capLog(text, 10_000);
    expect(Buffer.byteLength(out)).toBeLessThanOrEqual(MAX_LOG_BYTES);
    const lines = out.split('\n');
    expect(lines[0]).toBe(TRUNCATED_NOTICE);
    expect(lines[1]).toMatch(/^\d+ y{999}$/);
    expect(lines.at(-2)).toBe(`1999 ${line}`);
  });
  test('one line longer than the cap keeps its end, multi-byte characters intact', () => {
    const out = capLog(`${'é'.repeat(MAX_LOG_BYTES)}END`, 10);
    expect(Buffer.byteLength(out)).toBeLessThanOrEqual(MAX_LOG_BYTES);
    expect(out.startsWith(`${TRUNCATED_NOTICE}\né`)).toBe(true);
    expect(out.endsWith('END\n')).toBe(true);
    expect(out).not.toContain('\uFFFD');
  });
});
