/**
 * `jobsctl serve`: serves the @jobs external-worker API (`@jobs/http`) for `--db` until Ctrl-C
 * (SIGINT) or SIGTERM. Its clients — bearer tokens, each allowed a set of job types — come from
 * `JOBS_HTTP_TOKENS` or `--tokens-file`, as JSON: `[{ "name", "token", "types": [...] }]`.
 * Tokens are never printed. No engine is needed: the API leases and recovers jobs itself.
 */
import { readFileSync } from 'node:fs';
import { consoleLogger } from '@jobs/core';
import type { WorkerClientConfig } from '@jobs/http';
import type { Command } from 'commander';
import { type App, integer } from '../app.js';
import { UsageError } from '../errors.js';
import { serveOverStore } from '../serve-store.js';

interface ServeOptions {
  port: number;
  host: string;
  tokensFile?: string;
  basePath?: string;
  maxWaitMs: number;
  pollMs: number;
}

/** The clients from `--tokens-file` or `JOBS_HTTP_TOKENS`, checked enough to say what is wrong. */
function readClients(options: ServeOptions, env: App['io']['env']): WorkerClientConfig[] {
  let text: string | undefined;
  let source: string;
  if (options.tokensFile !== undefined) {
    source = `--tokens-file ${options.tokensFile}`;
    try {
      text = readFileSync(options.tokensFile, 'utf8');
    } catch (error) {
      throw new UsageError(
        `${source}: cannot read it (${(error as NodeJS.ErrnoException).code ?? 'error'})`,
      );
    }
  } else {
    source = 'JOBS_HTTP_TOKENS';
    text = env.JOBS_HTTP_TOKENS;
  }
  if (text === undefined || text.trim() === '') {
    throw new UsageError(
      'no clients: set JOBS_HTTP_TOKENS (or --tokens-file) to JSON like [{"name":"python","token":"<secret>","types":["run-script"]}]',
    );
  }
  let clients: unknown;
  try {
    clients = JSON.parse(text);
  } catch {
    // The parser's message may quote the text, and the text holds tokens: say only where.
    throw new UsageError(`${source} is not valid JSON: expected [{"name","token","types"}, …]`);
  }
  if (!Array.isArray(clients) || clients.length === 0) {
    throw new UsageError(`${source} must be a JSON array of { "name", "token", "types" }`);
  }
  return clients as WorkerClientConfig[];
}

export function registerServe(program: Command, app: App): void {
  program
    .command('serve')
    .description(
      'serve the external-worker HTTP API (acquire, extend, complete, fail with fencing tokens; Ctrl-C stops)',
    )
    .option('--port <n>', 'port to listen on (0: any free port)', integer(0, 65_535), 8080)
    .option('--host <address>', 'address to listen on', '127.0.0.1')
    .option('--tokens-file <path>', 'JSON file of the clients (default: $JOBS_HTTP_TOKENS)')
    .option('--base-path <path>', 'serve under this path, e.g. /workers')
    .option(
      '--max-wait-ms <ms>',
      'longest long-poll an acquire may ask for',
      integer(0, 600_000),
      60_000,
    )
    .option(
      '--poll-ms <ms>',
      'how often waiting acquires look again and lapsed leases are recovered',
      integer(10, 60_000),
      1_000,
    )
    .addHelpText(
      'after',
      '\nClients (JOBS_HTTP_TOKENS or --tokens-file), each a bearer token allowed some job types:\n  [{"name":"python","token":"<at least 16 characters>","types":["run-script"],"maxAcquire":100}]\n\nExample:\n  JOBS_HTTP_TOKENS=\'[{"name":"py","token":"…","types":["backup"]}]\' jobsctl serve --db ./jobs.db --port 8080\n  curl -s http://127.0.0.1:8080/openapi.json',
    )
    .action(async (options: ServeOptions, cmd: Command) => {
      const clients = readClients(options, app.io.env);
      const target = app.resolveTarget(cmd);
      await serveOverStore(
        app,
        target,
        options,
        async (store) => {
          const { createWorkerApi } = await import('@jobs/http');
          try {
            return createWorkerApi({
              store,
              clients,
              maxWaitMs: options.maxWaitMs,
              pollMs: options.pollMs,
              logger: consoleLogger('warn'),
              ...(options.basePath === undefined ? {} : { basePath: options.basePath }),
            });
          } catch (error) {
            if (!(error instanceof TypeError)) throw error;
            throw new UsageError(error.message.replace('createWorkerApi: clients', 'clients'));
          }
        },
        (origin) => {
          const base = options.basePath ? `/${options.basePath.replace(/^\/+|\/+$/g, '')}` : '';
          app.print(`jobsctl serve: worker API for ${target.display} at ${origin}${base}/`);
          app.print(
            `clients: ${clients.map((c, i) => `${c.name ?? `client-${i + 1}`} (${c.types.join(', ')})`).join('; ')}`,
          );
        },
      );
    });
}
