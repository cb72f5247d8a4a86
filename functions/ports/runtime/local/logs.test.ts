import { closeSync, mkdtempSync, readFileSync, rmSync, statSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, test } from '@jest/globals';
import type { LogQuery, RuntimeTarget } from '../port.js';
import {
  APP_STARTS_KEPT,
  BUILDS_KEPT,
  buildLogPath,
  logEnd,
  logPath,
  MAX_APP_LOG_BYTES,
  MAX_BUILD_LOG_BYTES,
  openLog,
  readLogs,
} from './logs.js';
import type { LocalRuntime } from './state.js';

/*
 * Logs keep history: an app's log keeps its last 5 processes and its last 3 builds'
 * logs, each under its marker line, bounded in size, and a read's tail goes across them. Real files in a
 * temp dir, written as the runtime writes them (`openLog`, then the output).
 */

const root = mkdtempSync(join(tmpdir(), 'local-logs-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

let pr = 0;
function fixture() {
  const rt = { root, secretValues: new Map(), hiddenPaths: [] } as unknown as LocalRuntime;
  const n = ++pr;
  const target: RuntimeTarget = {
    orgId: 'org-logs',
    envKey: `acme/shop#${n}`,
    repoFullName: 'acme/shop',
    prNumber: n,
    generation: 1,
  };
  return { rt, target };
}

/** What the runtime does at a process start: a header, then the process's output. */
function start(
  rt: LocalRuntime,
  t: RuntimeTarget,
  i: number,
  output = `process ${i} line 1\nprocess ${i} line 2\n`,
) {
  const fd = openLog(rt, t, 'web', `start sha${i} on port 4000${i}`);
  writeSync(fd, output);
  closeSync(fd);
}
/** What the runtime does at a build: a marker in the app's log, then a new build log. */
function build(rt: LocalRuntime, t: RuntimeTarget, i: number, output = `compiling ${i}\n`) {
  closeSync(openLog(rt, t, 'web', `build sha${i} (generation ${i}): output in web.build.log`));
  const fd = openLog(rt, t, 'web', `build sha${i} (generation ${i})`, 'build');
  writeSync(fd, output);
  closeSync(fd);
}
const query = (source: LogQuery['source'], tailLines = 10_000): LogQuery => ({
  source,
  tailLines,
  maxBytes: 1024 * 1024,
});
const headers = (text: string, kind: string) =>
  text.split('\n').filter((l) => new RegExp(`^--- \\S+ ${kind} `).test(l));

describe('the local runtime keeps log history', () => {
  test(`an app's log keeps its last ${APP_STARTS_KEPT} processes, a start header before each`, async () => {
    const { rt, target } = fixture();
    for (let i = 1; i <= 7; i++) start(rt, target, i);
    const read = await readLogs(rt, target, 'web', query('app'));
    expect(headers(read!.text, 'start').map((h) => h.replace(/^--- \S+ /, ''))).toEqual(
      [3, 4, 5, 6, 7].map((i) => `start sha${i} on port 4000${i} ---`),
    );
    expect(read!.text).not.toContain('process 2');
    expect(read!.text.endsWith('process 7 line 1\nprocess 7 line 2\n')).toBe(true);
    // The file itself holds no more.
    expect(headers(readFileSync(logPath(rt, target, 'web'), 'utf8'), 'start')).toHaveLength(APP_STARTS_KEPT);
  });

  test('--tail reads across processes: the end of the one before, its marker, the latest', async () => {
    const { rt, target } = fixture();
    start(rt, target, 1, 'first booting\nfirst crashed: Error: boom\n');
    start(rt, target, 2, 'second booting\n');
    const read = await readLogs(rt, target, 'web', query('app', 3));
    expect(read).toEqual({
      text: expect.stringMatching(
        /^first crashed: Error: boom\n--- \S+ start sha2 on port 40002 ---\nsecond booting\n$/,
      ),
      truncated: true,
    });
    // A failure's cause is still searched in the latest process only.
    expect(logEnd(rt, target, 'web', 'app')).toBe('second booting\n');
  });

  test(`builds: the last ${BUILDS_KEPT} logs, oldest first, each under its header; the latest is the cause's`, async () => {
    const { rt, target } = fixture();
    for (let i = 1; i <= 4; i++) build(rt, target, i);
    const read = await readLogs(rt, target, 'web', query('build'));
    expect(read!.text).toMatch(
      /^--- \S+ build sha2 \(generation 2\) ---\ncompiling 2\n--- \S+ build sha3 \(generation 3\) ---\ncompiling 3\n--- \S+ build sha4 \(generation 4\) ---\ncompiling 4\n$/,
    );
    expect(read!.truncated).toBe(false);
    expect((await readLogs(rt, target, 'web', query('build', 2)))!.text).toMatch(
      /^--- \S+ build sha4 \(generation 4\) ---\ncompiling 4\n$/,
    );
    expect(logEnd(rt, target, 'web', 'build')).toMatch(/compiling 4\n$/);
    expect(() => statSync(buildLogPath(rt, target, 'web', BUILDS_KEPT))).toThrow();
    // The app's log (markers only, never started) has no output to answer.
    expect(await readLogs(rt, target, 'web', query('app'))).toBeUndefined();
  });

  test('bounded in size: a long process is cut to its end at the next start, an old build when it moves back', async () => {
    const { rt, target } = fixture();
    const line = `${'x'.repeat(999)}\n`;
    start(rt, target, 1, line.repeat(Math.ceil(MAX_APP_LOG_BYTES / 1000) + 100));
    start(rt, target, 2);
    expect(statSync(logPath(rt, target, 'web')).size).toBeLessThanOrEqual(MAX_APP_LOG_BYTES + 1_000);
    expect(readFileSync(logPath(rt, target, 'web'), 'utf8')).toMatch(
      /\n--- \S+ start sha2 on port 40002 ---\nprocess 2 line 1\n/,
    );

    build(rt, target, 1, line.repeat(Math.ceil(MAX_BUILD_LOG_BYTES / 1000) + 100));
    build(rt, target, 2);
    expect(statSync(buildLogPath(rt, target, 'web', 1)).size).toBeLessThanOrEqual(MAX_BUILD_LOG_BYTES);
    const read = await readLogs(rt, target, 'web', query('build', 2));
    expect(read!.text).toMatch(/^--- \S+ build sha2 \(generation 2\) ---\ncompiling 2\n$/);
  });
});
