/** A progress bar for bulk actions, drawn on stderr when it is a terminal (nothing otherwise). */
import type { Io } from './app.js';

const WIDTH = 30;
/** Redraw at most this often: a bar updated per job would cost more than the jobs. */
const REDRAW_MS = 100;

export class Progress {
  private done = 0;
  private drawnAt = 0;

  constructor(
    private readonly io: Io,
    private readonly label: string,
    private readonly total: number,
  ) {}

  /** Counts `n` more jobs handled. */
  tick(n = 1): void {
    this.done += n;
    const now = Date.now();
    if (this.done < this.total && now - this.drawnAt < REDRAW_MS) return;
    this.drawnAt = now;
    this.draw();
  }

  /** Clears the bar, leaving the line free for the summary. */
  finish(): void {
    if (this.io.interactive && this.total > 0) this.io.err('\r\x1b[2K');
  }

  private draw(): void {
    if (!this.io.interactive || this.total === 0) return;
    const filled = Math.round((this.done / this.total) * WIDTH);
    const bar = `${'█'.repeat(filled)}${'░'.repeat(WIDTH - filled)}`;
    this.io.err(`\r${this.label} ${bar} ${this.done}/${this.total}`);
  }
}
