import type { EngineEventName, EngineEvents } from './types.js';

type Listener<E extends EngineEventName> = (event: EngineEvents[E]) => void;

/** A small typed event emitter. A listener that throws is reported, never breaks the engine. */
export class TypedEvents {
  private readonly listeners = new Map<EngineEventName, Set<Listener<EngineEventName>>>();

  constructor(private readonly onListenerError: (error: unknown, event: EngineEventName) => void) {}

  on<E extends EngineEventName>(event: E, listener: Listener<E>): () => void {
    let set = this.listeners.get(event);
    if (!set) {
      set = new Set();
      this.listeners.set(event, set);
    }
    set.add(listener as Listener<EngineEventName>);
    return () => this.off(event, listener);
  }

  off<E extends EngineEventName>(event: E, listener: Listener<E>): void {
    this.listeners.get(event)?.delete(listener as Listener<EngineEventName>);
  }

  has(event: EngineEventName): boolean {
    return (this.listeners.get(event)?.size ?? 0) > 0;
  }

  emit<E extends EngineEventName>(event: E, payload: EngineEvents[E]): void {
    const set = this.listeners.get(event);
    if (!set) return;
    for (const listener of set) {
      try {
        listener(payload);
      } catch (error) {
        if (event === 'error') continue;
        this.onListenerError(error, event);
      }
    }
  }
}
