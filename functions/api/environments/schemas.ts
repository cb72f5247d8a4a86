import * as z from 'zod/mini';
import { owner, prPath, repo } from '../../shared/validation.js';

/** Path of one environment: `{owner}/{repo}/{pr}`. */
export const envPathSchema = z.object({ owner, repo, pr: prPath });
export type EnvPath = z.infer<typeof envPathSchema>;

export const envRef = (orgId: string, p: EnvPath) => ({
  orgId,
  repoFullName: `${p.owner}/${p.repo}`,
  prNumber: p.pr,
});
