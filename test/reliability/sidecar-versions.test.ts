/**
 * Sidecars a turn cannot use: one of a newer format (what a newer version of the library leaves behind after a
 * rollback) is refused with a typed error naming the file and the version, and nothing is moved, changed or lost; a
 * corrupt thread binding is moved aside and the turn's `result.warnings` says so. Real `codex app-server`, fake model.
 */
import { existsSync, readFileSync, readdirSync, writeFileSync } from "node:fs";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { runCodexTurn } from "../../src/turn.js";
import { recoverCodexSession } from "../../src/recovery.js";
import { SessionFileError } from "../../src/transcript/errors.js";
import { sessionSidecarPaths } from "../../src/transcript/paths.js";
import { readSessionHistory } from "../../src/transcript/session-file.js";
import { startOfflineCodex, type OfflineCodex } from "../../src/testing/index.js";
import { disposeChecked, messageText, tempSessions, turnParams } from "../helpers/turn-env.js";
import { recordCases } from "./case-count.js";

let env: OfflineCodex;
const sessions = tempSessions("sidecar-versions-");

beforeAll(async () => {
  env = await startOfflineCodex();
});
afterAll(async () => {
  await disposeChecked(env);
  sessions.cleanup();
});

recordCases("sidecar-set-aside", 2);

/** A session with one completed turn. */
async function session(): Promise<{ file: string; sidecars: ReturnType<typeof sessionSidecarPaths> }> {
  const file = sessions.file();
  expect((await runCodexTurn(turnParams(env, file, "first"))).status).toBe("completed");
  return { file, sidecars: sessionSidecarPaths(file) };
}

const siblings = (file: string) => readdirSync(path.dirname(file)).filter((n) => n.startsWith(path.basename(file))).sort();

describe("a sidecar of a newer format", () => {
  it("a pending-finalize record of version 2: the turn fails with SESSION_SIDECAR_VERSION_UNSUPPORTED, nothing moved or lost", async () => {
    const { file, sidecars } = await session();
    // What a newer version left: a turn that exists only in this record.
    const newer = JSON.stringify({ version: 2, records: [{ turnId: "turn-from-the-future", messages: [{ role: "user", content: "only here" }] }] });
    writeFileSync(sidecars.pendingFinalize, newer);
    const before = siblings(file);
    const transcript = readFileSync(file, "utf8");
    const r = await runCodexTurn(turnParams(env, file, "second"));
    expect(r.status).toBe("failed");
    expect(r.error?.code).toBe("SESSION_SIDECAR_VERSION_UNSUPPORTED");
    expect(r.error?.message).toContain(path.basename(sidecars.pendingFinalize));
    expect(r.error?.message).toContain("format version 2");
    expect(readFileSync(sidecars.pendingFinalize, "utf8")).toBe(newer);
    expect(siblings(file)).toEqual(before);
    expect(readFileSync(file, "utf8")).toBe(transcript);
    // recoverCodexSession refuses it the same way, with the typed error.
    const err = await recoverCodexSession({ sessionId: path.basename(file, ".jsonl"), sessionFile: file }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(SessionFileError);
    expect((err as SessionFileError).code).toBe("SESSION_SIDECAR_VERSION_UNSUPPORTED");
    expect((err as SessionFileError).path).toBe(sidecars.pendingFinalize);
    expect(readFileSync(sidecars.pendingFinalize, "utf8")).toBe(newer);
  });

  it("a thread binding of version 2: the turn fails with the typed error, the binding stays byte for byte", async () => {
    const { file, sidecars } = await session();
    const binding = JSON.parse(readFileSync(sidecars.binding, "utf8").trim().split("\n")[0]!) as Record<string, unknown>;
    const newer = `${JSON.stringify({ ...binding, version: 2, somethingNew: true })}\n`;
    writeFileSync(sidecars.binding, newer);
    const before = siblings(file);
    const r = await runCodexTurn(turnParams(env, file, "second"));
    expect(r.status).toBe("failed");
    expect(r.error?.code).toBe("SESSION_SIDECAR_VERSION_UNSUPPORTED");
    expect(r.error?.message).toContain(path.basename(sidecars.binding));
    expect(r.error?.message).toContain("format version 2");
    expect(readFileSync(sidecars.binding, "utf8")).toBe(newer);
    expect(siblings(file)).toEqual(before);
    expect((await readSessionHistory(file)).messages.map(messageText)).toEqual(["first", "reply to: first"]);
  });
});

describe("a corrupt thread binding", () => {
  it("is moved aside, the turn runs on a fresh thread, and result.warnings says what happened", async () => {
    const { file, sidecars } = await session();
    writeFileSync(sidecars.binding, '{"version":1,"threadId":\n');
    const r = await runCodexTurn(turnParams(env, file, "second"));
    expect(r.status).toBe("completed");
    expect(r.warnings).toEqual([expect.stringMatching(/thread binding .*codex-binding.json was corrupt \(not JSON\); it was moved aside to .*\.corrupt-1 and this turn starts a fresh Codex thread/)]);
    expect(existsSync(`${sidecars.binding}.corrupt-1`)).toBe(true);
    expect(readFileSync(`${sidecars.binding}.corrupt-1`, "utf8")).toBe('{"version":1,"threadId":\n');
  });
});
