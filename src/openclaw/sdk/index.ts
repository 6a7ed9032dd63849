/**
 * The `openclaw/plugin-sdk` subpaths this host implements, and what each exports. The loader hook
 * (`../sdk-resolver.ts`) serves these to plugins in place of OpenClaw's package.
 */
import * as core from "./core.js";
import * as loggingCore from "./logging-core.js";
import * as sessionTranscript from "./session-transcript-runtime.js";

type SdkModule = Record<string, unknown>;

const coreExports: SdkModule = {
  buildMemorySystemPromptAddition: core.buildMemorySystemPromptAddition,
  prepareMemorySystemPromptAddition: core.prepareMemorySystemPromptAddition,
  delegateCompactionToRuntime: core.delegateCompactionToRuntime,
  definePluginEntry: core.definePluginEntry,
  emptyPluginConfigSchema: core.emptyPluginConfigSchema,
};
const loggingExports: SdkModule = {
  createSubsystemLogger: loggingCore.createSubsystemLogger,
  getChildLogger: loggingCore.getChildLogger,
};

/**
 * Export tables by subpath (`""` is `openclaw/plugin-sdk` itself). Every value is a function, so the served modules
 * can forward calls to these at call time.
 *
 * @example
 * ```ts
 * Object.keys(SDK_MODULES); // ["", "core", "plugin-entry", "context-engine", "logging-core", "session-transcript-runtime"]
 * ```
 */
export const SDK_MODULES: Readonly<Record<string, SdkModule>> = {
  "": { ...coreExports, ...loggingExports },
  core: coreExports,
  "plugin-entry": { definePluginEntry: core.definePluginEntry, emptyPluginConfigSchema: core.emptyPluginConfigSchema },
  "context-engine": {
    buildMemorySystemPromptAddition: core.buildMemorySystemPromptAddition,
    delegateCompactionToRuntime: core.delegateCompactionToRuntime,
  },
  "logging-core": loggingExports,
  "session-transcript-runtime": { readVisibleSessionTranscriptMessageEntries: sessionTranscript.readVisibleSessionTranscriptMessageEntries },
};

export { setSdkHostLogger, toSdkLogger, type SdkLogger, type SdkWarningReport } from "./logging-core.js";
export { RUNTIME_COMPACTION_NOT_DELEGATED } from "./core.js";
