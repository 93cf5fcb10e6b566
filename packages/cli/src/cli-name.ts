/**
 * The binary's name (`bin` in package.json). No shell may shadow it: `jobs` is a builtin of
 * every POSIX shell, so `npx jobs status` ran the shell's job control instead of the CLI.
 */
export const CLI_NAME = 'jobsctl';
