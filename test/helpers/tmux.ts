/** Drives a program in a tmux pane, as a person at a terminal would: type lines, read the screen, wait for text. */
import { execFileSync } from "node:child_process";

export interface TmuxDriver {
  /** Run a tmux command against the server (e.g. `send-keys`). */
  tmux(...args: string[]): string;
  /** The pane's text (last 200 lines, wrapped lines joined). */
  pane(): string;
  /** Type `text` literally, then Enter. */
  type(text: string): void;
  /** Send a key such as `C-c`. */
  key(name: string): void;
  /** Poll the screen until `check` holds; throws with the screen after `timeoutMs`. */
  waitFor(check: (screen: string) => boolean, what: string, timeoutMs?: number): Promise<string>;
  /** Kill the session if it is still there. */
  kill(): void;
}

/** A driver for the tmux session named `session` (start it with `tmux("new-session", "-d", "-s", session, ...)`). */
export function tmuxDriver(session: string): TmuxDriver {
  const tmux = (...args: string[]): string => execFileSync("tmux", args, { encoding: "utf8" });
  const pane = () => tmux("capture-pane", "-p", "-J", "-S", "-200", "-t", session);
  return {
    tmux,
    pane,
    type(text) {
      tmux("send-keys", "-t", session, "-l", text);
      tmux("send-keys", "-t", session, "Enter");
    },
    key(name) {
      tmux("send-keys", "-t", session, name);
    },
    async waitFor(check, what, timeoutMs = 90_000) {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const screen = pane();
        if (check(screen)) return screen;
        if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}; screen:\n${screen}`);
        await new Promise((r) => setTimeout(r, 50));
      }
    },
    kill() {
      try {
        tmux("kill-session", "-t", session);
      } catch {
        // already gone: the program exited
      }
    },
  };
}
