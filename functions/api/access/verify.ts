import type { LambdaFunctionURLEvent, LambdaFunctionURLResult } from 'aws-lambda';
import { verifyAccess } from '../../core/access-verify.js';
import { secretStore } from '../../ports/registry/secret-store.js';

/**
 * The access verifier (issue 29), behind a Lambda function URL: ingress-nginx's external auth of protected
 * previews on EKS asks it about each visitor (core/access-verify.ts). Thin: the event in, the answer out.
 * A function URL's payload carries the `Cookie` header in `cookies` and takes `Set-Cookie`s the same way.
 */
export async function handler(event: LambdaFunctionURLEvent): Promise<LambdaFunctionURLResult> {
  const headers = event.headers ?? {};
  const cookie = event.cookies?.length ? event.cookies.join('; ') : headers.cookie;
  const answer = await verifyAccess(secretStore(), {
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
