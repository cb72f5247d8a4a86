import { config } from '../../shared/config.js';
import { GitHubAppSourceHost } from '../source-host/github-app.js';
import { adapter } from './adapters.js';
import { githubAppCredentials } from './github-app.js';

/** Repositories and commits (AWS: GitHub, as the GitHub App). */
export const sourceHost = /* @__PURE__ */ adapter(
  'sourceHost',
  () => new GitHubAppSourceHost({ credentials: githubAppCredentials(), apiUrl: config().github.apiUrl }),
);
