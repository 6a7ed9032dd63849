/**
 * docs/parameters.md's configuration table has exactly one row per `runCodexTurn` parameter (src/params.ts), says which are
 * required, lists every sub-option of the nested objects and states the defaults the schemas apply.
 */
import { readFileSync } from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { codexTurnParamsSchema, dynamicToolSchema, projectionConfigSchema, timeoutsSchema } from "../../src/params.js";
import { accordionConfigSchema, MIN_COMPACTION_TARGET_FRACTION } from "../../src/compaction/accordion.js";
import { DEFAULT_PART_CAP_CHARS, DEFAULT_TOTAL_CAP_CHARS } from "../../src/projection/render.js";
import { defaultDivergenceTokens } from "../../src/projection/index.js";
import { REPO_ROOT } from "./doc-examples.js";

interface Row {
  name: string;
  type: string;
  default: string;
  meaning: string;
}

/** Rows of the first table after the `## Configuration` heading, keyed by the backticked parameter name. */
function configRows(): Map<string, Row> {
  const lines = readFileSync(path.join(REPO_ROOT, "docs", "parameters.md"), "utf8").split("\n");
  const start = lines.findIndex((l) => /^## Configuration\b/.test(l));
  if (start < 0) throw new Error("docs/parameters.md has no `## Configuration` section");
  const rows = new Map<string, Row>();
  let inTable = false;
  for (const line of lines.slice(start + 1)) {
    if (line.startsWith("## ")) break;
    if (!line.startsWith("|")) {
      if (inTable) break;
      continue;
    }
    inTable = true;
    const cells = line
      .slice(1, line.lastIndexOf("|"))
      .split(/(?<!\\)\|/)
      .map((c) => c.trim());
    if (cells[0] === "parameter" || /^-+$/.test(cells[0]!.replace(/\s/g, ""))) continue;
    const name = /^`([A-Za-z]+)`$/.exec(cells[0]!)?.[1];
    if (!name) throw new Error(`README configuration row without a single \`name\`: ${line}`);
    if (cells.length !== 4) throw new Error(`README configuration row for ${name} has ${cells.length} cells, expected 4`);
    rows.set(name, { name, type: cells[1]!, default: cells[2]!, meaning: cells[3]! });
  }
  return rows;
}

const plain = (s: string) => s.replace(/`/g, "").replace(/(\d)[,_](?=\d{3}\b)/g, "$1");
const show = (v: unknown) => (typeof v === "string" ? JSON.stringify(v) : String(v));

describe("docs/parameters.md configuration table", () => {
  const rows = configRows();
  const shape = codexTurnParamsSchema.shape;

  it("has one row per parameter of codexTurnParamsSchema, and no other", () => {
    expect([...rows.keys()].sort()).toEqual(Object.keys(shape).sort());
  });

  it("marks exactly the required parameters as required", () => {
    for (const [name, schema] of Object.entries(shape)) {
      const required = !schema.safeParse(undefined).success;
      expect(rows.get(name)?.default === "required", `${name}: required=${required}`).toBe(required);
    }
  });

  it("lists every sub-option of the nested parameters", () => {
    const nested: Record<string, string[]> = {
      projection: Object.keys(projectionConfigSchema.shape),
      timeouts: Object.keys(timeoutsSchema.shape),
      compaction: Object.keys(accordionConfigSchema.shape),
      dynamicTools: Object.keys(dynamicToolSchema.shape),
    };
    for (const [name, keys] of Object.entries(nested)) {
      for (const key of keys) expect(rows.get(name)?.type, `${name}.${key}`).toContain(key);
    }
    for (const mode of projectionConfigSchema.shape.mode.unwrap().options) {
      expect(rows.get("projection")?.meaning, `projection.mode ${mode}`).toContain(`\`"${mode}"\``);
    }
  });

  it("states the defaults the code applies", () => {
    const expectDefault = (name: string, key: string, value: unknown) =>
      expect(plain(rows.get(name)?.default ?? ""), `${name}.${key} default`).toMatch(
        new RegExp(`${key}\\s+${show(value).replace(/[.*+?^${}()|[\]\\"]/g, "\\$&")}`),
      );
    for (const [key, value] of Object.entries(timeoutsSchema.parse({}))) expectDefault("timeouts", key, value);
    for (const [key, value] of Object.entries(projectionConfigSchema.parse({}))) expectDefault("projection", key, value);
    for (const [key, value] of Object.entries(accordionConfigSchema.parse({}))) expectDefault("compaction", key, value);
    expectDefault("projection", "partCapChars", DEFAULT_PART_CAP_CHARS);
    expectDefault("projection", "totalCapChars", DEFAULT_TOTAL_CAP_CHARS);
    expect(defaultDivergenceTokens(1000)).toBe(250);
    expect(plain(rows.get("projection")!.default)).toContain(`divergenceTokens 25% of contextTokenBudget, else ${defaultDivergenceTokens(undefined)}`);
    expect(rows.get("compaction")!.default).toContain(`[${MIN_COMPACTION_TARGET_FRACTION}, 1]`);
  });
});
