/**
 * Path resolution shared by the transcript reader, writer and lock: symlinks and `..` are resolved before the
 * `sessionRoot` check so a link cannot smuggle a write outside the root.
 */
import fs from "node:fs";
import path from "node:path";
import { SessionFileError } from "./errors.js";

function errCode(err: unknown): string | undefined {
  return typeof err === "object" && err !== null && "code" in err ? String((err as { code: unknown }).code) : undefined;
}

function isSymlink(p: string): boolean {
  try {
    return fs.lstatSync(p).isSymbolicLink();
  } catch {
    return false;
  }
}

/** Realpath of `p`, or of its nearest existing ancestor with the missing tail re-appended. */
async function realpathOrAncestor(p: string, reported: string): Promise<string> {
  const abs = path.resolve(p);
  const missing: string[] = [];
  let cur = abs;
  for (;;) {
    try {
      const real = fs.realpathSync.native(cur); // synchronous: see small-file.ts
      return missing.length === 0 ? real : path.join(real, ...missing.reverse());
    } catch (err) {
      const code = errCode(err);
      if (code === "ENOENT") {
        // A dangling symlink is not "missing": following it would create a file wherever it points.
        const isLink = isSymlink(cur);
        if (isLink) {
          throw new SessionFileError("SESSION_UNREADABLE", reported, `session path ${reported} is a dangling symlink (${cur})`, {
            cause: err,
          });
        }
        const parent = path.dirname(cur);
        if (parent === cur) return abs;
        missing.push(path.basename(cur));
        cur = parent;
        continue;
      }
      if (code === "ENOTDIR") {
        throw new SessionFileError("SESSION_UNREADABLE", reported, `session path ${reported} is unreadable: a parent is not a directory`, {
          cause: err,
        });
      }
      if (code === "EACCES" || code === "EPERM" || code === "ELOOP") {
        throw new SessionFileError("SESSION_UNREADABLE", reported, `session path ${reported} is unreadable (${code})`, { cause: err });
      }
      throw new SessionFileError("SESSION_UNREADABLE", reported, `cannot resolve session path ${reported}: ${String(err)}`, { cause: err });
    }
  }
}

/**
 * Resolve a session path to its canonical absolute form, enforcing `sessionRoot` when given. The file itself need
 * not exist.
 *
 * @example
 * ```ts
 * const real = await resolveSessionPath("/data/../data/s1.jsonl", "/data"); // "/data/s1.jsonl"
 * ```
 */
export async function resolveSessionPath(sessionFile: string, sessionRoot?: string): Promise<string> {
  if (typeof sessionFile !== "string" || sessionFile.length === 0 || sessionFile.includes("\0")) {
    throw new SessionFileError("SESSION_INVALID_ARGUMENT", String(sessionFile), `session path ${JSON.stringify(sessionFile)} is not a valid path`);
  }
  const real = await realpathOrAncestor(sessionFile, sessionFile);
  if (sessionRoot !== undefined) {
    const root = await realpathOrAncestor(sessionRoot, sessionRoot);
    const rel = path.relative(root, real);
    if (rel === "" || rel.startsWith("..") || path.isAbsolute(rel)) {
      throw new SessionFileError(
        "SESSION_OUTSIDE_ROOT",
        sessionFile,
        `session path ${sessionFile} resolves to ${real}, which is outside the session root ${root}`,
      );
    }
  }
  return real;
}

/** Map a filesystem error on the session file itself to a typed error. */
export function sessionIoError(err: unknown, file: string, action: string): SessionFileError {
  if (err instanceof SessionFileError) return err;
  const code = errCode(err);
  if (code === "EISDIR") {
    return new SessionFileError("SESSION_PATH_IS_DIRECTORY", file, `session path ${file} is a directory`, { cause: err });
  }
  if (action === "read" || code === "ENOTDIR") {
    return new SessionFileError("SESSION_UNREADABLE", file, `cannot ${action} session file ${file} (${code ?? String(err)})`, { cause: err });
  }
  return new SessionFileError("SESSION_WRITE_FAILED", file, `cannot ${action} session file ${file} (${code ?? String(err)})`, { cause: err });
}

export { errCode };
