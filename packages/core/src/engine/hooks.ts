/**
 * Hooks around enqueue, handler runs, steps and waits (`engine.use`), for instrumentation such as
 * `@jobs/otel`. With none added, enqueue and dispatch call straight through.
 */
import { JobsError, ValidationError } from '../errors.js';
import type { Job } from '../store.js';
import type { EngineHooks, EnqueueDraft, WaitCall } from './types.js';
import { assertKnownKeys, describe } from './validate.js';

const HOOK_NAMES = new Set<keyof EngineHooks>(['enqueue', 'run', 'step', 'wait']);

type Around<T, A extends unknown[]> = (...args: [...A, () => Promise<T>]) => Promise<T>;

export class EngineHookList {
  /** Bound hooks of each kind, outermost first; rebuilt when hooks are added or removed. */
  enqueue: Around<Job[], [readonly EnqueueDraft[]]>[] = [];
  run: Around<unknown, [Job]>[] = [];
  step: Around<unknown, [Job, Parameters<NonNullable<EngineHooks['step']>>[1]]>[] = [];
  wait: Around<unknown, [Job, WaitCall]>[] = [];
  private readonly added: EngineHooks[] = [];

  /** Adds hooks after those already added (so inside them); returns the function removing them. */
  add(hooks: EngineHooks): () => void {
    if (typeof hooks !== 'object' || hooks === null) {
      throw new ValidationError('hooks', `must be an object, got ${describe(hooks)}`);
    }
    assertKnownKeys(hooks, HOOK_NAMES as ReadonlySet<string>, 'hooks');
    for (const name of HOOK_NAMES) {
      if (hooks[name] !== undefined && typeof hooks[name] !== 'function') {
        throw new ValidationError(
          `hooks.${name}`,
          `must be a function, got ${describe(hooks[name])}`,
        );
      }
    }
    this.added.push(hooks);
    this.rebuild();
    return () => {
      const index = this.added.indexOf(hooks);
      if (index >= 0) this.added.splice(index, 1);
      this.rebuild();
    };
  }

  private rebuild(): void {
    this.enqueue = this.added.flatMap((h) => (h.enqueue ? [h.enqueue.bind(h)] : []));
    this.run = this.added.flatMap((h) => (h.run ? [h.run.bind(h)] : []));
    this.step = this.added.flatMap((h) => (h.step ? [h.step.bind(h)] : []));
    this.wait = this.added.flatMap((h) => (h.wait ? [h.wait.bind(h)] : []));
  }
}

/**
 * Calls `inner` through `hooks`, the first outermost. A hook's rejection, or a `next()` it
 * called more than once, rejects the call.
 */
export function callThrough<T, A extends unknown[]>(
  hooks: readonly Around<T, A>[],
  args: A,
  inner: () => Promise<T>,
): Promise<T> {
  const step = (i: number): Promise<T> => {
    const hook = hooks[i];
    if (!hook) return inner();
    let called = false;
    return hook(...args, () => {
      if (called) {
        return Promise.reject(
          new JobsError('INVALID_STATE', '[@jobs/core] engine.use: a hook called next() twice'),
        );
      }
      called = true;
      return step(i + 1);
    });
  };
  try {
    return Promise.resolve(step(0));
  } catch (error) {
    return Promise.reject(error);
  }
}
