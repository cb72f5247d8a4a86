import type { CheckRunConclusion } from '../../ports/pr-status/port.js';

/*
 * The story a completed check run tells, as pure functions of what is stored: the runs of one head commit
 * (their status, duration, retries, flakiness, failed step) and the preview's own state. Which conclusion
 * (`conclusionOf`), and the output GitHub shows (`renderOutput`). Every text comes from the stored run,
 * whose step outputs and errors are masked when written (core/runs/execution: secret values never reach
 * the record), so nothing here sees a secret.
 */

/** What the gate reads of one run. */
export interface GateRun {
  runId: string;
  testId: string;
  /** The application of its test (whose quarantines it is judged by). */
  applicationId?: string;
  name: string;
  status: 'pending' | 'running' | 'passed' | 'failed';
  startedAt?: string;
  endedAt?: string;
  error?: string;
  /** Attempts beyond the first. */
  retries: number;
  flaky: boolean;
  /**
   * Why the run failed, classified: `environment` when the preview itself never answered (a sleeping
   * preview that never woke, a target that could not be reached), so the title tells a failing preview
   * from a failing test. Absent: the test failed.
   */
  errorKind?: 'environment';
  /**
   * The failed step: its number (1-based), interaction and output, its screenshot's media key, and the
   * screenshot's link (when the service knows its public URL).
   */
  failedStep?: {
    number: number;
    interaction: string;
    output: string;
    imageKey?: string;
    screenshot?: string;
  };
  /** A link to the run's report. */
  reportUrl?: string;
  /** Quarantined: its failure does not fail the gate (still reported). */
  quarantined?: boolean;
  /** Who owns the quarantine, why, and when it ends. */
  quarantine?: { owner: string; reason: string; until: string };
}

/** What ended the story other than the runs. */
export type GateEnd =
  | { kind: 'preview-failed'; error: string }
  | { kind: 'superseded'; newerSha: string }
  | { kind: 'closed' }
  | { kind: 'skipped'; by: string; reason: string };

export interface GateOutput {
  title: string;
  summary: string;
  text?: string;
}

const ENDED = new Set(['passed', 'failed']);

/** Whether every run ended. */
export const allEnded = (runs: GateRun[]): boolean => runs.every((r) => ENDED.has(r.status));

/** The conclusion of a completed story. */
export function conclusionOf(runs: GateRun[], end?: GateEnd): CheckRunConclusion {
  if (end?.kind === 'skipped') return 'neutral';
  if (end?.kind === 'superseded' || end?.kind === 'closed') return 'cancelled';
  if (end?.kind === 'preview-failed') return 'failure';
  return runs.some((r) => r.status === 'failed' && !r.quarantined) ? 'failure' : 'success';
}

const seconds = (r: GateRun): string => {
  if (!r.startedAt || !r.endedAt) return '—';
  return `${((Date.parse(r.endedAt) - Date.parse(r.startedAt)) / 1000).toFixed(1)} s`;
};
const cell = (text: string) => text.replace(/\|/g, '\\|').replace(/\n/g, ' ');
const fence = (text: string) => text.replace(/```/g, "'''");
const plural = (n: number, one: string) => `${n} ${one}${n === 1 ? '' : 's'}`;

function title(runs: GateRun[], end: GateEnd | undefined, completed: boolean): string {
  if (!completed) {
    const done = runs.filter((r) => ENDED.has(r.status)).length;
    return runs.length
      ? `Running: ${done} of ${plural(runs.length, 'test')} done`
      : 'Waiting for the preview';
  }
  switch (end?.kind) {
    case 'skipped':
      return `Skipped by ${end.by}: ${end.reason}`;
    case 'superseded':
      return `Cancelled: superseded by ${end.newerSha.slice(0, 12)}`;
    case 'closed':
      return 'Cancelled: the pull request closed before the tests ended';
    case 'preview-failed':
      return 'The preview failed: no test ran against it';
  }
  const failed = runs.filter((r) => r.status === 'failed' && !r.quarantined);
  if (failed.length && failed.every((r) => r.errorKind === 'environment'))
    return `The preview never answered: ${plural(failed.length, 'test')} could not run against it`;
  if (failed.length) return `${plural(failed.length, 'test')} failed of ${runs.length}`;
  const flaky = runs.filter((r) => r.flaky).length;
  const quarantined = runs.filter((r) => r.status === 'failed' && r.quarantined).length;
  return [
    `${plural(runs.length - quarantined, 'test')} passed`,
    ...(flaky ? [`${flaky} flaky`] : []),
    ...(quarantined ? [`${quarantined} quarantined failure${quarantined === 1 ? '' : 's'} ignored`] : []),
  ].join(', ');
}

/** The check run's output: title, summary (a line per test) and text (each failure's story). */
export function renderOutput(runs: GateRun[], end: GateEnd | undefined, completed: boolean): GateOutput {
  const lines: string[] = [];
  if (end?.kind === 'preview-failed')
    lines.push(
      'The preview of this commit failed, so its tests could not run.',
      '',
      '```text',
      fence(end.error),
      '```',
    );
  if (end?.kind === 'superseded')
    lines.push(`A newer commit, \`${end.newerSha}\`, superseded this one before its tests ended.`);
  if (end?.kind === 'closed') lines.push('The pull request closed before the tests ended.');
  if (end?.kind === 'skipped') lines.push(`**${cell(end.by)}** skipped the tests: ${cell(end.reason)}`);
  if (runs.length) {
    if (lines.length) lines.push('');
    lines.push(
      '| Test | Status | Duration | Retries | Report |',
      '|---|---|---|---|---|',
      ...runs.map((r) => {
        const status = `${r.status}${r.flaky ? ' (flaky)' : ''}${r.quarantined ? ' (quarantined)' : ''}${r.errorKind === 'environment' ? ' (preview never answered)' : ''}`;
        return `| ${cell(r.name)} | \`${status}\` | ${seconds(r)} | ${r.retries} | ${r.reportUrl ? `[report](${r.reportUrl})` : `\`${r.runId}\``} |`;
      }),
    );
    const flaky = runs.filter((r) => r.flaky);
    if (flaky.length)
      lines.push('', `Flaky (passed after a retry): ${flaky.map((r) => cell(r.name)).join(', ')}.`);
    const quarantined = runs.filter((r) => r.quarantined);
    if (quarantined.length)
      lines.push(
        '',
        'Quarantined (they run and are reported, but a failure does not fail the gate):',
        ...quarantined.map((r) =>
          r.quarantine
            ? `- ${cell(r.name)}: owner ${cell(r.quarantine.owner)}, until ${r.quarantine.until.slice(0, 10)}, ${cell(r.quarantine.reason)}`
            : `- ${cell(r.name)}`,
        ),
      );
  }
  const failures = runs.filter((r) => r.status === 'failed');
  const text = failures.map((r) => {
    const step = r.failedStep;
    return [
      `### ${r.name}${r.quarantined ? ' (quarantined: does not fail the gate)' : ''}`,
      '',
      ...(step ? [`Failed step ${step.number} (\`${step.interaction}\`)`, ''] : []),
      '```text',
      fence(r.error ?? step?.output ?? 'failed'),
      '```',
      ...(step?.screenshot ? ['', `[Screenshot](${step.screenshot})`] : []),
    ].join('\n');
  });
  return {
    title: title(runs, end, completed),
    summary: lines.join('\n') || 'No test has started yet.',
    ...(text.length ? { text: text.join('\n\n') } : {}),
  };
}
