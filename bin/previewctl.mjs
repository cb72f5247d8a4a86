#!/usr/bin/env node
// previewctl: the operator CLI. Its help and API commands run from dist/previewctl.mjs, an esbuild bundle
// of lib/cli/ (node built-ins only, no TypeScript compiled per call), rebuilt here when a source
// is newer. The admin commands (orgs, apps create/update, tests import, events put) load the service's
// TypeScript with tsx. lib/cli/build.mjs says more.
import { readFileSync, statSync } from 'node:fs';

const root = new URL('..', import.meta.url);
const bundle = new URL('dist/previewctl.mjs', root);

/** Whether the bundle exists and no source it was built from has changed since. */
function fresh() {
  try {
    const built = statSync(bundle).mtimeMs;
    const inputs = JSON.parse(readFileSync(new URL('dist/previewctl.inputs.json', root), 'utf8'));
    return inputs.every((input) => statSync(new URL(input, root)).mtimeMs <= built);
  } catch {
    return false;
  }
}

async function loadMain() {
  if (fresh() || (await (await import('../lib/cli/build.mjs')).buildCli()))
    return (await import(bundle.href)).main;
  const { register } = await import('tsx/esm/api');
  register();
  return (await import('../lib/cli/main.ts')).main;
}

const admin = async (command) => {
  const { register } = await import('tsx/esm/api');
  register();
  return (await import('../lib/cli/admin-commands.ts')).main(command);
};

const main = await loadMain();
process.exitCode = await main(process.argv.slice(2), { admin });
