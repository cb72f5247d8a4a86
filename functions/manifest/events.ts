/**
 * The event manifest: each EventBridge rule the service owns and the Lambda it invokes. Read by the CDK
 * stateless stack (a rule, its target with a DLQ and a retry policy, and the function with an on-failure
 * destination, since EventBridge invokes a Lambda asynchronously) and, for rules on the service's own bus,
 * by the local in-process bus. Plain data, like the route manifest.
 */
import type { RouteAccess } from './access.js';

export interface EventTargetDef {
  /** Handler module, relative to the repository root; it exports `handler` (an EventBridge event). */
  entry: string;
  access: Omit<RouteAccess, 'starts'> & Pick<RouteAccess, 'starts'>;
}

/**
 * The access of a source change that deploys (a pull request updated, the default branch pushed): the
 * application and environment read, the environment written, `deploy` started, the source host asked for
 * the head when two updates share a second (core/environments/source-order.ts), the PR status reported.
 */
const DEPLOYS_A_SOURCE_CHANGE: EventTargetDef['access'] = {
  tables: { applications: 'R', environments: 'RW', runs: 'R' },
  starts: ['deploy'],
  sourceHost: true,
  prStatus: true,
};

export interface EventRuleDef {
  description: string;
  /**
   * `default`: the account's default bus (AWS service events). `service`: the service's own bus
   * (EVENT_BUS_NAME), which takes events only from its own account; the local server's in-process bus
   * delivers these rules to the same targets.
   */
  bus: 'default' | 'service';
  /** The rule's event pattern, less what CDK adds from the stack (`detail.project-name` below). */
  pattern: { source: string[]; 'detail-type': string[]; detail?: Record<string, unknown> };
  /** Match only the stack's own image-build project (CDK adds `detail.project-name`). */
  ownImageBuildProject?: true;
  target: EventTargetDef;
}

/**
 * The events of the service's own bus. GitHub webhooks become `preview.github` events, one per
 * organization the delivery acts for; `Preview Redeploy Requested` is the documented custom event any
 * system of the account may put (source `preview.redeploy`, detail `{orgId, repoFullName, prNumber,
 * app?, mode?}`).
 */
export const GITHUB_EVENT_SOURCE = 'preview.github';
export const REDEPLOY_EVENT_SOURCE = 'preview.redeploy';
export const DETAIL_TYPES = {
  pullRequestUpdated: 'Pull Request Updated',
  pullRequestClosed: 'Pull Request Closed',
  defaultBranchPushed: 'Default Branch Pushed',
  redeployRequested: 'Preview Redeploy Requested',
  gateRequested: 'Merge Gate Requested',
} as const;

/** CodeBuild's terminal build states (a build in any other state is still running). */
export const TERMINAL_BUILD_STATES = ['SUCCEEDED', 'FAILED', 'FAULT', 'STOPPED', 'TIMED_OUT'] as const;

