/**
 * Our `openclaw/plugin-sdk/logging-core`: subsystem loggers over the host's pino logger (structured; plugins pass
 * their own message text, which is theirs to keep free of content).
 */
import type { Logger } from "pino";
import { silentLogger } from "../../log/logger.js";

let hostLogger: Logger = silentLogger;
let hostReport: SdkWarningReport | undefined;

/** Where a plugin logger's warnings and errors are reported beside the log (see `../plugin-warnings.ts`). */
export type SdkWarningReport = (level: "warn" | "error", message: string) => void;

/** The logger plugin subsystem loggers write to, and where their warnings are reported (the plugin host sets both at load). */
export function setSdkHostLogger(logger: Logger, report?: SdkWarningReport | undefined): void {
  hostLogger = logger;
  hostReport = report;
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
 * toSdkLogger(pino(), (level, message) => warnings.push(message)).warn("skipped"); // logged and reported
 * ```
 */
export function toSdkLogger(logger: Logger, report?: SdkWarningReport | undefined): SdkLogger {
  const at =
    (level: "debug" | "info" | "warn" | "error") =>
    (message: string, meta?: Record<string, unknown>) => {
      if (meta) logger[level](meta, message);
      else logger[level](message);
      if (report && (level === "warn" || level === "error")) report(level, message);
    };
  return {
    debug: at("debug"),
    info: at("info"),
    warn: at("warn"),
    error: at("error"),
    child: (bindings) => toSdkLogger(logger.child(bindings), report),
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
  return toSdkLogger(hostLogger.child({ subsystem }), hostReport);
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
  return toSdkLogger(hostLogger.child(bindings ?? {}), hostReport);
}
