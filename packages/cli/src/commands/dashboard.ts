/**
 * `jobs dashboard`: serves the @jobs/dashboard web UI for `--db` on localhost until Ctrl-C
 * (SIGINT) or SIGTERM. Read-only unless `--allow-actions`: whoever reaches the port may then
 * retry, delete and pause, so keep `--host` on loopback or put it behind your own auth.
 */
import { once } from 'node:events';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { consoleLogger } from '@jobs/core';
import type { Command } from 'commander';
import { type App, integer } from '../app.js';
import { openStore } from '../connect.js';
import { UsageError } from '../errors.js';

interface DashboardOptions {
  port: number;
  host: string;
  readOnly?: boolean;
  allowActions?: boolean;
}

const LOOPBACK = new Set(['127.0.0.1', '::1', 'localhost']);

export function registerDashboard(program: Command, app: App): void {
  program
    .command('dashboard')
    .description(
      'serve the web dashboard on localhost (read-only unless --allow-actions; Ctrl-C stops)',
    )
    .option('--port <n>', 'port to listen on (0: any free port)', integer(0, 65_535), 8080)
    .option('--host <address>', 'address to listen on', '127.0.0.1')
    .option('--read-only', 'no actions, whatever else is given (the default)')
    .option('--allow-actions', 'allow retry, delete, cancel, suspend and pause from the browser')
    .addHelpText(
      'after',
      '\nActions (retry, delete, bulk, pause) are off unless --allow-actions is given: then anyone\nwho reaches the port may run them, so keep --host on loopback (or behind your own auth).\n\nExample:\n  jobs dashboard --db postgres://app@db:5432/app --port 8080\n  jobs dashboard --db ./jobs.db --allow-actions',
    )
    .action(async (options: DashboardOptions, cmd: Command) => {
      if (options.readOnly && options.allowActions) {
        throw new UsageError('--read-only and --allow-actions contradict each other: give one');
      }
      const target = app.resolveTarget(cmd);
      const opened = await openStore(target, 'existing');
      const stop = new AbortController();
      const onSignal = (): void => stop.abort();
      process.once('SIGINT', onSignal);
      process.once('SIGTERM', onSignal);
      try {
        await opened.store.now(); // fail now, with the usual hint, when the database is unreachable
        const actions = options.allowActions === true;
        const { createDashboard } = await import('@jobs/dashboard');
        const dashboard = createDashboard({
          store: opened.store,
          readOnly: !actions,
          ...(actions ? { authorize: () => true } : {}),
          logger: consoleLogger('warn'),
        });
        const server = createServer(dashboard.handler);
        server.listen(options.port, options.host);
        await Promise.race([
          once(server, 'listening'),
          once(server, 'error').then(([error]) => {
            throw error;
          }),
        ]);
        const { port } = server.address() as AddressInfo;
        const host = options.host.includes(':') ? `[${options.host}]` : options.host;
        app.print(`jobs dashboard for ${target.display} at http://${host}:${port}/`);
        app.print(
          actions
            ? `actions are ON: anyone who reaches this address can retry, delete and pause${LOOPBACK.has(options.host) ? '' : ' (not a loopback address!)'}`
            : 'read-only: start with --allow-actions to retry, delete and pause from the browser',
        );
        app.print('Ctrl-C stops');
        if (!stop.signal.aborted) await once(stop.signal, 'abort');
        server.closeAllConnections();
        await new Promise<void>((resolve) => server.close(() => resolve()));
      } finally {
        process.off('SIGINT', onSignal);
        process.off('SIGTERM', onSignal);
        await opened.close().catch(() => {});
      }
    });
}
