import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { LIFECYCLE_DOC_PATH, renderLifecycleDoc } from "../../scripts/generate-lifecycle-doc.js";
import { machineToMermaid } from "../../src/inspect/mermaid.js";
import { turnMachine } from "../../machines/turn.machine.js";

describe("docs/lifecycle.md", () => {
  it("is generated from the current machine definitions (run `npm run gen:docs` after changing a machine)", () => {
    expect(readFileSync(LIFECYCLE_DOC_PATH, "utf8")).toBe(renderLifecycleDoc());
  });

  it("draws every lifecycle state and guard of the turn machine", () => {
    const diagram = machineToMermaid(turnMachine);
    for (const state of ["loadHistory", "bootstrap", "assemble", "project", "hooks", "threadStart", "turnRunning", "mirror", "finalize", "maintain", "completed", "failed", "aborted", "yieldAborted"]) {
      expect(diagram).toMatch(new RegExp(`\\b${state}\\b`));
    }
    expect(diagram).toContain("[shouldBootstrap]");
    expect(diagram).toContain("[canMaintainForeground]");
    // The decisions the host used to make in closures: lock + recovery, the accordion, the resume fallback, the
    // pending record and finalize's snapshot choice.
    for (const state of ["session", "acquiringLock", "recovering", "compactBeforeTurn", "reloadHistory", "resuming", "recordingPending", "choosingSnapshot", "rereading"]) {
      expect(diagram).toMatch(new RegExp(`\\b${state}\\b`));
    }
    for (const guard of ["accordionDue", "compactedBeforeTurn", "planResumes", "resumeFailedFallBackToFresh", "mirrorIsTail", "rereadHoldsTurn"]) {
      expect(diagram).toContain(`[${guard}]`);
    }
    expect(diagram).toContain('state "turnRunning · invoke runTurn" as turnRunning {');
  });
});