const rules = {
  imageBuildFinished: {
    description: 'An image build reached a terminal state: end the BuildImages task waiting on it',
    bus: 'default',
    pattern: {
      source: ['aws.codebuild'],
      'detail-type': ['CodeBuild Build State Change'],
      detail: { 'build-status': [...TERMINAL_BUILD_STATES] },
    },
    ownImageBuildProject: true,
    target: {
      entry: 'functions/events/image-build-finished.ts',
      // environments: is the build's generation still current (a superseded one ends Superseded).
      // applications, secrets R: a failed build's output is masked with its apps' secret values.
      access: {
        tables: { builds: 'RW', environments: 'R', applications: 'R' },
        secrets: 'R',
        imageBuilds: true,
        completesTasks: true,
      },
    },
  },
  pullRequestUpdated: {
    description:
      'A pull request was opened, reopened, pushed to, marked ready or (un)labeled: deploy its head, or ' +
      "tear its preview down when the application's preview rules skip it",
    bus: 'service',
    pattern: { source: [GITHUB_EVENT_SOURCE], 'detail-type': [DETAIL_TYPES.pullRequestUpdated] },
    target: {
      entry: 'functions/events/pull-request-updated.ts',
      // prStatus: the PR comment lists the environment's latest test runs (runs, `listOrg`). sourceHost: the
      // pull request's head, read when two updates share a second (core/environments/source-order.ts), and
      // its files for an event put by hand (the `paths` rule). teardown: a pull request the application's
      // preview rules now skip has its preview torn down. tenancy (the gate's items): the head's check run `queued` (and the
      // one of the head it supersedes `cancelled`).
      access: {
        tables: { applications: 'R', environments: 'RW', runs: 'R', tenancy: 'RW' },
        starts: ['deploy', 'teardown'],
        sourceHost: true,
        prStatus: true,
        gateLinks: true,
      },
    },
  },
  pullRequestClosed: {
    description: 'A pull request was closed or merged: tear its preview down',
    bus: 'service',
    pattern: { source: [GITHUB_EVENT_SOURCE], 'detail-type': [DETAIL_TYPES.pullRequestClosed] },
    target: {
      entry: 'functions/events/pull-request-closed.ts',
      // The PR's status is reported by the teardown it starts (TearDown), not here.
      access: { tables: { environments: 'RW' }, starts: ['teardown'] },
    },
  },
  defaultBranchPushed: {
    description: "A push to the repository's default branch: redeploy the main-branch environment (0)",
    bus: 'service',
    pattern: { source: [GITHUB_EVENT_SOURCE], 'detail-type': [DETAIL_TYPES.defaultBranchPushed] },
    target: {
      entry: 'functions/events/default-branch-pushed.ts',
      access: DEPLOYS_A_SOURCE_CHANGE,
    },
  },
  previewRedeployRequested: {
    description: 'The documented custom event: redeploy a whole environment or one app',
    bus: 'service',
    pattern: { source: [REDEPLOY_EVENT_SOURCE], 'detail-type': [DETAIL_TYPES.redeployRequested] },
    target: {
      entry: 'functions/events/redeploy-requested.ts',
      access: {
        tables: { environments: 'RW', runs: 'R' },
        starts: ['deploy', 'redeployApp'],
        prStatus: true,
      },
    },
  },
  gateRequested: {
    description:
      "The merge gate was asked from the pull request: re-run a head's tests (all, or the failed ones) or " +
      'skip them with a reason',
    bus: 'service',
    pattern: { source: [GITHUB_EVENT_SOURCE], 'detail-type': [DETAIL_TYPES.gateRequested] },
    target: {
      entry: 'functions/events/gate-requested.ts',
      // starts testRun: the runs of a re-run; prStatus: the check run, and the reply to a skip refused.
      access: {
        tables: { environments: 'R', applications: 'R', tests: 'R', runs: 'RW', tenancy: 'RW' },
        starts: ['testRun'],
        prStatus: true,
        gateLinks: true,
      },
    },
  },
} as const satisfies Record<string, EventRuleDef>;

export type EventRuleId = keyof typeof rules;
/** Every rule, by id (typed as the definition, so code may read any of its optional fields). */
export const eventRules: Record<EventRuleId, EventRuleDef> = rules;

/** What a scheduled target runs on: a schedule, not a bus (EventBridge Scheduler or a scheduled rule). */
export interface ScheduleDef {
  description: string;
  /** EventBridge schedule expression. */
  schedule: string;
  /** How often the local server runs the target (its timer), in seconds, unless configured otherwise. */
  localEverySeconds: number;
  target: EventTargetDef;
}

/** The scheduled targets of the service. */
export const schedules = {
  expirySweep: {
    description:
      "Tear down preview environments that went longer than their application's ttl without a deploy; " +
      'start again the deploys and teardowns a failed start left stranded; remove stale teardown fences',
    schedule: 'rate(15 minutes)',
    localEverySeconds: 60,
    target: {
      entry: 'functions/events/expiry-sweep.ts',
      // runtime: the cluster, to remove the teardown fences that guard nothing any more.
      access: {
        tables: { environments: 'RW', applications: 'R' },
        starts: ['teardown', 'deploy'],
        runtime: true,
      },
    },
  },
  webhookRedelivery: {
    description:
      'Ask GitHub to redeliver the App webhook deliveries of the last day that failed and were never ' +
      'acted on (GitHub does not redeliver by itself); a delivery is given up after three redeliveries',
    schedule: 'rate(15 minutes)',
    // Not run by the local server: locally there is no GitHub App, so no delivery to ask for again.
    localEverySeconds: 900,
    target: {
      entry: 'functions/events/webhook-redelivery.ts',
      // deliveries: the claims of the deliveries acted on; sourceHost: the GitHub App secret and API URL.
      access: { tables: { deliveries: 'R' }, sourceHost: true },
    },
  },
  runSweep: {
    description:
      'End failed the test runs left pending or running past their time limit (an execution that ended ' +
      'without ending its run), sending the scenario down each owes, once',
    schedule: 'rate(10 minutes)',
    // Not run by the local server: it fails every run left pending or running when it starts
    // (core/runs/recovery.ts, recoverRuns), and nothing else outlives its process there.
    localEverySeconds: 600,
    target: {
      entry: 'functions/events/run-sweep.ts',
      // tenancy: the organizations whose runs it lists; secrets: R, the factory signing secret of a down.
      // tenancy (the gate's items), environments, prStatus: a swept run's merge gate completes its check run.
      access: {
        tables: { runs: 'RW', tenancy: 'RW', environments: 'R' },
        secrets: 'R',
        prStatus: true,
        gateLinks: true,
      },
    },
  },
} as const satisfies Record<string, ScheduleDef>;

export type ScheduleId = keyof typeof schedules;
