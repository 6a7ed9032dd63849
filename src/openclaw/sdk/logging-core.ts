/**
 * Our `openclaw/plugin-sdk/logging-core`: subsystem loggers over the host's pino logger (structured; plugins pass
 * their own message text, which is theirs to keep free of content).
 */
import type { Logger } from "pino";
import { silentLogger } from "../../log/logger.js";

let hostLogger: Logger = silentLogger;

/** The logger plugin subsystem loggers write to (the plugin host sets it at load). */
export function setSdkHostLogger(logger: Logger): void {
  hostLogger = logger;
}

/** OpenClaw's `RuntimeLogger` shape. */
export interface SdkLogger {
  debug(message: string, meta?: Record<string, unknown>): void;
  info(message: string, meta?: Record<string, unknown>): void;
  warn(message: string, meta?: Record<string, unknown>): void;
  error(message: string, meta?: Record<string, unknown>): void;
  child(bindings: Record<string, unknown>): SdkLogger;
}

/**
 * Wrap a pino logger in OpenClaw's logger shape (`logger.info(message, meta?)`).
 *
 * @example
 * ```ts
 * toSdkLogger(pino()).info("ready", { count: 3 });
 * ```
 */
export function toSdkLogger(logger: Logger): SdkLogger {
  const at =
    (level: "debug" | "info" | "warn" | "error") =>
    (message: string, meta?: Record<string, unknown>) =>
      meta ? logger[level](meta, message) : logger[level](message);
  return {
    debug: at("debug"),
    info: at("info"),
    warn: at("warn"),
    error: at("error"),
    child: (bindings) => toSdkLogger(logger.child(bindings)),
  };
}

/**
 * A logger for one plugin subsystem.
 *
 * @example
 * ```ts
 * createSubsystemLogger("lcm").info("compacted", { leaves: 3 });
 * ```
 */
export function createSubsystemLogger(subsystem: string): SdkLogger {
  return toSdkLogger(hostLogger.child({ subsystem }));
}

/**
 * A child logger with the given bindings.
 *
 * @example
 * ```ts
 * getChildLogger({ plugin: "lossless-claw" }).debug("tick");
 * ```
 */
export function getChildLogger(bindings?: Record<string, unknown>): SdkLogger {
  return toSdkLogger(hostLogger.child(bindings ?? {}));
}
