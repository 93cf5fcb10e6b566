/**
 * The command's own errors: one line on stderr, no stack, exit code 1 (2 for usage errors).
 * What a driver's error means for the operator is `explain.ts`'s.
 */

/** An error the command reports as it is: its message is already the one line to print. */
export class CliError extends Error {
  constructor(
    message: string,
    readonly exitCode: 1 | 2 = 1,
  ) {
    super(message);
    this.name = 'CliError';
  }
}

/** The command line was wrong (missing `--db`, a bad option value): exit code 2. */
export class UsageError extends CliError {
  constructor(message: string) {
    super(message, 2);
    this.name = 'UsageError';
  }
}

/** Work stopped part way by `cause`: printed as `<message>: <what the cause means>`. */
export class StoppedError extends Error {
  constructor(message: string, cause: unknown) {
    super(message, { cause });
    this.name = 'StoppedError';
  }
}
