/**
 * One HTTP server over a command's store until Ctrl-C (SIGINT) or SIGTERM, for the commands that
 * serve something (`dashboard`, `serve`): open the store and fail at once with the usual hint when
 * the database is unreachable, build the request handler, listen, say where, wait for the
 * signal, then close the service, its connections and the store.
 */
import { once } from 'node:events';
import { createServer, type RequestListener } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { JobStore } from '@jobs/core';
import type { App } from './app.js';
import { openStore } from './connect.js';
import type { Target } from './target.js';

/** What a serving command mounts: a request handler, and what to close before the server. */
export interface HttpService {
  handler: RequestListener;
  close?(): void;
}

/**
 * Serves `build(store)` on `listen` until a signal. `announce` gets the server's origin
 * (`http://host:port`, the port the system gave for 0) to print the command's own lines.
 */
export async function serveOverStore(
  app: App,
  target: Target,
  listen: { port: number; host: string },
  build: (store: JobStore) => Promise<HttpService>,
  announce: (origin: string) => void,
): Promise<void> {
  const opened = await openStore(target, 'existing');
  const stop = new AbortController();
  const onSignal = (): void => stop.abort();
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);
  try {
    await opened.store.now(); // fail now, with the usual hint, when the database is unreachable
    const service = await build(opened.store);
    const server = createServer(service.handler);
    server.listen(listen.port, listen.host);
    await Promise.race([
      once(server, 'listening'),
      once(server, 'error').then(([error]) => {
        throw error;
      }),
    ]);
    const { port } = server.address() as AddressInfo;
    const host = listen.host.includes(':') ? `[${listen.host}]` : listen.host;
    announce(`http://${host}:${port}`);
    app.print('Ctrl-C stops');
    if (!stop.signal.aborted) await once(stop.signal, 'abort');
    service.close?.();
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  } finally {
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
    await opened.close().catch(() => {});
  }
}
