import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, test } from '@jest/globals';
import { externalModulesFor, lambdaLayers, layerIds, layersFor } from '../../lib/cdk/bundling.js';
import { ServiceFunction } from '../../lib/cdk/constructs/service-function.js';
import { writeLayer } from '../../lib/cdk/constructs/shared-layers.js';
import { clusterContext, type Json, resourcesOf, synthesize } from './synth.js';

// Shared layers (lib/cdk/bundling.ts `lambdaLayers`): each is attached to exactly the functions whose
// entries it lists, and those are the functions that call the EKS cluster (plus the app-logs route, which
// reads pod logs); its content is the package pre-bundled, and it loads from where Lambda puts it.

const scratch = mkdtempSync(join(tmpdir(), 'infra-layers-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

for (const [label, context] of [
  ['without a cluster', {}],
  ['with a cluster', clusterContext],
] as const) {
  describe(`shared layers (${label})`, () => {
    const { stateless, statelessTemplate: template } = synthesize(context);
    const layers = resourcesOf(template, 'AWS::Lambda::LayerVersion');
    const functions = resourcesOf(template, 'AWS::Lambda::Function');
    const apiFunctions = stateless.node
      .findAll()
      .filter((c): c is ServiceFunction => c instanceof ServiceFunction);
    const idOf = (fn: ServiceFunction) => stateless.getLogicalId(fn.node.defaultChild as never);
    const layerRefs = (fn: ServiceFunction): Json[] => functions[idOf(fn)].Properties.Layers ?? [];

    test('one layer version per shared layer, Node.js 22, both architectures', () => {
      const kubernetes = Object.entries(layers).filter(([id]) => id.startsWith('KubernetesLayer'));
      expect(kubernetes).toHaveLength(1);
      expect(kubernetes[0]![1].Properties).toMatchObject({
        CompatibleRuntimes: ['nodejs22.x'],
        CompatibleArchitectures: expect.arrayContaining(['arm64', 'x86_64']),
      });
    });

    test('each function has exactly the layers its entry is listed for, and leaves their packages out', () => {
      expect(apiFunctions.length).toBeGreaterThan(30);
      const layerIdOf = Object.fromEntries(
        layerIds.map((id) => [
          id,
          Object.keys(layers).find((l) => l.startsWith(`${id[0]!.toUpperCase()}${id.slice(1)}Layer`)),
        ]),
      );
      for (const fn of apiFunctions) {
        const expected = layersFor(fn.entry).map((id) => ({ Ref: layerIdOf[id] }));
        // The browser function may also have the ffmpeg layer: only shared layers are compared.
        const shared = layerRefs(fn).filter((ref) => Object.values(layerIdOf).includes(ref.Ref));
        expect({ entry: fn.entry, layers: shared }).toEqual({ entry: fn.entry, layers: expected });
      }
    });

    test('the Kubernetes layer goes to the functions that call the cluster, and the app-logs route', () => {
      const callers = stateless.clusterCallers().map(([, fn]) => fn.entry);
      const layered = apiFunctions
        .filter((fn) => layersFor(fn.entry).includes('kubernetes'))
        .map((fn) => fn.entry);
      expect(new Set(layered)).toEqual(new Set([...callers, 'functions/api/environments/logs.ts']));
      expect([...lambdaLayers.kubernetes.entries].sort()).toEqual([...new Set(layered)].sort());
      for (const entry of layered) expect(externalModulesFor(entry, {})).toEqual(['@kubernetes/client-node']);
      // Not the image builds: they never reach the cluster.
      expect(layered).not.toContain('functions/steps/build-images.ts');
      expect(layered).not.toContain('functions/events/image-build-finished.ts');
    });
  });
}

describe('the Kubernetes layer content', () => {
  test('is @kubernetes/client-node pre-bundled into one ES module, and loads from nodejs/node_modules', () => {
    // Act: what the layer asset's local bundling writes (offline, from the installed node_modules).
    writeLayer('kubernetes', scratch);
    const dir = join(scratch, 'nodejs', 'node_modules', '@kubernetes', 'client-node');
    const pkg = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8'));
    // A function's `import('@kubernetes/client-node')` resolved from beside the layer's node_modules. On
    // Node < 22.19 the stand-ins of functions/ports/runtime/eks/client.ts `loadClient` come first, as there.
    const script =
      "import zlib from 'node:zlib'; import wt from 'node:worker_threads';" +
      "if (typeof zlib.createZstdDecompress !== 'function') zlib.createZstdDecompress = () => { throw new Error('zstd'); };" +
      "if (typeof wt.markAsUncloneable !== 'function') wt.markAsUncloneable = () => {};" +
      'Promise.withResolvers ??= function () { let a, b; const p = new this((x, y) => { a = x; b = y; }); return { promise: p, resolve: a, reject: b }; };' +
      "const k8s = await import('@kubernetes/client-node');" +
      'console.log(typeof k8s.KubeConfig, typeof k8s.CoreV1Api, typeof k8s.AppsV1Api);';
    const loaded = spawnSync(process.execPath, ['--input-type=module', '-e', script], {
      cwd: join(scratch, 'nodejs'),
      encoding: 'utf8',
    });
    // Assess
    expect(pkg).toMatchObject({ name: '@kubernetes/client-node', type: 'module', main: 'index.mjs' });
    expect({ status: loaded.status, stdout: loaded.stdout.trim(), stderr: loaded.stderr }).toEqual({
      status: 0,
      stdout: 'function function function',
      stderr: '',
    });
  });
});
