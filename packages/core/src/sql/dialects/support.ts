/** Small pieces the dialects share: reading driver error codes, wrapping inline DDL. */
import type { Migration } from '../migration.js';

/** A driver's error code (`23505`, `ER_DUP_ENTRY`), also when an ORM wrapped the error. */
export function driverCode(error: unknown): string | undefined {
  const e = error as { code?: unknown; driverError?: { code?: unknown } } | null;
  const code = e?.driverError?.code ?? e?.code;
  return typeof code === 'string' ? code : undefined;
}

/** A MySQL driver's numeric error (`1062`), also when an ORM wrapped the error. */
export function driverErrno(error: unknown): number | undefined {
  const e = error as { errno?: unknown; driverError?: { errno?: unknown } } | null;
  const errno = e?.driverError?.errno ?? e?.errno;
  return typeof errno === 'number' ? errno : undefined;
}

/** Migrations given as statement lists, version 1 first. */
export function inline(versions: readonly (readonly string[])[]): Migration[] {
  return versions.map((statements, i) => ({
    version: i + 1,
    name: `${String(i + 1).padStart(4, '0')}_inline`,
    statements,
  }));
}
