import type {
  AppSpec,
  BuildInputs,
  BuildResult,
  ServiceSpec,
  ServiceState,
} from '../../ports/runtime/port.js';
import type { AccessMode } from '../applications/index.js';

/*
 * An environment as stored and as callers see it: the record every use case of the domain reads and
 * writes, and what the runs and the GitHub domain know of it.
 */

export type EnvironmentStatus = 'pending' | 'building' | 'deploying' | 'ready' | 'failed' | 'torn_down';

/** What a redeploy needs to run the pipeline again. Records written before redeploy support lack it. */
export interface DeployInputs {
  headSha: string;
  headRef: string;
  baseSha?: string;
  /** The head is a fork's (a pull request from another repository): deployed without secret bundles. */
  fork?: boolean;
}

/** An environment as stored (table `environments`, key (orgId, envKey)). */
export interface Environment {
  orgId: string;
  envKey: string;
  repoFullName: string;
  prNumber: number;
  status: EnvironmentStatus;
  phase?: string;
  createdAt: string;
  updatedAt: string;
  lastDeployedSha?: string;
  urls: Record<string, string>;
  error?: string;
  /** Bumped by every whole-environment request; steps of an older generation change nothing. */
  generation: number;
  inputs?: DeployInputs;
  /** App names declared in the environment's preview config, once read. */
  apps?: string[];
  /** The apps as the preview config declares them (what restarts and rebuilds run). */
  appSpecs?: Record<string, AppSpec>;
  /** preview.yaml `services:`: the environment's databases, each with its seed app resolved. */
  serviceSpecs?: Record<string, ServiceSpec>;
  /** Each service's kind and state after the last deploy (the status answer's `services`). */
  services?: Record<string, ServiceState>;
  /** preview.yaml `factory`: the Environment Factory of scenario runs. */
  factory?: { app: string; path: string };
  /**
   * The access its apps were last deployed with (DeployApps; the front door): its links follow it, so a preview
   * deployed before its application was protected offers none until redeployed. Absent (older records):
   * the application's setting.
   */
  access?: AccessMode;
  /** The image each app runs from (app → `uri@digest`), in runtimes that run images. */
  images?: Record<string, string>;
  /**
   * Set by MarkFailed: the apps a failed environment stopped (a failed environment keeps nothing
   * running), each with why it is not running (`exited (exit code 1): <cause>`, `stopped: <reason>`).
   */
  stoppedApps?: Record<string, string>;
  /** What each app's build reads at the head commit (git object ids: build-inputs.ts). */
  buildInputs?: Record<string, BuildInputs>;
  /** How each app got what it runs: built, or reused from an earlier build of the same identity. */
  builds?: Record<string, BuildResult>;
  /** Set when a teardown was requested: nothing but a new deploy may run after it. */
  tornDownRequested?: boolean;
  /** A CUID naming this environment (given on its first deploy, kept after): a run's application_version_id. */
  environmentId?: string;
  /** When the last whole-environment deploy was requested (expiry counts from it). */
  lastDeployAt?: string;
  /** Ordering key of the last source-host event acted on (source-order.ts): older ones are stale. */
  sourceEventAt?: string;
  /** When the front door scaled the environment to zero (phase `asleep`); gone once it wakes. */
  asleepAt?: string;
  /** Why the preview was torn down when its pull request stopped matching the application's rules. */
  teardownReason?: string;
}

/** What callers see (PreviewStatus): the stored environment less its internal bookkeeping. */
export type PreviewStatus = Pick<
  Environment,
  | 'repoFullName'
  | 'prNumber'
  | 'status'
  | 'phase'
  | 'createdAt'
  | 'updatedAt'
  | 'lastDeployedSha'
  | 'urls'
  | 'error'
  | 'environmentId'
  | 'asleepAt'
  | 'stoppedApps'
  | 'builds'
  | 'services'
> & {
  /** Set for a pull request from a fork: its apps run without the application's secret bundles. */
  fork?: true;
  /**
   * A protected environment's way in (the front door): app → signed, expiring link that sets its access cookie.
   * Only in GET of one environment, only when its application is `protected`.
   */
  accessUrls?: Record<string, string>;
  /** Additive: the app names its preview config declares, once read (also when no URL is up). */
  apps?: string[];
};

export interface EnvRef {
  orgId: string;
  repoFullName: string;
  prNumber: number;
}
