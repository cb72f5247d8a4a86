import { config } from '../../shared/config.js';
import { GitHubAppSourceHost } from '../source-host/github-app.js';
import { adapter, once } from './adapters.js';
import { githubAppCredentials } from './github-app.js';

/**
 * The GitHub App's REST client (AWS mode), once per container, whichever ports a handler takes from it:
 * repositories and commits (`sourceHost`), the App's webhook deliveries (webhook-deliveries.ts).
 */
export const githubAppSourceHost = /* @__PURE__ */ once(
  () => new GitHubAppSourceHost({ credentials: githubAppCredentials(), apiUrl: config().github.apiUrl }),
);

/** Repositories and commits (AWS: GitHub, as the GitHub App). */
export const sourceHost = /* @__PURE__ */ adapter('sourceHost', githubAppSourceHost);
