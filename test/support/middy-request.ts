import type { APIGatewayProxyEvent } from 'aws-lambda';
import type { Request, State } from '../../functions/api/middleware/request.js';
import { lambdaContext } from '../../functions/shared/aws/lambda-context.js';

/** An API Gateway event with nothing in it but `over`. */
export const apiEvent = (over: Partial<APIGatewayProxyEvent> = {}): APIGatewayProxyEvent =>
  ({
    headers: {},
    body: null,
    pathParameters: null,
    queryStringParameters: null,
    requestContext: {},
    ...over,
  }) as APIGatewayProxyEvent;

/**
 * A middy request as the chain hands it to each middleware, for testing one middleware alone: the event,
 * a local Lambda context with `requestId`, and the state earlier middlewares would have left.
 */
export function middyRequest(
  event: Partial<APIGatewayProxyEvent> = {},
  internal: Partial<State> = {},
  requestId = 'req-1',
): Request {
  return {
    event: apiEvent(event),
    context: lambdaContext('t', requestId),
    response: null,
    error: null,
    internal: { started: 0, ...internal },
  };
}
