import type { ChildProcess } from 'node:child_process';
import {
  closeSync,
  existsSync,
  mkdirSync,
  openSync,
  readSync,
  statSync,
  writeFileSync,
  writeSync,
} from 'node:fs';
import { join } from 'node:path';
import type { Readable } from 'node:stream';
import { log } from '../../../shared/log.js';
import { maskSecrets } from '../../../shared/mask.js';
import { MaskingWriter } from '../../../shared/mask-stream.js';
import type { LogQuery, LogSource, LogTarget, LogText, RuntimeTarget } from '../port.js';
import { envId, type LocalRuntime, sleep } from './state.js';
import { scrub } from './working-copies.js';

/*
 * The logs of the local runtime: per app, `<dataDir>/runtime/<org>/<owner>/<repo>/<pr>/logs/<app>.log`
 * (appended, a `--- … start … ---` header per process) and `<app>.build.log` (its latest build, rewritten
 * per build). Output reaches them masked as it is written; what is read back is masked again with the
 * values the app was started with, and server paths replaced.
 */

const LOG_TAIL_BYTES = 2_000;
/** How much of the end of a failed build's or process's output is searched for its cause. */
const CAUSE_SEARCH_BYTES = 64 * 1024;
/** Read beyond a log query's `maxBytes`: masking changes lengths, the caller cuts exactly. */
const LOG_READ_MARGIN = 64 * 1024;
/** The header a process start writes into its app's log (`openLog`): its output follows. */
const START_HEADER = /^--- \S+ start .* ---$/;
/** How long after a process exits its output may still be arriving (a child it left holds the pipe). */
const DRAIN_WAIT_MS = 2_000;

type LogOwner = Pick<RuntimeTarget, 'orgId' | 'envKey'>;

/** Where an app's log is kept. */
export function logPath(rt: LocalRuntime, target: LogOwner, app: string): string {
  return join(envDir(rt, target), 'logs', `${app}.log`);
}

/** Where the output of an app's latest build is kept. */
export function buildLogPath(rt: LocalRuntime, target: LogOwner, app: string): string {
  return join(envDir(rt, target), 'logs', `${app}.build.log`);
}

/** An app's log (`app`) or its latest build's (`build`). */
const logOf = (rt: LocalRuntime, target: LogOwner, app: string, kind: LogSource) =>
  kind === 'build' ? buildLogPath(rt, target, app) : logPath(rt, target, app);

function envDir(rt: LocalRuntime, target: LogOwner): string {
  return join(rt.root, ...envId(target).split('/'));
}

/** The secret values an app was started with (none after a restart of the server). */
export const secretsOf = (rt: LocalRuntime, id: string, app: string) =>
  rt.secretValues.get(`${id}/${app}`) ?? [];

/** The index of the last process start header in an app log's `lines` (-1: none). */
const latestStart = (lines: string[]) => lines.findLastIndex((l) => START_HEADER.test(l));

/**
 * `app`: the output of the app's latest process (from its log's last start header); `build`: its latest
 * build's log. Masked with the secret values this runtime started the app with (none after a restart
 * of the server: the caller masks the bundle), server paths replaced.
 */
export async function readLogs(
  rt: LocalRuntime,
  target: LogTarget,
  app: string,
  query: LogQuery,
): Promise<LogText | undefined> {
  const path = logOf(rt, target, app, query.source);
  if (!existsSync(path)) return undefined;
  const read = readTail(path, query.maxBytes + LOG_READ_MARGIN);
  let text = read.text;
  let truncated = read.cut;
  if (query.source === 'app') {
    const lines = text.split('\n');
    const start = latestStart(lines);
    // The whole log read and no start in it: the app was built, never started.
    if (start < 0 && !read.cut) return undefined;
    if (start >= 0) {
      text = lines.slice(start + 1).join('\n');
      truncated = false;
    }
  }
  const masked = scrub(rt, maskSecrets(text, secretsOf(rt, envId(target), app)));
  const lines = masked.split('\n');
  if (lines.at(-1) === '') lines.pop();
  if (lines.length > query.tailLines) truncated = true;
  const kept = lines.slice(-query.tailLines);
  return { text: kept.length ? `${kept.join('\n')}\n` : '', truncated };
}

