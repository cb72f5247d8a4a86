/**
 * Git trees of a fake repository's commit, with the object ids git itself gives them (a blob is
 * `sha1("blob <size>\0<bytes>")`, a tree `sha1("tree <size>\0" + entries)`, entries sorted as git sorts
 * them), so the fake GitHub's git data API answers what GitHub would for the same files (see
 * git-trees.test.ts: checked against `git` on a real repository). Test support code, not product.
 */
import { createHash } from 'node:crypto';

export interface FakeTreeEntry {
  path: string;
  mode: string;
  type: 'blob' | 'tree';
  sha: string;
  size?: number;
}

const objectId = (type: 'blob' | 'tree', body: Buffer) =>
  createHash('sha1')
    .update(Buffer.concat([Buffer.from(`${type} ${body.length}\0`), body]))
    .digest('hex');

/** Every tree of a commit's files (path → content), by id, and the root tree's id. */
export function gitTrees(files: Record<string, string>): {
  root: string;
  trees: Map<string, FakeTreeEntry[]>;
} {
  const trees = new Map<string, FakeTreeEntry[]>();
  const build = (prefix: string): string => {
    const names = new Map<string, 'blob' | 'tree'>();
    for (const path of Object.keys(files)) {
      if (!path.startsWith(prefix)) continue;
      const [first, ...more] = path.slice(prefix.length).split('/');
      names.set(first!, more.length > 0 ? 'tree' : 'blob');
    }
    const entries: FakeTreeEntry[] = [...names].map(([name, type]) => {
      if (type === 'tree') return { path: name, mode: '040000', type, sha: build(`${prefix}${name}/`) };
      const content = Buffer.from(files[`${prefix}${name}`]!);
      return { path: name, mode: '100644', type, sha: objectId('blob', content), size: content.length };
    });
    // Git's order: by name, a tree's name compared as if it ended in '/'.
    const key = (e: FakeTreeEntry) => Buffer.from(e.type === 'tree' ? `${e.path}/` : e.path);
    entries.sort((a, b) => Buffer.compare(key(a), key(b)));
    const body = Buffer.concat(
      entries.flatMap((e) => [
        Buffer.from(`${e.mode === '040000' ? '40000' : e.mode} ${e.path}\0`),
        Buffer.from(e.sha, 'hex'),
      ]),
    );
    const id = objectId('tree', body);
    trees.set(id, entries);
    return id;
  };
  return { root: build(''), trees };
}
