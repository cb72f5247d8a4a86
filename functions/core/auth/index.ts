/*
 * Who is calling, the front of the domain: an organization's API key or client credentials, or GitHub's
 * webhook signature (authenticate.ts).
 */

export { authenticate, type Principal } from './authenticate.js';
