/**
 * Polyfills for built-ins newer than Node 20 that our dependencies use.
 * aws-local-stepfunctions calls `Promise.withResolvers` (ES2024, Node 22+); Lambda runs Node 22+, so this
 * only ever takes effect on Node 20 (local mode, tests). Same shape as the TC39 proposal's reference polyfill.
 */
type Resolvers<T> = {
  promise: Promise<T>;
  resolve: (value: T | PromiseLike<T>) => void;
  reject: (reason?: unknown) => void;
};
const P = Promise as unknown as { withResolvers?: <T>() => Resolvers<T> };
if (typeof P.withResolvers !== 'function') {
  P.withResolvers = <T>(): Resolvers<T> => {
    let resolve!: Resolvers<T>['resolve'];
    let reject!: Resolvers<T>['reject'];
    const promise = new Promise<T>((res, rej) => {
      resolve = res;
      reject = rej;
    });
    return { promise, resolve, reject };
  };
}

export {};
