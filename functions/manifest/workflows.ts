/**
 * The workflow manifest: each state machine's ASL file and, for every `${Placeholder}` in it, the Lambda
 * entry that runs that task. CDK builds one function per entry and substitutes its ARN; the local workflow
 * adapter substitutes a local ARN and runs the same entry in-process. Plain data, like the route manifest.
 */
import type { RouteAccess, WorkflowName } from './access.js';

export type { WorkflowName } from './access.js';

export interface TaskDef {
  /** Step handler module, relative to the repository root; it exports `handler`. */
  entry: string;
  /** What the step may touch; `starts` names workflows it starts (MarkReady starts preview test runs). */
  access: RouteAccess;
}
export interface WorkflowDef {
  /** ASL file, relative to the repository root. */
  definition: string;
  /** Placeholder name (without `${}`) → task. */
  tasks: Record<string, TaskDef>;
}

// The steps that settle an environment report it on the pull request (prStatus), with its latest runs.
const markFailed: TaskDef = {
  entry: 'functions/steps/mark-failed.ts',
  // runtime: a failed environment keeps nothing running (it stops the environment's apps on the cluster).
  // tenancy (the gate's items): the merge gate's check run of the failed head (applications: whether it has preview tests);
  // no gateLinks: a failed preview's check run links no report, and its environment is at Lambda's 4 KB.
  access: {
    tables: { environments: 'RW', runs: 'R', tenancy: 'RW', applications: 'R' },
    prStatus: true,
    runtime: true,
  },
};
const buildImages: TaskDef = {
  entry: 'functions/steps/build-images.ts',
  // completesTasks: the build ends its own task when every image exists already (else imageBuildFinished).
  access: {
    tables: { environments: 'RW', builds: 'RW' },
    artifacts: 'R',
    imageBuilds: true,
    completesTasks: true,
  },
};
const deployApps: TaskDef = {
  entry: 'functions/steps/deploy-apps.ts',
  // runtime and invokesWatcher: it deploys to the cluster and starts the rollout watcher, which ends the task.
  access: {
    tables: { environments: 'RW', applications: 'R' },
    // RW: it stores the passwords of the environment's services when it first makes them.
    secrets: 'RW',
    runtime: true,
    invokesWatcher: true,
  },
};
const markReady: TaskDef = {
  entry: 'functions/steps/mark-ready.ts',
  // prStatus: the status on the pull request (secrets: a protected preview's comment carries links signed
  // with its application's access key); starts testRun: the app's `run_on_preview` tests.
  access: {
    tables: { environments: 'RW', applications: 'R', tests: 'R', runs: 'RW', tenancy: 'RW' },
    secrets: 'R',
    prStatus: true,
    gateLinks: true,
    starts: ['testRun'],
  },
};

export const workflows = {
  deploy: {
    definition: 'statemachines/deploy.asl.json',
    tasks: {
      FetchSourceFunctionArn: {
        entry: 'functions/steps/fetch-source.ts',
        access: { tables: { environments: 'RW' }, sourceHost: true, artifacts: 'RW' },
      },
      ReadConfigFunctionArn: {
        entry: 'functions/steps/read-config.ts',
        access: { tables: { environments: 'RW' }, sourceHost: true },
      },
      BuildImagesFunctionArn: buildImages,
      DeployAppsFunctionArn: deployApps,
      MarkReadyFunctionArn: markReady,
      MarkFailedFunctionArn: markFailed,
    },
  },
  teardown: {
    definition: 'statemachines/teardown.asl.json',
    tasks: {
      TearDownFunctionArn: {
        entry: 'functions/steps/tear-down.ts',
        // runtime: it removes the environment from the cluster (no watcher, no callback task); secrets:
        // it forgets the passwords of the environment's services; tenancy/applications: it ends the
        // head commit's check run.
        access: {
          tables: { environments: 'RW', runs: 'R', tenancy: 'RW', applications: 'R' },
          runtime: true,
          prStatus: true,
          secrets: 'RW',
        },
      },
      MarkFailedFunctionArn: markFailed,
    },
  },
  redeployApp: {
    definition: 'statemachines/redeploy-app.asl.json',
    tasks: {
      BuildImagesFunctionArn: buildImages,
      DeployAppsFunctionArn: deployApps,
      MarkReadyFunctionArn: markReady,
      MarkFailedFunctionArn: markFailed,
    },
  },
  testRun: {
    definition: 'statemachines/test-run.asl.json',
    tasks: {
      RunPrepareFunctionArn: {
        entry: 'functions/steps/run-prepare.ts',
        access: { tables: { runs: 'RW', applications: 'R', environments: 'R' } },
      },
      RunExecuteFunctionArn: {
        entry: 'functions/steps/run-execute.ts',
        // The browser Lambda: x86_64, >= 2 GB, 15 min, @sparticuz/chromium and ffmpeg (see `browser`).
        // recipes: the scenario a test names (scenario data).
        // media: 'W': it stores screenshots and videos; it mints no URL and signs no link.
        // tenancy (the gate's items), environments, prStatus: the run's end brings its merge gate's check run up to date.
        access: {
          tables: { runs: 'RW', recipes: 'R', tenancy: 'RW', environments: 'R' },
          secrets: 'R',
          media: 'W',
          browser: true,
          prStatus: true,
          gateLinks: true,
        },
      },
      RunMarkFailedFunctionArn: {
        entry: 'functions/steps/run-mark-failed.ts',
        // secrets: R, the factory signing secret, for the `down` a dead executor still owes.
        access: {
          tables: { runs: 'RW', tenancy: 'RW', environments: 'R' },
          secrets: 'R',
          prStatus: true,
          gateLinks: true,
        },
      },
    },
  },
} as const satisfies Record<WorkflowName, WorkflowDef>;

/** Fake but well-formed ARN for a placeholder in local mode. */
export const localTaskArn = (placeholder: string): string =>
  `arn:aws:lambda:local:000000000000:function:${placeholder.replace(/FunctionArn$/, '')}`;

/** Substitute `${Name}` placeholders in an ASL document. */
export function substitute(asl: string, values: Record<string, string>): string {
  return asl.replace(/\$\{(\w+)\}/g, (whole, name: string) => values[name] ?? whole);
}
