/*
 * Applications, the front of the domain: organizations and their applications (applications.ts); who may
 * open a preview, the front door's settings, access keys and a run's access cookie (access.ts), and the
 * verifier the front door asks (access-verify.ts); which pull requests get a preview (preview-rules.ts);
 * each organization's fair share of requests, deploys and runs (fair-share.ts).
 */

export {
  type AccessMode,
  type AccessSettings,
  accessKey,
  accessUrls,
  assertProtectable,
  effectiveAccess,
  effectiveSleepMinutes,
  ensureAccessKey,
  parseAccessMode,
  parseSleepMinutes,
  prepareRunAccess,
  type RunAccessCookie,
  rotateAccessKey,
} from './access.js';
export { openedLink, verifyAccess } from './access-verify.js';
export {
  type Application,
  type ApplicationSettings,
  createApplication,
  createOrganization,
  DEFAULT_TTL_HOURS,
  findApplicationByRepo,
  getApplication,
  listApplications,
  MAX_TTL_HOURS,
  type OrgCredentials,
  organizationExists,
  orgsLinkingRepo,
  parseAllowedOrigins,
  toApplicationView,
  updateApplication,
} from './applications.js';
export { assertDeploySlot, assertRunSlot, describeFairShare, takeRequest } from './fair-share.js';
export {
  decide,
  labelMatters,
  type PullRequestFacts,
  parsePreviewRuleSettings,
  previewRulesOf,
  type Verdict,
} from './preview-rules.js';
