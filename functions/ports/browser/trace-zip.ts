import { createRequire } from 'node:module';

/*
 * A run's Playwright trace is a zip (trace.trace: the actions with their parameters and DOM snapshots;
 * trace.network: requests and responses; resources/: bodies, screenshots). Before it leaves the browser
 * port, every text entry is passed through the run's mask, so the values the executor masks in outputs
 * (the secret-bundle values of the environment's apps, the Environment Factory's secret, secret-named
 * variables) are not in it: not in a `fill`'s recorded value, an input's snapshotted value, a request's
 * body or header, a response. Binary entries (JPEG screenshots, fonts) are masked byte for byte; like
 * the step screenshots and the video, a screenshot's pixels show what the page showed (a value typed
 * into a visible text field: see docs/reference/tests-and-runs.md).
 * The zip is read and written with yauzl and yazl as playwright-core itself bundles them.
 */

interface ZipEntry {
  fileName: string;
}
interface ZipReader {
  readEntry(): void;
  on(event: 'entry', cb: (entry: ZipEntry) => void): void;
  on(event: 'end', cb: () => void): void;
  on(event: 'error', cb: (err: Error) => void): void;
  openReadStream(entry: ZipEntry, cb: (err: Error | null, stream?: NodeJS.ReadableStream) => void): void;
}
interface ZipWriter {
  addBuffer(buffer: Buffer, name: string): void;
  end(): void;
  outputStream: NodeJS.ReadableStream;
}
interface ZipLibs {
  yauzl: {
    fromBuffer(
      buffer: Buffer,
      opts: { lazyEntries: boolean },
      cb: (err: Error | null, zip?: ZipReader) => void,
    ): void;
  };
  yazl: { ZipFile: new () => ZipWriter };
}

let libs: ZipLibs | undefined;
const zipLibs = (): ZipLibs =>
  (libs ??= createRequire(import.meta.url)('playwright-core/lib/utilsBundle') as ZipLibs);

const readAll = (stream: NodeJS.ReadableStream): Promise<Buffer> =>
  new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    stream.on('data', (c: Buffer) => chunks.push(c));
    stream.on('end', () => resolve(Buffer.concat(chunks)));
    stream.on('error', reject);
  });

/** The entries of a zip, in order. */
export function readZip(zip: Buffer): Promise<{ name: string; body: Buffer }[]> {
  return new Promise((resolve, reject) => {
    zipLibs().yauzl.fromBuffer(zip, { lazyEntries: true }, (err, reader) => {
      if (err || !reader) return reject(err ?? new Error('not a zip'));
      const entries: { name: string; body: Buffer }[] = [];
      reader.on('error', reject);
      reader.on('end', () => resolve(entries));
      reader.on('entry', (entry) => {
        if (entry.fileName.endsWith('/')) return reader.readEntry();
        reader.openReadStream(entry, (e, stream) => {
          if (e || !stream) return reject(e ?? new Error('unreadable zip entry'));
          readAll(stream).then((body) => {
            entries.push({ name: entry.fileName, body });
            reader.readEntry();
          }, reject);
        });
      });
      reader.readEntry();
    });
  });
}

/** A zip of these entries. */
export function writeZip(entries: { name: string; body: Buffer }[]): Promise<Buffer> {
  const zip = new (zipLibs().yazl.ZipFile)();
  for (const e of entries) zip.addBuffer(e.body, e.name);
  const out = readAll(zip.outputStream);
  zip.end();
  return out;
}

/**
 * `body` with `mask` applied: as UTF-8 text when it is that (it survives the round trip byte for byte),
 * else byte for byte as Latin-1 (an image or font: a value's ASCII bytes are masked there too, and every
 * other byte is kept).
 */
function maskBody(body: Buffer, mask: (text: string) => string): Buffer {
  const text = body.toString('utf8');
  const utf8 = Buffer.from(text, 'utf8').equals(body);
  const decoded = utf8 ? text : body.toString('latin1');
  const masked = mask(decoded);
  return masked === decoded ? body : Buffer.from(masked, utf8 ? 'utf8' : 'latin1');
}

/** The trace with `mask` applied to every entry (see above). */
export async function maskTrace(zip: Buffer, mask: (text: string) => string): Promise<Buffer> {
  const entries = await readZip(zip);
  const masked: { name: string; body: Buffer }[] = [];
  for (const e of entries) {
    // One entry at a time, yielding between them: the host (the local server) keeps answering meanwhile.
    await new Promise((r) => setImmediate(r));
    masked.push({ name: e.name, body: maskBody(e.body, mask) });
  }
  return writeZip(masked);
}
