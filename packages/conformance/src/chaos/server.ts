/**
 * A private database server that a chaos test owns and may restart: PostgreSQL (`initdb`,
 * `pg_ctl`) or MariaDB (`mariadb-install-db`, `mariadbd`) on a temporary data directory and a
 * port of its own. A test can crash it and bring it back on the same port without touching the
 * shared servers that other suites use at the same time. Nothing is simulated: clients see
 * their connections die, connects refused while the server is down, and crash recovery when it
 * comes back.
 */
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import {
  chownSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
} from 'node:fs';
import { connect, createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';
import { stablePortCandidate } from './proxy.js';

/** Which server to run. */
export type DatabaseServerKind = 'postgres' | 'mariadb';

/**
 * How to stop it. `immediate` is a crash: PostgreSQL's immediate shutdown (no checkpoint,
 * crash recovery on the next start), SIGKILL for MariaDB. `fast` ends every session and shuts
 * down cleanly (`pg_ctl -m fast`, SIGTERM).
 */
export type DatabaseStopMode = 'immediate' | 'fast';

export interface DatabaseServerOptions {
  /** How long a start (crash recovery included) may take. Default 30 000. */
  startTimeoutMs?: number;
}

const TAG = '[@jobs/conformance] DatabaseServer';
const isRoot = (): boolean => process.getuid?.() === 0;

/** The first `name` in `dirs`, then on PATH; null when there is none. */
function findBinary(names: readonly string[], dirs: readonly string[]): string | null {
  const path = (process.env.PATH ?? '').split(delimiter).filter(Boolean);
  for (const dir of [...dirs, ...path]) {
    for (const name of names) {
      const file = join(dir, name);
      if (existsSync(file)) return file;
    }
  }
  return null;
}

/** Why `file --version` does not run, or null. */
function notRunnable(file: string, user?: { uid: number; gid: number }): string | null {
  try {
    execFileSync(file, ['--version'], { stdio: 'ignore', timeout: 10_000, ...user, cwd: '/' });
    return null;
  } catch (error) {
    return `${file} does not run (${(error as Error).message.split('\n')[0]})`;
  }
}

/** Runs a command to its exit; rejects with its output when it fails. */
function run(
  file: string,
  args: readonly string[],
  options: { user?: { uid: number; gid: number }; cwd: string; timeoutMs: number },
): Promise<void> {
  return new Promise((resolve, reject) => {
    // Resolved on 'exit', not 'close': a daemon it starts may keep inherited pipes open.
    const child = spawn(file, args, {
      cwd: options.cwd,
      stdio: ['ignore', 'pipe', 'pipe'],
      ...options.user,
    });
    let output = '';
    const collect = (chunk: Buffer) => {
      output = (output + chunk.toString('utf8')).slice(-4_000);
    };
    child.stdout?.on('data', collect);
    child.stderr?.on('data', collect);
    const timer = setTimeout(() => child.kill('SIGKILL'), options.timeoutMs);
    child.once('error', (error) => {
      clearTimeout(timer);
      reject(error);
    });
    child.once('exit', (code, signal) => {
      clearTimeout(timer);
      child.stdout?.destroy();
      child.stderr?.destroy();
      if (code === 0) resolve();
      else {
        const why = signal ? `signal ${signal}` : `code ${code}`;
        reject(new Error(`${TAG}: ${file} ${args.join(' ')} failed (${why})\n${output.trim()}`));
      }
    });
  });
}

/** True when nothing listens on 127.0.0.1:`port`. */
function portFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const probe = createServer();
    probe.once('error', () => resolve(false));
    probe.listen({ port, host: '127.0.0.1', exclusive: true }, () => {
      probe.close(() => resolve(true));
    });
  });
}

