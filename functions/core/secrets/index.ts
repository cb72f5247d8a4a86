/*
 * Secret bundles, the front of the domain: an application's bundle per app, listed, written under a lease
 * and deleted (bundles.ts).
 */

export { deleteSecret, listSecrets, upsertSecrets } from './bundles.js';
