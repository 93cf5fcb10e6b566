/**
 * The "database" under `JsonFileJobStore`: tables held in memory, written to one JSON file after
 * every change, with one queue that runs each operation alone and writes once per batch.
 *
 * This is the part you replace when you adapt the store to your own database: `run(fn)` plays
 * the role of "BEGIN; …; COMMIT" and the tables (maps of `Job` and `ScheduleRecord` objects,
 * as `@jobs/core` defines them) play the role of your tables or collections. Several store
 * instances opened on the same file in one process share one `JsonFile` (like connections to
 * one database), so the conformance suite can race them against each other.
 */
import { randomUUID } from 'node:crypto';
import { open, readdir, readFile, rename, rm } from 'node:fs/promises';
import { basename, dirname, join, resolve } from 'node:path';
import { type Job, type JobLogLine, type ScheduleRecord, StoreError } from '@jobs/core';

export interface Tables {
  /** The next job id: ids grow in insertion order and are never reused. */
  nextId: number;
  /** Unfinished jobs by id, as `@jobs/core` defines a `Job`, in insertion (= id) order. */
  jobs: Map<string, Job>;
  /** Schedules by name. */
  schedules: Map<string, ScheduleRecord>;
}

/**
 * A `Job` as the file holds it: `JSON.stringify` writes its times as ISO-8601 strings
 * (millisecond precision), and `reviveJob` turns them back into `Date`s.
 */
export type JobJson = Omit<
  Job,
  'dueAt' | 'createdAt' | 'lockExpiresAt' | 'startedAt' | 'occurrence' | 'logs'
> & {
  dueAt: string;
  createdAt: string;
  lockExpiresAt: string | null;
  startedAt?: string | null;
  occurrence: string | null;
  logs?: { at: string; message: string }[];
};

/** A `ScheduleRecord` as the file holds it (times as ISO-8601 strings). */
export type ScheduleJson = Omit<ScheduleRecord, 'nextAt' | 'createdAt' | 'updatedAt'> & {
  nextAt: string | null;
  createdAt: string;
  updatedAt: string;
};

/** What the file holds. `format` lets a later version of the store migrate old files. */
interface FileContents {
  format: typeof FORMAT;
  nextId: number;
  jobs: JobJson[];
  schedules: ScheduleJson[];
}

/** Version 2 holds `Job` objects; files of version 1 (an earlier layout) are refused. */
const FORMAT = 2;

/** A job read from the file: its times as `Date`s again. Everything else is stored as it is. */
export function reviveJob(json: JobJson): Job {
  return {
    ...json,
    dueAt: new Date(json.dueAt),
    createdAt: new Date(json.createdAt),
    lockExpiresAt: optionalDate(json.lockExpiresAt),
    startedAt: optionalDate(json.startedAt ?? null),
    occurrence: optionalDate(json.occurrence),
    logs: (json.logs ?? []).map(
      (line): JobLogLine => ({
        at: new Date(line.at),
        message: line.message,
      }),
    ),
  };
}

/** A schedule read from the file: its times as `Date`s again. */
export function reviveSchedule(json: ScheduleJson): ScheduleRecord {
  return {
    ...json,
    nextAt: optionalDate(json.nextAt),
    createdAt: new Date(json.createdAt),
    updatedAt: new Date(json.updatedAt),
  };
}

function optionalDate(value: string | null): Date | null {
  return value === null ? null : new Date(value);
}

const TEMP_SUFFIX = '.tmp';

type Settle = (value: unknown) => void;

/** An operation that ran, and what it returned (handed out once the batch is on disk). */
interface Done {
  op: Operation;
  value: unknown;
}

/** One call of `run`, waiting for its turn. */
interface Operation {
  operation: string;
  fn: (tables: Tables) => unknown;
  write: boolean;
  create: boolean;
  resolve: Settle;
  reject: (error: unknown) => void;
}

