/**
 * The API's OpenAPI 3.1 document, served at `GET /openapi.json`. A test checks it against the
 * real routes (`WORKER_API_ROUTES`) and real answers, so it cannot drift from what is served.
 */

const problem = { $ref: '#/components/responses/Problem' };
const tokenField = {
  type: 'string',
  description: "The lease's fencing token from acquire: a stale one is refused with 409.",
};
const jobId = {
  name: 'id',
  in: 'path',
  required: true,
  schema: { type: 'string', pattern: '^(0|[1-9][0-9]{0,18})$' },
};

/** W3C Trace Context of the caller: the API's request span is its child (with a `tracer`). */
const traceHeaders = [
  {
    name: 'traceparent',
    in: 'header',
    required: false,
    schema: { type: 'string' },
    description: 'W3C traceparent of the caller; the request span is its child',
  },
  { name: 'tracestate', in: 'header', required: false, schema: { type: 'string' } },
];

function jsonBody(schema: object): object {
  return { required: true, content: { 'application/json': { schema } } };
}

function ok(description: string, schema: object): object {
  return { description, content: { 'application/json': { schema } } };
}

function post(operationId: string, summary: string, body: object, answer: object): object {
  return {
    post: {
      operationId,
      summary,
      security: [{ bearer: [] }],
      parameters: operationId === 'acquire' ? traceHeaders : [jobId, ...traceHeaders],
      requestBody: jsonBody(body),
      responses: {
        '200': answer,
        '400': problem,
        '401': problem,
        '403': problem,
        '409': problem,
        '413': problem,
      },
    },
  };
}

