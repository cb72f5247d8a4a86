import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, expect } from '@jest/globals';
import type { OrgCredentials } from '../../functions/core/applications/applications.js';
import { findExecutable } from '../../functions/ports/browser/local-chromium.js';
import { setLogSink } from '../../functions/shared/log.js';
import type { Cloud } from './cloud-tier.js';
import { bridgeEvent, REGION } from './fakes/aws.js';
import type { FakeGitHub } from './fakes/github.js';
import type { CheckRunWriteRecord, FakeCheckRun } from './fakes/github-checks.js';
import { startGitHubApp, stopGitHubCloud } from './github-cloud.js';

/*
 * The merge gate's cloud tier, shared by its test files: the real handlers in PREVIEW_MODE=aws, the GitHub
 * App installed on acme/shop at the GitHub fake (which keeps every check-run write), a loopback app the
 * preview's URL points at, and the state machines' executions recorded, not run: a test plays their
 * states itself (the deploy's MarkReady or MarkFailed, each run's Prepare and Execute), as Step Functions
 * would. `useGateTier` registers the suite's beforeAll and afterAll and answers the helpers.
 */

export const PREVIEW_YAML = 'apps:\n  web:\n    port: 3000\n';
export const API_HOST = 'abc123def4.execute-api.eu-west-1.amazonaws.com';
export const STAGE = 'api';
const LINK_SECRET_ARN = `arn:aws:secretsmanager:${REGION}:000000000000:secret:preview-run-links`;

/** A step that passes against the loopback app's home page. */
export const home = {
  interaction: 'assert-visible',
  instruction: 'home',
  element: { html: '', selector: '#home' },
};
/** A step that fails until the app's page says so (`setPage`). */
export const absent = { interaction: 'assert-text', instruction: 'It says "Nowhere to be seen"' };

const HOME_PAGE = '<h1 id="home">Home</h1>';

/** What the suite's beforeAll set up, and what the handlers did. */
export interface GateTier {
  cloud: Cloud;
  github: FakeGitHub;
  org: OrgCredentials;
  applicationId: string;
  appUrl: string;
  logs: string[];
  /** The executions the handlers started (StartExecution answered; the test plays their states). */
  started: { workflow: string; input: Record<string, unknown>; name: string }[];
  /** The time of the last Pull Request Updated event (ms). */
  clock: number;
}

