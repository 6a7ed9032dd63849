import { pino, type Logger, type LoggerOptions } from "pino";

/**
 * Field paths that may carry prompt text, transcript contents or secrets. Our own code never logs them; the
 * redaction is a second line of defence for fields a host adds through child loggers.
 */
export const REDACTED_LOG_PATHS: readonly string[] = [
  "prompt",
  "promptText",
  "text",
  "content",
  "messages",
  "developerInstructions",
  "systemPromptAddition",
  "apiKey",
  "authorization",
  "*.prompt",
  "*.promptText",
  "*.text",
  "*.content",
  "*.messages",
  "*.apiKey",
  "*.authorization",
];

/**
 * A pino logger with the project's redaction defaults.
 *
 * @example
 * ```ts
 * const logger = createLogger({ level: "debug" });
 * await runCodexTurn({ ...params, logger });
 * ```
 */
export function createLogger(options: LoggerOptions = {}, destination?: pino.DestinationStream): Logger {
  const merged: LoggerOptions = {
    base: { lib: "codex-turn-machine" },
    ...options,
    redact: { paths: [...REDACTED_LOG_PATHS], censor: "[redacted]" },
  };
  return destination ? pino(merged, destination) : pino(merged);
}

/** A logger that writes nothing: the default when the host passes none. */
export const silentLogger: Logger = pino({ level: "silent" });
