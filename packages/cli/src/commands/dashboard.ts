/**
 * `jobsctl dashboard`: serves the @jobs/dashboard web UI for `--db` on localhost until Ctrl-C
 * (SIGINT) or SIGTERM. Read-only unless `--allow-actions`: whoever reaches the port may then
 * retry, delete and pause, so keep `--host` on loopback or put it behind your own auth.
 * It answers only the host names it is told (`--host`, `--allowed-host`) besides localhost and
 * IP addresses: a page that points its own name at this address (DNS rebinding) reads nothing.
 */
import { isIP } from 'node:net';
import { hostname } from 'node:os';
import { consoleLogger } from '@jobs/core';
import type { Command } from 'commander';
import { type App, integer } from '../app.js';
import { UsageError } from '../errors.js';
import { serveOverStore } from '../serve-store.js';

interface DashboardOptions {
  port: number;
  host: string;
  readOnly?: boolean;
  allowActions?: boolean;
  allowedHost: string[];
}

const LOOPBACK = new Set(['127.0.0.1', '::1', 'localhost']);
/** Binds that listen on every interface: reached by the machine's IP addresses or its name. */
const EVERY_INTERFACE = new Set(['0.0.0.0', '::', '[::]']);

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
    .option(
      '--allowed-host <name>',
      'also answer requests for this host name (repeatable); localhost, IP addresses and --host always are',
      (name: string, names: string[]) => [...names, name],
      [] as string[],
    )
    .addHelpText(
      'after',
      '\nActions (retry, delete, bulk, pause) are off unless --allow-actions is given: then anyone\nwho reaches the port may run them, so keep --host on loopback (or behind your own auth).\n\nExample:\n  jobsctl dashboard --db postgres://app@db:5432/app --port 8080\n  jobsctl dashboard --db ./jobs.db --allow-actions',
    )
    .action(async (options: DashboardOptions, cmd: Command) => {
      if (options.readOnly && options.allowActions) {
        throw new UsageError('--read-only and --allow-actions contradict each other: give one');
      }
      const target = app.resolveTarget(cmd);
      const actions = options.allowActions === true;
      // Host names the dashboard answers besides localhost and IP addresses (DNS rebinding).
      const allowedHosts = [options.host, ...options.allowedHost];
      await serveOverStore(
        app,
        target,
        options,
        async (store) => {
          const { createDashboard } = await import('@jobs/dashboard');
          try {
            return createDashboard({
              store,
              readOnly: !actions,
              ...(actions ? { authorize: () => true } : {}),
              logger: consoleLogger('warn'),
              allowedHosts,
            });
          } catch (error) {
            if ((error as Error).name !== 'ValidationError') throw error;
            throw new UsageError(`--host/--allowed-host: ${(error as Error).message}`);
          }
        },
        (origin) => {
          app.print(`jobsctl dashboard for ${target.display} at ${origin}/`);
          app.print(
            actions
              ? `actions are ON: anyone who reaches this address can retry, delete and pause${LOOPBACK.has(options.host) ? '' : ' (not a loopback address!)'}`
              : 'read-only: start with --allow-actions to retry, delete and pause from the browser',
          );
          const names = [...new Set(allowedHosts)].filter(
            (name) => isIP(name.replace(/^\[|\]$/g, '')) === 0 && !/(^|\.)localhost$/i.test(name),
          );
          app.print(
            `hosts allowed: localhost, IP addresses${names.map((name) => `, ${name}`).join('')}; others get 421 (add one with --allowed-host <name>)`,
          );
          if (EVERY_INTERFACE.has(options.host)) {
            app.print(
              `listening on every interface: open it by an IP address of this machine, or allow its name (--allowed-host ${hostname()})`,
            );
          }
        },
      );
    });
}
