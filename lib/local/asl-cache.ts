import { mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { AslValidationCache } from '../../functions/ports/workflows/local-asl.js';
import { sha256Hex } from '../../functions/shared/crypto.js';

/** Versions of what validates ASL: a cached verdict holds only for the validator that gave it. */
function validatorVersions(repoRoot: string): string | undefined {
  try {
    return ['aws-local-stepfunctions', 'asl-validator']
      .map((pkg) => {
        const { version } = JSON.parse(
          readFileSync(join(repoRoot, 'node_modules', pkg, 'package.json'), 'utf8'),
        ) as { version: string };
        return `${pkg}@${version}`;
      })
      .join(' ');
  } catch {
    return undefined;
  }
}

/**
 * The local runtime's memory of ASL definitions asl-validator passed, in
 * `node_modules/.cache/preview-control-plane/asl-validated.json`: SHA-256 digests of each definition's
 * text (after substitution) with the validator versions. A start then skips validating what it validated
 * before (about 0.2 s per state machine); a changed file, or another validator version, is validated
 * again. Nothing is cached when the versions cannot be read; a cache file that cannot be read or written
 * is simply not used.
 */
export function aslValidationCache(repoRoot: string): AslValidationCache {
  const versions = validatorVersions(repoRoot);
  const dir = join(repoRoot, 'node_modules', '.cache', 'preview-control-plane');
  const file = join(dir, 'asl-validated.json');
  const digest = (asl: string) => sha256Hex(`${versions}\n${asl}`);
  let known = new Set<string>();
  try {
    const stored = JSON.parse(readFileSync(file, 'utf8')) as unknown;
    if (Array.isArray(stored)) known = new Set(stored.filter((d): d is string => typeof d === 'string'));
  } catch {
    // none yet
  }
  return {
    has: (asl) => versions !== undefined && known.has(digest(asl)),
    add: (asl) => {
      if (versions === undefined) return;
      known.add(digest(asl));
      try {
        mkdirSync(dir, { recursive: true });
        const tmp = `${file}.${process.pid}.tmp`;
        writeFileSync(tmp, `${JSON.stringify([...known].slice(-100))}\n`);
        renameSync(tmp, file);
      } catch {
        // a read-only checkout: validate again next time
      }
    },
  };
}
