import { config } from '../../shared/config.js';
import { GitHubAppPrStatus } from '../pr-status/github-app.js';
import { adapter } from './adapters.js';
import { githubAppCredentials } from './github-app.js';

/** Status on the pull request: GitHub Deployments and the PR comment, as the GitHub App. */
export const prStatus = /* @__PURE__ */ adapter(
  'prStatus',
  () => new GitHubAppPrStatus({ credentials: githubAppCredentials(), apiUrl: config().github.apiUrl }),
);
