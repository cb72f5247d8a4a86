import type { APIGatewayProxyEvent } from 'aws-lambda';
import { authenticate } from '../../core/auth/index.js';
import type { RouteDef } from '../../manifest/routes.js';
import { headersOf, type Middleware } from './request.js';

export interface AuthnOptions {
  /** The credential kind the route takes (its manifest's `auth`). */
  kind: RouteDef['auth'];
  /** `githubWebhook` routes: the webhook secret the signature is checked against. */
  webhookSecret?: () => Promise<string>;
  /** Who checks the credentials. @default core/auth.ts `authenticate` */
  authenticate?: typeof authenticate;
}

/**
 * Authenticates with the route's credential kind; 401 when missing or wrong. Reads the headers once for
 * the whole chain (`internal.headers`) and no body, but for a `githubWebhook` route, whose signature
 * covers the body: its bytes as received, before any parsing. So a caller without credentials gets 401
 * whatever the body is.
 */
export const authn = ({
  kind,
  webhookSecret,
  authenticate: check = authenticate,
}: AuthnOptions): Middleware => ({
  before: async (request) => {
    const internal = request.internal;
    internal.headers = headersOf(request.event);
    internal.principal = await check(
      kind,
      internal.headers,
      kind === 'githubWebhook' && webhookSecret
        ? { rawBody: rawBytesOf(request.event), secret: webhookSecret }
        : undefined,
    );
  },
});

/** The body's bytes as received (API Gateway base64-encodes a body it does not pass as text). */
function rawBytesOf(event: APIGatewayProxyEvent): Buffer {
  const body = event.body ?? '';
  return event.isBase64Encoded ? Buffer.from(body, 'base64') : Buffer.from(body, 'utf8');
}
