// Bundle previewctl's fast path (lib/cli/main.ts and what it imports: node built-ins, and dotenv's
// parser for env files, itself built-ins only) into
// dist/previewctl.mjs with esbuild, so a call compiles no TypeScript. Run by `npm ci` (the `prepare`
// script) and by bin/previewctl.mjs whenever a source is newer than the bundle. Without esbuild (an
// install without dev dependencies) it does nothing: bin/previewctl.mjs then loads the sources with tsx.
import { mkdirSync, renameSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('../..', import.meta.url));
export const BUNDLE = `${root}dist/previewctl.mjs`;
export const INPUTS = `${root}dist/previewctl.inputs.json`;

/** Build the bundle; false when esbuild is not installed. */
export async function buildCli() {
  let esbuild;
  try {
    esbuild = await import('esbuild');
  } catch {
    return false;
  }
  const result = await esbuild.build({
    // Input paths in the metafile are relative to this: the root, wherever the build runs from.
    absWorkingDir: root,
    entryPoints: [`${root}lib/cli/main.ts`],
    bundle: true,
    platform: 'node',
    format: 'esm',
    target: 'node20',
    write: false,
    metafile: true,
    outfile: BUNDLE,
    logLevel: 'silent',
    // dotenv is CommonJS and requires node built-ins: an ES module bundle gives it a `require`.
    banner: {
      js: [
        '// Built by lib/cli/build.mjs from lib/cli/*.ts; do not edit.',
        "import { createRequire as __cliRequire } from 'node:module';",
        'const require = __cliRequire(import.meta.url);',
      ].join('\n'),
    },
  });
  mkdirSync(`${root}dist`, { recursive: true });
  const tmp = `${BUNDLE}.${process.pid}.tmp`;
  const inputsTmp = `${INPUTS}.${process.pid}.tmp`;
  writeFileSync(inputsTmp, JSON.stringify(Object.keys(result.metafile.inputs)));
  renameSync(inputsTmp, INPUTS);
  writeFileSync(tmp, result.outputFiles[0].contents);
  renameSync(tmp, BUNDLE);
  return true;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const built = await buildCli();
  if (!built)
    process.stderr.write('previewctl: esbuild is not installed; the CLI will load its sources with tsx\n');
}
