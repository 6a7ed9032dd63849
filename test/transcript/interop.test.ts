import { promises as fsp } from "node:fs";
import path from "node:path";
import { SessionManager } from "@mariozechner/pi-coding-agent";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { AgentMessage } from "../../src/context-engine/types.js";
import { mirrorKeysForTurn, mirrorTurnToTranscript } from "../../src/transcript/mirror.js";
import { invalidateSessionIndex, readSessionHistory, readSessionTranscript } from "../../src/transcript/session-file.js";
import { createJsonlSessionStore } from "../../src/store/session-store.js";
import { readLines, tempDir } from "./helpers.js";
import { turnMessages } from "./fixtures/turn-messages.js";

let dir: string;
beforeEach(async () => {
  dir = await tempDir();
  invalidateSessionIndex();
});
afterEach(async () => {
  await fsp.rm(dir, { recursive: true, force: true });
});

type PiMessage = Parameters<SessionManager["appendMessage"]>[0];

describe("files we write open in pi's SessionManager", () => {
  it("rebuilds the same messages, keeps our idempotency keys, and pi can append after us", async () => {
    const file = path.join(dir, "ours.jsonl");
    const t1 = turnMessages("thr", "t1");
    const t2 = turnMessages("thr", "t2");
    await mirrorTurnToTranscript({ sessionFile: file, sessionId: "sess-1", cwd: dir, threadId: "thr", turnId: "t1", messages: t1 });
    await mirrorTurnToTranscript({ sessionFile: file, sessionId: "sess-1", cwd: dir, threadId: "thr", turnId: "t2", messages: t2 });

    const sm = SessionManager.open(file, dir);
    expect(sm.getSessionId()).toBe("sess-1");
    expect(sm.getHeader()).toMatchObject({ type: "session", version: 3, id: "sess-1", cwd: dir });
    expect(sm.buildSessionContext().messages).toEqual([...t1, ...t2]);
    // The key is a top-level entry field pi keeps but never copies into messages.
    const entries = sm.getEntries() as unknown as Array<Record<string, unknown>>;
    expect(entries.map((e) => e.idempotencyKey)).toEqual([...mirrorKeysForTurn("thr", "t1", t1), ...mirrorKeysForTurn("thr", "t2", t2)]);
    expect(sm.getLeafId()).toBe(entries.at(-1)!.id);

    // pi appends (and compacts) after our entries; we read its additions back.
    const piMsg = { role: "user", content: "typed in pi", timestamp: 42 } as PiMessage;
    const piId = sm.appendMessage(piMsg);
    const compactionId = sm.appendCompaction("summary of earlier work", piId, 1234);
    const tail = { role: "assistant", content: [{ type: "text", text: "after compaction" }], timestamp: 43, provider: "p", model: "m" } as unknown as PiMessage;
    sm.appendMessage(tail);

    const ours = await readSessionTranscript(file);
    expect(ours.buildMessages()).toEqual(sm.buildSessionContext().messages);
    expect(ours.buildMessages()[0]).toMatchObject({ role: "compactionSummary", summary: "summary of earlier work", tokensBefore: 1234 });
    expect(ours.entries.find((e) => e.id === compactionId)?.type).toBe("compaction");

    // And our next mirror chains after pi's leaf.
    await mirrorTurnToTranscript({ sessionFile: file, sessionId: "sess-1", threadId: "thr", turnId: "t3", messages: turnMessages("thr", "t3") });
    const sm2 = SessionManager.open(file, dir);
    expect(sm2.buildSessionContext().messages).toEqual((await readSessionTranscript(file)).buildMessages());
    expect(sm2.buildSessionContext().messages.slice(-5)).toEqual(turnMessages("thr", "t3"));
  });

  it("origins follow the keys: mirrored messages carry their turn, pi's own messages and summaries null", async () => {
    const file = path.join(dir, "ours.jsonl");
    await mirrorTurnToTranscript({ sessionFile: file, sessionId: "s", threadId: "thrA", turnId: "u1", messages: turnMessages("thrA", "u1") });
    const sm = SessionManager.open(file, dir);
    sm.appendMessage({ role: "user", content: "pi", timestamp: 1 } as PiMessage);
    const h = await readSessionHistory(file);
    expect(h.messages).toHaveLength(6);
    expect(h.origins).toEqual([...Array(5).fill({ threadId: "thrA", turnId: "u1" }), null]);
  });
});