/** Open an app's log (appending) or its build log (rewritten: the latest build only), with a header. */
export function openLog(
  rt: LocalRuntime,
  target: RuntimeTarget,
  app: string,
  what: string,
  kind: 'app' | 'build' = 'app',
): number {
  const path = logOf(rt, target, app, kind);
  mkdirSync(join(path, '..'), { recursive: true });
  const fd = openSync(path, kind === 'build' ? 'w' : 'a', 0o600);
  writeFileSync(fd, `--- ${new Date().toISOString()} ${what} ---\n`);
  return fd;
}

/**
 * The end of an app's log or build log (the last `bytes`), secret values masked. An app may print its
 * own secrets (a stack trace with a connection string, a PEM key): never quote them. Masked before
 * anything splits the text, so a multi-line value is caught whole.
 */
export function logEnd(
  rt: LocalRuntime,
  target: RuntimeTarget,
  app: string,
  kind: 'app' | 'build',
  bytes = CAUSE_SEARCH_BYTES,
) {
  const path = logOf(rt, target, app, kind);
  if (!existsSync(path)) return '';
  let { text } = readTail(path, bytes);
  if (kind === 'app') {
    // The latest process only.
    const lines = text.split('\n');
    const start = latestStart(lines);
    if (start >= 0) text = lines.slice(start + 1).join('\n');
  }
  return maskSecrets(text, secretsOf(rt, envId(target), app));
}

/** The end of an app's log, on one line, for an error message. */
export function logTail(rt: LocalRuntime, target: RuntimeTarget, app: string, kind: 'app' | 'build'): string {
  const masked = logEnd(rt, target, app, kind, LOG_TAIL_BYTES);
  const lines = masked.split('\n').filter((l) => l.trim() && !l.startsWith('--- '));
  return lines.slice(-5).join(' | ').slice(-500) || '(no output)';
}

/**
 * Copy a child's stdout and stderr into `fd` through a `MaskingWriter`, and close `fd` once both end (or
 * the child could not start). Writes are synchronous and in arrival order, as the file's own would be.
 */
export function maskedOutput(
  child: ChildProcess,
  fd: number,
  secrets: string[],
): { drained: Promise<void>; lastOutputAt: () => number } {
  let last = Date.now();
  const writer = new MaskingWriter(secrets, (text) => {
    try {
      writeSync(fd, text);
    } catch (err) {
      log.error('could not write to a log file', { code: (err as NodeJS.ErrnoException).code ?? 'error' });
    }
  });
  const streams = [child.stdout, child.stderr].filter((s): s is Readable => s !== null);
  const drained = new Promise<void>((resolve) => {
    let open = streams.length;
    const done = () => {
      if (--open > 0) return;
      writer.end();
      closeSync(fd);
      resolve();
    };
    if (open === 0) {
      open = 1;
      done();
      return;
    }
    streams.forEach((stream, i) => {
      stream.on('data', (chunk: Buffer) => {
        last = Date.now();
        writer.push(chunk, String(i));
      });
      stream.once('close', done);
    });
  });
  return { drained, lastOutputAt: () => last };
}

/** Wait for a process's output to be written, but not for ever (a daemon it started may keep the pipe). */
export const drainedOrLater = (drained: Promise<void>) => Promise.race([drained, sleep(DRAIN_WAIT_MS)]);

/**
 * The last `bytes` of a file as text; `cut` when the file is longer. Read from mid-file, the first line
 * may be a fragment (of a secret, say): it is dropped.
 */
function readTail(path: string, bytes: number): { text: string; cut: boolean } {
  const size = statSync(path).size;
  const fd = openSync(path, 'r');
  const buf = Buffer.alloc(Math.min(size, bytes));
  try {
    readSyncAt(fd, buf, size - buf.length);
  } finally {
    closeSync(fd);
  }
  const raw = buf.toString('utf8');
  const cut = size > buf.length;
  return { text: cut ? raw.slice(raw.indexOf('\n') + 1) : raw, cut };
}

function readSyncAt(fd: number, buf: Buffer, position: number) {
  // readFileSync cannot start mid-file; readSync with a position can.
  let done = 0;
  while (done < buf.length) {
    const n = readSync(fd, buf, done, buf.length - done, position + done);
    if (n === 0) break;
    done += n;
  }
}
