/**
 * The spawn-time version check: the generated protocol types (src/codex/protocol) describe one Codex release; a
 * different binary may speak a different protocol. A mismatch is a logged WARNING, not an error (a patch release
 * usually works, and the user may have chosen the binary on purpose); the warning names both versions.
 */
import { readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const PACKAGE_NAME = "codex-turn-machine";
let cachedExpected: string | null | undefined;

/**
 * The Codex version the protocol types were generated for: the `@openai/codex` version this package pins in its
 * package.json (dependencies, then peer, then dev dependencies), without a range operator. `undefined` when the
 * package.json cannot be found (bundled copies): the check is then skipped.
 *
 * @example
 * ```ts
 * expectedCodexVersion(); // "0.171.0"
 * ```
 */
export function expectedCodexVersion(): string | undefined {
  if (cachedExpected !== undefined) return cachedExpected ?? undefined;
  cachedExpected = null;
  let dir = path.dirname(fileURLToPath(import.meta.url));
  for (let i = 0; i < 6; i++) {
    try {
      const pkg = JSON.parse(readFileSync(path.join(dir, "package.json"), "utf8")) as Record<string, unknown>;
      if (pkg.name === PACKAGE_NAME) {
        const pinned = ["dependencies", "peerDependencies", "devDependencies"]
          .map((k) => (pkg[k] as Record<string, string> | undefined)?.["@openai/codex"])
          .find((v) => typeof v === "string");
        cachedExpected = pinned ? pinned.replace(/^[\^~=v]+/, "") : null;
        break;
      }
    } catch {
      /* no package.json here */
    }
    dir = path.dirname(dir);
  }
  return cachedExpected ?? undefined;
}

/**
 * The Codex version in an `initialize` result's `userAgent` (`"<client>/0.169.0 (Debian 12; x86_64) ..."`).
 *
 * @example
 * ```ts
 * versionFromUserAgent("codex-turn-machine/0.169.0 (Debian 12.0.0; x86_64)"); // "0.169.0"
 * ```
 */
export function versionFromUserAgent(userAgent: string): string | undefined {
  return /^[^/\s]+\/(\d+\.\d+\.\d+(?:-[0-9A-Za-z.-]+)?)/.exec(userAgent)?.[1];
}

/**
 * Compare the running binary's version with the expected one. `ok` is true when they are equal or either is unknown.
 *
 * @example
 * ```ts
 * const c = checkCodexVersion("x/0.170.0 (...)", "0.169.0"); // { ok: false, actual: "0.170.0", expected: "0.169.0" }
 * ```
 */
export function checkCodexVersion(
  userAgent: string,
  expected: string | undefined = expectedCodexVersion(),
): { ok: boolean; actual?: string | undefined; expected?: string | undefined } {
  const actual = versionFromUserAgent(userAgent);
  const result = { ...(actual !== undefined ? { actual } : {}), ...(expected !== undefined ? { expected } : {}) };
  return { ok: actual === undefined || expected === undefined || actual === expected, ...result };
}