/** A port for the server, below the ephemeral range (see `stablePortCandidate`) and free now. */
async function choosePort(): Promise<number> {
  for (let attempt = 0; attempt < 50; attempt++) {
    const port = stablePortCandidate();
    if (await portFree(port)) return port;
  }
  throw new Error(`${TAG}: found no free port`);
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** What differs between the two servers. */
interface Flavour {
  /** The server's log, for failure reports. */
  readonly logFile: string;
  init(): Promise<void>;
  /** Starts on `port`; resolves once it accepts sessions. */
  start(port: number, timeoutMs: number): Promise<void>;
  stop(mode: DatabaseStopMode): Promise<void>;
  /** Kills it at once, synchronously (process exit). */
  killSync(): void;
  url(port: number, database?: string): string;
}

// ---- PostgreSQL ----

/** initdb's directory: `JOBS_PG_BINDIR`, the newest /usr/lib/postgresql/N/bin, or PATH. */
function postgresBinDir(): string | null {
  const fromEnv = process.env.JOBS_PG_BINDIR;
  if (fromEnv) return existsSync(join(fromEnv, 'initdb')) ? fromEnv : null;
  const root = '/usr/lib/postgresql';
  const versions = existsSync(root)
    ? readdirSync(root)
        .filter((v) => /^\d+$/.test(v))
        .sort((a, b) => Number(b) - Number(a))
    : [];
  const initdb = findBinary(
    ['initdb'],
    versions.map((v) => join(root, v, 'bin')),
  );
  return initdb ? join(initdb, '..') : null;
}

/** As root, PostgreSQL runs as the `postgres` system user. */
function postgresUser(): { uid: number; gid: number } | undefined | string {
  if (!isRoot()) return undefined;
  try {
    const id = (flag: string) =>
      Number(execFileSync('id', [flag, 'postgres'], { encoding: 'utf8' }).trim());
    return { uid: id('-u'), gid: id('-g') };
  } catch {
    return 'running as root and there is no `postgres` user to run PostgreSQL as (installing the postgresql package creates it)';
  }
}

function postgresUnavailable(): string | null {
  const bin = postgresBinDir();
  if (!bin) {
    return 'no PostgreSQL server binaries (initdb, pg_ctl): install them (`apt-get install postgresql`) or point JOBS_PG_BINDIR at their directory';
  }
  const user = postgresUser();
  if (typeof user === 'string') return user;
  return notRunnable(join(bin, 'initdb'), user) ?? notRunnable(join(bin, 'pg_ctl'), user);
}

function postgresFlavour(dir: string): Flavour {
  const bin = postgresBinDir() as string;
  const user = postgresUser() as { uid: number; gid: number } | undefined;
  if (user) chownSync(dir, user.uid, user.gid);
  const data = join(dir, 'data');
  const logFile = join(dir, 'server.log');
  const pgCtl = (args: string[], timeoutMs: number) =>
    run(join(bin, 'pg_ctl'), ['-D', data, ...args], { user, cwd: dir, timeoutMs });
  return {
    logFile,
    init: () =>
      run(
        join(bin, 'initdb'),
        ['-D', data, '-A', 'trust', '-U', 'postgres', '-E', 'UTF8', '--locale=C', '--no-sync'],
        { user, cwd: dir, timeoutMs: 60_000 },
      ),
    start: (port, timeoutMs) => {
      const settings = [
        `-p ${port}`,
        `-k ${dir}`,
        '-c listen_addresses=127.0.0.1',
        '-c fsync=off',
        '-c shared_buffers=32MB',
      ];
      // -w: returns once the server accepts sessions (crash recovery done).
      const seconds = String(Math.ceil(timeoutMs / 1000));
      return pgCtl(
        ['-w', '-t', seconds, '-l', logFile, '-o', settings.join(' '), 'start'],
        timeoutMs + 5_000,
      );
    },
    stop: (mode) => pgCtl(['-w', '-t', '30', '-m', mode, 'stop'], 35_000),
    killSync: () => {
      try {
        execFileSync(join(bin, 'pg_ctl'), ['-D', data, '-m', 'immediate', '-w', 'stop'], {
          stdio: 'ignore',
          cwd: dir,
          timeout: 10_000,
          ...user,
        });
      } catch {
        // Already stopped.
      }
    },
    url: (port, database = 'postgres') => `postgres://postgres@127.0.0.1:${port}/${database}`,
  };
}

// ---- MariaDB ----

function mariadbBinaries(): { server: string; install: string } | null {
  const server = findBinary(['mariadbd', 'mysqld'], ['/usr/sbin', '/usr/local/sbin']);
  const install = findBinary(['mariadb-install-db', 'mysql_install_db'], ['/usr/bin']);
  return server && install ? { server, install } : null;
}

function mariadbUnavailable(): string | null {
  const binaries = mariadbBinaries();
  if (!binaries) {
    return 'no MariaDB server binaries (mariadbd, mariadb-install-db): install them (`apt-get install mariadb-server`)';
  }
  return notRunnable(binaries.server);
}

/**
 * True when a MySQL-protocol greeting comes from `port` (a handshake packet, not an error
 * packet such as "server is starting").
 */
function greets(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect({ port, host: '127.0.0.1' });
    const done = (ok: boolean) => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(1_000, () => done(false));
    socket.once('error', () => done(false));
    let received = Buffer.alloc(0);
    socket.on('data', (chunk: Buffer) => {
      received = Buffer.concat([received, chunk]);
      // 3-byte length, 1-byte sequence, then the payload: 0x0a is protocol 10's handshake.
      if (received.length >= 5) done(received[4] === 0x0a);
    });
  });
}

