import { describe, expect, test } from '@jest/globals';
import { batchedSink } from './log.js';

const nextTurn = () => new Promise<void>((resolve) => setImmediate(resolve));

describe('batchedSink (the local server’s log sink)', () => {
  test('the lines of one event-loop turn go out in one write, in order, each ending in a newline', async () => {
    const writes: string[] = [];
    const sink = batchedSink((text) => writes.push(text));
    sink('{"n":1}');
    sink('{"n":2}');
    sink('{"n":3}');
    expect(writes).toEqual([]);
    await nextTurn();
    expect(writes).toEqual(['{"n":1}\n{"n":2}\n{"n":3}\n']);
    sink('{"n":4}');
    await nextTurn();
    await nextTurn();
    expect(writes).toEqual(['{"n":1}\n{"n":2}\n{"n":3}\n', '{"n":4}\n']);
  });

  test('what is still waiting is written when the process exits', () => {
    const writes: string[] = [];
    const before = process.listeners('exit').length;
    const sink = batchedSink((text) => writes.push(text));
    const onExit = process.listeners('exit').slice(before);
    expect(onExit).toEqual([sink.flush]);
    sink('last words');
    sink.flush();
    expect(writes).toEqual(['last words\n']);
    sink.flush();
    expect(writes).toHaveLength(1);
    process.off('exit', sink.flush);
  });
});
