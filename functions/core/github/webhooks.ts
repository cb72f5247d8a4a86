import { DeleteCommand, PutCommand } from '@aws-sdk/lib-dynamodb';
import * as z from 'zod/mini';
import { DETAIL_TYPES, GITHUB_EVENT_SOURCE } from '../../manifest/events.js';
import { keys } from '../../manifest/tables.js';
import type { BusEvent, EventBus } from '../../ports/events/port.js';
import type { PrStatus } from '../../ports/pr-status/port.js';
import type { SourceHost } from '../../ports/source-host/port.js';
import type { Workflows } from '../../ports/workflows/port.js';
import { ddb, isConditionFailure, table } from '../../shared/aws/dynamo.js';
import { ValidationError } from '../../shared/errors.js';
import { log } from '../../shared/log.js';
import { appName, describeIssues, MAX_PR, repoFullName, rowId } from '../../shared/validation.js';
import {
  type Application,
  decide,
  findApplicationByRepo,
  labelMatters,
  orgsLinkingRepo,
  type PullRequestFacts,
  previewRulesOf,
  type Verdict,
} from '../applications/index.js';
import {
  type Environment,
  findEnvironment,
  orderKey,
  reportStatus,
  requestAppRedeploy,
  requestMainBranchDeploy,
  requestPrDeploy,
  requestRedeploy,
  requestTeardown,
  StaleEvent,
} from '../environments/index.js';
import { type GateLinks, syncGate } from '../gate/index.js';
import { type GateRequest, normalizeGateDelivery } from './gate-requests.js';

/*
 * Previews that follow the pull request. A GitHub webhook delivery is verified (its signature), read
 * (`normalizeDelivery`), matched to the organizations it acts for (`receiveWebhook`) and turned into one
 * event per organization on the service's own bus; the bus's rules hand those events to the consumers
 * below, which call the same use cases as the API. The custom `Preview Redeploy Requested` event reaches
 * `onRedeployRequested` the same way.
 */

// ---------------------------------------------------------------------------------------------------
// What a delivery says
// ---------------------------------------------------------------------------------------------------

const sha = z.string().check(z.regex(/^[0-9a-f]{40}$/i, 'must be a 40-digit commit SHA'));
const nonEmpty = z.string().check(z.minLength(1));
const ref = z.string().check(z.minLength(1), z.maxLength(255));
const prNumber = z.number().check(z.int(), z.gte(1), z.lte(MAX_PR));
const repository = z.object({ full_name: repoFullName, default_branch: z.optional(nonEmpty) });
const installation = z.optional(z.object({ id: z.number().check(z.int(), z.gt(0)) }));

const labelName = z.string().check(z.minLength(1), z.maxLength(255));
const pullRequestPayload = z.object({
  action: nonEmpty,
  number: prNumber,
  // `labeled` and `unlabeled`: the label added or removed.
  label: z.optional(z.object({ name: labelName })),
  pull_request: z.object({
    draft: z.optional(z.boolean()),
    labels: z.optional(z.array(z.object({ name: labelName })).check(z.maxLength(1000))),
    // null for a deleted ("ghost") account.
    user: z.optional(z.nullable(z.object({ login: z.string().check(z.maxLength(255)) }))),
    merged: z.optional(z.nullable(z.boolean())),
    updated_at: nonEmpty,
    head: z.object({
      sha,
      ref,
      // null when the fork was deleted
      repo: z.nullable(z.object({ full_name: nonEmpty })),
    }),
    base: z.object({ sha, ref: nonEmpty, repo: z.object({ full_name: repoFullName }) }),
  }),
  repository,
  installation,
});

const pushPayload = z.object({
  ref: nonEmpty,
  after: sha,
  deleted: z.optional(z.boolean()),
  repository: z.extend(repository, {
    default_branch: nonEmpty,
    // GitHub sends epoch seconds in push payloads.
    pushed_at: z.optional(z.union([z.number(), z.string()])),
  }),
  installation,
});

