import type { LambdaFunctionURLEvent, LambdaFunctionURLResult } from 'aws-lambda';
import { openedLink, verifyAccess } from '../../core/applications/index.js';
import { secretStore } from '../../ports/registry/secret-store.js';
import { ACCESS_PATH, readVerifyPath } from '../../shared/access-token.js';

/**
 * The front door's access verifier, behind a Lambda function URL: ingress-nginx's external auth of protected
 * previews on EKS asks it about each visitor (core/access-verify.ts). Thin: the event in, the answer out.
 * A function URL's payload carries the `Cookie` header in `cookies` and takes `Set-Cookie`s the same way.
 * A request for ACCESS_PATH itself is a visitor's opened link (the app's access Ingress routes it here):
 * a redirect to the app's `/` (core/access-verify.ts `openedLink`).
 */
export async function handler(event: LambdaFunctionURLEvent): Promise<LambdaFunctionURLResult> {
  const headers = event.headers ?? {};
  const cookie = event.cookies?.length ? event.cookies.join('; ') : headers.cookie;
  // A Gateway's external auth: the scope in the path, the visitor's Host and path (VERIFY_PREFIX).
  const gateway = readVerifyPath(
    event.rawPath,
    event.rawQueryString ?? '',
    headers.host,
    headers['x-forwarded-proto'],
  );
  // The link's own request, routed here by the app's access Ingress after the external auth passed it.
  const answer = gateway
    ? await verifyAccess(secretStore(), { ...gateway, cookie, nowMs: Date.now(), redirectLink: true })
    : event.rawPath === ACCESS_PATH
      ? openedLink()
      : await verifyAccess(secretStore(), {
          query: event.queryStringParameters ?? {},
          cookie,
          originalUrl: headers['x-original-url'],
          nowMs: Date.now(),
        });
  return {
    statusCode: answer.statusCode,
    headers: answer.headers,
    ...(answer.cookies.length ? { cookies: answer.cookies } : {}),
    body: answer.body,
  };
}
