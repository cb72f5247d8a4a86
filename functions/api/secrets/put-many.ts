import { route } from '../../shared/http.js';

// Placeholder until this route's use case lands: an honest 501, never a fake success.
export const { main, handler } = route('putSecrets', {}, async () => ({
  statusCode: 501,
  body: { error: 'not implemented yet' },
}));
