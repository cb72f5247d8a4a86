import type { OrgCredentials } from '../../functions/core/applications/applications.js';
import { bearer, call } from '../support/api.js';
import { pollUntil, type Status, settled } from '../support/apps.js';
import type { Cloud } from './cloud-tier.js';

/*
 * Previews of acme/shop opened in the cloud simulation tier as a caller opens them: through the API, the
 * image build the pipeline starts finished by hand (fake CodeBuild's `finishBuild`, its EventBridge event
 * to the real handler), the rollout left to the real steps and watcher. What every cloud test that deploys
 * a preview on the fake cluster begins with.
 */

/** Who opens the previews: the cloud tier and the organization whose key calls the API. */
export interface PreviewCaller {
  cloud: Cloud;
  org: OrgCredentials;
}

/** A preview as its status answer has it (its additive fields too: `services`, `accessUrls`, …). */
export type PreviewStatus = Status & Record<string, any>;

/** The status path of acme/shop's preview of PR `pr` (0: the main branch's environment). */
export const previewPath = (pr: number) => `/v1/preview/environments/acme/shop/${pr}`;

export interface OpenOptions {
  /** The PR's head branch. @default `feature-<pr>` */
  headRef?: string;
  /** PR 0: deploy the main branch of this application (`POST /v1/preview/applications/<id>/0`). */
  applicationId?: string;
}

/**
 * Open acme/shop's preview of PR `pr` at `sha` (PR 0: deploy its main branch), wait for the image build it
 * starts and finish that build SUCCEEDED; the deploy goes on (`settle` waits for its end).
 */
export async function openPreview(h: PreviewCaller, pr: number, sha: string, opts: OpenOptions = {}) {
  const { cloud, org } = h;
  const builds = cloud.aws.builds.length;
  const res =
    pr === 0
      ? await call(cloud, 'POST', `/v1/preview/applications/${opts.applicationId}/0`, {
          headers: bearer(org),
        })
      : await call(cloud, 'POST', '/v1/preview/environments', {
          body: {
            repoFullName: 'acme/shop',
            prNumber: pr,
            headSha: sha,
            headRef: opts.headRef ?? `feature-${pr}`,
          },
          headers: bearer(org),
        });
  if (res.status !== 202)
    throw new Error(`opening PR ${pr} answered ${res.status}: ${JSON.stringify(res.body)}`);
  const deadline = Date.now() + 20_000;
  while (cloud.aws.builds.length <= builds) {
    if (Date.now() > deadline) throw new Error(`no image build for PR ${pr}`);
    await new Promise((r) => setTimeout(r, 20));
  }
  await cloud.invoke(
    'functions/events/image-build-finished.ts',
    cloud.aws.finishBuild(cloud.aws.builds.at(-1)!.id, 'SUCCEEDED'),
  );
}

/** Poll the preview of PR `pr` until `done` (default: ready or failed), as a caller would. */
export function settle(h: PreviewCaller, pr: number, done: (s: PreviewStatus) => boolean = settled) {
  return pollUntil(
    h.cloud,
    h.org,
    previewPath(pr),
    done as (s: Status) => boolean,
    60_000,
  ) as Promise<PreviewStatus>;
}

/** `openPreview`, then `settle`: the preview's status once its deploy ended. */
export async function deployPreview(
  h: PreviewCaller,
  pr: number,
  sha: string,
  opts: OpenOptions & { done?: (s: PreviewStatus) => boolean } = {},
): Promise<PreviewStatus> {
  await openPreview(h, pr, sha, opts);
  return settle(h, pr, opts.done);
}
