/** The machine's output as the public result (src/turn/result.ts): fields that only some turns have. */
import { describe, expect, it } from "vitest";
import type { TurnMachineOutput } from "../../machines/turn.contract.js";
import { toTurnResult } from "../../src/turn/result.js";

const output = (extra: Partial<TurnMachineOutput> = {}): TurnMachineOutput => ({
  status: "completed",
  engine: { bootstrap: "skipped:noEngine", assemble: "skipped:noEngine", finalize: "skipped:noEngine", maintenance: "skipped:noEngine" },
  trace: ["loadHistory", "completed"],
  warnings: [],
  followUps: [],
  followUpImages: [],
  backgroundMaintenance: false,
  ...extra,
});
const record = { threadId: "t", turnId: "u", codexStatus: "completed" as const, assistantText: "", messagesSnapshot: [], compactions: [] };

describe("toTurnResult", () => {
  it("carries the images Codex generated and a recovered cut turn; neither field when there was none", () => {
    const r = toTurnResult(
      output({ record: { ...record, generatedImages: [{ itemId: "ig_1", path: "/i.png" }] }, cutTurn: { turnId: "u0", outcome: "recovered", codexStatus: "interrupted", messages: 3 } }),
      Promise.resolve(),
      [],
      "run-1",
    );
    expect(r.generatedImages).toEqual([{ itemId: "ig_1", path: "/i.png" }]);
    expect(r.cutTurnRecovered).toEqual({ turnId: "u0", codexStatus: "interrupted", messages: 3 });
    const plain = toTurnResult(output({ record, cutTurn: { turnId: "u0", outcome: "alreadyMirrored" } }), Promise.resolve(), [], "run-1");
    expect(plain).not.toHaveProperty("generatedImages");
    expect(plain).not.toHaveProperty("cutTurnRecovered");
  });
});