export class JsonFile {
  readonly path: string;
  /** In-process wake-up listeners, shared by every store instance on this file. */
  readonly listeners = new Set<() => void>();
  private tables: Tables | null = null;
  /** The last text known to be on disk: what a failed write rolls the tables back to. */
  private committed = '';
  /** Operations waiting for their turn, and the loop running them (null when idle). */
  private pending: Operation[] = [];
  private draining: Promise<void> | null = null;
  private users = 0;

  private constructor(path: string) {
    this.path = path;
  }

  /**
   * Runs `fn` alone (no other operation on this file interleaves with it). Resolves only once
   * the changes `fn` made, and those of every operation before it, are on disk; if writing fails
   * they are undone. `create` makes a missing file (only `migrate()` does).
   */
  run<T>(operation: string, fn: (tables: Tables) => T, write: boolean, create = false): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      this.pending.push({ operation, fn, write, create, resolve: resolve as Settle, reject });
      // Start after a turn of the event loop: calls made meanwhile share the batch, and a caller
      // awaiting calls in a tight loop cannot starve timers (such as the engine's heartbeats).
      this.draining ??= new Promise((started) => setImmediate(started)).then(() => this.drain());
    });
  }

  /**
   * Group commit: runs the waiting operations one after the other on the tables, then writes the
   * file ONCE for all of them, and only then resolves them. Each operation sees the ones before
   * it, nobody sees a change before it is on disk, and N concurrent writers cost one fsync, not N.
   */
  private async drain(): Promise<void> {
    while (this.pending.length > 0) {
      const batch = this.pending.splice(0);
      // The first operation ever loads the file; if that fails, it fails alone.
      while (this.tables === null && batch.length > 0) {
        const op = batch[0] as Operation;
        await this.load(op.operation, op.create).catch((error: unknown) => {
          op.reject(error);
          batch.shift();
        });
      }
      await this.commit(this.runBatch(batch));
    }
    this.draining = null;
  }

  /**
   * Runs a batch like one transaction. A write that throws may have changed the tables halfway,
   * so it is rejected, the tables go back to what is on disk, and the batch runs again without
   * it: nothing half-done stays behind. (Results are handed out only after the write, so running
   * an operation again is invisible to its caller.)
   */
  private runBatch(batch: Operation[]): Done[] {
    for (;;) {
      const done: Done[] = [];
      let failedWrite: Operation | null = null;
      for (const op of batch) {
        try {
          done.push({ op, value: op.fn(this.tables as Tables) });
        } catch (error) {
          op.reject(error);
          if (op.write) {
            failedWrite = op;
            break;
          }
        }
      }
      if (failedWrite === null) return done;
      batch = batch.filter((op) => op !== failedWrite);
      this.tables = this.decode(failedWrite.operation, this.committed);
    }
  }

  /** Writes the tables if any of `done` changed them, then settles all of `done`. */
  private async commit(done: Done[]): Promise<void> {
    const writer = done.find((d) => d.op.write);
    if (writer && this.tables) {
      try {
        await this.save(writer.op.operation, this.tables);
      } catch (error) {
        // The tables are back to the last file; every operation of the batch saw changes that
        // are gone now, reads included, so all of them fail.
        for (const d of done) d.op.reject(error);
        return;
      }
    }
    for (const d of done) d.op.resolve(d.value);
  }

  /** Wakes listeners after the current operation returned, as a database notifies after commit. */
  notify(): void {
    setImmediate(() => {
      for (const listener of [...this.listeners]) listener();
    });
  }

  private async load(operation: string, create: boolean): Promise<Tables> {
    let text: string;
    try {
      text = await readFile(this.path, 'utf8');
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'ENOENT') {
        throw new StoreError(`[json-file] ${operation}: cannot read ${this.path}`, {
          cause: error,
        });
      }
      if (!create) {
        throw new StoreError(
          `[json-file] ${operation}: ${this.path} does not exist; call migrate() first`,
        );
      }
      const empty: Tables = { nextId: 1, jobs: new Map(), schedules: new Map() };
      await this.save(operation, empty);
      this.tables = empty;
      return empty;
    }
    // A crash between writing a temp file and renaming it leaves the temp file behind; the real
    // file is still the last complete version, so the leftovers are simply removed.
    await this.removeTempFiles();
    this.tables = this.decode(operation, text);
    this.committed = text;
    return this.tables;
  }

  /**
   * Write to a temp file, fsync it, rename it over the file, fsync the directory. Operations that
   * arrive while this runs wait and form the next batch: the slower the disk, the bigger the batch.
   */
  private async save(operation: string, tables: Tables): Promise<void> {
    const contents: FileContents = {
      format: FORMAT,
      nextId: tables.nextId,
      // `JSON.stringify` writes each `Date` as its ISO-8601 string (`Date.prototype.toJSON`).
      jobs: [...tables.jobs.values()] as unknown as JobJson[],
      schedules: [...tables.schedules.values()] as unknown as ScheduleJson[],
    };
    const text = JSON.stringify(contents);
    const temp = `${this.path}.${randomUUID().slice(0, 8)}${TEMP_SUFFIX}`;
    try {
      const file = await open(temp, 'w');
      try {
        await file.writeFile(text, 'utf8');
        await file.sync();
      } finally {
        await file.close();
      }
      await rename(temp, this.path);
      // The rename is durable only once the directory entry is on disk too.
      const dir = await open(dirname(this.path), 'r');
      try {
        await dir.sync();
      } finally {
        await dir.close();
      }
      this.committed = text;
    } catch (error) {
      await rm(temp, { force: true });
      if (this.tables !== null) this.tables = this.decode(operation, this.committed);
      throw new StoreError(`[json-file] ${operation}: cannot write ${this.path}`, { cause: error });
    }
  }

  private decode(operation: string, text: string): Tables {
    let contents: FileContents;
    try {
      contents = JSON.parse(text) as FileContents;
    } catch (error) {
      throw new StoreError(`[json-file] ${operation}: ${this.path} is not valid JSON`, {
        cause: error,
      });
    }
    if (contents.format !== FORMAT) {
      throw new StoreError(
        `[json-file] ${operation}: ${this.path} has format ${String(contents.format)}; this store reads format ${FORMAT}`,
      );
    }
    return {
      nextId: contents.nextId,
      jobs: new Map(contents.jobs.map((json) => [json.id, reviveJob(json)])),
      schedules: new Map(contents.schedules.map((json) => [json.name, reviveSchedule(json)])),
    };
  }

  private async removeTempFiles(): Promise<void> {
    const prefix = `${basename(this.path)}.`;
    const dir = dirname(this.path);
    for (const name of await readdir(dir)) {
      if (name.startsWith(prefix) && name.endsWith(TEMP_SUFFIX)) {
        await rm(join(dir, name), { force: true });
      }
    }
  }

  // ---- one JsonFile per path per process, shared by the stores that use it ----

  private static readonly openFiles = new Map<string, JsonFile>();

  /** The shared handle of `path`; pair every `attach` with one `detach`. */
  static attach(path: string): JsonFile {
    const absolute = resolve(path);
    let file = JsonFile.openFiles.get(absolute);
    if (!file) {
      file = new JsonFile(absolute);
      JsonFile.openFiles.set(absolute, file);
    }
    file.users += 1;
    return file;
  }

  /** When the last user detaches, the tables are dropped: the next open reads the file again. */
  async detach(): Promise<void> {
    this.users -= 1;
    if (this.users > 0) return;
    await this.draining; // let queued writes finish before forgetting the tables
    if (this.users === 0 && JsonFile.openFiles.get(this.path) === this) {
      JsonFile.openFiles.delete(this.path);
    }
  }
}