/** A delivery the service acts on, before it knows for whom. */
export type Normalized =
  | {
      kind: 'pullRequestUpdated';
      repoFullName: string;
      installationId?: number;
      prNumber: number;
      action: string;
      headSha: string;
      headRef: string;
      baseSha: string;
      fork: boolean;
      draft: boolean;
      eventAt: string;
      /** The pull request's labels now, and its author: what the application's preview rules read. */
      labels: string[];
      author?: string;
      /** `labeled` / `unlabeled`: the label added or removed. */
      label?: string;
    }
  | {
      kind: 'pullRequestClosed';
      repoFullName: string;
      installationId?: number;
      prNumber: number;
      merged: boolean;
      eventAt: string;
    }
  | {
      kind: 'defaultBranchPushed';
      repoFullName: string;
      installationId?: number;
      branch: string;
      headSha: string;
    }
  | GateRequest;

const UPDATE_ACTIONS = ['opened', 'reopened', 'synchronize', 'ready_for_review', 'labeled', 'unlabeled'];

function parsePayload<T extends z.core.$ZodType>(schema: T, payload: unknown, event: string): z.infer<T> {
  const parsed = z.safeParse(schema, payload);
  if (!parsed.success) throw new ValidationError(describeIssues(`${event} payload`, parsed.error));
  return parsed.data;
}

/**
 * What a delivery means for previews, or why it means nothing (`ignored`). Acted on: `pull_request`
 * opened, reopened, synchronize and ready_for_review (deploy the head), labeled and unlabeled (the
 * preview rules may now say otherwise) and closed (tear down); `push` to
 * the repository's default branch (redeploy environment 0). A payload of one of those that lacks what
 * the service reads is a 400 naming the field.
 */
export function normalizeDelivery(event: string, payload: unknown): Normalized | { ignored: string } {
  if (event === 'ping') return { ignored: 'ping' };
  if (event === 'pull_request') {
    const action = (payload as { action?: unknown } | null)?.action;
    if (typeof action === 'string' && action !== 'closed' && !UPDATE_ACTIONS.includes(action))
      return { ignored: `pull_request action "${action}" changes no preview` };
    const p = parsePayload(pullRequestPayload, payload, 'pull_request');
    if ((p.action === 'labeled' || p.action === 'unlabeled') && !p.label)
      throw new ValidationError(`pull_request payload: label is required for the ${p.action} action`);
    const base = p.repository.full_name;
    const common = {
      repoFullName: base,
      installationId: p.installation?.id,
      prNumber: p.number,
      eventAt: p.pull_request.updated_at,
    };
    if (p.action === 'closed')
      return { kind: 'pullRequestClosed', ...common, merged: p.pull_request.merged === true };
    const head = p.pull_request.head.repo?.full_name;
    return {
      kind: 'pullRequestUpdated',
      ...common,
      action: p.action,
      headSha: p.pull_request.head.sha.toLowerCase(),
      headRef: p.pull_request.head.ref,
      baseSha: p.pull_request.base.sha.toLowerCase(),
      fork: head === undefined || head.toLowerCase() !== base.toLowerCase(),
      draft: p.pull_request.draft === true,
      labels: (p.pull_request.labels ?? []).map((l) => l.name),
      ...(p.pull_request.user?.login ? { author: p.pull_request.user.login } : {}),
      ...(p.label && (p.action === 'labeled' || p.action === 'unlabeled') ? { label: p.label.name } : {}),
    };
  }
  if (event === 'push') {
    const p = parsePayload(pushPayload, payload, 'push');
    if (!p.ref.startsWith('refs/heads/')) return { ignored: `push of ${p.ref}, not of a branch` };
    const branch = p.ref.slice('refs/heads/'.length);
    if (p.deleted) return { ignored: `branch ${branch} was deleted` };
    if (branch !== p.repository.default_branch)
      return { ignored: `push to ${branch}, not to the default branch ${p.repository.default_branch}` };
    return {
      kind: 'defaultBranchPushed',
      repoFullName: p.repository.full_name,
      installationId: p.installation?.id,
      branch,
      headSha: p.after.toLowerCase(),
    };
  }
  if (event === 'check_run' || event === 'issue_comment') return normalizeGateDelivery(event, payload);
  return { ignored: `event "${event}" is not acted on` };
}

// ---------------------------------------------------------------------------------------------------
// The service bus events (the details the consumers read)
// ---------------------------------------------------------------------------------------------------

