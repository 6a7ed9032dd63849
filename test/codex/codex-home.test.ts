import path from "node:path";
import { describe, expect, it } from "vitest";
import { buildChildEnv } from "../../src/codex/child-env.js";
import { resolveCodexHome } from "../../src/codex/codex-home.js";
import { checkCodexVersion, expectedCodexVersion, versionFromUserAgent } from "../../src/codex/codex-version.js";

describe("resolveCodexHome", () => {
  const homedir = () => path.join(path.sep, "home", "me");
  it("uses $CODEX_HOME when set and non-empty, else ~/.codex", () => {
    expect(resolveCodexHome({ env: { CODEX_HOME: "/x/codex" }, homedir })).toEqual({ home: "/x/codex", source: "CODEX_HOME" });
    expect(resolveCodexHome({ env: { CODEX_HOME: "" }, homedir })).toEqual({ home: path.join(homedir(), ".codex"), source: "default" });
    expect(resolveCodexHome({ env: {}, homedir })).toEqual({ home: path.join(homedir(), ".codex"), source: "default" });
  });
});

describe("buildChildEnv", () => {
  it("passes the allow-list and passEnv names, then extra, and CODEX_HOME last", () => {
    const parent = { PATH: "/bin", HOME: "/h", HTTP_PROXY: "http://127.0.0.1:1", SECRET: "s", OPENAI_API_KEY: "k", NODE_EXTRA_CA_CERTS: "/ca.pem" };
    const env = buildChildEnv({ parent, passEnv: ["OPENAI_API_KEY"], extra: { CODEX_HOME: "ignored", X: "1" }, codexHome: "/ch" });
    expect(env).toEqual({ PATH: "/bin", HOME: "/h", HTTP_PROXY: "http://127.0.0.1:1", NODE_EXTRA_CA_CERTS: "/ca.pem", OPENAI_API_KEY: "k", RUST_LOG: "warn", X: "1", CODEX_HOME: "/ch" });
  });
});

describe("codex version check", () => {
  it("reads the version from the initialize userAgent and compares it with the pinned one", () => {
    expect(versionFromUserAgent("codex-turn-machine/0.169.0 (Debian 12.0.0; x86_64) unknown")).toBe("0.169.0");
    expect(versionFromUserAgent("garbage")).toBeUndefined();
    expect(expectedCodexVersion()).toBe("0.171.0");
    expect(checkCodexVersion("c/0.171.0 (x)")).toEqual({ ok: true, actual: "0.171.0", expected: "0.171.0" });
    expect(checkCodexVersion("c/0.169.0 (x)")).toEqual({ ok: false, actual: "0.169.0", expected: "0.171.0" });
    expect(checkCodexVersion("no version here").ok).toBe(true);
  });
});