function mariadbFlavour(dir: string): Flavour {
  const { server, install } = mariadbBinaries() as { server: string; install: string };
  const data = join(dir, 'data');
  const tmp = join(dir, 'tmp');
  mkdirSync(tmp, { recursive: true });
  const logFile = join(dir, 'server.log');
  // mariadbd will not run as root unless told to.
  const asRoot = isRoot() ? ['--user=root'] : [];
  let child: ChildProcess | null = null;
  let exited: Promise<void> = Promise.resolve();
  // A temporary directory of its own (the install's bootstrap server's too): at start,
  // mariadbd deletes every `#sql*` file in its tmpdir, and in the shared /tmp those are the
  // shared server's temporary tables in use ("Error on delete of '/tmp/#sql-temptable-….MAI'"
  // in a test beside it).
  const common = ['--no-defaults', `--datadir=${data}`, `--tmpdir=${tmp}`, ...asRoot];
  return {
    logFile,
    init: () =>
      run(install, [...common, '--auth-root-authentication-method=normal'], {
        cwd: dir,
        timeoutMs: 60_000,
      }),
    start: async (port, timeoutMs) => {
      const started = spawn(
        server,
        [
          ...common,
          `--port=${port}`,
          '--bind-address=127.0.0.1',
          `--socket=${join(dir, 'mysqld.sock')}`,
          `--pid-file=${join(dir, 'mysqld.pid')}`,
          `--log-error=${logFile}`,
          // Commits reach the OS at once: they survive a killed server (not a lost machine).
          '--innodb-flush-log-at-trx-commit=2',
          '--innodb-buffer-pool-size=32M',
        ],
        { cwd: dir, stdio: 'ignore' },
      );
      child = started;
      let gone: Error | null = null;
      exited = new Promise((resolve) => {
        started.once('exit', (code, signal) => {
          gone = new Error(`${TAG}: mariadbd exited (code ${code}, signal ${signal})`);
          if (child === started) child = null;
          resolve();
        });
      });
      const deadline = Date.now() + timeoutMs;
      while (!(await greets(port))) {
        if (gone) throw gone;
        if (Date.now() > deadline) {
          started.kill('SIGKILL');
          throw new Error(`${TAG}: mariadbd did not answer on ${port} within ${timeoutMs} ms`);
        }
        await sleep(50);
      }
    },
    stop: async (mode) => {
      const running = child;
      if (!running) return;
      running.kill(mode === 'immediate' ? 'SIGKILL' : 'SIGTERM');
      const force = setTimeout(() => running.kill('SIGKILL'), 30_000);
      await exited;
      clearTimeout(force);
    },
    killSync: () => {
      child?.kill('SIGKILL');
    },
    url: (port, database = 'test') => `mysql://root@127.0.0.1:${port}/${database}`,
  };
}

// ---- the server ----

const FLAVOURS: Record<
  DatabaseServerKind,
  { unavailable(): string | null; make(dir: string): Flavour }
> = {
  postgres: { unavailable: postgresUnavailable, make: postgresFlavour },
  mariadb: { unavailable: mariadbUnavailable, make: mariadbFlavour },
};

/** Servers still running or not yet removed: killed and removed when the process exits. */
const live = new Set<DatabaseServer>();
let exitHookInstalled = false;
function removeOnExit(server: DatabaseServer): void {
  live.add(server);
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  process.once('exit', () => {
    for (const left of live) left.destroySync();
  });
}

