/** Job ids: canonical decimal integers that fit a signed 64-bit column (every store's id). */

/** Whether `id` is a job id any store could hold: `0`, or digits without a leading 0, ≤ 2⁶³−1. */
export function isJobId(id: string): boolean {
  return (
    typeof id === 'string' &&
    /^(0|[1-9][0-9]{0,18})$/.test(id) &&
    (id.length < 19 || BigInt(id) <= 9_223_372_036_854_775_807n)
  );
}
