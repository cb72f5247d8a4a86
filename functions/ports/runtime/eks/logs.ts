/**
 * The apps' output on the cluster: the `AppLogs` role for `source: 'app'` (their pods' logs), and a failed
 * pod's cause read from its log (`failureCause`, for the rollout watch). What the app-logs route gets
 * from the registry with the build logs beside it (registry/runtime/app-logs.ts), so its bundle carries
 * the connection and this file, not the deploy, the fences, the rollout watch or the Lambda invoker.
 */
import type { V1Secret } from '@kubernetes/client-node';
import { log } from '../../../shared/log.js';
import { maskSecrets } from '../../../shared/masking/mask.js';
import { failureMessage } from '../log-cause.js';
import type { AppLogs, LogQuery, LogTarget, LogText, RuntimeTarget } from '../port.js';
import { isCode, KubeError } from './client.js';
import type { EksConnection } from './connection.js';
import { appLabels, LABELS, namespaceName, objectName, stamp } from './objects.js';
import { podSummary } from './rollout.js';

const LOG_TAIL_LINES = 20;
const LOG_TAIL_CHARS = 1500;
/** How many of a failed pod's last log lines are searched for its cause. */
const CAUSE_SEARCH_LINES = 200;
/** What is kept of an app's output when its environment fails: its pods' last lines, at most this much. */
export const KEPT_OUTPUT_LINES = 500;
export const KEPT_OUTPUT_BYTES = 64 * 1024;
/** The key of the kept output in its Secret. */
const KEPT_OUTPUT_KEY = 'output';

/** The Secret in the environment's namespace that keeps an app's last output once the environment failed. */
export const keptOutputName = (app: string) => `${objectName(app)}-last-output`;

export class EksLogs implements AppLogs {
  constructor(private readonly conn: EksConnection) {}

  /**
   * The app's pods' output: a section per pod of the app (oldest first, so the newest ends the text),
   * headed `--- pod <name> (<state>) ---`, each its container's last `tailLines` lines; a pod whose
   * container waits to restart shows its previous run's. Masked with the values of the app's Secret (the
   * bundle it runs with). undefined when the environment or the app has no pods.
   */
  async logs(target: LogTarget, app: string, query: LogQuery): Promise<LogText | undefined> {
    if (query.source !== 'app') return undefined;
    const ns = namespaceName(target);
    const conn = this.conn;
    const pods = await conn
      .call(`list pods of ${ns}/${app}`, (k) => k.pods.list(ns, `${LABELS.app}=${app}`))
      .catch((err) => {
        if (isCode(err, 404)) return [];
        throw err;
      });
    if (pods.length === 0) return this.keptOutput(ns, app, query);
    const secret = await conn.readOrNull('secrets', ns, objectName(app));
    const secrets = Object.values(secret?.data ?? {}).map((v) => Buffer.from(v, 'base64').toString('utf8'));
    const t = (p: (typeof pods)[number]) => new Date(p.metadata?.creationTimestamp ?? 0).getTime();
    const sorted = [...pods].sort((a, b) => t(a) - t(b));
    const limitBytes = Math.max(1024, Math.floor(query.maxBytes / sorted.length));
    let truncated = false;
    const sections: string[] = [];
    for (const pod of sorted) {
      const name = pod.metadata?.name ?? '?';
      const status = pod.status?.containerStatuses?.find((c) => c.name === 'app');
      const previous = !status?.state?.running && (status?.restartCount ?? 0) > 0;
      const read = (tailLines: number) =>
        conn.call(`read the log of ${ns}/${name}`, (k) =>
          k.podLog(ns, name, { tailLines, limitBytes, previous }),
        );
      let text = '';
      try {
        // limitBytes keeps the first bytes of the tail asked for: while the answer hits it, the newest
        // lines may be missing, so ask for fewer lines (halving) until it fits.
        for (let tail = query.tailLines; ; tail = Math.floor(tail / 2)) {
          text = String((await read(tail)) ?? '');
          if (Buffer.byteLength(text) < limitBytes) break;
          truncated = true;
          if (tail <= 1) break;
        }
      } catch (err) {
        // A container that has not started has no log yet (400): its section is empty.
        if (!(err instanceof KubeError) || err.code !== 400) throw err;
        text = '';
      }
      const lines = text.split('\n');
      if (lines.at(-1) === '') lines.pop();
      if (lines.length >= query.tailLines) truncated = true;
      const state = `${podSummary(pod)}${previous ? "; the previous container's log" : ''}`;
      sections.push(`--- pod ${name} (${state}) ---\n${lines.length ? `${lines.join('\n')}\n` : ''}`);
    }
    return { text: maskSecrets(sections.join(''), secrets), truncated };
  }

