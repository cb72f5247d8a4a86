#!/usr/bin/env node
// previewctl: operator CLI. A JS shim so `npx previewctl` works without a build step: tsx loads the
// TypeScript sources the service itself runs.
import { register } from 'tsx/esm/api';

register();
const { main } = await import('../lib/local/cli.ts');
process.exitCode = await main(process.argv.slice(2));