/** The document, with `serverUrl` (the API's base path as served) as its server. */
export function openApiDocument(serverUrl: string): Record<string, unknown> {
  return {
    openapi: '3.1.0',
    info: {
      title: '@jobs external worker API',
      version: '1',
      description:
        'Acquire jobs with a lease, extend it while working, then complete, fail or release each job. Every call after acquire names the lease token; a stale token changes nothing (409).',
    },
    servers: [{ url: serverUrl === '' ? '/' : serverUrl }],
    components: {
      securitySchemes: { bearer: { type: 'http', scheme: 'bearer' } },
      responses: {
        Problem: {
          description: 'An error (RFC 9457)',
          content: {
            'application/problem+json': { schema: { $ref: '#/components/schemas/Problem' } },
          },
        },
      },
      schemas: {
        Problem: {
          type: 'object',
          required: ['type', 'title', 'status', 'detail'],
          properties: {
            type: {
              type: 'string',
              description: 'urn:jobs:http:<kind>, e.g. urn:jobs:http:lease-lost',
            },
            title: { type: 'string' },
            status: { type: 'integer' },
            detail: { type: 'string' },
          },
        },
        Completion: {
          type: 'object',
          required: ['id', 'token'],
          additionalProperties: false,
          properties: {
            id: { type: 'string' },
            token: tokenField,
            result: { description: 'Any JSON, kept in history' },
          },
        },
        CompletionResult: {
          type: 'object',
          required: ['id'],
          properties: {
            id: { type: 'string' },
            outcome: { const: 'completed' },
            problem: { $ref: '#/components/schemas/Problem' },
          },
        },
        AcquiredJob: {
          type: 'object',
          required: [
            'id',
            'type',
            'payload',
            'attempt',
            'retriesLeft',
            'token',
            'leaseExpiresAt',
            'traceparent',
            'tracestate',
          ],
          properties: {
            id: { type: 'string' },
            type: { type: 'string' },
            payload: {},
            attempt: { type: 'integer', description: 'This attempt, from 1' },
            retriesLeft: { type: 'integer' },
            token: tokenField,
            leaseExpiresAt: { type: 'string', format: 'date-time' },
            scope: { type: ['string', 'null'] },
            tenantId: { type: ['string', 'null'] },
            queue: { type: 'string' },
            meta: {
              type: ['object', 'null'],
              additionalProperties: { type: 'string' },
              description: 'Headers stored with the job, e.g. W3C traceparent',
            },
            progress: { description: 'The last progress reported, or null' },
            traceparent: {
              type: ['string', 'null'],
              description:
                "The W3C traceparent stored with the job (meta.traceparent, written by @jobs/otel): send it on as this job's trace context",
            },
            tracestate: { type: ['string', 'null'], description: 'Its W3C tracestate, if any' },
          },
        },
      },
    },
    paths: {
      '/acquire': post(
        'acquire',
        'Lease up to `max` due jobs of the given types, waiting up to `waitMs` for one',
        {
          type: 'object',
          additionalProperties: false,
          properties: {
            types: {
              type: 'array',
              items: { type: 'string' },
              minItems: 1,
              description: "Default: all of the client's types",
            },
            max: { type: 'integer', minimum: 1, default: 1 },
            leaseMs: { type: 'integer', minimum: 100, default: 30000 },
            waitMs: {
              type: 'integer',
              minimum: 0,
              default: 0,
              description: 'Long-poll: wait this long for a job',
            },
            worker: {
              type: 'string',
              pattern: '^[A-Za-z0-9._:@-]{1,100}$',
              description: 'Shown as the lock owner',
            },
            complete: {
              type: 'array',
              maxItems: 1000,
              items: { $ref: '#/components/schemas/Completion' },
              description:
                'Optional: jobs this worker finished, completed before the acquire in the same request (one store call where the store can), each on its own as in POST /complete; their answers come back in `results`',
            },
          },
        },
        ok('The leased jobs (none when nothing came within waitMs)', {
          type: 'object',
          required: ['jobs'],
          properties: {
            jobs: { type: 'array', items: { $ref: '#/components/schemas/AcquiredJob' } },
            results: {
              type: 'array',
              items: { $ref: '#/components/schemas/CompletionResult' },
              description: 'When `complete` was sent: each of its jobs completed, or why not',
            },
          },
        }),
      ),
      '/jobs/{id}/extend': post(
        'extend',
        'Extend the lease (a heartbeat), report progress, learn of a cancel request',
        {
          type: 'object',
          required: ['token'],
          additionalProperties: false,
          properties: {
            token: tokenField,
            progress: { description: 'Any JSON, ≤ 8 KiB' },
            leaseMs: { type: 'integer', minimum: 100 },
          },
        },
        ok('The lease was extended', {
          type: 'object',
          required: ['leaseExpiresAt', 'cancelRequested'],
          properties: {
            leaseExpiresAt: { type: 'string', format: 'date-time' },
            cancelRequested: {
              type: 'boolean',
              description: 'Stop, then call fail or release: the job ends as cancelled',
            },
          },
        }),
      ),
      '/jobs/{id}/complete': post(
        'complete',
        'Complete the job with an optional result',
        {
          type: 'object',
          required: ['token'],
          additionalProperties: false,
          properties: { token: tokenField, result: { description: 'Any JSON, kept in history' } },
        },
        ok('Completed', settled(['completed'])),
      ),
      '/jobs/{id}/fail': post(
        'fail',
        'Fail this attempt: retried after a backoff while retries are left, else dead-lettered',
        {
          type: 'object',
          required: ['token', 'error'],
          additionalProperties: false,
          properties: {
            token: tokenField,
            error: {
              oneOf: [
                { type: 'string', minLength: 1 },
                {
                  type: 'object',
                  required: ['message'],
                  properties: { message: { type: 'string' }, stack: { type: 'string' } },
                },
              ],
            },
            retryInMs: {
              type: 'integer',
              minimum: 0,
              description: "Default: the job's retry policy",
            },
            unrecoverable: { type: 'boolean', description: 'Straight to the dead-letter area' },
          },
        },
        ok('The failure was recorded', {
          type: 'object',
          required: ['id', 'outcome', 'retryInMs', 'retriesLeft'],
          properties: {
            id: { type: 'string' },
            outcome: { enum: ['retry', 'deadletter'] },
            retryInMs: { type: ['integer', 'null'] },
            retriesLeft: { type: 'integer' },
          },
        }),
      ),
      '/jobs/{id}/release': post(
        'release',
        'Give the job back unstarted (no attempt counted)',
        {
          type: 'object',
          required: ['token'],
          additionalProperties: false,
          properties: { token: tokenField },
        },
        ok('Released', settled(['released'])),
      ),
      '/complete': {
        post: {
          operationId: 'completeMany',
          summary: 'Complete many held jobs in one request, each on its own',
          security: [{ bearer: [] }],
          parameters: traceHeaders,
          requestBody: jsonBody({
            type: 'object',
            required: ['jobs'],
            additionalProperties: false,
            properties: {
              jobs: {
                type: 'array',
                minItems: 1,
                maxItems: 1000,
                items: { $ref: '#/components/schemas/Completion' },
              },
            },
          }),
          responses: {
            '200': ok("Each job completed, or why not (a lost lease is that job's own problem)", {
              type: 'object',
              required: ['results'],
              properties: {
                results: {
                  type: 'array',
                  items: { $ref: '#/components/schemas/CompletionResult' },
                },
              },
            }),
            '400': problem,
            '401': problem,
            '413': problem,
          },
        },
      },
      '/openapi.json': {
        get: {
          operationId: 'openapi',
          summary: 'This document',
          responses: { '200': ok('OpenAPI 3.1', { type: 'object' }) },
        },
      },
      '/health': {
        get: {
          operationId: 'health',
          summary: 'Whether the store answers',
          responses: {
            '200': ok('The store answers', {
              type: 'object',
              required: ['status', 'store'],
              properties: { status: { const: 'ok' }, store: { type: 'string' } },
            }),
            '503': problem,
          },
        },
      },
      '/metrics': {
        get: {
          operationId: 'metrics',
          summary: 'Prometheus metrics',
          responses: {
            '200': {
              description: 'Prometheus text',
              content: { 'text/plain': { schema: { type: 'string' } } },
            },
          },
        },
      },
    },
  };
}

function settled(outcomes: string[]): object {
  return {
    type: 'object',
    required: ['id', 'outcome'],
    properties: { id: { type: 'string' }, outcome: { enum: outcomes } },
  };
}
