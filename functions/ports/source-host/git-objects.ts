/**
 * The git object at a path of a commit (`SourceHost.objectId`): what a build's identity hashes (the tree
 * of an app's build context, the blob of a Dockerfile outside it). Git object ids are content hashes, so
 * two commits whose `web/` is the same tree give the same id, however the rest of the repository differs.
 *
 * GitHub (the git data API): `GET /repos/{o}/{r}/git/commits/{sha}` → the commit's root tree, then one
 * `GET /repos/{o}/{r}/git/trees/{tree}` per path segment, each naming the next entry's id. A path of one
 * or two folders costs two or three requests; `objectAt` takes the adapter's own request function
 * (its installation client, retries and error mapping: github-app.ts).
 */
import type { GitObject } from './port.js';

/** One entry of a git tree as GitHub's trees API answers it. */
export interface GitTreeEntry {
  path: string;
  mode?: string;
  type: 'blob' | 'tree' | 'commit';
  sha: string;
}

/** `a/./b/` → `['a','b']`; `.` or `` → `[]` (the root); undefined for a path that climbs (`..`) or is absolute. */
export function pathSegments(path: string): string[] | undefined {
  if (path.startsWith('/')) return undefined;
  const parts = path.split('/').filter((p) => p !== '' && p !== '.');
  return parts.includes('..') ? undefined : parts;
}

/** What the walk asks the source host: undefined where it answers 404/422 (no such commit or tree). */
export interface GitDataReader {
  commitTree(sha: string): Promise<string | undefined>;
  tree(treeId: string): Promise<GitTreeEntry[] | undefined>;
}

/** The object at `path` of commit `sha`, walking one tree per segment; undefined when there is none. */
export async function objectAt(
  reader: GitDataReader,
  sha: string,
  path: string,
): Promise<GitObject | undefined> {
  const segments = pathSegments(path);
  if (!segments) return undefined;
  const root = await reader.commitTree(sha);
  if (!root) return undefined;
  let current: GitObject = { type: 'tree', id: root };
  for (const segment of segments) {
    if (current.type !== 'tree') return undefined;
    const entries = await reader.tree(current.id);
    const entry = entries?.find((e) => e.path === segment);
    if (!entry || (entry.type !== 'tree' && entry.type !== 'blob')) return undefined;
    current = { type: entry.type, id: entry.sha.toLowerCase() };
  }
  return current;
}
