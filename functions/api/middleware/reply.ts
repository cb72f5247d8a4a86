import type { APIGatewayProxyResult } from 'aws-lambda';

/** An answer as the API writes every JSON one (replies and errors alike). */
export const json = (statusCode: number, body: unknown): APIGatewayProxyResult => ({
  statusCode,
  headers: { 'content-type': 'application/json' },
  // A trailing newline, so a body printed by curl does not run into the shell prompt.
  body: `${JSON.stringify(body)}\n`,
});
