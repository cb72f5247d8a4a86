import type { LinkSigner } from '../../ports/media/port.js';
import { config } from '../../shared/config.js';
import { reportLink } from '../runs/index.js';

/*
 * The merge gate's links, from the service's public base URL (`config().publicUrl`: PUBLIC_URL; in AWS
 * the stack's `publicUrl` context key, locally the server's own URL). The check run's `details_url` is
 * the dashboard, naming the head commit (locally only: the API serves no dashboard); each run's row links its report (a signed link, valid
 * `REPORT_LINK_TTL_SECONDS`, as the start-run answer gives it) and a failed run its failed step's
 * screenshot (a media URL, valid `MEDIA_URL_TTL_SECONDS`, as the report page mints them). No base URL:
 * no links at all, and the check run reads as before.
 */

/** The links a check run carries. */
export interface GateLinks {
  /**
   * The dashboard, naming one head commit of a pull request (`?env=…&commit=…`). Only where the
   * service serves the dashboard (the local server; the API in AWS serves none yet): no broken link.
   */
  details(ref: { envKey: string; sha: string }): string | undefined;
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
 * getter, called only when there is a URL (a function without media access never builds a reader).
 */
export function gateLinks(media: () => LinkSigner): GateLinks | undefined {
  const { publicUrl: base, mode } = config();
  if (!base) return undefined;
  return {
    details: (ref) => (mode === 'local' ? commitViewUrl(base, ref) : undefined),
    report: (runId) => reportLink(media(), base, runId),
    screenshot: (reportUrl, step) => `${reportUrl}#step-${step}`,
  };
}