/** `env`: handler settings beside the tier's (`EVENT_BUS_NAME` for the webhook handler…). */
export function useGateTier(orgName: string, env: Record<string, string> = {}) {
  const t = { logs: [], started: [], clock: Date.parse('2032-03-01T10:00:00Z') } as unknown as GateTier;
  let app: Server | undefined;
  let page = HOME_PAGE;

  beforeAll(async () => {
    setLogSink((line) => t.logs.push(line));
    app = createServer((_req, res) => {
      res.writeHead(200, { 'content-type': 'text/html' });
      res.end(page);
    });
    await new Promise<void>((ok) => app!.listen(0, '127.0.0.1', () => ok()));
    t.appUrl = `http://127.0.0.1:${(app.address() as AddressInfo).port}`;
    const started = await startGitHubApp(
      orgName,
      { 'preview.yaml': PREVIEW_YAML },
      {
        env: {
          MEDIA_BUCKET: 'preview-media',
          PREVIEW_FFMPEG_PATH: findExecutable('ffmpeg') ?? '/usr/bin/ffmpeg',
          // The stack's `publicUrl` (the API's stage URL) and the link key: the check run's links.
          PUBLIC_URL: `https://${API_HOST}/${STAGE}`,
          RUN_LINK_SECRET_ARN: LINK_SECRET_ARN,
          ...env,
        },
      },
    );
    Object.assign(t, {
      cloud: started.cloud,
      github: started.github,
      org: started.org,
      applicationId: started.applicationId,
    });
    t.cloud.aws.secrets.set(LINK_SECRET_ARN, 'k'.repeat(64));
    t.cloud.aws.workflows.start = (async (workflow: string, input: Record<string, unknown>, name: string) => {
      t.started.push({ workflow, input, name });
      return { executionId: `local:${workflow}:${name}` };
    }) as typeof t.cloud.aws.workflows.start;
    await importTest('Home on previews', [home]);
  }, 60_000);
  afterAll(async () => {
    await stopGitHubCloud({ cloud: t.cloud, github: t.github });
    await new Promise((r) => (app ? app.close(r) : r(undefined)));
  }, 60_000);

  /** Pull Request Updated of acme/shop as EventBridge delivers it, each one a second later unless `at`. */
  function updated(pr: number, headSha: string, at?: string) {
    if (!at) t.clock += 1000;
    const eventAt = at ?? new Date(t.clock).toISOString();
    const detail = {
      orgId: t.org.orgId,
      repoFullName: 'acme/shop',
      prNumber: pr,
      headSha,
      headRef: `feature-${pr}`,
      fork: false,
      eventAt,
    };
    return bridgeEvent('Pull Request Updated', 'preview.github', detail, `evt-${pr}-${headSha.slice(0, 8)}`);
  }
  const pullRequestUpdated = (event: ReturnType<typeof updated>) =>
    t.cloud.invoke<{ outcome: string }>('functions/events/pull-request-updated.ts', event);

  /** A new head commit of acme/shop (the fake GitHub refuses check runs of commits it does not have). */
  const commit = (label: string) =>
    t.github.addCommit('acme/shop', { 'preview.yaml': PREVIEW_YAML, 'label.txt': label });

  async function importTest(name: string, steps: unknown[]) {
    const { importTests } = await import('../../functions/core/test-definitions/definitions.js');
    await importTests(t.org.orgId, [
      {
        name,
        folder: { id: 'gate', name: 'Gate' },
        application_id: t.applicationId,
        application_version: { name: 'web', path: '/' },
        run_on_preview: true,
        step_timeout_seconds: 2,
        steps,
      },
    ]);
  }

  /** The newest deploy execution started for a pull request. */
  function deployOf(pr: number) {
    const deploy = t.started
      .filter((s) => s.workflow === 'deploy' && s.input.envKey === `acme/shop#${pr}`)
      .at(-1);
    if (!deploy) throw new Error(`no deploy started for #${pr}`);
    return deploy;
  }

  /** The deploy execution started for a pull request's newest request: MarkReady with the preview's URL. */
  async function markReady(pr: number) {
    const input = { ...deployOf(pr).input, ready: { urls: { web: t.appUrl } } };
    await t.cloud.invoke('functions/steps/mark-ready.ts', input);
    return input;
  }

  /** The runs MarkReady (or a re-run) started since `from` (their executions' inputs). */
  const runsSince = (from: number) =>
    t.started
      .slice(from)
      .filter((s) => s.workflow === 'testRun')
      .map((s) => ({ runId: String(s.input.runId), execution: s.name }));

  /** Play one run's Prepare and Execute, as its execution would; Execute's input, to play it again. */
  async function playRun(run: { runId: string; execution: string }) {
    const prepared = await t.cloud.invoke<{ ready: boolean }>('functions/steps/run-prepare.ts', run);
    expect(prepared.ready).toBe(true);
    const input = { runId: run.runId, prepared };
    await t.cloud.invoke('functions/steps/run-execute.ts', input, 600_000);
    return input;
  }

  const runsOf = (sha: string): FakeCheckRun[] => t.github.checkRuns.ofHead(sha);
  const story = (sha: string): CheckRunWriteRecord[] =>
    runsOf(sha).flatMap((r) => t.github.checkRuns.storyOf(r.id));
  const statuses = (sha: string) => story(sha).map((w) => w.body.status);

  return {
    t,
    updated,
    pullRequestUpdated,
    commit,
    importTest,
    deployOf,
    markReady,
    runsSince,
    playRun,
    runsOf,
    story,
    statuses,
    /** What the loopback app answers from now on (the home page by default). */
    setPage: (html = HOME_PAGE) => {
      page = html;
    },
  };
}
