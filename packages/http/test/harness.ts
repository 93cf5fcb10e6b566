/**
 * A worker API over a real store on a loopback port, and a small HTTP helper: what every
 * external-worker test starts from. Requests go through real sockets, as a remote worker's do.
 */
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { JobStore } from '@jobs/core';
import { createWorkerApi, type WorkerApi, type WorkerApiOptions } from '../src/index.js';

export interface Served {
  url: string;
  api: WorkerApi;
  close(): Promise<void>;
}

/** Serves `createWorkerApi(options)` on 127.0.0.1 at a free port. */
export async function serveApi(options: WorkerApiOptions): Promise<Served> {
  const api = createWorkerApi(options);
  const server: Server = createServer(api.handler);
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    api,
    async close() {
      api.close();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

export const newToken = (): string => randomBytes(24).toString('base64url');
export const newType = (name: string): string => `${name}-${randomBytes(4).toString('hex')}`;

export interface Answer {
  status: number;
  type: string | null;
  // biome-ignore lint/suspicious/noExplicitAny: test answers are read field by field
  body: any;
}

/** POSTs `body` (an object, or raw text) to `url` with a bearer `token` (null: none). */
export async function post(
  url: string,
  token: string | null,
  body: unknown,
  headers: Record<string, string> = {},
): Promise<Answer> {
  const response = await fetch(url, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      ...(token === null ? {} : { authorization: `Bearer ${token}` }),
      ...headers,
    },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
  const text = await response.text();
  return {
    status: response.status,
    type: response.headers.get('content-type'),
    body: text === '' ? null : JSON.parse(text),
  };
}

/** The fields of a job a refused call must leave as they were. */
export function snapshot(job: unknown): unknown {
  if (job === null) return null;
  const j = job as Record<string, unknown>;
  return {
    state: j.state,
    lockToken: j.lockToken,
    lockOwner: j.lockOwner,
    attempts: j.attempts,
    retriesLeft: j.retriesLeft,
    lastError: j.lastError,
    lockExpiresAt: (j.lockExpiresAt as Date | null)?.getTime() ?? null,
  };
}

export type StoreFactory = () => Promise<{ store: JobStore; drop(): Promise<void> }>;
