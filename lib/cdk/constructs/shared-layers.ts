import { createHash } from 'node:crypto';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { AssetHashType, DockerImage, Stack } from 'aws-cdk-lib';
import * as lambda from 'aws-cdk-lib/aws-lambda';
import type { Construct } from 'constructs';
import { buildSync } from 'esbuild';
import { type LayerId, lambdaBundling, lambdaEsbuildOptions, lambdaLayers, repoRoot } from '../bundling.js';

/** The construct id of a shared layer in its stack. */
const layerConstructId = (id: LayerId) => `${id[0]!.toUpperCase()}${id.slice(1)}Layer`;

/** The installed version of a package (what the layer is built from). */
function installedVersion(name: string): string {
  const pkg = JSON.parse(readFileSync(join(repoRoot, 'node_modules', name, 'package.json'), 'utf8')) as {
    version: string;
  };
  return pkg.version;
}

/**
 * Write a layer's content into `outputDir`: each package pre-bundled by esbuild (the Lambda settings of
 * bundling.ts: ESM, minified, node22, the `require` banner) into `nodejs/node_modules/<package>/index.mjs`
 * with a package.json pointing at it, so a function's `import('<package>')` resolves to it in /opt. One
 * file instead of the package's thousands loads faster and weighs ~4 MB instead of ~80 MB of sources,
 * maps and types. Offline: from the installed node_modules, with the esbuild CDK already uses.
 */
export function writeLayer(id: LayerId, outputDir: string): void {
  for (const name of lambdaLayers[id].packages) {
    const dir = join(outputDir, 'nodejs', 'node_modules', name);
    mkdirSync(dir, { recursive: true });
    buildSync({
      stdin: { contents: `export * from '${name}';`, resolveDir: repoRoot, loader: 'js' },
      absWorkingDir: repoRoot,
      bundle: true,
      platform: 'node',
      outfile: join(dir, 'index.mjs'),
      logLevel: 'error',
      ...lambdaEsbuildOptions(),
    });
    writeFileSync(
      join(dir, 'package.json'),
      `${JSON.stringify({ name, version: installedVersion(name), type: 'module', main: 'index.mjs', exports: { '.': './index.mjs' } }, null, 2)}\n`,
    );
  }
}

/**
 * The stack's shared layer `id` (lib/cdk/bundling.ts `lambdaLayers`), created on first use: Node.js 22,
 * both architectures (the packages are plain JavaScript). Its asset hash is the packages' installed
 * versions and the bundling settings, so it changes (and is uploaded again) only when they do.
 */
export function sharedLayer(scope: Construct, id: LayerId): lambda.ILayerVersion {
  const stack = Stack.of(scope);
  const existing = stack.node.tryFindChild(layerConstructId(id));
  if (existing) return existing as lambda.LayerVersion;
  const def = lambdaLayers[id];
  const hash = createHash('sha256')
    .update(
      JSON.stringify({ id, lambdaBundling, packages: def.packages.map((p) => [p, installedVersion(p)]) }),
    )
    .digest('hex');
  return new lambda.LayerVersion(stack, layerConstructId(id), {
    // The path is where this was first written (now this file): changing the description would publish a
    // new version of every shared layer on the next deploy for nothing.
    description: `${def.packages.join(', ')}, pre-bundled (lib/cdk/layers.ts)`,
    compatibleRuntimes: [lambda.Runtime.NODEJS_22_X],
    compatibleArchitectures: [lambda.Architecture.ARM_64, lambda.Architecture.X86_64],
    code: lambda.Code.fromAsset(dirname(fileURLToPath(import.meta.url)), {
      assetHash: hash,
      assetHashType: AssetHashType.CUSTOM,
      bundling: {
        // Never used: local bundling always succeeds or throws (synthesis stays offline, no Docker).
        image: DockerImage.fromRegistry('scratch'),
        local: {
          tryBundle(outputDir: string) {
            writeLayer(id, outputDir);
            return true;
          },
        },
      },
    }),
  });
}
