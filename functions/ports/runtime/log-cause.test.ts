import { describe, expect, test } from '@jest/globals';
import { capLog, MAX_LOG_BYTES, TRUNCATED_NOTICE } from '../../core/environments/logs.js';
import { CAUSE_WINDOW_LINES, failureMessage, leadingCause, logsCommand } from './log-cause.js';

/** What Node 20 prints for `require('./missing-config.json')` (a newcomer's first failed start). */
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

/** What npm 10 prints for `npm run build` where the app's folder has no package.json. */
const NPM_ENOENT = `npm error code ENOENT
npm error syscall open
npm error path /work/acme/shop/api/package.json
npm error errno -2
npm error enoent Could not read package.json: Error: ENOENT: no such file or directory, open '/work/acme/shop/api/package.json'
npm error enoent This is related to npm not being able to find a file.
npm error enoent
npm error A complete log of this run can be found in: /root/.npm/_logs/2026-11-26T15_43_13_682Z-debug-0.log
`;

/** `npm ci` without a lockfile: the message right after the code, then 80 lines of usage. */
const NPM_USAGE = `npm error code EUSAGE
npm error
npm error The \`npm ci\` command can only install with an existing package-lock.json or
npm error npm-shrinkwrap.json with lockfileVersion >= 1. Run an install with npm@5 or
npm error later to generate a package-lock.json file, then try again.
npm error
npm error Clean install a project
${Array.from({ length: 80 }, (_, i) => `npm error   --option-${i}\nnpm error     What option ${i} does, an error: not.`).join('\n')}
npm error Run "npm help ci" for more info
npm error A complete log of this run can be found in: /root/.npm/_logs/x-debug-0.log
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
    [
      "npm: the line that says why, not its code, errno, path or 'A complete log' boilerplate",
      NPM_ENOENT,
      "Could not read package.json: Error: ENOENT: no such file or directory, open '/work/acme/shop/api/package.json'",
    ],
    [
      'npm: the message after its code line, however long the usage text after it',
      NPM_USAGE,
      'The `npm ci` command can only install with an existing package-lock.json or | npm-shrinkwrap.json with lockfileVersion >= 1. Run an install with npm@5 or',
    ],
    [
      'two compiler errors in a row: both quoted',
      "src/a.ts(1,1): error TS2304: Cannot find name 'x'.\nsrc/b.ts(2,2): error TS2304: Cannot find name 'y'.\nsrc/c.ts(3,3): error TS2304: Cannot find name 'z'.\n",
      "src/a.ts(1,1): error TS2304: Cannot find name 'x'. | src/b.ts(2,2): error TS2304: Cannot find name 'y'.",
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

  test('the cause is near the end: an error the app logged long before it crashed is not quoted', () => {
    const early = 'Error: retrying the database connection\n';
    const chatter = Array.from({ length: CAUSE_WINDOW_LINES }, (_, i) => `request ${i} served`).join('\n');
    const crash =
      "\nTypeError: Cannot read properties of undefined (reading 'id')\n    at handler (/app/server.js:9:3)\n\nNode.js v20.20.2\n";
    expect(leadingCause(early + chatter + crash)).toBe(
      "TypeError: Cannot read properties of undefined (reading 'id')",
    );
    // Within the window, the first error still leads (the one the others follow from), the next beside it.
    expect(leadingCause(`${early}${crash}`)).toBe(
      "Error: retrying the database connection | TypeError: Cannot read properties of undefined (reading 'id')",
    );
  });

  test('a long cause is capped', () => {
    const cause = leadingCause(`Error: ${'x'.repeat(1000)}`)!;
    expect(cause.length).toBe(300);
    expect(cause.endsWith('…')).toBe(true);
  });
});

describe('failureMessage', () => {
  const where = { target: { repoFullName: 'acme/shop', prNumber: 7 }, app: 'web', source: 'build' as const };
  test('leads with the cause, then what failed, then the CLI command that prints the full log', () => {
    expect(
      failureMessage('app web: build `node build.js` failed (exit code 1)', NODE_MISSING_MODULE, 'x', where),
    ).toBe(
      "Error: Cannot find module './missing-config.json' (app web: build `node build.js` failed (exit code 1)); " +
        'full log: previewctl envs logs web --repo acme/shop --pr 7 --source build',
    );
  });
  test('no cause: what failed, the last lines, where the full log is', () => {
    expect(failureMessage('app web exited (exit code 1)', 'bye\n', 'bye', { ...where, source: 'app' })).toBe(
      'app web exited (exit code 1); last output: bye; full log: previewctl envs logs web --repo acme/shop --pr 7',
    );
  });
  test('logsCommand', () => {
    expect(logsCommand({ repoFullName: 'a/b', prNumber: 0 }, 'api', 'app')).toBe(
      'previewctl envs logs api --repo a/b --pr 0',
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
