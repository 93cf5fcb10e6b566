/**
 * Errors as `application/problem+json` (RFC 9457): a `type` URI naming the kind of problem, a
 * short `title`, the `status` and a `detail` that says what was wrong and what to do.
 */

/** The kinds of problem the API answers with; each is `type` `urn:jobs:http:<kind>`. */
export type ProblemKind =
  | 'unauthorized'
  | 'forbidden'
  | 'not-found'
  | 'method-not-allowed'
  | 'bad-request'
  | 'unsupported-media-type'
  | 'payload-too-large'
  | 'lease-lost'
  | 'cancelled'
  | 'too-many-requests'
  | 'unavailable'
  | 'internal';

const TITLES: Record<ProblemKind, [number, string]> = {
  unauthorized: [401, 'Unauthorized'],
  forbidden: [403, 'Forbidden'],
  'not-found': [404, 'Not found'],
  'method-not-allowed': [405, 'Method not allowed'],
  'bad-request': [400, 'Bad request'],
  'unsupported-media-type': [415, 'Unsupported media type'],
  'payload-too-large': [413, 'Payload too large'],
  'lease-lost': [409, 'Lease lost'],
  cancelled: [409, 'Cancelled'],
  'too-many-requests': [429, 'Too many requests'],
  unavailable: [503, 'Service unavailable'],
  internal: [500, 'Internal server error'],
};

export interface Problem {
  type: string;
  title: string;
  status: number;
  detail: string;
}

/** A problem as thrown inside the API and turned into a response at its edge. */
export class ProblemError extends Error {
  readonly problem: Problem;
  readonly headers: Record<string, string>;

  constructor(kind: ProblemKind, detail: string, headers: Record<string, string> = {}) {
    super(detail);
    this.name = 'ProblemError';
    const [status, title] = TITLES[kind];
    this.problem = { type: `urn:jobs:http:${kind}`, title, status, detail };
    this.headers = headers;
  }
}

/** An answer before it becomes a fetch `Response` or is written to a node response. */
export interface Reply {
  status: number;
  headers: Record<string, string>;
  body: string;
}

export function problemReply(error: ProblemError): Reply {
  return {
    status: error.problem.status,
    headers: {
      'content-type': 'application/problem+json',
      'cache-control': 'no-store',
      ...error.headers,
    },
    body: JSON.stringify(error.problem),
  };
}

export function jsonReply(status: number, body: unknown): Reply {
  return {
    status,
    headers: { 'content-type': 'application/json; charset=utf-8', 'cache-control': 'no-store' },
    body: JSON.stringify(body),
  };
}

export function toResponse(reply: Reply): Response {
  return new Response(reply.body, { status: reply.status, headers: reply.headers });
}
