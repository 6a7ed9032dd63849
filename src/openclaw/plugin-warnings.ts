/**
 * A plugin's logger warnings and errors, made visible: lossless-claw says through its logger alone that it skipped
 * persisting a turn ("fails closed"), so a host that only logs them (or logs nothing) lets a user believe it works.
 * Each `warn`/`error` line of a plugin's loggers (`api.logger`, `runtime.logging.getChildLogger()`, the SDK's
 * `logging-core`) is recorded here, deduplicated, and handed to the next turn that settles (`result.warnings`, through
 * the loaded hooks' `takeWarnings`) and, as it happens, to the host's `onPluginWarning` (the CLI prints it on stderr).
 */

/** One warning or error a plugin logged. */
export interface PluginWarning {
  pluginId: string;
  level: "warn" | "error";
  /** The plugin's own message text (capped at {@link PLUGIN_WARNING_MAX_CHARS}). */
  message: string;
}

/** Longest message kept; longer ones are cut with an ellipsis. */
export const PLUGIN_WARNING_MAX_CHARS = 500;
/** Warnings held for the next turn at most (the oldest are dropped first). */
const HELD_MAX = 50;

/** Collects plugin warnings for the turns of one load. */
export interface PluginWarningLog {
  report(pluginId: string, level: "warn" | "error", message: unknown): void;
  /** The warnings recorded since the last call, each once, as turn warnings (`plugin <id>: <message>`). */
  take(): string[];
}

/**
 * @example
 * ```ts
 * const log = createPluginWarningLog((w) => process.stderr.write(`warning: plugin ${w.pluginId}: ${w.message}\n`));
 * log.report("lossless-claw", "warn", "[lcm] afterTurn: skipped");
 * log.take(); // ["plugin lossless-claw: [lcm] afterTurn: skipped"]
 * ```
 */
export function createPluginWarningLog(onWarning?: ((warning: PluginWarning) => void) | undefined): PluginWarningLog {
  let held: string[] = [];
  return {
    report(pluginId, level, message) {
      const raw = typeof message === "string" ? message : message instanceof Error ? message.message : String(message);
      const text = raw.length > PLUGIN_WARNING_MAX_CHARS ? `${raw.slice(0, PLUGIN_WARNING_MAX_CHARS)}…` : raw;
      const line = `plugin ${pluginId}${level === "error" ? " error" : ""}: ${text}`;
      if (!held.includes(line)) {
        held.push(line);
        if (held.length > HELD_MAX) held.shift();
      }
      try {
        onWarning?.({ pluginId, level, message: text });
      } catch {
        // A display callback must never break the plugin.
      }
    },
    take() {
      const out = held;
      held = [];
      return out;
    },
  };
}
