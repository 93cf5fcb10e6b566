/**
 * A loopback TCP proxy that puts real network faults between a store and its database: point
 * the store at the proxy (`proxy.url(databaseUrl)`) and, while it runs, make the network
 * refuse new connections, cut the open ones, black-hole everything (accept, never answer), or
 * add latency. Nothing is mocked: the store's driver sees the same sockets, errors and
 * silences it sees in production.
 */
import { readFileSync } from 'node:fs';
import { connect, createServer, type Server, type Socket } from 'node:net';

/** What happens to new connections. */
export type ChaosMode = 'pass' | 'refuse' | 'reject' | 'black-hole';

export interface ChaosProxyOptions {
  /** The database: `{ host, port }` or its URL (`postgres://…`, `mysql://…`). */
  target: string | { host: string; port: number };
  /** Address to listen on. Default `127.0.0.1`. */
  host?: string;
}

const DEFAULT_PORTS: Record<string, number> = {
  'postgres:': 5432,
  'postgresql:': 5432,
  'mysql:': 3306,
  'mariadb:': 3306,
};

function parseTarget(target: ChaosProxyOptions['target']): { host: string; port: number } {
  if (typeof target !== 'string') return target;
  const url = new URL(target);
  const port = url.port === '' ? DEFAULT_PORTS[url.protocol] : Number(url.port);
  if (port === undefined) {
    throw new TypeError(`[@jobs/conformance] ChaosProxy: no port in ${url.protocol} target URL`);
  }
  return { host: url.hostname, port };
}

/**
 * A port below the operating system's ephemeral range. While the proxy refuses (does not
 * listen), a client reconnecting to a port inside that range can be given that very port as
 * its own source port and connect to itself (TCP simultaneous open), which would then keep
 * the proxy from listening again.
 */
export function stablePortCandidate(): number {
  let low = 32_768;
  try {
    const [first] = readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').split(/\s+/);
    if (first && Number(first) > 11_000) low = Number(first);
  } catch {
    // Not Linux: the usual default range.
  }
  return 10_000 + Math.floor(Math.random() * (low - 11_000));
}

/** One direction of a link: chunks read from `source`, written to the sink in order. */
class Relay {
  private readonly queue: { chunk: Buffer; due: number }[] = [];
  private timer: NodeJS.Timeout | null = null;
  private ended = false;
  private waitingForDrain = false;
  sink: Socket | null = null;

  constructor(
    private readonly source: Socket,
    private readonly link: Link,
  ) {
    source.on('data', (chunk: Buffer) => {
      this.queue.push({ chunk, due: Date.now() + link.proxy.latencyMs });
      this.pump();
    });
    source.on('end', () => {
      this.ended = true;
      this.pump();
    });
  }

  /** Writes what is due, unless the link is held (black hole) or the sink is not there yet. */
  pump(): void {
    if (this.timer) return;
    if (this.link.held || this.sink === null || this.sink.destroyed) {
      this.sync();
      return;
    }
    const now = Date.now();
    while (this.queue.length > 0 && !this.waitingForDrain) {
      const next = this.queue[0] as { chunk: Buffer; due: number };
      if (next.due > now) {
        this.timer = setTimeout(() => {
          this.timer = null;
          this.pump();
        }, next.due - now);
        break;
      }
      this.queue.shift();
      if (!this.sink.write(next.chunk)) {
        this.waitingForDrain = true;
        this.sink.once('drain', () => {
          this.waitingForDrain = false;
          this.pump();
        });
      }
    }
    if (this.ended && this.queue.length === 0) this.sink.end();
    this.sync();
  }

  /** Reads only while chunks can move on: a held or slow link fills the kernel's buffers. */
  private sync(): void {
    const flowing = !this.link.held && !this.waitingForDrain && this.queue.length < 64;
    if (flowing && this.source.isPaused()) this.source.resume();
    else if (!flowing && !this.source.isPaused()) this.source.pause();
  }

  stop(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    this.queue.length = 0;
  }
}

/** A client connection and, once connected, its connection to the database. */
class Link {
  upstream: Socket | null = null;
  /** Black-holed: nothing moves either way, and nothing is told when a side goes away. */
  held: boolean;
  private closed = false;
  private readonly up: Relay;
  private down: Relay | null = null;

  constructor(
    readonly proxy: ChaosProxy,
    readonly client: Socket,
    held: boolean,
  ) {
    this.held = held;
    client.setNoDelay(true);
    this.up = new Relay(client, this);
    // While held, a side that goes away is noticed only when the black hole ends (`release`).
    const gone = (): void => {
      if (!this.held) this.close();
    };
    client.on('error', gone);
    client.on('close', gone);
    if (!held) this.open();
    else this.up.pump();
  }

  /** Connects to the database (at once, or when a black hole ends). */
  private open(): void {
    if (this.closed || this.upstream) return;
    const { host, port } = this.proxy.target;
    const upstream = connect({ host, port });
    upstream.setNoDelay(true);
    this.upstream = upstream;
    upstream.on('connect', () => {
      this.up.sink = upstream;
      this.up.pump();
    });
    const gone = (): void => {
      if (!this.held) this.close();
    };
    upstream.on('error', gone);
    upstream.on('close', gone);
    const down = new Relay(upstream, this);
    down.sink = this.client;
    this.down = down;
  }

  hold(): void {
    this.held = true;
    this.up.pump();
    this.down?.pump();
  }

  /** Ends a black hole: a side that went away meanwhile takes the other with it. */
  release(): void {
    if (this.closed) return;
    this.held = false;
    if (this.client.destroyed || this.upstream?.destroyed) {
      this.close();
      return;
    }
    this.open();
    this.up.pump();
    this.down?.pump();
  }

