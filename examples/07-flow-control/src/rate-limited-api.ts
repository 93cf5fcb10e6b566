/**
 * A rate-limited API client: at most 5 calls per second per API host, across every worker, and
 * a host that answers "429 Too Many Requests" pushes its own window out.
 *
 * The `call-api` type has `rateLimit: { max: 5, perMs: 1000, key: (job) => job.payload.host }`:
 * each host has its own window, kept in the store, so two workers together start at most 5
 * calls of a host per second. Jobs over the limit wait (due when the window ends) without
 * counting an attempt. The fake `slow.example` answers 429 with `Retry-After: 2` once; the
 * handler says so with `ctx.rateLimited(2000)`: no call to that host starts for 2 s, and this
 * job runs again then, its attempt not counted.
 */
import type { JobContext } from '@jobs/core';
import { twoWorkers } from './two-workers.js';

interface Call {
  host: string;
  n: number;
}

export async function rateLimitedApi(filename: string): Promise<void> {
  console.log('— a rate-limited API client: 5 calls per second per host —');
  const t0 = Date.now();
  const calls: { host: string; at: number; attempt: number }[] = [];
  let throttled = false;
  let done = 0;
  const callApi = async (job: { payload: Call }, ctx: JobContext) => {
    const { host } = job.payload;
    // A stand-in for `fetch(`https://${host}/…`)`.
    if (host === 'slow.example' && !throttled) {
      throttled = true;
      console.log(`worker:   ${host} answered 429, Retry-After: 2`);
      return ctx.rateLimited(2_000);
    }
    calls.push({ host, at: Date.now() - t0, attempt: ctx.attempt });
    done += 1;
  };
  const { workers, runUntil } = await twoWorkers(filename, {
    concurrency: 10,
    handlers: {
      'call-api': {
        handler: callApi,
        rateLimit: { max: 5, perMs: 1_000, key: (job) => (job.payload as Call).host },
      },
    },
  });
  const jobs = [
    ...Array.from({ length: 12 }, (_, n) => ({ host: 'api.example', n })),
    ...Array.from({ length: 3 }, (_, n) => ({ host: 'slow.example', n })),
  ];
  await workers[0]?.enqueueMany(jobs.map((payload) => ({ type: 'call-api', payload })));
  await runUntil(() => done === jobs.length);
  for (const host of ['api.example', 'slow.example']) {
    const mine = calls.filter((c) => c.host === host);
    const first = mine[0]?.at ?? 0;
    // Calls per window: windows open at the host's first call, one second each.
    const windows: number[] = [];
    for (const c of mine) {
      const w = Math.floor((c.at - first) / 1000);
      windows[w] = (windows[w] ?? 0) + 1;
    }
    const attempts = [...new Set(mine.map((c) => c.attempt))].join(', ');
    console.log(
      `${host}: ${mine.length} calls, per second ${[...windows].map((n) => n ?? 0).join(' / ')}; ` +
        `first call at ${first} ms; attempts: ${attempts}`,
    );
  }
  console.log('');
}
