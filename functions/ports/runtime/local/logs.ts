import type { ChildProcess } from 'node:child_process';
import {
  closeSync,
  existsSync,
  mkdirSync,
  openSync,
  readSync,
  renameSync,
  rmSync,
  statSync,
  writeFileSync,
  writeSync,
} from 'node:fs';
import { join } from 'node:path';
import type { Readable } from 'node:stream';
import { log } from '../../../shared/log.js';
import { maskSecrets } from '../../../shared/masking/mask.js';
import { MaskingWriter } from '../../../shared/masking/mask-stream.js';
import type { LogQuery, LogSource, LogTarget, LogText, RuntimeTarget } from '../port.js';
import { envId, type LocalRuntime } from './state.js';
import { scrub } from './working-copies.js';

/*
 * The logs of the local runtime: per app, `<dataDir>/runtime/<org>/<owner>/<repo>/<pr>/logs/<app>.log`
 * (appended, a `--- … start … ---` header per process; the last `APP_STARTS_KEPT` processes kept) and
 * `<app>.build.log` (its latest build; the two before it in `<app>.build.1.log` and `<app>.build.2.log`,
 * each beginning with its `--- … build … ---` header). Output reaches them masked as it is written; what
 * is read back is masked again with the values the app was started with, and server paths replaced. A
 * read goes across the history: the app's processes, or its builds, oldest first.
 */

/** How many process starts an app's log keeps (the current one included). */
export const APP_STARTS_KEPT = 5;
/** How many builds' logs an app keeps (the latest included). */
export const BUILDS_KEPT = 3;
/** What an app's log is cut to (its end, whole lines) when a process starts. */
export const MAX_APP_LOG_BYTES = 4 * 1024 * 1024;
/** What an older build's log is cut to (its end, whole lines) when a new build begins. */
export const MAX_BUILD_LOG_BYTES = 1024 * 1024;

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

/** Where the output of an app's latest build is kept (`back`: of the one `back` builds before it). */
export function buildLogPath(rt: LocalRuntime, target: LogOwner, app: string, back = 0): string {
  return join(envDir(rt, target), 'logs', back ? `${app}.build.${back}.log` : `${app}.build.log`);
}

/** The build logs an app keeps, oldest first. */
const buildLogs = (rt: LocalRuntime, target: LogOwner, app: string) =>
  Array.from({ length: BUILDS_KEPT }, (_, i) => buildLogPath(rt, target, app, BUILDS_KEPT - 1 - i));

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
 * `app`: the output of the app's processes, the last `APP_STARTS_KEPT` of them, each after its start
 * header; `build`: its builds' logs, the last `BUILDS_KEPT`, oldest first, each under its header. The
 * last lines of that text (`query`), masked with the secret values this runtime started the app with
 * (none after a restart of the server: the caller masks the bundle), server paths replaced.
 */
export async function readLogs(
  rt: LocalRuntime,
  target: LogTarget,
  app: string,
  query: LogQuery,
): Promise<LogText | undefined> {
  const paths =
    query.source === 'build' ? buildLogs(rt, target, app) : [logOf(rt, target, app, query.source)];
  const read = readAcross(paths, query.maxBytes + LOG_READ_MARGIN);
  if (!read) return undefined;
  const text = read.text;
  let truncated = read.cut;
  // The whole log read and no start in it: the app was built, never started.
  if (query.source === 'app' && latestStart(text.split('\n')) < 0 && !read.cut) return undefined;
  const masked = scrub(rt, maskSecrets(text, secretsOf(rt, envId(target), app)));
  const lines = masked.split('\n');
  if (lines.at(-1) === '') lines.pop();
  if (lines.length > query.tailLines) truncated = true;
  const kept = lines.slice(-query.tailLines);
  return { text: kept.length ? `${kept.join('\n')}\n` : '', truncated };
}

/**
 * Open an app's log (appending) or a new build log, with a header. A process start (`what` begins with
 * `start `) first cuts the app's log to the processes kept before it; a build moves the older build logs
 * back one place (the oldest goes), each cut to `MAX_BUILD_LOG_BYTES`. A build still writing to the log
 * moved keeps writing there: its output stays with its header.
 */
export function openLog(
  rt: LocalRuntime,
  target: RuntimeTarget,
  app: string,
  what: string,
  kind: 'app' | 'build' = 'app',
): number {
  const path = logOf(rt, target, app, kind);
  mkdirSync(join(path, '..'), { recursive: true });
  if (kind === 'build') rotateBuildLogs(buildLogs(rt, target, app));
  else if (what.startsWith('start ')) trimAppLog(path);
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

/**
 * Wait for a process's output to be written, but not for ever (a daemon it started may keep the pipe).
 * The timer goes once the output is in: a pending one would hold a stopping server's event loop open.
 */
export async function drainedOrLater(drained: Promise<void>): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const later = new Promise<void>((resolve) => {
    timer = setTimeout(resolve, DRAIN_WAIT_MS);
  });
  try {
    await Promise.race([drained, later]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * Keep the last `APP_STARTS_KEPT - 1` processes of an app's log (a new one is about to start), at most
 * `MAX_APP_LOG_BYTES` of it. Rewritten in place: a process still writing appends (O_APPEND) after it.
 */
function trimAppLog(path: string) {
  if (!existsSync(path)) return;
  const { text, cut } = readTail(path, MAX_APP_LOG_BYTES);
  const lines = text.split('\n');
  const starts = lines.flatMap((l, i) => (START_HEADER.test(l) ? [i] : []));
  const from = starts.length >= APP_STARTS_KEPT ? starts[starts.length - (APP_STARTS_KEPT - 1)]! : 0;
  if (!cut && from === 0) return;
  writeFileSync(path, lines.slice(from).join('\n'), { mode: 0o600 });
}

/** Move each build log of `paths` (oldest first) one place older; the oldest goes. Each is capped. */
function rotateBuildLogs(paths: string[]) {
  rmSync(paths[0]!, { force: true });
  for (let i = 1; i < paths.length; i++) {
    if (!existsSync(paths[i]!)) continue;
    renameSync(paths[i]!, paths[i - 1]!);
    const { text, cut } = readTail(paths[i - 1]!, MAX_BUILD_LOG_BYTES);
    if (cut) writeFileSync(paths[i - 1]!, text, { mode: 0o600 });
  }
}

/**
 * The last `bytes` of the files `paths` (oldest first) read as one text, the files that do not exist left
 * out; undefined when none does. `cut` when anything before the text was left out.
 */
function readAcross(paths: string[], bytes: number): { text: string; cut: boolean } | undefined {
  const parts: string[] = [];
  let budget = bytes;
  let cut = false;
  let found = false;
  for (const path of [...paths].reverse()) {
    if (!existsSync(path)) continue;
    if (budget <= 0) {
      cut = true;
      break;
    }
    found = true;
    const read = readTail(path, budget);
    parts.unshift(read.text.endsWith('\n') || read.text === '' ? read.text : `${read.text}\n`);
    budget -= Buffer.byteLength(read.text);
    if (read.cut) {
      cut = true;
      break;
    }
  }
  return found ? { text: parts.join(''), cut } : undefined;
}

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