  /** Resets both sides (an RST each way, as a dropped connection looks). */
  reset(): void {
    if (this.closed) return;
    this.closed = true;
    this.up.stop();
    this.down?.stop();
    this.client.resetAndDestroy();
    this.upstream?.resetAndDestroy();
    this.proxy.forget(this);
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.up.stop();
    this.down?.stop();
    this.client.destroy();
    this.upstream?.destroy();
    this.proxy.forget(this);
  }
}

/**
 * A loopback TCP proxy in front of a database, for chaos tests.
 *
 * @example
 * const proxy = await ChaosProxy.start({ target: 'postgres://postgres@127.0.0.1:5432/test' });
 * const store = new PostgresJobStore({ connectionString: proxy.url(PG_URL) });
 * proxy.blackHole();            // the store's calls now hang on a silent network
 * await proxy.pass();           // and the network is back
 * await proxy.outage(10_000);   // refuse + cut for 10 s, like a database restart
 * await proxy.close();
 */
export class ChaosProxy {
  readonly target: { host: string; port: number };
  readonly host: string;
  /** The port the proxy listens on (the same for its whole life). */
  port = 0;
  /** Latency added to every chunk, each way, in ms. */
  latencyMs = 0;
  /** Connections accepted so far. */
  accepted = 0;
  private current: ChaosMode = 'pass';
  private server: Server | null = null;
  private readonly links = new Set<Link>();
  private closed = false;

  private constructor(options: ChaosProxyOptions) {
    this.target = parseTarget(options.target);
    this.host = options.host ?? '127.0.0.1';
  }

  /** Starts a proxy in `pass` mode. */
  static async start(options: ChaosProxyOptions): Promise<ChaosProxy> {
    const proxy = new ChaosProxy(options);
    for (let attempt = 0; ; attempt++) {
      try {
        await proxy.listen(attempt < 20 ? stablePortCandidate() : 0);
        return proxy;
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code !== 'EADDRINUSE' || attempt >= 20) throw error;
      }
    }
  }

  /** What happens to new connections now. */
  get mode(): ChaosMode {
    return this.current;
  }

  /** Client connections open now. */
  get connections(): number {
    return this.links.size;
  }

  /** `databaseUrl` with its host and port replaced by the proxy's. */
  url(databaseUrl: string): string {
    const url = new URL(databaseUrl);
    url.hostname = this.host;
    url.port = String(this.port);
    return url.toString();
  }

  /** Forwards again: listens, releases black-holed connections (their data flows on). */
  async pass(): Promise<void> {
    this.current = 'pass';
    await this.listen(this.port);
    for (const link of [...this.links]) link.release();
  }

  /**
   * New connections fail: by default nothing listens (the client gets ECONNREFUSED); with
   * `{ listening: true }` each is accepted and reset at once (ECONNRESET). Open connections
   * are left alone: `cut()` them too for a database that went away.
   */
  async refuse(options: { listening?: boolean } = {}): Promise<void> {
    this.current = options.listening ? 'reject' : 'refuse';
    if (options.listening) await this.listen(this.port);
    else await this.unlisten();
  }

  /** Resets every open connection, both ways. The mode stays as it is. */
  cut(): void {
    for (const link of [...this.links]) link.reset();
  }

  /**
   * A silent network: open and new connections are kept open (the client's connects
   * complete, as the kernel accepts them) but nothing moves either way, and neither side is
   * told when the other goes away. `pass()` lets everything through again.
   */
  blackHole(): void {
    this.current = 'black-hole';
    for (const link of this.links) link.hold();
  }

  /** Adds `ms` of latency to each chunk, both ways, from now on (0 removes it). */
  delay(ms: number): void {
    if (!Number.isFinite(ms) || ms < 0) {
      throw new TypeError(`[@jobs/conformance] ChaosProxy.delay: ms must be >= 0, got ${ms}`);
    }
    this.latencyMs = ms;
  }

  /**
   * The database goes away for `ms` and comes back, as a restart looks from a client: new
   * connections refused and open ones cut for `ms`, then `pass()`.
   */
  async outage(ms: number): Promise<void> {
    await this.refuse();
    this.cut();
    await new Promise((resolve) => setTimeout(resolve, ms));
    await this.pass();
  }

  /** Stops listening and destroys every connection. */
  async close(): Promise<void> {
    this.closed = true;
    for (const link of [...this.links]) link.close();
    await this.unlisten();
  }

  /** @internal A link that closed. */
  forget(link: Link): void {
    this.links.delete(link);
  }

  private accept(socket: Socket): void {
    this.accepted += 1;
    if (this.closed || this.current === 'reject' || this.current === 'refuse') {
      socket.on('error', () => {});
      socket.resetAndDestroy();
      return;
    }
    this.links.add(new Link(this, socket, this.current === 'black-hole'));
  }

  private listen(port: number): Promise<void> {
    if (this.server) return Promise.resolve();
    const server = createServer({ allowHalfOpen: true, pauseOnConnect: false }, (socket) =>
      this.accept(socket),
    );
    return new Promise((resolve, reject) => {
      server.once('error', reject);
      server.listen({ port, host: this.host, exclusive: true }, () => {
        server.off('error', reject);
        server.on('error', () => {});
        this.server = server;
        const address = server.address();
        if (address && typeof address === 'object') this.port = address.port;
        resolve();
      });
    });
  }

  /** Closes the listening socket at once (open connections are the links' to end). */
  private async unlisten(): Promise<void> {
    const server = this.server;
    this.server = null;
    server?.close();
  }
}
