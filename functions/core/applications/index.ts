export {
  type AccessMode,
  type AccessSettings,
  accessKey,
  accessUrls,
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
export { assertDeploySlot, assertRunSlot, takeRequest } from './fair-share.js';
export {
  decide,
  labelMatters,
  type PullRequestFacts,
  parsePreviewRuleSettings,
  previewRulesOf,
  type Verdict,
} from './preview-rules.js';
