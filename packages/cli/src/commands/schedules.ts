/** `jobsctl schedules`: list schedules with their next fire time; pause and resume them by name. */
import type { ScheduleInfo } from '@jobs/core';
import type { Command } from 'commander';
import type { App } from '../app.js';
import { cell, inZone, table } from '../format.js';

/** One schedule as `jobsctl schedules --json` prints it. */
export interface ScheduleJson {
  name: string;
  type: string;
  trigger: { cron: string | null; every: string | null; repeat: string | null; timezone: string };
  /** Next fire time (ISO-8601, UTC), and the same in the schedule's time zone; null when done. */
  nextAt: string | null;
  nextAtLocal: string | null;
  paused: boolean;
  /** A coalesced fire waits for the previous occurrence to finish. */
  pendingMisfire: boolean;
  fired: number;
  skipped: number;
  overlap: string;
  shards: number;
  queue: string;
  createdAt: string;
  updatedAt: string;
}

export function scheduleJson(info: ScheduleInfo): ScheduleJson {
  const o = info.options;
  return {
    name: info.name,
    type: o.type,
    trigger: { cron: o.cron, every: o.every, repeat: o.repeat, timezone: o.timezone },
    nextAt: info.nextAt?.toISOString() ?? null,
    nextAtLocal: info.nextAt ? inZone(info.nextAt, o.timezone) : null,
    paused: info.paused,
    pendingMisfire: info.pendingMisfire,
    fired: info.fired,
    skipped: info.skipped,
    overlap: o.overlap,
    shards: o.shards,
    queue: o.queue,
    createdAt: info.createdAt.toISOString(),
    updatedAt: info.updatedAt.toISOString(),
  };
}

function trigger(s: ScheduleJson): string {
  if (s.trigger.cron !== null) return `cron ${s.trigger.cron}`;
  if (s.trigger.every !== null) return `every ${s.trigger.every}`;
  return `repeat ${s.trigger.repeat ?? '?'}`;
}

export function renderSchedules(schedules: readonly ScheduleJson[]): string {
  if (schedules.length === 0) return 'no schedules';
  return table(
    ['NAME', 'TYPE', 'TRIGGER', 'NEXT FIRE (schedule time zone)', 'FIRED', 'SKIPPED', 'STATE'],
    schedules.map((s) => [
      cell(s.name, 40),
      cell(s.type, 30),
      cell(trigger(s), 40),
      s.nextAtLocal ?? 'no more occurrences',
      String(s.fired),
      String(s.skipped),
      `${s.paused ? 'paused' : 'active'}${s.pendingMisfire ? ', misfire pending' : ''}`,
    ]),
    { right: [4, 5] },
  );
}

export function registerSchedules(program: Command, app: App): void {
  const schedules = program
    .command('schedules')
    .description('list schedules (the default), or pause / resume one by name');
  schedules
    .command('list', { isDefault: true })
    .description('schedules with trigger, next fire time in their time zone, fired/skipped, paused')
    .option('--json', 'print a JSON array of schedules (see the README for the fields)')
    .addHelpText('after', '\nExample:\n  jobsctl schedules --db ./jobs.db')
    .action(async (options: { json?: boolean }, cmd: Command) => {
      await app.withSession(cmd, async ({ engine }) => {
        const list = (await engine.admin.listSchedules()).map(scheduleJson);
        if (options.json) app.printJson(list);
        else app.print(renderSchedules(list));
      });
    });
  for (const [verb, paused] of [
    ['pause', true],
    ['resume', false],
  ] as const) {
    schedules
      .command(verb)
      .description(
        paused
          ? 'stop a schedule firing (its jobs already created stay)'
          : 'fire again; occurrences missed while paused run once (or the schedule’s catchUp)',
      )
      .argument('<name>', 'the schedule name')
      .option('--json', 'print the schedule as JSON')
      .action(async (name: string, options: { json?: boolean }, cmd: Command) => {
        await app.withSession(cmd, async ({ engine }) => {
          const info = paused
            ? await engine.pauseSchedule(name)
            : await engine.resumeSchedule(name);
          if (options.json) app.printJson(scheduleJson(info));
          else app.print(`${paused ? 'paused' : 'resumed'} schedule ${info.name}`);
        });
      });
  }
}