const orgId = rowId;
export const pullRequestUpdatedDetail = z.object({
  orgId,
  repoFullName,
  prNumber,
  headSha: sha,
  headRef: ref,
  baseSha: z.optional(sha),
  fork: z.boolean(),
  eventAt: nonEmpty,
  deliveryId: z.optional(z.string()),
  // What the application's preview rules read (core/applications/preview-rules.ts); an event put by hand may
  // leave them out (no labels, no author known).
  labels: z.optional(z.array(labelName).check(z.maxLength(1000))),
  author: z.optional(z.string().check(z.maxLength(255))),
  // The webhook's verdict under the rules; absent (an event put by hand), the consumer decides.
  verdict: z.optional(
    z.union([
      z.object({ preview: z.literal(true) }),
      z.object({ preview: z.literal(false), reason: nonEmpty }),
    ]),
  ),
});
export const pullRequestClosedDetail = z.object({
  orgId,
  repoFullName,
  prNumber,
  merged: z.optional(z.boolean()),
  eventAt: nonEmpty,
  deliveryId: z.optional(z.string()),
});
export const defaultBranchPushedDetail = z.object({
  orgId,
  applicationId: rowId,
  repoFullName,
  branch: ref,
  headSha: sha,
  deliveryId: z.optional(z.string()),
});
/** The documented custom event: `detail-type: "Preview Redeploy Requested"`. */
export const redeployRequestedDetail = z
  .object({
    orgId,
    repoFullName,
    prNumber: z.number().check(z.int(), z.gte(0), z.lte(MAX_PR)),
    app: z.optional(appName),
    mode: z.optional(z.enum(['rebuild', 'restart'])),
  })
  .check(
    z.refine((d) => d.mode === undefined || d.app !== undefined, {
      message: 'mode applies to one app: name the app',
      path: ['mode'],
    }),
  );

export type PullRequestUpdatedDetail = z.infer<typeof pullRequestUpdatedDetail>;
export type PullRequestClosedDetail = z.infer<typeof pullRequestClosedDetail>;
export type DefaultBranchPushedDetail = z.infer<typeof defaultBranchPushedDetail>;
export type RedeployRequestedDetail = z.infer<typeof redeployRequestedDetail>;

// ---------------------------------------------------------------------------------------------------
// The webhook
// ---------------------------------------------------------------------------------------------------

export interface WebhookDeps {
  bus: EventBus;
  sourceHost: Pick<SourceHost, 'installation' | 'changedFiles'>;
  /** AWS: act only when the installation covering the repository is the event's. */
  checkInstallation: boolean;
}

export interface WebhookDelivery {
  /** `X-GitHub-Event`. */
  event: string | undefined;
  /** `X-GitHub-Delivery`. */
  deliveryId: string | undefined;
  payload: unknown;
}

export type WebhookOutcome = { accepted: true; deliveryId: string; events: number } | { ignored: string };

const DELIVERY_RE = /^[A-Za-z0-9-]{1,100}$/;
/** How long a delivery id is remembered (GitHub offers redelivery for three days). */
const DELIVERY_TTL_SECONDS = 7 * 24 * 3600;

/**
 * The applications a delivery acts through, one per organization: each organization that linked the
 * repository, through its application linked to it (the one a deploy of the API uses), unless that one
 * is disabled or, where installations are checked, switched off.
 */
async function actingApplications(repo: string, deps: WebhookDeps): Promise<Application[]> {
  const apps: Application[] = [];
  for (const org of await orgsLinkingRepo(repo)) {
    const app = await findApplicationByRepo(org, repo);
    if (!app?.repoFullName || app.disabled) continue;
    if (deps.checkInstallation && !app.installationActive) continue;
    apps.push(app);
  }
  return apps;
}

