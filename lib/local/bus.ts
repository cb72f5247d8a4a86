import { randomUUID } from 'node:crypto';
import { mkdirSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { BusEvent, EventBus } from '../../functions/ports/events/port.js';
import { log } from '../../functions/shared/log.js';

/*
 * `previewctl events put` locally: the CLI is another process than the server whose bus runs the rules,
 * so it drops the events into `<dataDir>/events-inbox/` (the private data dir: no port, no token) and the
 * server's inbox puts them on its bus within a quarter of a second (or at its next start). A file the bus
 * refuses is renamed `*.rejected` and logged.
 */

/** The inbox of a data dir. */
export const eventInboxDir = (dataDir: string): string => join(dataDir, 'events-inbox');

/** Thrown for an event file that holds no event the bus could take. */
export class EventFileError extends Error {
  override name = 'EventFileError';
}

function asObject(v: unknown): Record<string, unknown> | undefined {
  return v && typeof v === 'object' && !Array.isArray(v) ? (v as Record<string, unknown>) : undefined;
}

/** One event, in any of the shapes an EVENT.json may hold. */
function toBusEvent(raw: unknown, at: string): BusEvent {
  const o = asObject(raw);
  if (!o) throw new EventFileError(`${at}: not an object`);
  // An EventBridge event (`source`, `detail-type`, `detail`), a PutEvents entry (`Source`, `DetailType`,
  // `Detail` as JSON text or an object), or what the inbox holds (`detailType`).
  const source = o.source ?? o.Source;
  const detailType = o['detail-type'] ?? o.DetailType ?? o.detailType;
  let detail = o.detail ?? o.Detail;
  if (typeof detail === 'string') {
    try {
      detail = JSON.parse(detail);
    } catch {
      throw new EventFileError(`${at}: Detail is not JSON`);
    }
  }
  const time = o.time ?? o.Time;
  if (typeof source !== 'string' || !source) throw new EventFileError(`${at}: source is required`);
  if (typeof detailType !== 'string' || !detailType)
    throw new EventFileError(`${at}: detail-type is required`);
  if (!asObject(detail)) throw new EventFileError(`${at}: detail must be a JSON object`);
  return {
    source,
    detailType,
    detail: detail as Record<string, unknown>,
    ...(typeof time === 'string' ? { time } : {}),
  };
}

/**
 * The events of an EVENT.json: an EventBridge event, a PutEvents entry, a list of either, or
 * `{"Entries": [...]}` (what `aws events put-events --cli-input-json` takes).
 */
export function parseEventFile(text: string): BusEvent[] {
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch {
    throw new EventFileError('the file is not JSON');
  }
  const entries = Array.isArray(doc)
    ? doc
    : Array.isArray(asObject(doc)?.Entries)
      ? (asObject(doc)!.Entries as unknown[])
      : [doc];
  if (entries.length === 0) throw new EventFileError('the file holds no event');
  return entries.map((e, i) => toBusEvent(e, entries.length > 1 ? `event ${i}` : 'the event'));
}

/** Queue events for the local server's bus (written whole, then renamed into the inbox). */
export function queueLocalEvents(dataDir: string, events: BusEvent[]): { file: string } {
  const dir = eventInboxDir(dataDir);
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const name = `${Date.now().toString().padStart(15, '0')}-${randomUUID()}.json`;
  const tmp = join(dir, `.${name}.tmp`);
  writeFileSync(tmp, JSON.stringify(events), { mode: 0o600 });
  renameSync(tmp, join(dir, name));
  return { file: join(dir, name) };
}

export interface Inbox {
  /** Put what the inbox holds on the bus now; the number of events put. */
  drain(): Promise<number>;
  stop(): Promise<void>;
}

/** Deliver the inbox to `bus` now and every `everyMs` until stopped. */
export function startInbox(dataDir: string, bus: EventBus, everyMs = 250): Inbox {
  const dir = eventInboxDir(dataDir);
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  let running: Promise<number> | undefined;
  let stopped = false;

  const once = async (): Promise<number> => {
    let put = 0;
    const files = readdirSync(dir)
      .filter((f) => f.endsWith('.json') && !f.startsWith('.'))
      .sort();
    for (const f of files) {
      if (stopped) break;
      const path = join(dir, f);
      try {
        const events = parseEventFile(readFileSync(path, 'utf8'));
        await bus.put(events);
        rmSync(path, { force: true });
        put += events.length;
      } catch (err) {
        log.error('event file refused', { file: f, reason: (err as Error).message.slice(0, 300) });
        renameSync(path, `${path}.rejected`);
      }
    }
    return put;
  };
  const drain = (): Promise<number> => {
    running ??= once().finally(() => {
      running = undefined;
    });
    return running;
  };
  const timer = setInterval(() => {
    drain().catch((err: Error) => log.error('event inbox failed', { name: err.name }));
  }, everyMs);
  timer.unref();
  void drain().catch((err: Error) => log.error('event inbox failed', { name: err.name }));
  return {
    drain,
    stop: async () => {
      stopped = true;
      clearInterval(timer);
      await running?.catch(() => undefined);
    },
  };
}
