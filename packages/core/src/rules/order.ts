/**
 * The acquisition order (DESIGN invariant 9): higher priority first, then earlier due time,
 * then insertion order (ids grow with insertion). The SQL stores say the same in their
 * `ORDER BY`; this is it for code.
 */

/**
 * Negative when `a` is acquired before `b`. Ids are canonical decimals of any size: the
 * shorter is smaller, else they compare as text (no BigInt: this runs for every pair of a
 * large batch, and most pairs tie on priority and due time).
 */
export function compareAcquisitionOrder(
  a: { priority: number; dueAt: Date; id: string },
  b: { priority: number; dueAt: Date; id: string },
): number {
  return (
    b.priority - a.priority ||
    a.dueAt.getTime() - b.dueAt.getTime() ||
    a.id.length - b.id.length ||
    (a.id < b.id ? -1 : a.id > b.id ? 1 : 0)
  );
}
