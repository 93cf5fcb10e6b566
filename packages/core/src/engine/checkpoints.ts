/**
 * Step checkpoints, written like a group commit: a checkpoint reached while none is being
 * written goes out at once, alone; those reached while one is under way wait for it and then
 * go out together, in one write (`StoreSteps.saveMany`). A step alone waits for nothing more
 * than before; many runs stepping at once share round trips — fewer than one per step at any
 * concurrency above one. Each checkpoint stays fenced by its own lease's token (a stale one
 * is refused alone). Without `saveMany`, or with a caller's transaction, each is `save`d alone.
 */
import type { JobRef, StepSave, StoreSteps } from '../store.js';

/** Checkpoints in one write, at most (`StoreSteps.saveMany`'s limit). */
const MAX_BATCH = 1_000;

interface Waiting extends StepSave {
  resolve(saved: boolean): void;
  reject(error: unknown): void;
}

export class Checkpoints {
  private waiting: Waiting[] = [];
  private writing = false;

  constructor(private readonly steps: () => StoreSteps | undefined) {}

  /** Writes `ref`'s step list, fenced by its token; false when the store refused it. */
  save(ref: JobRef, stepsJson: string): Promise<boolean> {
    const steps = this.steps() as StoreSteps;
    if (!steps.saveMany) return steps.save(ref, stepsJson);
    return new Promise<boolean>((resolve, reject) => {
      this.waiting.push({ ref, stepsJson, resolve, reject });
      if (!this.writing) void this.write(steps);
    });
  }

  /** Writes what waits, batch after batch, until nothing does. */
  private async write(steps: StoreSteps): Promise<void> {
    this.writing = true;
    try {
      while (this.waiting.length > 0) {
        const batch = this.take();
        try {
          if (batch.length === 1) {
            const [one] = batch as [Waiting];
            one.resolve(await steps.save(one.ref, one.stepsJson));
            continue;
          }
          const refused = new Set(
            await (steps.saveMany as NonNullable<StoreSteps['saveMany']>)(batch),
          );
          for (const save of batch) save.resolve(!refused.has(save.ref.id));
        } catch (error) {
          for (const save of batch) save.reject(error);
        }
      }
    } finally {
      this.writing = false;
    }
  }

  /**
   * The next batch: at most `MAX_BATCH`, one checkpoint per job (a run writes its checkpoints
   * one after the other, so a second one of a job waits for the next batch).
   */
  private take(): Waiting[] {
    const batch: Waiting[] = [];
    const rest: Waiting[] = [];
    const jobs = new Set<string>();
    for (const save of this.waiting) {
      if (batch.length < MAX_BATCH && !jobs.has(save.ref.id)) {
        jobs.add(save.ref.id);
        batch.push(save);
      } else rest.push(save);
    }
    this.waiting = rest;
    return batch;
  }
}
