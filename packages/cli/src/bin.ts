#!/usr/bin/env node
/** The `jobsctl` binary: runs the command line and exits with its code. */
import type { Io } from './app.js';
import { main } from './program.js';

const io: Io = {
  out: (text) => process.stdout.write(text),
  err: (text) => process.stderr.write(text),
  interactive: process.stderr.isTTY === true,
  env: process.env,
};

// `jobsctl list | head` closes the pipe early: that is not an error.
process.stdout.on('error', (error: NodeJS.ErrnoException) => {
  if (error.code === 'EPIPE') process.exit(0);
  throw error;
});

const code = await main(process.argv.slice(2), io);
process.exitCode = code;
// Connections are closed by now; should a driver still hold the event loop (a connect attempt
// to a server that never answers), the command ends anyway.
setTimeout(() => process.exit(code), 1000).unref();