/** The bus events of a delivery, one per acting application (organization), with its rules' verdict. */
function eventsOf(n: Normalized, apps: Acting[], deliveryId: string): BusEvent[] {
  const of = ({ app, verdict }: Acting): Pick<BusEvent, 'detailType' | 'detail'> => {
    const common = { orgId: app.orgId, repoFullName: app.repoFullName!, deliveryId };
    if (n.kind === 'gateRequested')
      return {
        detailType: DETAIL_TYPES.gateRequested,
        detail: { ...common, prNumber: n.prNumber, request: n.request },
      };
    if (n.kind === 'pullRequestClosed')
      return {
        detailType: DETAIL_TYPES.pullRequestClosed,
        detail: { ...common, prNumber: n.prNumber, merged: n.merged, eventAt: n.eventAt },
      };
    if (n.kind === 'defaultBranchPushed')
      return {
        detailType: DETAIL_TYPES.defaultBranchPushed,
        detail: { ...common, applicationId: app.applicationId, branch: n.branch, headSha: n.headSha },
      };
    return {
      detailType: DETAIL_TYPES.pullRequestUpdated,
      detail: {
        ...common,
        prNumber: n.prNumber,
        headSha: n.headSha,
        headRef: n.headRef,
        baseSha: n.baseSha,
        fork: n.fork,
        eventAt: n.eventAt,
        labels: n.labels,
        ...(n.author ? { author: n.author } : {}),
        ...(verdict ? { verdict } : {}),
      },
    };
  };
  return apps.map((a) => ({ source: GITHUB_EVENT_SOURCE, ...of(a) }));
}

/** An application a delivery acts through, and for a pull request update its rules' verdict. */
interface Acting {
  app: Application;
  verdict?: Verdict;
}

/** Whether the pull request has a preview now (deployed or on its way, not torn down nor tearing down). */
async function hasPreview(orgId: string, repoFullName: string, prNumber: number): Promise<boolean> {
  const env = await findEnvironment(orgId, keys.environments.envKey(repoFullName, prNumber));
  return env !== undefined && env.status !== 'torn_down' && !env.tornDownRequested;
}

/**
 * A pull request update under each acting application's preview rules (core/applications/preview-rules.ts):
 * the applications it acts through, each with its verdict, and the reasons of those it leaves out. An
 * application is left out when the rules skip the pull request and it has no preview (nothing to tear down),
 * and, for a label added or removed, when that label is none of its rule labels or the verdict is to keep the
 * preview it already has. The changed files are asked of the source host once, and only when an application
 * has `paths`.
 */
async function judgeUpdate(
  n: Extract<Normalized, { kind: 'pullRequestUpdated' }>,
  apps: Application[],
  sourceHost: Pick<SourceHost, 'changedFiles'>,
): Promise<{ acting: Acting[]; reasons: string[] }> {
  let files: Promise<string[] | undefined> | undefined;
  const facts: PullRequestFacts = {
    labels: n.labels,
    ...(n.author ? { author: n.author } : {}),
    changedFiles: () => {
      files ??= sourceHost.changedFiles(n.repoFullName, {
        number: n.prNumber,
        headSha: n.headSha,
        baseSha: n.baseSha,
      });
      return files;
    },
  };
  const acting: Acting[] = [];
  const reasons: string[] = [];
  for (const app of apps) {
    const rules = previewRulesOf(app);
    if (n.label !== undefined && !labelMatters(rules, n.label)) {
      reasons.push(`label "${n.label}" changes no preview`);
      continue;
    }
    const verdict = await decide(rules, facts);
    const live =
      verdict.preview && n.label === undefined
        ? undefined
        : await hasPreview(app.orgId, app.repoFullName!, n.prNumber);
    if (!verdict.preview && !live) reasons.push(verdict.reason);
    else if (verdict.preview && live) reasons.push('the pull request has its preview already');
    else acting.push({ app, verdict });
  }
  return { acting, reasons };
}

/**
 * A verified GitHub webhook delivery (POST /v1/github/webhooks; the signature was checked before the
 * body was parsed). Answers fast: the deploys and teardowns run behind the bus.
 * Steps: 400 without `X-GitHub-Event` or a well-formed `X-GitHub-Delivery`; read the delivery (ignored
 * when it means nothing for previews); in AWS, ignored unless the installation covering the repository
 * is the event's; find the organizations it acts for (ignored when none: no application links the
 * repository, or every one is disabled; a draft only for those whose application deploys drafts; a
 * pull request update only for those whose preview rules give it a preview, or skip one that has a
 * preview, which is then torn down: `judgeUpdate`);
 * claim the delivery id (a redelivery is ignored: it changes nothing); put one event per organization on
 * the bus (on failure the claim is released and the answer is a 5xx: GitHub does not redeliver by itself,
 * but the `webhookRedelivery` schedule asks it to, and the redelivery, same GUID, can then do it;
 * core/github/redelivery.ts).
 */
