/**
 * The entries from the root to the leaf (default: the last entry in file order), following `parentId`. A `parentId`
 * of null (or one naming no entry) ends the walk: pi treats such an entry as a root, so everything before it in the
 * file is outside the context.
 */
function pathToLeaf(
  entries: readonly SessionEntry[],
  leafId: string | null | undefined,
  known: ReadonlyMap<string, SessionEntry> | undefined,
): SessionEntry[] {
  if (leafId === null) return [];
  let byId = known;
  if (!byId) {
    const map = new Map<string, SessionEntry>();
    for (const e of entries) map.set(e.id, e);
    byId = map;
  }
  const leaf = (leafId ? byId.get(leafId) : undefined) ?? entries[entries.length - 1];
  const pathRev: SessionEntry[] = [];
  const seen = new Set<SessionEntry>();
  let current: SessionEntry | undefined = leaf;
  // pi has no cycle guard (a cyclic parent chain hangs it); we stop at the first repeat.
  while (current && !seen.has(current)) {
    seen.add(current);
    pathRev.push(current);
    current = current.parentId ? byId.get(current.parentId) : undefined;
  }
  return pathRev.reverse();
}

/**
 * The message one path entry contributes to the context (pi's `appendMessage` in `buildSessionContext`): a `message`
 * entry its message, a `custom_message` entry a `custom` message, a `branch_summary` with a summary a `branchSummary`
 * message; anything else (compactions are handled by the caller) nothing.
 *
 * @example
 * ```ts
 * entryContextMessage({ type: "label", id: "a", parentId: null, timestamp: "" }); // undefined
 * ```
 */
export function entryContextMessage(e: SessionEntry): AgentMessage | undefined {
  if (e.type === "message") return (e as MessageEntry).message;
  if (e.type === "custom_message") {
    const c = e as CustomMessageEntry;
    return { role: "custom", customType: c.customType, content: c.content, display: c.display, details: c.details, timestamp: isoToMs(c.timestamp) };
  }
  if (e.type === "branch_summary" && (e as BranchSummaryEntry).summary) {
    const b = e as BranchSummaryEntry;
    return { role: "branchSummary", summary: b.summary, fromId: b.fromId, timestamp: isoToMs(b.timestamp) };
  }
  return undefined;
}

/**
 * Rebuild the model-context messages from session entries: a port of pi's `buildSessionContext` (SessionManager).
 */
import type { AgentMessage } from "../context-engine/types.js";
import type { BranchSummaryEntry, CompactionEntry, CustomMessageEntry, MessageEntry, SessionContext, SessionEntry } from "./entries.js";

function isoToMs(ts: unknown): number {
  return new Date(ts as string).getTime();
}

/**
 * Rebuild the model-context messages from entries, exactly as pi's `buildSessionContext(entries, leafId)` does:
 * walk `parentId` from the leaf (default: the last entry), emit the latest compaction's summary first, then the kept
 * entries from `firstKeptEntryId` up to the compaction, then everything after it. `message` entries contribute their
 * message, `custom_message` entries a `custom` message, `branch_summary` entries a `branchSummary` message.
 *
 * @example
 * ```ts
 * const { messages, sources } = buildSessionContextFromEntries(transcript.entries);
 * ```
 *
 * `byId` (every entry by id) may be passed by a caller that keeps one, to save building it.
 */
export function buildSessionContextFromEntries(
  entries: readonly SessionEntry[],
  leafId?: string | null,
  byId?: ReadonlyMap<string, SessionEntry>,
): SessionContext {
  const chain = pathToLeaf(entries, leafId, byId);
  if (chain.length === 0) return { messages: [], sources: [] };

  let compaction: CompactionEntry | null = null;
  for (const e of chain) if (e.type === "compaction") compaction = e as CompactionEntry;

  const messages: AgentMessage[] = [];
  const sources: SessionEntry[] = [];
  const emit = (e: SessionEntry): void => {
    const m = entryContextMessage(e);
    if (m === undefined) return;
    messages.push(m);
    sources.push(e);
  };

  if (compaction) {
    messages.push({
      role: "compactionSummary",
      summary: compaction.summary,
      tokensBefore: compaction.tokensBefore,
      timestamp: isoToMs(compaction.timestamp),
    });
    sources.push(compaction);
    const idx = chain.findIndex((e) => e.type === "compaction" && e.id === compaction.id);
    let foundFirstKept = false;
    for (let i = 0; i < idx; i++) {
      const e = chain[i]!;
      if (e.id === compaction.firstKeptEntryId) foundFirstKept = true;
      if (foundFirstKept) emit(e);
    }
    for (let i = idx + 1; i < chain.length; i++) emit(chain[i]!);
  } else {
    for (const e of chain) emit(e);
  }
  return { messages, sources };
}

