export { authenticate, type Principal } from './authenticate.js';