/**
 * A database server of the test's own. Its URL points at the database clients use: for
 * PostgreSQL `postgres://postgres@127.0.0.1:<port>/postgres` (trust), for MariaDB
 * `mysql://root@127.0.0.1:<port>/test` (root, no password).
 *
 * @example
 * const reason = DatabaseServer.unavailable('postgres'); // skip the test when not null
 * const server = await DatabaseServer.create('postgres');
 * const store = new PostgresJobStore({ connectionString: server.url() });
 * await server.stop('immediate'); // a crash: sessions die, connects are refused
 * await server.start(); // same port, after crash recovery
 * await server.destroy();
 */
export class DatabaseServer {
  private up = false;
  private destroyed = false;

  private constructor(
    readonly kind: DatabaseServerKind,
    /** The temporary directory: data, socket and log. Removed by `destroy()`. */
    readonly directory: string,
    /** The TCP port on 127.0.0.1, the same across restarts. */
    readonly port: number,
    private readonly flavour: Flavour,
    private readonly startTimeoutMs: number,
  ) {}

  /** Why a `kind` server cannot be run here (binaries missing or not runnable), or null. */
  static unavailable(kind: DatabaseServerKind): string | null {
    return FLAVOURS[kind].unavailable();
  }

  /** Creates the data directory (initdb, mariadb-install-db) and starts the server. */
  static async create(
    kind: DatabaseServerKind,
    options: DatabaseServerOptions = {},
  ): Promise<DatabaseServer> {
    const reason = DatabaseServer.unavailable(kind);
    if (reason) throw new Error(`${TAG}: cannot run ${kind}: ${reason}`);
    const directory = mkdtempSync(join(tmpdir(), `jobs-${kind}-`));
    const flavour = FLAVOURS[kind].make(directory);
    const timeout = options.startTimeoutMs ?? 30_000;
    // The port is chosen free, but something may take it before the server binds: retry.
    for (let attempt = 1; ; attempt++) {
      const server = new DatabaseServer(kind, directory, await choosePort(), flavour, timeout);
      removeOnExit(server);
      try {
        if (attempt === 1) await flavour.init();
        await server.start();
        return server;
      } catch (error) {
        live.delete(server);
        if (attempt >= 3 || !/address already in use|could not bind/i.test(server.log())) {
          server.destroySync();
          throw error;
        }
      }
    }
  }

  /** True between a start and a stop. */
  get running(): boolean {
    return this.up;
  }

  /** The URL of `database` on this server (default `postgres` or `test`). */
  url(database?: string): string {
    return this.flavour.url(this.port, database);
  }

  /** Starts the stopped server on its port; resolves once it accepts sessions. */
  async start(): Promise<void> {
    if (this.destroyed) throw new Error(`${TAG}: destroyed`);
    if (this.up) return;
    try {
      await this.flavour.start(this.port, this.startTimeoutMs);
    } catch (error) {
      throw new Error(`${(error as Error).message}\n${this.log()}`, { cause: error });
    }
    this.up = true;
  }

  /** Stops the server (`immediate`: a crash; `fast`: a clean shutdown ending sessions). */
  async stop(mode: DatabaseStopMode = 'fast'): Promise<void> {
    if (!this.up) return;
    this.up = false;
    await this.flavour.stop(mode);
  }

  /** Stops it, waits `downMs` (clients meanwhile find nothing listening), starts it again. */
  async restart(mode: DatabaseStopMode = 'immediate', downMs = 0): Promise<void> {
    await this.stop(mode);
    if (downMs > 0) await sleep(downMs);
    await this.start();
  }

  /** The last lines of the server's log. */
  log(lines = 30): string {
    try {
      return readFileSync(this.flavour.logFile, 'utf8')
        .trimEnd()
        .split('\n')
        .slice(-lines)
        .join('\n');
    } catch {
      return '(no server log)';
    }
  }

  /** Stops the server at once and removes its directory. */
  async destroy(): Promise<void> {
    if (this.destroyed) return;
    await this.stop('immediate').catch(() => this.flavour.killSync());
    this.destroySync();
  }

  /** @internal Kills the server synchronously and removes its directory (process exit). */
  destroySync(): void {
    live.delete(this);
    if (this.destroyed) return;
    this.destroyed = true;
    if (this.up) this.flavour.killSync();
    this.up = false;
    rmSync(this.directory, { recursive: true, force: true });
  }
}
