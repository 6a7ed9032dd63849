import { mkdtemp, readFile, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { KNOWN_NOTIFICATION_METHODS, KNOWN_SERVER_REQUEST_METHODS } from "../../src/codex/known-methods.js";
import { PROTOCOL_DIR, diffTrees, generateProtocol, listFiles } from "../../scripts/generate-protocol.js";

const tmp: string[] = [];
afterAll(async () => {
  await Promise.all(tmp.map((d) => rm(d, { recursive: true, force: true })));
});

describe("generated protocol types", () => {
  it("match what the pinned codex binary generates (run `npm run gen:protocol` after a version bump)", async () => {
    const dir = await mkdtemp(path.join(os.tmpdir(), "codex-proto-drift-"));
    tmp.push(dir);
    const out = path.join(dir, "protocol");
    await generateProtocol(out);
    expect((await listFiles(out)).length).toBeGreaterThan(100);
    expect(await diffTrees(PROTOCOL_DIR, out)).toEqual([]);
  });

  it("detects a difference (the check can fail)", async () => {
    const dir = await mkdtemp(path.join(os.tmpdir(), "codex-proto-drift-neg-"));
    tmp.push(dir);
    const out = path.join(dir, "protocol");
    await generateProtocol(out);
    const { writeFile } = await import("node:fs/promises");
    await writeFile(path.join(out, "ClientInfo.ts"), "// tampered\n");
    expect(await diffTrees(PROTOCOL_DIR, out)).toEqual(["differs: ClientInfo.ts"]);
  });

  it("lists exactly the methods of the checked-in unions", async () => {
    const methods = async (file: string): Promise<string[]> =>
      [...(await readFile(path.join(PROTOCOL_DIR, file), "utf8")).matchAll(/"method": "([^"]+)"/g)].map((m) => m[1]!).sort();
    expect(await methods("ServerNotification.ts")).toEqual([...KNOWN_NOTIFICATION_METHODS].sort());
    expect(await methods("ServerRequest.ts")).toEqual([...KNOWN_SERVER_REQUEST_METHODS].sort());
  });
});
