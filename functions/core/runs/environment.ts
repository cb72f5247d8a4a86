import type { Environment } from '../environments/index.js';

/*
 * Which environment a test run ran against, named the way people name it: the repository, the pull request
 * (0: the main-branch environment) and the commit its apps were deployed from. Resolved with the run's target
 * (core/runs/target.ts `resolveTarget`), stored with it, and shown in the TestRun (`environment`, additive)
 * and in the run's report header.
 */

/** Stored with a run's target (`RunTarget.environment`). */
export interface RunEnvironment {
  repoFullName: string;
  prNumber: number;
  /** The commit the environment's apps run (its last deploy's head). */
  sha?: string;
}

/** What a TestRun shows of it (snake_case, as the TestRun's other fields). */
export interface RunEnvironmentView {
  repository: string;
  pr_number: number;
  commit: string | null;
}

export function runEnvironmentOf(env: Environment): RunEnvironment {
  const sha = env.lastDeployedSha ?? env.inputs?.headSha;
  return { repoFullName: env.repoFullName, prNumber: env.prNumber, ...(sha ? { sha } : {}) };
}

/** The TestRun's additive `environment`, once the run's target was resolved (nothing before). */
export function environmentView(run: { target?: { environment?: RunEnvironment } }): {
  environment?: RunEnvironmentView;
} {
  const e = run.target?.environment;
  if (!e) return {};
  return { environment: { repository: e.repoFullName, pr_number: e.prNumber, commit: e.sha ?? null } };
}

/** One line for the report header: `acme/shop · PR #7 · commit 1a2b3c4` (PR 0: `main branch`). */
export function environmentLine(e: RunEnvironment): string {
  return [
    e.repoFullName,
    e.prNumber === 0 ? 'main branch' : `PR #${e.prNumber}`,
    ...(e.sha ? [`commit ${e.sha.slice(0, 7)}`] : []),
  ].join(' · ');
}
