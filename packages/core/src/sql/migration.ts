/** A numbered schema migration, as a dialect lists them (see `migrate.ts`). */
export interface Migration {
  version: number;
  /** File name without `.sql`, e.g. `0001_init`. */
  name: string;
  /** The statements, placeholders filled in. */
  statements: readonly string[];
}
