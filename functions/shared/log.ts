/**
 * Structured JSON logging: one object per line on stdout. Callers pass only the fields they mean to log;
 * nothing here serializes request bodies, so secret values have no path into a log line.
 */
export type LogFields = Record<string, string | number | boolean | null | undefined>;

let sink: (line: string) => void = (line) => process.stdout.write(`${line}\n`);

/** Replace where log lines go (the local server and tests use it to capture or silence them). */
export function setLogSink(next: (line: string) => void): void {
  sink = next;
}

/**
 * A sink for a long-running local process (`npm start`): the lines of one turn of the event loop are
 * written together, one write instead of one per line (a request's line costs a system call less under
 * load), and whatever is left is written when the process exits. Not for Lambda, whose environment may
 * be frozen before the next turn: functions keep the default sink.
 */
export function batchedSink(write: (text: string) => void): ((line: string) => void) & { flush: () => void } {
  let pending: string[] = [];
  const flush = () => {
    if (!pending.length) return;
    const text = `${pending.join('\n')}\n`;
    pending = [];
    write(text);
  };
  process.on('exit', flush);
  const sink = (line: string) => {
    if (pending.push(line) === 1) setImmediate(flush);
  };
  return Object.assign(sink, { flush });
}

function emit(level: 'info' | 'warn' | 'error', message: string, fields: LogFields): void {
  // The line's own keys come first and cannot be overwritten by a field of the same name (they are set
  // again after the fields; a key keeps its first position). Cheaper than copying the fields less those.
  const time = new Date().toISOString();
  sink(JSON.stringify(Object.assign({ level, time, message }, fields, { level, time, message })));
}

export const log = {
  info: (message: string, fields: LogFields = {}) => emit('info', message, fields),
  warn: (message: string, fields: LogFields = {}) => emit('warn', message, fields),
  error: (message: string, fields: LogFields = {}) => emit('error', message, fields),
};
