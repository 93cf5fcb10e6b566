/**
 * A job's log (`ctx.log`): lines its handlers write, kept with the job (`Job.logs`), written by
 * lease renewals and before the job settles as `progress` is, and kept in history — the newest
 * `MAX_LOG_LINES`, each at most `MAX_LOG_LINE_CHARS` characters, with characters no store can
 * keep replaced. Every line also goes to the engine's logger (`info`, with the job's id).
 */

import { UNSTORABLE_IN_JSON } from '../rules.js';
import { type JobLogLine, MAX_LOG_LINE_CHARS, MAX_LOG_LINES } from '../store.js';
import type { EngineRuntime, HeldJob } from './runtime.js';
import type { JobLog, Logger } from './types.js';

const UNSTORABLE = new RegExp(UNSTORABLE_IN_JSON.source, 'g');

/** `message` as a stored line keeps it: text, unstorable characters replaced, cut with `…`. */
export function logLineText(message: unknown): string {
  const text = (typeof message === 'string' ? message : String(message)).replace(
    UNSTORABLE,
    '\ufffd',
  );
  return text.length > MAX_LOG_LINE_CHARS ? `${text.slice(0, MAX_LOG_LINE_CHARS - 1)}…` : text;
}

/** Appends a line to `held`'s log (the newest `MAX_LOG_LINES` kept), for the next renewal. */
export function appendLogLine(rt: EngineRuntime, held: HeldJob, message: unknown): void {
  const line: JobLogLine = { at: new Date(rt.options.clock.now()), message: logLineText(message) };
  const lines = held.job.logs ?? [];
  lines.push(line);
  if (lines.length > MAX_LOG_LINES) lines.splice(0, lines.length - MAX_LOG_LINES);
  held.job.logs = lines;
  if (rt.options.store.capabilities.logs === true) {
    held.logsJson = JSON.stringify(lines.map((l) => ({ at: l.at.getTime(), message: l.message })));
    held.logsDirty = true;
  }
}

/**
 * `ctx.log` of `held`'s run: call it to write a line (`ctx.log('uploaded 3 files')`); its
 * `info`, `warn` and `error` write a line too (prefixed with the level, and passed on at that
 * level), `debug` only goes to the engine's logger.
 */
export function jobLog(rt: EngineRuntime, held: HeldJob): JobLog {
  const logger: Logger = rt.options.logger;
  const at =
    (level: 'info' | 'warn' | 'error') =>
    (message: string, data?: Record<string, unknown>): void => {
      appendLogLine(rt, held, level === 'info' ? message : `${level}: ${message}`);
      logger[level](message, { ...data, jobId: held.job.id, type: held.job.type });
    };
  const log = at('info') as JobLog;
  log.info = at('info');
  log.warn = at('warn');
  log.error = at('error');
  log.debug = (message, data) =>
    logger.debug(message, { ...data, jobId: held.job.id, type: held.job.type });
  return log;
}
