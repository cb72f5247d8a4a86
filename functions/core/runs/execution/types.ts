import type { Browser } from '../../../ports/browser/port.js';
import type { MediaWriter } from '../../../ports/media/port.js';
import type { SecretStore } from '../../../ports/secret-store/port.js';
import type { FactoryClientOptions } from '../../scenarios/index.js';
import type { RunTarget } from '../store.js';

/*
 * What executing a run takes: the ports and limits its caller hands in (the Execute step, the local
 * server), and the run it executes. Shared by the executor, each attempt and the scenario provisioning.
 */

export interface ExecuteDeps {
  browser: Browser;
  media: MediaWriter;
  secrets: SecretStore;
  /** Defaults when the test sets none (config: 15 s and 600 s unless changed). */
  stepTimeoutSeconds: number;
  runTimeoutSeconds: number;
  /** How long a sleeping preview may take to wake before the first step (PREVIEW_WAKE_TIMEOUT_SECONDS). */
  wakeTimeoutSeconds: number;
  now?: () => number;
  /** Retry and timeout limits of Environment Factory requests (30 s each unless changed: tests). */
  factory?: FactoryClientOptions;
  /**
   * The executor Lambda's remaining time (its context's getRemainingTimeInMillis): the steps stop early
   * enough to leave the reserve for the video, its upload and `down` (deadline.ts). Absent
   * locally, where the run's own limit alone applies.
   */
  remainingMs?: () => number;
  /** This invocation's id (the Lambda request id): its claim on the run's attempt (claims.ts). */
  invocationId?: string;
  /** How often a retried executor looks whether the first one ended the run (2 s unless changed: tests). */
  claimPollMs?: number;
  /** Wake the run's environment if it sleeps (the front door; local: the runtime's `wake`; AWS: absent). */
  wake?: (ref: { orgId: string; envKey: string }) => Promise<void>;
  /**
   * Where the service's own calls (the factory's `up`/`down`) reach each app of the run's environment
   * (behind the front door; local: the runtime's `serviceUrls`, the apps' own ports; AWS: absent, the public URLs).
   */
  serviceUrls?: (ref: { orgId: string; envKey: string }) => Promise<Record<string, string> | undefined>;
}

export interface ExecuteInput {
  runId: string;
  attempt: string;
  target: RunTarget;
}
