import type { APIGatewayProxyEvent } from 'aws-lambda';

/**
 * The path prefix of the API's stage as the caller reached it: the default execute-api host carries the
 * stage as the first path segment (`/api`); custom domains and the local server do not (empty).
 */
export function stagePath(event: Pick<APIGatewayProxyEvent, 'requestContext'>, host: string): string {
  return host.includes('.execute-api.') && event.requestContext?.stage
    ? `/${event.requestContext.stage}`
    : '';
}