export async function receiveWebhook(deps: WebhookDeps, delivery: WebhookDelivery): Promise<WebhookOutcome> {
  if (!delivery.event) throw new ValidationError('X-GitHub-Event header is required');
  const deliveryId = delivery.deliveryId?.trim();
  if (!deliveryId || !DELIVERY_RE.test(deliveryId))
    throw new ValidationError('X-GitHub-Delivery header is required (a delivery GUID)');
  const n = normalizeDelivery(delivery.event, delivery.payload);
  if ('ignored' in n) return n;

  if (deps.checkInstallation) {
    if (n.installationId === undefined) return { ignored: 'the payload names no installation' };
    const found = await deps.sourceHost.installation(n.repoFullName);
    if (found?.installationId !== String(n.installationId))
      return { ignored: `installation ${n.installationId} does not cover ${n.repoFullName}` };
  }

  let apps = await actingApplications(n.repoFullName, deps);
  if (apps.length === 0) return { ignored: `no application links ${n.repoFullName}` };
  if (n.kind === 'pullRequestUpdated' && n.draft) {
    apps = apps.filter((a) => a.deployDrafts === true);
    if (apps.length === 0) return { ignored: 'draft pull request: it deploys once it is ready for review' };
  }
  let acting: Acting[] = apps.map((app) => ({ app }));
  if (n.kind === 'pullRequestUpdated') {
    const judged = await judgeUpdate(n, apps, deps.sourceHost);
    if (judged.acting.length === 0) return { ignored: [...new Set(judged.reasons)].join('; ') };
    acting = judged.acting;
  }

  const key = keys.deliveries.github(deliveryId);
  const now = Math.floor(Date.now() / 1000);
  try {
    await ddb().send(
      new PutCommand({
        TableName: table('deliveries'),
        Item: {
          deliveryId: key,
          event: delivery.event,
          receivedAt: new Date().toISOString(),
          expiresAt: now + DELIVERY_TTL_SECONDS,
        },
        ConditionExpression: 'attribute_not_exists(deliveryId)',
      }),
    );
  } catch (err) {
    if (isConditionFailure(err)) return { ignored: `delivery ${deliveryId} was already received` };
    throw err;
  }
  try {
    await deps.bus.put(eventsOf(n, acting, deliveryId));
  } catch (err) {
    await ddb()
      .send(new DeleteCommand({ TableName: table('deliveries'), Key: { deliveryId: key } }))
      .catch(() => undefined);
    throw err;
  }
  log.info('webhook delivery accepted', { deliveryId, kind: n.kind, events: acting.length });
  return { accepted: true, deliveryId, events: acting.length };
}

// ---------------------------------------------------------------------------------------------------
// The consumers
// ---------------------------------------------------------------------------------------------------

export interface ConsumerDeps {
  workflows: Workflows;
  prStatus: PrStatus;
  /** The merge gate's links, when the service knows its public URL. */
  links?: GateLinks;
}

/**
 * The verdict of an event put by hand (no `verdict` in its detail): the rules of the organization's
 * application for the repository, read against the labels and author the detail names (none when it
 * names none) and the files the source host says the pull request changes.
 */
async function verdictOf(
  sourceHost: Pick<SourceHost, 'changedFiles'>,
  d: PullRequestUpdatedDetail,
): Promise<Verdict> {
  if (d.verdict) return d.verdict;
  const app = await findApplicationByRepo(d.orgId, d.repoFullName);
  // No application (or a disabled one): requestPrDeploy answers that.
  if (!app) return { preview: true };
  return decide(previewRulesOf(app), {
    labels: d.labels ?? [],
    ...(d.author ? { author: d.author } : {}),
    changedFiles: () =>
      sourceHost.changedFiles(d.repoFullName, { number: d.prNumber, headSha: d.headSha, baseSha: d.baseSha }),
  });
}

/**
 * Pull Request Updated: deploy the head (the API's `requestPrDeploy`: a new generation supersedes any deploy
 * in flight; a fork's head is marked so its apps get no secret bundles), then show it on the PR. When the
 * application's preview rules skip the pull request (the webhook's verdict, or for an event put by hand the
 * rules read here: `verdictOf`), its preview, if it has one, is torn down instead, with the reason, which the
 * PR comment then shows; without one nothing happens. Events are acted on in the order of their `updated_at`
 * (core/environments/source-order.ts): an older one, or the same one again, is `stale`; of two in the same
 * second, the one whose head the source host gives as the pull request's head now (asked only then) wins,
 * whichever arrives first; a teardown for the rules wins a tie, as a close does.
 */
