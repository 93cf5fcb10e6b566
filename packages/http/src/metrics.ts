/**
 * The API's counters, served as Prometheus text at `GET /metrics`: requests by operation and
 * status, jobs by what happened to them, and the long-polls waiting now. Labels carry client
 * names, never tokens.
 */
export class WorkerApiMetrics {
  private readonly requests = new Map<string, number>();
  private readonly jobs = new Map<string, number>();

  request(operation: string, status: number): void {
    const key = `operation="${operation}",status="${status}"`;
    this.requests.set(key, (this.requests.get(key) ?? 0) + 1);
  }

  /** `event`: acquired, extended, completed, failed, retried, deadlettered, released, cancelled, lease_lost. */
  job(event: string, client: string, count = 1): void {
    if (count === 0) return;
    const key = `event="${event}",client="${client}"`;
    this.jobs.set(key, (this.jobs.get(key) ?? 0) + count);
  }

  render(waiting: number): string {
    const lines = [
      '# HELP jobs_http_requests_total Worker API requests by operation and HTTP status.',
      '# TYPE jobs_http_requests_total counter',
      ...[...this.requests].map(([labels, n]) => `jobs_http_requests_total{${labels}} ${n}`),
      '# HELP jobs_http_jobs_total Jobs by what a remote worker did with them.',
      '# TYPE jobs_http_jobs_total counter',
      ...[...this.jobs].map(([labels, n]) => `jobs_http_jobs_total{${labels}} ${n}`),
      '# HELP jobs_http_waiting_acquires Acquire calls long-polling now.',
      '# TYPE jobs_http_waiting_acquires gauge',
      `jobs_http_waiting_acquires ${waiting}`,
    ];
    return `${lines.join('\n')}\n`;
  }
}
