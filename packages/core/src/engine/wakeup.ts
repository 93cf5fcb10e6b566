/** The acquisition loop's sleep, and the wake-ups that cut it short. */
/** The loop's sleep, and what cuts it short (`engine.poll()`, a notification, a finished job). */
export class Wakeup {
  private pending = false;
  private wakeSleeper: (() => void) | null = null;

  constructor(private readonly isRunning: () => boolean) {}

  /** A wake-up arrived since the loop's pass began. */
  get woken(): boolean {
    return this.pending;
  }

  /** Ends the current sleep, or makes the next one return at once. */
  wake(): void {
    this.pending = true;
    const wake = this.wakeSleeper;
    this.wakeSleeper = null;
    wake?.();
  }

  /** Starts a pass: earlier wake-ups are answered by it. */
  reset(): void {
    this.pending = false;
  }

  sleep(ms: number): Promise<void> {
    if (this.pending || !this.isRunning()) return Promise.resolve();
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        this.wakeSleeper = null;
        resolve();
      }, ms);
      this.wakeSleeper = () => {
        clearTimeout(timer);
        resolve();
      };
    });
  }
}