export async function onPullRequestUpdated(
  deps: ConsumerDeps & { sourceHost: Pick<SourceHost, 'pullRequestHead' | 'changedFiles'> },
  d: PullRequestUpdatedDetail,
): Promise<string> {
  const verdict = await verdictOf(deps.sourceHost, d);
  if (!verdict.preview) {
    const ref = { orgId: d.orgId, repoFullName: d.repoFullName, prNumber: d.prNumber };
    const env = await findEnvironment(d.orgId, keys.environments.envKey(d.repoFullName, d.prNumber));
    if (!env || env.status === 'torn_down' || env.tornDownRequested) return `skipped: ${verdict.reason}`;
    const done = await requestTeardown(deps.workflows, ref, {
      order: orderKey(d.eventAt, true),
      reason: verdict.reason,
    });
    return done === 'requested' ? `teardown requested: ${verdict.reason}` : done;
  }
  const isCurrent = async () => {
    const now = await deps.sourceHost.pullRequestHead(d.repoFullName, {
      number: d.prNumber,
      headRef: d.headRef,
    });
    return now?.toLowerCase() === d.headSha.toLowerCase();
  };
  let env: Environment;
  try {
    env = await requestPrDeploy(
      deps.workflows,
      d.orgId,
      d.repoFullName,
      d.prNumber,
      {
        headSha: d.headSha,
        headRef: d.headRef,
        ...(d.baseSha ? { baseSha: d.baseSha } : {}),
        ...(d.fork ? { fork: true } : {}),
      },
      { order: orderKey(d.eventAt, false), head: { sha: d.headSha, isCurrent } },
    );
  } catch (err) {
    if (err instanceof StaleEvent) return 'stale';
    throw err;
  }
  await reportStatus(deps, env);
  // The merge gate: this head's check run `queued`, and the one of a head it supersedes `cancelled`.
  await syncGate(deps, env);
  return 'deploy requested';
}

/**
 * Pull Request Closed: tear the preview down (the API's `requestTeardown`: a deploy in flight is
 * superseded, so a close during a build ends `torn_down`). The teardown step reports it on the PR.
 */
export async function onPullRequestClosed(
  deps: Pick<ConsumerDeps, 'workflows'>,
  d: PullRequestClosedDetail,
): Promise<string> {
  const ref = { orgId: d.orgId, repoFullName: d.repoFullName, prNumber: d.prNumber };
  const done = await requestTeardown(deps.workflows, ref, { order: orderKey(d.eventAt, true) });
  return done === 'stale' ? 'stale' : done === 'absent' ? 'no such environment' : 'teardown requested';
}

/** Default Branch Pushed: redeploy the main-branch environment (the API's `requestMainBranchDeploy`). */
export async function onDefaultBranchPushed(
  deps: ConsumerDeps & { sourceHost: SourceHost },
  d: DefaultBranchPushedDetail,
): Promise<string> {
  const out = await requestMainBranchDeploy(deps, d.orgId, d.applicationId, d.branch);
  await reportStatus(deps, { orgId: d.orgId, envKey: keys.environments.envKey(out.repoFullName, 0) });
  return `deploy of ${out.branch} at ${out.headSha.slice(0, 12)} requested`;
}

/**
 * Preview Redeploy Requested: redeploy the whole environment (`requestRedeploy`) or one app
 * (`requestAppRedeploy`, `mode` rebuild by default), with the API's 404s and 409s.
 */
export async function onRedeployRequested(deps: ConsumerDeps, d: RedeployRequestedDetail): Promise<string> {
  const ref = { orgId: d.orgId, repoFullName: d.repoFullName, prNumber: d.prNumber };
  if (d.app) await requestAppRedeploy(deps.workflows, ref, d.app, d.mode ?? 'rebuild');
  else await requestRedeploy(deps.workflows, ref);
  await reportStatus(deps, { orgId: d.orgId, envKey: keys.environments.envKey(d.repoFullName, d.prNumber) });
  return d.app ? `redeploy of ${d.app} (${d.mode ?? 'rebuild'}) requested` : 'redeploy requested';
}
