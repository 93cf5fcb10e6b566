/**
 * `jobsctl signal <name> --key <key> [--payload <json>]`: sends a signal as `engine.signal`
 * does, through the client engine (no worker needed): the store keeps it until one job waiting
 * in `ctx.waitFor(name, { key })` takes it, and a job already waiting for it is due at once.
 */
import { ValidationError } from '@jobs/core';
import { type Command, InvalidArgumentError } from 'commander';
import type { App } from '../app.js';
import { UsageError } from '../errors.js';

/** `--payload`: JSON text, parsed (`{"ok":true}`, `42`, `"text"`, `null`). */
function parsePayload(value: string): unknown {
  try {
    return JSON.parse(value) as unknown;
  } catch (error) {
    throw new InvalidArgumentError(`not JSON (${(error as Error).message})`);
  }
}

/** The command-line spelling of a field `engine.signal` refuses. */
const OPTION_OF: Record<string, string> = { name: '<name>', key: '--key', payload: '--payload' };

export function registerSignal(program: Command, app: App): void {
  program
    .command('signal')
    .description(
      'send a signal to the job waiting for it in ctx.waitFor (kept until one waits, if none does yet)',
    )
    .argument('<name>', 'the signal name, as ctx.waitFor names it')
    .requiredOption(
      '--key <key>',
      'which wait of that name: the key ctx.waitFor gives (an order id…)',
    )
    .option('--payload <json>', 'what ctx.waitFor returns, as JSON (default null)', parsePayload)
    .option('--json', 'print { name, key, payloadBytes }')
    .addHelpText(
      'after',
      '\nThe signal is stored and taken by exactly one job waiting for its name and key, once; a\njob already waiting is due at once and resumes when a worker takes it. Sent before any job\nwaits, it is kept until one does. The payload is at most 64 KiB of JSON.\n\nExample:\n  jobsctl signal approval --key o-1 --payload \'{"ok":true}\' --db ./jobs.db',
    )
    .action(
      async (
        name: string,
        options: { key: string; payload?: unknown; json?: boolean },
        command: Command,
      ) => {
        await app.withSession(command, async ({ engine }) => {
          const payload = options.payload ?? null;
          try {
            await engine.signal(name, { key: options.key, payload });
          } catch (error) {
            if (!(error instanceof ValidationError)) throw error;
            const option = OPTION_OF[error.field] ?? error.field;
            throw new UsageError(`${option}: ${error.message.slice(error.field.length + 2)}`);
          }
          const payloadBytes = Buffer.byteLength(JSON.stringify(payload), 'utf8');
          if (options.json) {
            app.printJson({ name, key: options.key, payloadBytes });
            return;
          }
          app.print(
            `sent signal ${name} (key ${options.key}, ${payloadBytes} bytes of JSON): a job waiting for it is due now; if none waits yet, the first to wait takes it`,
          );
        });
      },
    );
}
