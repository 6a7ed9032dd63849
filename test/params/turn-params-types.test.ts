/**
 * The hand-written, documented `CodexTurnParams` (src/turn-params.ts) stays equal to what `codexTurnParamsSchema`
 * accepts: a field added to one and not the other, or typed differently, fails `npm run typecheck` here (the
 * `expectTypeOf` lines are checked by tsc) and this test at runtime.
 */
import { describe, expect, expectTypeOf, it } from "vitest";
import type { z } from "zod";
import { codexTurnParamsSchema, projectionConfigSchema, timeoutsSchema, type SchemaTurnParams } from "../../src/params.js";
import type { CodexTurnParams, CodexTurnTimeouts, CompactionCadence, ProjectionConfig } from "../../src/turn-params.js";
import type { AccordionConfigInput } from "../../src/compaction/accordion.js";
import { readFileSync } from "node:fs";
import type { CodexAppServer } from "../../src/codex/app-server.js";

/** The keys every interface of the file documents, read from its source (one `name?:` / `name:` per field). */
function interfaceKeys(source: string, name: string): string[] {
  const start = source.indexOf(`export interface ${name} {`);
  const body = source.slice(start, source.indexOf("\n}\n", start));
  return [...body.matchAll(/^ {2}([A-Za-z]+)\??:/gm)].map((m) => m[1]!).sort();
}

describe("CodexTurnParams (hand-written) and codexTurnParamsSchema", () => {
  it("are the same type, nested objects included", () => {
    // appServer is CodexAppServer on both sides (a class: compared by name, not structurally in depth).
    expectTypeOf<Omit<CodexTurnParams, "appServer">>().toEqualTypeOf<Omit<SchemaTurnParams, "appServer">>();
    expectTypeOf<CodexTurnParams["appServer"]>().toEqualTypeOf<CodexAppServer>();
    expectTypeOf<SchemaTurnParams["appServer"]>().toEqualTypeOf<CodexAppServer>();
    expectTypeOf<ProjectionConfig>().toEqualTypeOf<z.input<typeof projectionConfigSchema>>();
    expectTypeOf<CodexTurnTimeouts>().toEqualTypeOf<z.input<typeof timeoutsSchema>>();
    expectTypeOf<CompactionCadence>().toEqualTypeOf<AccordionConfigInput>();
  });

  it("have the same keys, each documented (runtime check of the same)", () => {
    const source = readFileSync(new URL("../../src/turn-params.ts", import.meta.url), "utf8");
    expect(interfaceKeys(source, "CodexTurnParams")).toEqual(Object.keys(codexTurnParamsSchema.shape).sort());
    expect(interfaceKeys(source, "CodexTurnTimeouts")).toEqual(Object.keys(timeoutsSchema.shape).sort());
    expect(interfaceKeys(source, "ProjectionConfig")).toEqual(Object.keys(projectionConfigSchema.shape).sort());
    // Every field has TSDoc right above it (what an editor shows on hover), except the self-evident `description`.
    const start = source.indexOf("export interface CodexTurnParams {");
    const lines = source.slice(start).split("\n");
    for (const [i, line] of lines.entries()) {
      if (/^ {2}[A-Za-z]+\??:/.test(line)) expect(lines[i - 1], line).toMatch(/\*\/\s*$/);
      if (line === "}") break;
    }
  });

  it("the public declarations of the parameters mention no zod type", () => {
    const source = readFileSync(new URL("../../src/turn-params.ts", import.meta.url), "utf8");
    expect(source).not.toMatch(/from "zod"/);
  });
});
