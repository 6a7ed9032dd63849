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
 */
export function buildSessionContextFromEntries(entries: readonly SessionEntry[], leafId?: string | null): SessionContext {
  const byId = new Map<string, SessionEntry>();
  for (const e of entries) byId.set(e.id, e);
  if (leafId === null) return { messages: [], sources: [] };
  let leaf = leafId ? byId.get(leafId) : undefined;
  if (!leaf) leaf = entries[entries.length - 1];
  if (!leaf) return { messages: [], sources: [] };

  const pathRev: SessionEntry[] = [];
  const seen = new Set<SessionEntry>();
  let current: SessionEntry | undefined = leaf;
  // pi has no cycle guard (a cyclic parent chain hangs it); we stop at the first repeat.
  while (current && !seen.has(current)) {
    seen.add(current);
    pathRev.push(current);
    current = current.parentId ? byId.get(current.parentId) : undefined;
  }
  const chain = pathRev.reverse();

  let compaction: CompactionEntry | null = null;
  for (const e of chain) if (e.type === "compaction") compaction = e as CompactionEntry;

  const messages: AgentMessage[] = [];
  const sources: SessionEntry[] = [];
  const emit = (e: SessionEntry): void => {
    if (e.type === "message") {
      messages.push((e as MessageEntry).message);
      sources.push(e);
    } else if (e.type === "custom_message") {
      const c = e as CustomMessageEntry;
      messages.push({
        role: "custom",
        customType: c.customType,
        content: c.content,
        display: c.display,
        details: c.details,
        timestamp: isoToMs(c.timestamp),
      });
      sources.push(e);
    } else if (e.type === "branch_summary" && (e as BranchSummaryEntry).summary) {
      const b = e as BranchSummaryEntry;
      messages.push({ role: "branchSummary", summary: b.summary, fromId: b.fromId, timestamp: isoToMs(b.timestamp) });
      sources.push(e);
    }
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

