import { existsSync, readFileSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

/** The repository root (entries in the route and workflow manifests are relative to it). */
export const repoRoot = join(dirname(fileURLToPath(import.meta.url)), '..', '..');

/**
 * esbuild settings of every Lambda bundle, shared by the CDK construct (constructs/service-function.ts)
 * and the bundle-size benchmark (test/bench/bundles.ts), so what is measured is what is deployed.
 */
export const lambdaBundling = {
  format: 'esm',
  target: 'node22',
  minify: true,
  mainFields: ['module', 'main'],
  /**
   * ESM bundles have no `require`; some CommonJS dependencies still call it. Defining it from
   * `import.meta.url` keeps them working without marking anything external.
   */
  banner: "import { createRequire } from 'module'; const require = createRequire(import.meta.url);",
  /**
   * Packages replaced in every bundle (esbuild `alias`; paths relative to the repository root, where CDK
   * and the benchmark run esbuild). `@aws-sdk/credential-provider-node`, the SDK's default credential
   * chain that every client imports, becomes functions/shared/aws/lambda-credentials.ts: the environment
   * credentials Lambda gives the function, and nothing else (profiles, SSO, IMDS don't exist there; see
   * that file). About 130 KB less per bundle. Code run unbundled (local server, test tiers) keeps the chain.
   */
  alias: {
    '@aws-sdk/credential-provider-node': './functions/shared/aws/lambda-credentials.ts',
  },
} as const;

/** `lambdaBundling` as options of esbuild's `build()`, for what calls esbuild itself (layers, the benchmark). */
export function lambdaEsbuildOptions() {
  return {
    format: lambdaBundling.format,
    target: lambdaBundling.target,
    minify: lambdaBundling.minify,
    mainFields: [...lambdaBundling.mainFields],
    banner: { js: lambdaBundling.banner },
    alias: { ...lambdaBundling.alias },
  };
}

/** `lambdaBundling.alias` as the esbuild CLI arguments CDK's `bundling.esbuildArgs` passes on. */
export function aliasEsbuildArgs(): { '--alias': string[] } {
  return { '--alias': Object.entries(lambdaBundling.alias).map(([from, to]) => `${from}=${to}`) };
}

/**
 * Packages left out of the bundle of a function with `browser` access and copied, with their dependency
 * closure, into its own node_modules (`copiedModules` of ServiceFunction): @sparticuz/chromium must stay files
 * (its brotli-compressed Chromium sits beside its code), and playwright-core (4 MB minified) would make
 * the executor's bundle the largest by far. One function needs them, so a layer would share nothing: they
 * ride in its asset, which Chromium already makes ~75 MB.
 */
export const browserModules = ['@sparticuz/chromium', 'playwright-core'] as const;

/** The modules copied beside a function's bundle, by its manifest access. */
export function copiedModulesFor(access: { browser?: boolean }): string[] {
  return access.browser ? [...browserModules] : [];
}

/**
 * Shared Lambda layers: a package several functions load that cannot be bundled small. The layer holds the
 * package pre-bundled (one minified ESM file with its dependencies, built by esbuild at synth from the
 * installed node_modules, offline: lib/cdk/layers.ts) at `nodejs/node_modules/<package>`, where Lambda's
 * Node.js runtime resolves imports from layers; the functions of `entries` leave it out of their bundle
 * (external) and get the layer. `npm run check:bundles` fails when a bundle without the layer contains the
 * package or a function with it no longer imports it.
 */
export const lambdaLayers = {
  /**
   * @kubernetes/client-node (3.1 MB minified, with undici 0.7 MB): the EKS cluster adapter
   * (functions/ports/runtime/eks*.ts). The functions that call the cluster: DeployApps, TearDown (
   * `clusterStepEntries` of cluster.ts), the rollout watcher (workers.ts), the app-logs route
   * (pod logs) and the expiry sweep (stale teardown fences).
   */
  kubernetes: {
    packages: ['@kubernetes/client-node'],
    entries: [
      'functions/steps/deploy-apps.ts',
      'functions/steps/tear-down.ts',
      'functions/steps/mark-failed.ts',
      'functions/watchers/rollout.ts',
      'functions/api/environments/logs.ts',
      'functions/events/expiry-sweep.ts',
    ],
  },
} as const satisfies Record<string, { packages: readonly string[]; entries: readonly string[] }>;
export type LayerId = keyof typeof lambdaLayers;
export const layerIds = Object.keys(lambdaLayers) as LayerId[];

/** The layers a function's entry (relative to the repository root) gets, whose packages it leaves out. */
export function layersFor(entry: string): LayerId[] {
  return layerIds.filter((id) => (lambdaLayers[id].entries as readonly string[]).includes(entry));
}

/** What a function's bundle leaves out: its copied modules and its layers' packages. */
export function externalModulesFor(entry: string, access: { browser?: boolean }): string[] {
  return [...copiedModulesFor(access), ...layersFor(entry).flatMap((id) => lambdaLayers[id].packages)];
}

/**
 * The packages `names` and everything they depend on (optional dependencies when installed), as
 * directories relative to the repository root, resolved the way Node resolves them (a package's own
 * node_modules first, then its parents'). A directory inside another of the list is left out (copying the
 * outer one brings it). Throws when a required package is not installed.
 */
export function moduleClosure(names: readonly string[], root: string = repoRoot): string[] {
  const found = new Set<string>();
  const resolveFrom = (fromDir: string, name: string): string | undefined => {
    for (let dir = fromDir; ; dir = dirname(dir)) {
      const candidate = join(dir, 'node_modules', name);
      if (existsSync(join(candidate, 'package.json'))) return candidate;
      if (dir === root || dir === dirname(dir)) return undefined;
    }
  };
  const visit = (fromDir: string, name: string, optional: boolean): void => {
    const dir = resolveFrom(fromDir, name);
    if (!dir) {
      if (optional) return;
      throw new Error(`${name} is not installed under ${fromDir} (npm ci first)`);
    }
    if (found.has(dir)) return;
    found.add(dir);
    const pkg = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')) as {
      dependencies?: Record<string, string>;
      optionalDependencies?: Record<string, string>;
    };
    for (const dep of Object.keys(pkg.dependencies ?? {})) visit(dir, dep, false);
    for (const dep of Object.keys(pkg.optionalDependencies ?? {})) visit(dir, dep, true);
  };
  for (const name of names) visit(root, name, false);
  const dirs = [...found].map((dir) => relative(root, dir)).sort();
  return dirs.filter((dir) => !dirs.some((outer) => outer !== dir && dir.startsWith(`${outer}/`)));
}

/** Bundling hooks that copy `dirs` (relative to the project root) into the bundle, at the same paths. */
export function copyModulesHooks(dirs: readonly string[]) {
  const quote = (path: string) => `'${path.replace(/'/g, "'\\''")}'`;
  return {
    beforeBundling: (): string[] => [],
    beforeInstall: (): string[] => [],
    afterBundling: (inputDir: string, outputDir: string): string[] =>
      dirs.map(
        (dir) =>
          `mkdir -p ${quote(join(outputDir, dirname(dir)))} && cp -R ${quote(join(inputDir, dir))} ${quote(join(outputDir, dirname(dir)))}/`,
      ),
  };
}
