/**
 * A plugin's entry must resolve inside its plugin directory by real path: an entry that is a symlink to a file
 * elsewhere, or that lies under a symlinked directory pointing elsewhere, is refused before anything is imported; a
 * symlinked plugin directory itself (as npm links install them) and an entry linked within the directory still load.
 */
import { mkdir, symlink, writeFile } from "node:fs/promises";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { readPluginDescriptor } from "../../src/openclaw/manifest.js";
import { PluginLoadError } from "../../src/openclaw/index.js";
import { testTempDir } from "../helpers/temp-dir.js";

async function plugin(root: string, main: string): Promise<void> {
  await mkdir(root, { recursive: true });
  await writeFile(path.join(root, "package.json"), JSON.stringify({ name: "p", main }));
}

async function refusal(rootDir: string): Promise<PluginLoadError> {
  const error = await readPluginDescriptor(rootDir, "p").then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(PluginLoadError);
  return error as PluginLoadError;
}

describe("readPluginDescriptor: the entry's real path", () => {
  it("refuses an entry that is a symlink to a file outside the plugin directory", async () => {
    const dir = await testTempDir("ctm-manifest-entry-");
    await writeFile(path.join(dir, "outside.js"), "export default {};\n");
    const root = path.join(dir, "plugin");
    await plugin(root, "index.js");
    await symlink(path.join(dir, "outside.js"), path.join(root, "index.js"));
    const error = await refusal(root);
    expect(error.code).toBe("MANIFEST_INVALID");
    expect(error.message).toContain("entry index.js points outside the plugin directory");
  });

  it("refuses an entry under a symlinked directory that points outside", async () => {
    const dir = await testTempDir("ctm-manifest-entry-");
    await mkdir(path.join(dir, "elsewhere"));
    await writeFile(path.join(dir, "elsewhere", "index.js"), "export default {};\n");
    const root = path.join(dir, "plugin");
    await plugin(root, "dist/index.js");
    await symlink(path.join(dir, "elsewhere"), path.join(root, "dist"));
    expect((await refusal(root)).message).toContain("entry dist/index.js points outside the plugin directory");
  });

  it("refuses a path that leaves the directory, as before", async () => {
    const dir = await testTempDir("ctm-manifest-entry-");
    const root = path.join(dir, "plugin");
    await plugin(root, "../x.js");
    expect((await refusal(root)).message).toContain("entry ../x.js points outside the plugin directory");
  });

  it("accepts a symlinked plugin directory, an entry linked within it, and a name starting with '..'", async () => {
    const dir = await testTempDir("ctm-manifest-entry-");
    const real = path.join(dir, "real-plugin");
    await plugin(real, "index.js");
    await writeFile(path.join(real, "impl.js"), "export default {};\n");
    await symlink(path.join(real, "impl.js"), path.join(real, "index.js"));
    const linked = path.join(dir, "linked-plugin");
    await symlink(real, linked);
    expect((await readPluginDescriptor(linked, "p")).entry).toBe(path.join(linked, "index.js"));
    const dotted = path.join(dir, "dotted");
    await plugin(dotted, "..entry.js");
    expect((await readPluginDescriptor(dotted, "p")).entry).toBe(path.join(dotted, "..entry.js"));
  });
});
