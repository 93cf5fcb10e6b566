/**
 * The chaos proxy itself, in front of a local echo server: it passes bytes both ways, refuses,
 * rejects, cuts, black-holes (holding data, not losing it) and delays — each checked on real
 * sockets.
 */
import { connect, createServer, type Server, type Socket } from 'node:net';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ChaosProxy, sleep, waitFor } from '../src/index.js';

const TIMEOUT = 10_000;

/** An echo server that counts the connections it accepted and the ones open now. */
interface Echo {
  server: Server;
  port: number;
  accepted: number;
  open: Set<Socket>;
}

async function startEcho(): Promise<Echo> {
  const echo: Echo = { server: createServer(), port: 0, accepted: 0, open: new Set() };
  echo.server.on('connection', (socket) => {
    echo.accepted += 1;
    echo.open.add(socket);
    socket.on('error', () => {});
    socket.on('close', () => echo.open.delete(socket));
    socket.on('data', (chunk) => socket.write(chunk));
  });
  await new Promise<void>((resolve) => echo.server.listen(0, '127.0.0.1', resolve));
  echo.port = (echo.server.address() as { port: number }).port;
  return echo;
}

/** A client socket that collects what it receives and how it ended. */
interface Client {
  socket: Socket;
  received: () => string;
  ended: Promise<'closed' | 'error'>;
  error: () => NodeJS.ErrnoException | null;
}

function client(port: number): Client {
  const socket = connect({ port, host: '127.0.0.1' });
  let data = '';
  let error: NodeJS.ErrnoException | null = null;
  socket.setEncoding('utf8');
  socket.on('data', (chunk: string) => {
    data += chunk;
  });
  const ended = new Promise<'closed' | 'error'>((resolve) => {
    socket.on('error', (e) => {
      error = e;
      resolve('error');
    });
    socket.on('close', () => resolve(error ? 'error' : 'closed'));
  });
  return { socket, received: () => data, ended, error: () => error };
}

function connected(c: Client): Promise<void> {
  return new Promise((resolve, reject) => {
    c.socket.once('connect', resolve);
    c.socket.once('error', reject);
  });
}

describe('ChaosProxy', { timeout: TIMEOUT }, () => {
  let echo: Echo;
  let proxy: ChaosProxy;
  const clients: Client[] = [];
  const open = (): Client => {
    const c = client(proxy.port);
    clients.push(c);
    return c;
  };

  beforeEach(async () => {
    echo = await startEcho();
    proxy = await ChaosProxy.start({ target: { host: '127.0.0.1', port: echo.port } });
  });
  afterEach(async () => {
    for (const c of clients.splice(0)) c.socket.destroy();
    await proxy.close();
    for (const socket of echo.open) socket.destroy();
    await new Promise((resolve) => echo.server.close(resolve));
  });

  it('passes bytes both ways and rewrites a database URL to itself', async () => {
    const c = open();
    await connected(c);
    c.socket.write('hello');
    await waitFor('the echo', async () => c.received() === 'hello');
    expect(proxy.connections).toBe(1);
    expect(proxy.mode).toBe('pass');
    expect(proxy.url('postgres://u:p@db.example:5432/app?x=1')).toBe(
      `postgres://u:p@127.0.0.1:${proxy.port}/app?x=1`,
    );
  });

  it('refuse() stops listening (ECONNREFUSED), keeps open connections, and pass() listens on the same port', async () => {
    const before = open();
    await connected(before);
    const port = proxy.port;
    await proxy.refuse();
    const refused = open();
    expect(await refused.ended).toBe('error');
    expect(refused.error()?.code).toBe('ECONNREFUSED');
    before.socket.write('still');
    await waitFor('the open connection to work', async () => before.received() === 'still');
    await proxy.pass();
    expect(proxy.port).toBe(port);
    const after = open();
    await connected(after);
    after.socket.write('back');
    await waitFor('a new connection to work', async () => after.received() === 'back');
  });

  it('refuse({ listening: true }) accepts and resets new connections without reaching the server', async () => {
    await proxy.refuse({ listening: true });
    const accepted = echo.accepted;
    const c = open();
    c.socket.on('connect', () => c.socket.write('x'));
    expect(await c.ended).toBe('error');
    expect(echo.accepted).toBe(accepted);
  });

  it('cut() resets every open connection on both sides; new ones still pass', async () => {
    const a = open();
    const b = open();
    await Promise.all([connected(a), connected(b)]);
    a.socket.write('a');
    b.socket.write('b');
    await waitFor('both echoes', async () => a.received() === 'a' && b.received() === 'b');
    await waitFor('the server to see both', async () => echo.open.size === 2);
    proxy.cut();
    expect(await a.ended).toBe('error');
    expect(await b.ended).toBe('error');
    await waitFor('the server side to be closed too', async () => echo.open.size === 0);
    const c = open();
    await connected(c);
    c.socket.write('c');
    await waitFor('a new connection to work', async () => c.received() === 'c');
  });

  it('blackHole() holds data both ways without losing it, and accepts new connections it never forwards until pass()', async () => {
    const held = open();
    await connected(held);
    held.socket.write('1');
    await waitFor('the first echo', async () => held.received() === '1');
    const accepted = echo.accepted;
    proxy.blackHole();
    held.socket.write('2');
    const fresh = open();
    await connected(fresh); // the kernel completes the handshake: a silent network, not a refusal
    fresh.socket.write('3');
    await sleep(300);
    expect(held.received()).toBe('1');
    expect(fresh.received()).toBe('');
    expect(echo.accepted).toBe(accepted);
    await proxy.pass();
    await waitFor('held data to arrive', async () => held.received() === '12');
    await waitFor('the new connection to reach the server', async () => fresh.received() === '3');
  });

  it('a client that gives up during a black hole is not noticed by the server until pass()', async () => {
    const c = open();
    await connected(c);
    c.socket.write('x');
    await waitFor('the echo', async () => c.received() === 'x');
    proxy.blackHole();
    c.socket.destroy();
    await c.ended;
    await sleep(200);
    expect(echo.open.size).toBe(1);
    await proxy.pass();
    await waitFor('the server side to close', async () => echo.open.size === 0);
  });

  it('delay(ms) adds latency per chunk each way and keeps the order', async () => {
    const c = open();
    await connected(c);
    proxy.delay(100);
    const sent = Date.now();
    for (const part of ['a', 'b', 'c']) c.socket.write(part);
    await waitFor('the echoes', async () => c.received() === 'abc');
    // A lower bound only: latency is added on the way there and back.
    expect(Date.now() - sent).toBeGreaterThanOrEqual(190);
    expect(() => proxy.delay(-1)).toThrow(/ms must be >= 0/);
  });

  it('outage(ms) refuses and cuts for a while, then passes again', async () => {
    const c = open();
    await connected(c);
    const outage = proxy.outage(300);
    expect(await c.ended).toBe('error');
    const refused = open();
    expect(await refused.ended).toBe('error');
    await outage;
    const after = open();
    await connected(after);
    after.socket.write('ok');
    await waitFor('the connection after the outage', async () => after.received() === 'ok');
  });
});
