/**
 * The MediaStore port: screenshots and videos of test runs, and the signed links that open a run's report
 * without credentials. Adapters: `s3.ts` and `s3-writer.ts` (a private S3 bucket, presigned GET URLs; the
 * reader and the writer), `local-files.ts` (files under the data dir, served by the local server at
 * HMAC-signed URLs; both halves). Only keys are stored with a run; URLs are minted when a run is read, so each is valid for
 * `MEDIA_URL_TTL_SECONDS` from then.
 */

/** How long a media URL stays valid once minted. */
export const MEDIA_URL_TTL_SECONDS = 3600;
/** How long a run-report link stays valid once minted (the start-run response's `url`). */
export const REPORT_LINK_TTL_SECONDS = 7 * 24 * 3600;

/** What checking a signed link found: `forbidden` (missing or wrong signature, 403), `expired` (410). */
export type LinkCheck = 'ok' | 'forbidden' | 'expired';

/**
 * Reading media: URLs of stored objects and the signed links of run reports. What the read-side routes
 * (runs get/list/report/start) need; in AWS the S3 client's presigner (nothing that uploads).
 */
export interface MediaReader {
  /**
   * A GET URL of the object under `key`, valid for `MEDIA_URL_TTL_SECONDS` from now. `baseUrl` is the
   * service's public base URL as the caller reached it (an adapter that serves media itself uses it).
   */
  url(key: string, baseUrl: string): Promise<string>;
  /**
   * The query (`expires=<epoch seconds>&sig=<HMAC>`) that lets a browser open the service path `path`
   * (a run report) without credentials until `ttlSeconds` from now.
   */
  signLink(path: string, ttlSeconds: number): Promise<string>;
  /** Check the `expires` and `sig` a request for `path` carries. */
  checkLink(path: string, expires: string | undefined, sig: string | undefined): Promise<LinkCheck>;
}

/**
 * Signing report links and nothing else: what the functions that bring the merge gate need (a run's
 * report, its failed step by the report's anchor). In AWS only the link key, no S3 client or presigner.
 */
export type LinkSigner = Pick<MediaReader, 'signLink'>;

/** Writing media: what the run executor needs (screenshots, videos). */
export interface MediaWriter {
  /** Store `body` under `key` (replacing what was there); resolves once it is durable. */
  put(key: string, body: Buffer, contentType: string): Promise<void>;
}

/**
 * The whole port, as one adapter serves it locally (`local-files.ts`). In AWS the two halves are
 * separate adapters (`s3.ts`, `s3-writer.ts`), so that a function carries only the half it uses.
 */
export interface MediaStore extends MediaReader, MediaWriter {}
