import { NotFoundError } from '../../shared/errors.js';
import { readScenarioState, scenarioMetadata } from '../scenarios/index.js';
import type { Folder, StepElement } from '../test-definitions/index.js';
import { environmentView, type RunEnvironmentView } from './environment.js';
import {
  type ConsoleEvent,
  loadRun,
  type NetworkEvent,
  type RunItem,
  type RunStatus,
  type RunStepItem,
  type StepStatus,
} from './store.js';

/*
 * What callers see of a run (TestRun): the view of a stored or listed run, its media URLs minted for the
 * response, and GET /run/{run_id}.
 */

export interface RunStepView {
  id: string;
  instruction: string;
  interaction: string;
  output: string;
  status: StepStatus;
  url: string;
  element: StepElement;
  image: string | null;
  /**
   * Additive: the recorded selector matched nothing and the step acted on the element its recording
   * describes (`from` → `to`, the heal's score 0..1, the element's outer HTML then, masked).
   */
  healed?: { from: string; to: string; score: number; html?: string };
  /**
   * What the page reported during the step, masked and bounded: `console` (errors, warnings,
   * page errors) and `network` (failed or 4xx/5xx requests, and `refused` ones: the page's requests outside what the run
   * may reach, refused without failing the step); present when there was any.
   */
  metadata?: {
    console?: ConsoleEvent[];
    network?: NetworkEvent[];
    events_dropped?: number;
  };
}

/** What callers see (TestRun). `error` is additive: present only on a failed run that has one. */
export interface TestRunView {
  id: string;
  name: string;
  test_id: string;
  status: RunStatus;
  created_at: string;
  ended_at: string | null;
  folder_run_id: string | null;
  job_run_id: string | null;
  job_id: string | null;
  folder: Folder;
  video_url: string | null;
  /**
   * The run's Playwright trace, a signed link like `video_url`: present with `media=true`; null
   * before it is stored, and on a list page read without `steps=true` (the listing indexes carry no trace).
   */
  trace_url?: string | null;
  metadata: { source: string; application_version_id?: string } & Record<string, unknown>;
  error?: string;
  /** Additive: how many steps were healed, on a run that has any (read whole, or listed with `healed=true`). */
  healed_steps?: number;
  /**
   * Additive, on a run read whole whose page asked for origins the run may not reach (refused; its steps
   * went on): those origins, and how an application admits one.
   */
  refused_requests?: { origins: string[]; hint: string };
  /** Additive: the environment the run ran against, once resolved (not in a listing without steps). */
  environment?: RunEnvironmentView;
  steps?: RunStepView[];
}

/** What to include in a TestRun: media URLs (`media=true`) and steps (`steps=true`). */
export interface RunView {
  media: boolean;
  steps: boolean;
}

/** Turns a stored media key into its URL (already minted: see `MediaUrls`). */
export type MediaSigner = (key: string) => string | null;
const noMedia: MediaSigner = () => null;
/** Mints a URL for a stored media key, valid one hour from now (MediaStore.url). */
export type MediaUrls = (key: string) => Promise<string>;

/** A run as a page reads it: from a `page*` index (`RUN_LISTING`, no steps) or whole by id (`steps=true`). */
export type ListedRun = Omit<RunItem, 'steps' | 'variables'> & { steps?: RunStepItem[] };

export function toTestRunView(run: ListedRun, view: RunView, sign: MediaSigner = noMedia): TestRunView {
  const media = (key: string | undefined) => (view.media && key ? sign(key) : null);
  return {
    id: run.runId,
    name: run.name,
    test_id: run.testId,
    status: run.status,
    created_at: run.createdAt,
    ended_at: run.endedAt ?? null,
    folder_run_id: null,
    job_run_id: null,
    job_id: null,
    folder: { id: run.folder.id, name: run.folder.name },
    video_url: media(run.videoKey),
    ...(view.media ? { trace_url: media(run.traceKey) } : {}),
    metadata: {
      source: run.source,
      ...(run.applicationVersionId !== undefined ? { application_version_id: run.applicationVersionId } : {}),
      ...scenarioMetadata(readScenarioState(run.scenarioState)),
      // Retries: how many attempts a retried test took, and whether it passed after a failure. Only
      // on a run read whole (GET /run/{id}, GET /run with steps=true), and `flaky` on a page of
      // GET /run?flaky=true (its sparse index projects it): the other listing indexes project neither.
      ...(run.attempts?.length ? { attempts: run.attempts.length } : {}),
      ...(run.flaky ? { flaky: true } : {}),
      // Cold starts: how long the run waited for its preview, and when each app answered (read whole).
      ...(run.wake ? { wake: { waited_ms: run.wake.waitedMs, apps: run.wake.apps } } : {}),
      ...(run.errorKind ? { error_kind: run.errorKind } : {}),
    },
    ...(run.status === 'failed' && run.error ? { error: run.error } : {}),
    ...(run.healedSteps ? { healed_steps: run.healedSteps } : {}),
    ...(run.refusedOrigins?.length
      ? { refused_requests: { origins: [...run.refusedOrigins], hint: REFUSED_HINT } }
      : {}),
    ...environmentView(run),
    ...(view.steps
      ? {
          steps: (run.steps ?? []).map((s) => ({
            id: s.id,
            instruction: s.instruction,
            interaction: s.interaction,
            output: s.output,
            status: s.status,
            url: s.url,
            element: { html: s.element.html, selector: s.element.selector },
            image: media(s.imageKey),
            ...(s.healed ? { healed: { ...s.healed } } : {}),
            ...stepMetadata(s),
          })),
        }
      : {}),
  };
}

/** What a run with refused origins says of them (GET /run/{id}'s `refused_requests.hint`, the report). */
export const REFUSED_HINT =
  "the page asked for these origins, which this run may not reach: refused, and its steps went on (each step's " +
  "network lines name its own); an application's allowedOrigins admits an origin " +
  '(previewctl apps update --app ID --allowed-origins ORIGIN,…)';

/** A step's console and network events as its view's `metadata`; nothing when there were none. */
function stepMetadata(s: RunStepItem): Pick<RunStepView, 'metadata'> {
  if (!s.console?.length && !s.network?.length && !s.eventsDropped) return {};
  return {
    metadata: {
      ...(s.console?.length ? { console: s.console } : {}),
      ...(s.network?.length ? { network: s.network } : {}),
      ...(s.eventsDropped ? { events_dropped: s.eventsDropped } : {}),
    },
  };
}

/**
 * The URL of every media key of `runs` that the view shows, minted now (`media=true`; otherwise none):
 * a signer for `toTestRunView`.
 */
export async function mintMediaUrls(
  runs: ListedRun[],
  view: RunView,
  urls?: MediaUrls,
): Promise<MediaSigner> {
  if (!view.media || !urls) return noMedia;
  const minted = new Map<string, string>();
  for (const run of runs) {
    const wanted = [
      run.videoKey,
      run.traceKey,
      ...(view.steps ? (run.steps ?? []).map((s) => s.imageKey) : []),
    ];
    for (const key of wanted) if (key && !minted.has(key)) minted.set(key, await urls(key));
  }
  return (key) => minted.get(key) ?? null;
}

/** GET /run/{run_id}: one run of the caller's org (404 otherwise). */
export async function getRun(
  orgId: string,
  runId: string,
  view: RunView,
  urls?: MediaUrls,
): Promise<TestRunView> {
  const run = await loadRun(runId);
  if (!run || run.orgId !== orgId) throw new NotFoundError('run not found');
  return toTestRunView(run, view, await mintMediaUrls([run], view, urls));
}
