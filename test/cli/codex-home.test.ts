/**
 * Without --offline the CLI runs codex with the user's own Codex home: $CODEX_HOME, else Codex's default ~/.codex,
 * never a fresh temporary directory. Checked on the exported resolver only: nothing is spawned, nothing contacts a
 * network.
 */
import os from "node:os";
import path from "node:path";
import { describe, expect, it, vi } from "vitest";
import { liveCodexSpawnOptions, main, resolveCodexHome } from "../../src/cli/main.js";
import { configWarningText } from "../../src/cli/server.js";

const home = () => path.join(path.sep, "home", "ada");

describe("resolveCodexHome", () => {
  it("uses $CODEX_HOME when it is set", () => {
    expect(resolveCodexHome({ CODEX_HOME: "/srv/codex-home" }, home)).toEqual({ home: "/srv/codex-home", source: "CODEX_HOME" });
  });

  it("defaults to ~/.codex (Codex's own default) when CODEX_HOME is unset or empty", () => {
    const expected = { home: path.join(path.sep, "home", "ada", ".codex"), source: "default" };
    expect(resolveCodexHome({}, home)).toEqual(expected);
    // Codex itself treats an empty CODEX_HOME as unset.
    expect(resolveCodexHome({ CODEX_HOME: "" }, home)).toEqual(expected);
  });

  it("the live spawn options always name a CODEX_HOME (so CodexAppServer never creates a temporary one)", () => {
    expect(liveCodexSpawnOptions({}, home)).toEqual({
      codexHome: path.join(path.sep, "home", "ada", ".codex"),
      passEnv: ["OPENAI_API_KEY"],
    });
    expect(liveCodexSpawnOptions({ CODEX_HOME: "/srv/codex-home" }, home).codexHome).toBe("/srv/codex-home");
  });

  it("reads the real process environment and home directory by default", () => {
    const saved = process.env.CODEX_HOME;
    try {
      delete process.env.CODEX_HOME;
      expect(resolveCodexHome()).toEqual({ home: path.join(os.homedir(), ".codex"), source: "default" });
      process.env.CODEX_HOME = "/srv/other-home";
      expect(resolveCodexHome()).toEqual({ home: "/srv/other-home", source: "CODEX_HOME" });
    } finally {
      if (saved === undefined) delete process.env.CODEX_HOME;
      else process.env.CODEX_HOME = saved;
    }
  });
});

describe("help text", () => {
  it("run, chat and compact say which CODEX_HOME and environment a non-offline run uses", async () => {
    for (const cmd of ["run", "chat", "compact"]) {
      let text = "";
      const spy = vi.spyOn(process.stdout, "write").mockImplementation((chunk: string | Uint8Array) => {
        text += String(chunk);
        return true;
      });
      try {
        expect(await main([cmd, "--help"])).toBe(0);
      } finally {
        spy.mockRestore();
      }
      const flat = text.replace(/\s+/g, " ");
      expect(flat, cmd).toContain("CODEX_HOME set to $CODEX_HOME when that is set and non-empty, else ~/.codex");
      expect(flat, cmd).toContain("only PATH, HOME, the proxy variables and OPENAI_API_KEY (when set) are passed");
      expect(flat, cmd).toContain("With no login and no OPENAI_API_KEY, a live command exits 3 at once, naming `npx codex login`");
      expect(flat, cmd).not.toMatch(/CODEX_HOME, login or OPENAI_API_KEY/);
    }
  });
});

describe("a CODEX_HOME that does not exist", () => {
  it("run exits 3 naming it before anything is spawned", async () => {
    const saved = process.env.CODEX_HOME;
    const missing = path.join(os.tmpdir(), `ctm-no-such-codex-home-${process.pid}`);
    let err = "";
    const spy = vi.spyOn(process.stderr, "write").mockImplementation((chunk: string | Uint8Array) => {
      err += String(chunk);
      return true;
    });
    try {
      process.env.CODEX_HOME = missing;
      expect(await main(["run", "hi", "--session", path.join(os.tmpdir(), "ctm-unused.jsonl")])).toBe(3);
    } finally {
      spy.mockRestore();
      if (saved === undefined) delete process.env.CODEX_HOME;
      else process.env.CODEX_HOME = saved;
    }
    expect(err).toContain(`CODEX_HOME ${missing} (from $CODEX_HOME) is not usable`);
  });
});

describe("Codex's setup warnings in a live run (configWarningText, on stderr)", () => {
  it("names the file and line, then Codex's details indented", () => {
    expect(configWarningText({
      kind: "config",
      summary: "Error parsing rules; custom rules not applied.",
      details: "failed to parse rules file /h/rules/default.rules: starlark error\n --> /h/rules/default.rules:2:1\n",
      path: "/h/rules/default.rules",
      range: { start: { line: 2, column: 1 }, end: { line: 2, column: 5 } },
    })).toBe(
      "codex warning: Error parsing rules; custom rules not applied. (/h/rules/default.rules:2)\n" +
        "  failed to parse rules file /h/rules/default.rules: starlark error\n" +
        "   --> /h/rules/default.rules:2:1\n",
    );
    expect(configWarningText({ kind: "deprecation", summary: "x is deprecated" })).toBe("codex deprecation: x is deprecated\n");
  });
});
