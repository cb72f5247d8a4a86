import { byNumberThenText, type Column, fields, short, table, when } from './format.js';

/*
 * What previewctl prints of the API's answers: the environment, application and run tables, and the
 * text of one environment or run (commands.ts runs the commands; format.ts has the table helpers).
 */

export interface Env {
  repoFullName: string;
  prNumber: number;
  status: string;
  phase?: string;
  updatedAt?: string;
  lastDeployedSha?: string;
  urls: Record<string, string>;
  error?: string;
  /** A failed environment's apps that are not running: app → why. */
  stoppedApps?: Record<string, string>;
  environmentId?: string;
  /** A protected environment's signed links in (the front door): what `envs open` prints instead of `urls`. */
  accessUrls?: Record<string, string>;
}

// biome-ignore lint/suspicious/noExplicitAny: the API's answers, read field by field for printing.
export type Json = Record<string, any>;

/** The environments `envs list` shows: of `repo` and `status` when given, by repository then PR number. */
export function environmentRows<E extends Pick<Env, 'repoFullName' | 'prNumber' | 'status'>>(
  environments: E[],
  filters: { repo?: string; status?: string },
): E[] {
  const repo = filters.repo?.toLowerCase();
  return environments
    .filter((e) => repo === undefined || e.repoFullName.toLowerCase() === repo)
    .filter((e) => filters.status === undefined || e.status === filters.status)
    .sort(
      (a, b) => byNumberThenText(a.repoFullName, b.repoFullName) || byNumberThenText(a.prNumber, b.prNumber),
    );
}

export const APP_COLUMNS: Column<Json>[] = [
  { header: 'ID', value: (a) => a.applicationId },
  { header: 'REPOSITORY', value: (a) => a.repoFullName },
  { header: 'NAME', value: (a) => a.name, max: 30 },
  { header: 'TTL', value: (a) => (a.ttlHours === 0 ? 'never' : `${a.ttlHours} h`), right: true },
  { header: 'DRAFTS', value: (a) => (a.deployDrafts ? 'yes' : 'no') },
  {
    header: 'STATE',
    value: (a) => (a.disabled ? 'disabled' : a.installationActive ? 'active' : 'no installation'),
  },
];

export const ENV_COLUMNS: Column<Env>[] = [
  { header: 'REPOSITORY', value: (e) => e.repoFullName },
  { header: 'PR', value: (e) => e.prNumber, right: true },
  { header: 'STATUS', value: (e) => e.status },
  { header: 'PHASE', value: (e) => e.phase },
  { header: 'COMMIT', value: (e) => short(e.lastDeployedSha) },
  { header: 'UPDATED', value: (e) => when(e.updatedAt) },
  {
    header: 'APPS / ERROR',
    value: (e) =>
      e.status === 'failed' && (e.error || e.stoppedApps)
        ? [stoppedNames(e), e.error].filter(Boolean).join(' ')
        : Object.entries(e.urls)
            .map(([app, url]) => `${app} ${url}`)
            .join(', '),
    max: 100,
  },
];

export const RUN_COLUMNS: Column<Json>[] = [
  { header: 'ID', value: (r) => r.id },
  { header: 'TEST', value: (r) => r.name, max: 40 },
  { header: 'STATUS', value: (r) => r.status },
  { header: 'CREATED', value: (r) => when(r.created_at) },
  { header: 'ENDED', value: (r) => when(r.ended_at) },
];

/** `[stopped: api, web]`: the apps a failed environment stopped, first in its list row (the why is cut). */
function stoppedNames(e: Env): string | undefined {
  const names = Object.keys(e.stoppedApps ?? {}).sort();
  return names.length ? `[stopped: ${names.join(', ')}]` : undefined;
}

/** `  app  text` lines, apps in name order, under `title:`; nothing when there are none. */
function block(title: string, entries: Record<string, string> | undefined): string {
  const rows = Object.entries(entries ?? {}).sort(([a], [b]) => a.localeCompare(b));
  if (rows.length === 0) return '';
  const width = Math.max(...rows.map(([app]) => app.length));
  return `\n${title}:\n${rows.map(([app, text]) => `  ${app.padEnd(width)}  ${text}`).join('\n')}`;
}

export function envText(env: Env): string {
  const { urls, stoppedApps, ...rest } = env;
  return `${fields({ ...rest, updatedAt: when(rest.updatedAt), createdAt: undefined })}${block('urls', urls)}${block(
    'stopped apps',
    stoppedApps,
  )}`;
}

export function runText(run: Json): string {
  const { steps, ...rest } = run;
  const head = fields({ ...rest, created_at: when(rest.created_at), ended_at: when(rest.ended_at) });
  if (!Array.isArray(steps) || steps.length === 0) return head;
  const rows = table(
    steps.map((s: Json, i: number): Json => ({ ...s, n: i + 1 })),
    [
      { header: '#', value: (s) => s.n, right: true },
      { header: 'STATUS', value: (s) => s.status },
      { header: 'INSTRUCTION', value: (s) => s.instruction, max: 50 },
      { header: 'OUTPUT', value: (s) => s.output, max: 80 },
    ],
    '',
  );
  return `${head}\nsteps:\n${rows}`;
}
