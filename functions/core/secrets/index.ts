export { deleteSecret, listSecrets, upsertSecrets } from './bundles.js';