  /**
   * Keep the app's output as it is now (its pods' last `KEPT_OUTPUT_LINES` lines, at most
   * `KEPT_OUTPUT_BYTES`, masked with the app's Secret) in a Secret of the namespace (`keptOutputName`),
   * before its Deployment is deleted and the cluster removes its pods and their logs with them: what
   * `logs` answers once no pod of the app is left. The namespace's removal (teardown) removes it; a prune
   * of the app too. No pods, or no output: nothing kept (an earlier one stays). Never throws: a failure
   * to keep it is logged and the caller goes on stopping the app.
   */
  async keepOutput(target: RuntimeTarget, app: string): Promise<boolean> {
    const ns = namespaceName(target);
    const name = keptOutputName(app);
    try {
      const read = await this.logs(target, app, {
        source: 'app',
        tailLines: KEPT_OUTPUT_LINES,
        maxBytes: KEPT_OUTPUT_BYTES,
      });
      if (!read?.text || !/^--- pod /.test(read.text)) return false;
      const body: V1Secret = stamp(
        {
          apiVersion: 'v1',
          kind: 'Secret',
          metadata: {
            name,
            namespace: ns,
            labels: appLabels(app),
            annotations: { [KEPT_AT]: new Date().toISOString() },
          },
          type: 'Opaque',
          data: { [KEPT_OUTPUT_KEY]: Buffer.from(read.text, 'utf8').toString('base64') },
        },
        target.generation,
      );
      const existing = await this.conn.readOrNull('secrets', ns, name);
      if (existing)
        await this.conn.call(`replace secrets ${ns}/${name}`, (k) =>
          k.secrets.replace(ns, name, {
            ...body,
            metadata: { ...body.metadata, resourceVersion: existing.metadata?.resourceVersion },
          }),
        );
      else await this.conn.call(`create secrets ${ns}/${name}`, (k) => k.secrets.create(ns, body));
      return true;
    } catch (err) {
      log.warn('could not keep the output of a failed app', {
        namespace: ns,
        app,
        error: (err as Error).message,
      });
      return false;
    }
  }

  /** The output kept when the environment failed (`keepOutput`), under a line saying so; else undefined. */
  private async keptOutput(ns: string, app: string, query: LogQuery): Promise<LogText | undefined> {
    const kept = await this.conn.readOrNull('secrets', ns, keptOutputName(app)).catch((err) => {
      if (isCode(err, 404)) return undefined;
      throw err;
    });
    const data = kept?.data?.[KEPT_OUTPUT_KEY];
    if (!kept || data === undefined) return undefined;
    const at = kept.metadata?.annotations?.[KEPT_AT] ?? '?';
    const lines = Buffer.from(data, 'base64').toString('utf8').split('\n');
    if (lines.at(-1) === '') lines.pop();
    const text = lines.slice(-query.tailLines).join('\n');
    return {
      text: `--- the app's output kept when the environment failed (${at}); no pod of it runs now ---\n${text ? `${text}\n` : ''}`,
      truncated: lines.length > query.tailLines,
    };
  }
}

/** When an app's output was kept (an annotation of its kept-output Secret). */
const KEPT_AT = 'preview-control-plane/kept-at';

/**
 * `app web: CrashLoopBackOff (back-off …); last log lines: … | …`, with the app's secret values masked
 * (read from its Secret: the event carries none). Logs are left out when the Secret can't be read.
 */
export async function failureCause(
  conn: EksConnection,
  target: RuntimeTarget,
  ns: string,
  app: string,
  { reason, message }: { reason: string; message: string },
  pod: string | undefined,
  previous: boolean,
): Promise<string> {
  let logs = '';
  let secrets: string[] | undefined;
  try {
    const secret = await conn.readOrNull('secrets', ns, objectName(app));
    secrets = Object.values(secret?.data ?? {}).map((v) => Buffer.from(v, 'base64').toString('utf8'));
  } catch {
    secrets = undefined;
  }
  if (pod && secrets) {
    const read = (prev: boolean) =>
      conn.call(`read the log of ${ns}/${pod}`, (k) =>
        k.podLog(ns, pod, { tailLines: CAUSE_SEARCH_LINES, previous: prev }),
      );
    logs = await read(previous)
      .catch(() => (previous ? read(false) : ''))
      .catch(() => '');
  }
  const output = maskSecrets(String(logs ?? ''), secrets ?? []);
  const lines = output
    .split(/\r?\n/)
    .filter((l) => l.trim())
    .slice(-LOG_TAIL_LINES)
    .join(' | ');
  const tail = lines.length > LOG_TAIL_CHARS ? `…${lines.slice(-LOG_TAIL_CHARS)}` : lines;
  const withheld =
    pod && !secrets ? '; logs withheld (the secret bundle to mask them could not be read)' : '';
  const what = `app ${app}: ${reason}${message ? ` (${message})` : ''}`;
  const where = { target, app, source: 'app' as const };
  // Logs read: lead with the cause they name (else their last lines); withheld: say so.
  const text =
    pod && secrets
      ? failureMessage(what, output, tail, where).replace('; last output: (no output)', '')
      : `${what}${withheld}`;
  return maskSecrets(text, secrets ?? []);
}
