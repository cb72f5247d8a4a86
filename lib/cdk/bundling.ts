/**
 * esbuild settings of every Lambda bundle, shared by the CDK construct (lib/cdk/api-function.ts) and the
 * bundle-size benchmark (test/bench/bundles.ts), so what is measured is what is deployed.
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
} as const;
