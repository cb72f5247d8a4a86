import { type LinkSigner, REPORT_LINK_TTL_SECONDS } from '../../ports/media/port.js';
import { config } from '../../shared/config.js';
import { reportLink } from '../runs/index.js';

/*
 * The merge gate's links, from the service's public base URL (`config().publicUrl`: PUBLIC_URL; in AWS
 * the stack's `publicUrl` context key, locally the server's own URL). The check run's `details_url` is
 * the view of its head commit: locally the dashboard's per-commit view (`/?env=…&commit=…`), in AWS
 * (where the API serves no dashboard) a signed page of that head's gate (`/gate/…`, page.ts, valid
 * `REPORT_LINK_TTL_SECONDS`). Each run's row links its report (a signed link, valid
 * `REPORT_LINK_TTL_SECONDS`, as the start-run answer gives it) and a failed run its failed step's
 * screenshot (its report, at the failed step's anchor: the report page shows it). No base URL: no links
 * at all, and the check run reads as before.
 */

/** What names a head commit's view: the record's organization, environment, pull request and commit. */
export interface DetailsRef {
  orgId: string;
  envKey: string;
  repoFullName: string;
  prNumber: number;
  sha: string;
}

/** What names a head commit's page (page.ts serves it): the organization, the pull request, the commit. */
export interface CommitPageRef {
  orgId: string;
  repoFullName: string;
  prNumber: number;
  sha: string;
}

/** The page's path: `/gate/{org_id}/{owner}/{repo}/{pr}/{sha}`. */
export const commitPagePath = (ref: CommitPageRef): string =>
  `/gate/${[ref.orgId, ...ref.repoFullName.split('/'), String(ref.prNumber), ref.sha.toLowerCase()]
    .map(encodeURIComponent)
    .join('/')}`;

/** A signed link to a head commit's page, valid `REPORT_LINK_TTL_SECONDS` (as a report link). */
export async function commitPageLink(
  media: LinkSigner,
  baseUrl: string,
  ref: CommitPageRef,
): Promise<string> {
  const path = commitPagePath(ref);
  return `${baseUrl}${path}?${await media.signLink(path, REPORT_LINK_TTL_SECONDS)}`;
}

/** The links a check run carries. */
export interface GateLinks {
  /** The view of one head commit of a pull request: the dashboard's (locally) or a signed page (AWS). */
  details(ref: DetailsRef): Promise<string>;
  /** A run's report (signed, expiring). */
  report(runId: string): Promise<string>;
  /** A failed step's screenshot: where the run's report shows it (`<report link>#step-N`). */
  screenshot(reportUrl: string, step: number): string;
}

/** The dashboard, naming a head commit: `<base>/?env=<envKey>&commit=<sha>`. */
export const commitViewUrl = (baseUrl: string, ref: { envKey: string; sha: string }): string =>
  `${baseUrl}/?${new URLSearchParams({ env: ref.envKey, commit: ref.sha })}`;

/**
 * The gate's links when the service knows its public URL, else undefined. `media` is the registry's
 * link signer getter, called only when there is a URL (a function without the link key never builds one).
 */
export function gateLinks(media: () => LinkSigner): GateLinks | undefined {
  const { publicUrl: base, mode } = config();
  if (!base) return undefined;
  return {
    details: async (ref) =>
      mode === 'local' ? commitViewUrl(base, ref) : commitPageLink(media(), base, ref),
    report: (runId) => reportLink(media(), base, runId),
    screenshot: (reportUrl, step) => `${reportUrl}#step-${step}`,
  };
}
