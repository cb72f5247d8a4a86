/**
 * The baseline of `npm run bench:startup`: the same toolchain as `npm start` (Node with the tsx loader)
 * running nothing but a `node:http` server that answers /healthz on PORT.
 */
import { createServer } from 'node:http';

createServer((req, res) => {
  res.writeHead(req.url === '/healthz' ? 200 : 404, { 'content-type': 'application/json' });
  res.end('{"status":"ok"}\n');
}).listen(Number(process.env.PORT), '127.0.0.1');
process.on('SIGTERM', () => process.exit(0));
