/**
 * `DatabaseServer` itself: a private PostgreSQL or MariaDB that accepts connections on its own
 * port once started, refuses them while stopped (crashed or shut down), comes back on the same
 * port, and leaves nothing behind when destroyed. Skipped, with the reason, where the server
 * binaries are missing; under CI=true that fails instead.
 */
import { existsSync, rmSync, writeFileSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, expect, it, onTestFinished } from 'vitest';
import { DatabaseServer, type DatabaseServerKind, describeIfAvailable } from '../src/index.js';

/** Connects to 127.0.0.1:`port`: `open`, or the error code (`ECONNREFUSED` when nothing listens). */
function dial(port: number): Promise<string> {
  return new Promise((resolve) => {
    const socket = connect({ port, host: '127.0.0.1' });
    socket.once('connect', () => {
      socket.destroy();
      resolve('open');
    });
    socket.once('error', (error: NodeJS.ErrnoException) => resolve(error.code ?? String(error)));
  });
}

for (const kind of ['postgres', 'mariadb'] as const satisfies readonly DatabaseServerKind[]) {
  describeIfAvailable(DatabaseServer.unavailable(kind), `DatabaseServer: ${kind}`, {}, () => {
    let server: DatabaseServer | null = null;
    afterEach(async () => {
      await server?.destroy();
      server = null;
    }, 30_000);

    it('accepts on its own port, refuses while stopped either way, comes back on the same port, leaves the shared tmpdir alone, and destroy() removes its directory', {
      timeout: 60_000,
    }, async () => {
      // Named like a temporary table of a server using the shared tmpdir (the shared MariaDB's
      // on 3306): mariadbd deletes every `#sql*` file in its own tmpdir when it starts.
      const probe = join(tmpdir(), `#sql-jobs-probe-${process.pid}-${kind}.MAI`);
      writeFileSync(probe, '');
      onTestFinished(() => rmSync(probe, { force: true }));
      server = await DatabaseServer.create(kind);
      const { port, directory } = server;
      expect(server.url()).toContain(`@127.0.0.1:${port}/`);
      expect([server.running, await dial(port)]).toEqual([true, 'open']);

      await server.stop('immediate');
      expect([server.running, await dial(port)]).toEqual([false, 'ECONNREFUSED']);
      await server.start();
      expect([server.port, await dial(port)]).toEqual([port, 'open']);

      await server.stop('fast');
      expect(await dial(port)).toBe('ECONNREFUSED');
      await server.restart('immediate', 100);
      expect(await dial(port)).toBe('open');

      expect(existsSync(probe)).toBe(true);

      await server.destroy();
      expect([existsSync(directory), await dial(port)]).toEqual([false, 'ECONNREFUSED']);
    });
  });
}
