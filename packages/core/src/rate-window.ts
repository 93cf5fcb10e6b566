/**
 * The rate-limit window rule, once for every store (DESIGN invariant 19): fixed windows per key,
 * kept in the store. A window opens at the first take after the previous one ended and grants
 * at most `max` starts until it ends; a block ("the remote said back off") grants nothing until
 * it lifts, and the next window opens after it. Stores keep `RateWindow` per key and apply this
 * under their own lock (a row lock, the database's write lock, or one process).
 */
import type { RateTokenRequest } from './store.js';

/** One key's window as a store keeps it; times in epoch ms on the store's clock. */
export interface RateWindow {
  /** When the current window opened. */
  startMs: number;
  /** Its length (the limit's `perMs` when it opened). */
  perMs: number;
  /** Starts granted in it. */
  used: number;
  /** Nothing is granted before this time; null for no block. */
  blockedUntilMs: number | null;
}

/** The window after `request` was applied at `nowMs`, what it granted, and when to ask again. */
export function nextRateWindow(
  window: RateWindow | null,
  request: RateTokenRequest,
  nowMs: number,
): { state: RateWindow; granted: number; retryAt: Date } {
  let state: RateWindow =
    window === null || nowMs >= window.startMs + window.perMs
      ? { startMs: nowMs, perMs: request.perMs, used: 0, blockedUntilMs: null }
      : { ...window };
  if (window?.blockedUntilMs != null && window.blockedUntilMs > nowMs) {
    state.blockedUntilMs = window.blockedUntilMs;
  }
  const blockMs = request.blockMs ?? 0;
  if (blockMs > 0) {
    const until = nowMs + blockMs;
    // The block ends the current window: the next one opens when it lifts.
    state = {
      startMs: until - state.perMs,
      perMs: state.perMs,
      used: Math.max(state.used, request.max),
      blockedUntilMs: Math.max(until, state.blockedUntilMs ?? 0),
    };
  }
  if (state.blockedUntilMs !== null && state.blockedUntilMs > nowMs) {
    return { state, granted: 0, retryAt: new Date(state.blockedUntilMs) };
  }
  state.blockedUntilMs = null;
  const granted = Math.max(0, Math.min(request.want, request.max - state.used));
  state.used += granted;
  return { state, granted, retryAt: new Date(state.startMs + state.perMs) };
}
