/**
 * Per-turn host work that grows with the session: what `runCodexTurn` does on every turn over the whole transcript.
 * For a transcript of about N messages (3-message turns mirrored as `runCodexTurn` mirrors them):
 * - history read: `readSessionTranscript` + `historyFromTranscript`, as `loadHistory` does (parses the whole file);
 * - projection: `projectAssembledContext` in `delta` mode when the engine's view is the whole history and the bound
 *   thread holds all of it (the common steady state of a long session: nothing to send, but every message compared).
 * In process, no app-server; medians of several samples.
 */
import { promises as fsp } from "node:fs";
import os from "node:os";
import path from "node:path";
import type { AgentMessage } from "../src/context-engine/types.js";
import { projectAssembledContext } from "../src/projection/index.js";
import type { ThreadBinding } from "../src/transcript/binding.js";
import { mirrorTurnToTranscript } from "../src/transcript/mirror.js";
import { historyFromTranscript, readSessionTranscript } from "../src/transcript/session-file.js";
import { median, modelReply, round, table, userPrompt } from "./lib.js";

export interface SessionSizeFigures {
  messages: number;
  fileBytes: number;
  historyReadMs: number;
  projectionMs: number;
  samples: number;
}

function turnMessages(i: number): AgentMessage[] {
  const t = 1_700_000_000_000 + i * 1000;
  return [
    { role: "user", content: [{ type: "text", text: userPrompt(i) }], timestamp: t },
    { role: "assistant", content: [{ type: "thinking", thinking: `Thinking about turn ${i + 1}.` }], timestamp: t + 1 },
    {
      role: "assistant",
      content: [{ type: "text", text: modelReply(i) }],
      api: "openai-responses",
      provider: "codex",
      model: "bench",
      stopReason: "stop",
      usage: { input: 100, output: 50, cacheRead: 0, cacheWrite: 0, totalTokens: 150 },
      timestamp: t + 2,
    },
  ] as AgentMessage[];
}

/**
 * @example
 * ```ts
 * const rows = await measureSessionSizeCosts([100, 1000], 10);
 * console.log(rows[1]!.historyReadMs, rows[1]!.projectionMs);
 * ```
 */
export async function measureSessionSizeCosts(messageCounts: readonly number[], samples: number): Promise<SessionSizeFigures[]> {
  const out: SessionSizeFigures[] = [];
  for (const entries of messageCounts) {
    const dir = await fsp.mkdtemp(path.join(os.tmpdir(), "ctm-bench-size-"));
    const sessionFile = path.join(dir, "session.jsonl");
    try {
      const turns = Math.max(1, Math.ceil(entries / 3));
      for (let i = 0; i < turns; i++) {
        await mirrorTurnToTranscript({ sessionFile, sessionId: "size", threadId: "thr-size", turnId: `turn-${i}`, messages: turnMessages(i), locked: true });
      }
      const read = async () => historyFromTranscript(await readSessionTranscript(sessionFile, { sessionId: "size" }));
      const history = await read();
      const fingerprints = { dynamicTools: "tools", engineId: "window", policy: "policy" };
      const binding: ThreadBinding = {
        version: 1,
        threadId: "thr-size",
        dynamicToolsFingerprint: fingerprints.dynamicTools,
        engineId: fingerprints.engineId,
        policyFingerprint: fingerprints.policy,
        projectionMode: "delta",
        heldTurnIds: Array.from({ length: turns }, (_, i) => `turn-${i}`),
        ledger: [],
      };
      const readMs: number[] = [];
      const projectMs: number[] = [];
      for (let s = 0; s < samples + 2; s++) {
        const t0 = performance.now();
        const h = await read();
        const t1 = performance.now();
        const projection = projectAssembledContext({
          mode: "delta",
          prompt: "next question",
          history: h.messages,
          origins: h.origins,
          assembled: { messages: h.messages, estimatedTokens: 1 },
          binding,
          fingerprints,
          tokenBudget: 1_000_000,
        });
        const t2 = performance.now();
        if (projection.reason !== "threadHoldsContext") throw new Error(`session-size bench: unexpected projection ${projection.reason}`);
        if (s >= 2) {
          readMs.push(t1 - t0);
          projectMs.push(t2 - t1);
        }
      }
      out.push({
        messages: history.messages.length,
        fileBytes: (await fsp.stat(sessionFile)).size,
        historyReadMs: round(median(readMs), 2),
        projectionMs: round(median(projectMs), 2),
        samples,
      });
    } finally {
      await fsp.rm(dir, { recursive: true, force: true });
    }
  }
  return out;
}

export function formatSessionSize(rows: readonly SessionSizeFigures[]): string {
  const lines = ["\nPer-turn work that grows with the session (in process; delta projection, engine view = whole history, all held):"];
  lines.push(
    table([
      ["messages", "file bytes", "history read ms", "projection ms", "samples"],
      ...rows.map((r) => [r.messages, r.fileBytes, r.historyReadMs, r.projectionMs, r.samples]),
    ]),
  );
  return lines.join("\n");
}