describe("the session store's files in pi (native tools, custom messages, compaction)", () => {
  it("pi's SessionManager reads them and buildSessionContext agrees with readHistory", async () => {
    const file = path.join(dir, "store.jsonl");
    const store = createJsonlSessionStore({ sessionFile: file, sessionId: "sess-n", cwd: dir });
    const t = 1_780_000_000_000;
    const native = [
      { role: "user", content: "fix the build", timestamp: t },
      { role: "custom", customType: "codex.plan", content: "1. run tests\n2. patch", display: true, timestamp: t + 1 },
      { role: "assistant", content: [{ type: "toolCall", id: "c1", name: "shell", arguments: { command: ["npm", "test"] } }], timestamp: t + 2 },
      { role: "toolResult", toolCallId: "c1", toolName: "shell", content: [{ type: "text", text: "1 failing" }], isError: true, timestamp: t + 3 },
      { role: "assistant", content: [{ type: "toolCall", id: "c2", name: "apply_patch", arguments: { patch: "*** Begin Patch" } }], timestamp: t + 4 },
      { role: "toolResult", toolCallId: "c2", toolName: "apply_patch", content: [{ type: "text", text: "ok" }], isError: false, timestamp: t + 5 },
      { role: "assistant", content: [{ type: "toolCall", id: "c3", name: "web_search", arguments: { query: "vitest" } }], timestamp: t + 6 },
      { role: "toolResult", toolCallId: "c3", toolName: "web_search", content: [{ type: "text", text: "found" }], isError: false, timestamp: t + 7 },
      { role: "assistant", content: [{ type: "text", text: "fixed" }], provider: "codex", model: "m", timestamp: t + 8 },
    ] as unknown as AgentMessage[];
    const first = await store.appendTurn({ threadId: "thr", turnId: "n1", messages: native });
    const second = await store.appendTurn({ threadId: "thr", turnId: "n2", messages: turnMessages("thr", "n2") });
    const compactionId = await store.appendCompaction({ summary: "plan made, build fixed", firstKeptEntryId: first.entryIds[6]!, tokensBefore: 4321, details: { by: "test" } });
    await store.appendTurn({ threadId: "thr", turnId: "n3", messages: turnMessages("thr", "n3") });

    const sm = SessionManager.open(file, dir);
    const entries = sm.getEntries() as unknown as Array<Record<string, unknown>>;
    expect(entries.find((e) => e.type === "custom_message")).toMatchObject({ customType: "codex.plan", display: true });
    expect(entries.find((e) => e.id === compactionId)).toMatchObject({ type: "compaction", firstKeptEntryId: first.entryIds[6], tokensBefore: 4321, details: { by: "test" } });
    const history = await store.readHistory();
    expect(history.messages).toEqual(sm.buildSessionContext().messages);
    expect(history.messages.map((m) => m.role)).toEqual([
      "compactionSummary", "assistant", "toolResult", "assistant", ...turnMessages("thr", "n2").map((m) => m.role), ...turnMessages("thr", "n3").map((m) => m.role),
    ]);
    expect(history.lastEntryId).toBe(sm.getLeafId());
    expect(history.entryCount).toBe(entries.length);
    expect(second.entryIds).toHaveLength(5);
    // Before the compaction, every native message (the custom plan included) read back as it was mirrored.
    const before = SessionManager.open(file, dir);
    before.branch(first.entryIds[8]!);
    expect(before.buildSessionContext().messages).toEqual(native);
  });
});

describe("files pi writes open here", () => {
  it("rebuilds the same messages, including a compaction, branch summary and custom message", async () => {
    const sm = SessionManager.create(dir, dir);
    const msgs: AgentMessage[] = [
      { role: "user", content: "first", timestamp: 1 },
      { role: "assistant", content: [{ type: "text", text: "one" }], provider: "p", model: "m", timestamp: 2 },
      { role: "user", content: [{ type: "text", text: "second" }], timestamp: 3 },
      { role: "assistant", content: [{ type: "thinking", thinking: "hm" }, { type: "text", text: "two" }], provider: "p", model: "m", timestamp: 4 },
    ];
    const ids = msgs.map((m) => sm.appendMessage(m as PiMessage));
    sm.appendModelChange("prov", "model-x");
    sm.appendCustomEntry("ext-state", { n: 1 });
    sm.appendCustomMessageEntry("ext-note", "visible note", true, { d: 1 });
    sm.appendCompaction("compacted the start", ids[2]!, 999);
    sm.appendMessage({ role: "user", content: "third", timestamp: 5 } as PiMessage);
    sm.appendMessage({ role: "assistant", content: [{ type: "text", text: "three" }], provider: "p", model: "m", timestamp: 6 } as unknown as PiMessage);
    // Branch back and summarise: the leaf is now the branch summary's child.
    sm.branchWithSummary(ids[3]!, "what the abandoned branch did");
    sm.appendMessage({ role: "user", content: "on the branch", timestamp: 7 } as PiMessage);
    const file = sm.getSessionFile()!;
    expect(file).toBeTruthy();

    const ours = await readSessionTranscript(file);
    const reopened = SessionManager.open(file, dir);
    expect(ours.header?.id).toBe(sm.getSessionId());
    expect(ours.buildMessages()).toEqual(reopened.buildSessionContext().messages);
    expect(ours.buildMessages()).toEqual(sm.buildSessionContext().messages);
    expect(ours.buildMessages().map((m) => m.role)).toEqual(["user", "assistant", "user", "assistant", "branchSummary", "user"]);

    // Without the branch: compaction path. Rebuild from the compaction's tail entry.
    const compacted = ours.entries.find((e) => e.type === "message" && (e.message as { content?: unknown }).content === "third")!;
    const tailId = ours.entries[ours.entries.indexOf(compacted) + 1]!.id;
    const { buildSessionContextFromEntries } = await import("../../src/transcript/session-file.js");
    const viaCompaction = buildSessionContextFromEntries(ours.entries, tailId).messages;
    reopened.branch(tailId);
    expect(viaCompaction).toEqual(reopened.buildSessionContext().messages);
    expect(viaCompaction.map((m) => m.role)).toEqual(["compactionSummary", "user", "assistant", "custom", "user", "assistant"]);

    // We can mirror into pi's file, and pi still reads it.
    await mirrorTurnToTranscript({ sessionFile: file, sessionId: sm.getSessionId(), threadId: "thr", turnId: "t9", messages: turnMessages("thr", "t9") });
    const lines = await readLines(file);
    expect(lines.filter((l) => l.includes('"type":"session"'))).toHaveLength(1);
    const again = SessionManager.open(file, dir);
    expect(again.buildSessionContext().messages.slice(-5)).toEqual(turnMessages("thr", "t9"));
    expect(again.buildSessionContext().messages).toEqual((await readSessionTranscript(file)).buildMessages());
  });
});
