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
