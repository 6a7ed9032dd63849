/**
 * Screenshots an HTML file with headless Chromium, for checking a statechart page as a person would see it. This
 * is a manual/dev tool (Chromium is not a project dependency); unit tests do not use it.
 */
import { execFile } from "node:child_process";
import { existsSync } from "node:fs";
import { mkdtemp, rm, stat } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { pathToFileURL } from "node:url";
import { pino, type Logger } from "pino";
import { z } from "zod";

/** Codes of {@link ScreenshotError}. */
export type ScreenshotErrorCode =
  | "SCREENSHOT_INVALID_ARGUMENT"
  /** No Chromium binary at the given (or default) path. */
  | "SCREENSHOT_NO_BROWSER"
  /** Chromium exited with an error or produced no PNG. */
  | "SCREENSHOT_FAILED";

/**
 * The error type thrown by {@link screenshotHtml}.
 *
 * @example
 * ```ts
 * const dir = os.tmpdir();
 * await screenshotHtml(path.join(dir, "page.html"), path.join(dir, "page.png")).catch((err) => {
 *   if (err instanceof ScreenshotError && err.code === "SCREENSHOT_NO_BROWSER") console.error("install chromium");
 * });
 * ```
 */
export class ScreenshotError extends Error {
  readonly code: ScreenshotErrorCode;
  constructor(code: ScreenshotErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options?.cause === undefined ? undefined : { cause: options.cause });
    this.name = "ScreenshotError";
    this.code = code;
  }
}

const optionsSchema = z
  .object({
    width: z.number().int().min(100).max(8000).default(1600),
    height: z.number().int().min(100).max(16000).default(1200),
    /** Fragment appended to the file URL, e.g. `step=7` for the replay page. */
    hash: z.string().regex(/^[A-Za-z0-9=&_-]*$/).optional(),
    /** Chromium's virtual time budget: how long (virtual ms) scripts may run before the shot. */
    virtualTimeBudgetMs: z.number().int().min(100).max(60_000).default(5000),
    chromiumPath: z.string().min(1).default("/usr/bin/chromium"),
    timeoutMs: z.number().int().min(1000).max(300_000).default(60_000),
    logger: z.custom<Logger>().optional(),
  })
  .strict();

export type ScreenshotOptions = z.input<typeof optionsSchema>;

/**
 * Renders `htmlPath` in headless Chromium (offline-friendly flags, a fresh profile) and writes a PNG.
 *
 * @example
 * ```ts
 * const html = path.join(os.tmpdir(), "viz-check.html");
 * await writeFile(html, renderStatechartPage({ machines, trace }));
 * await screenshotHtml(html, html.replace(/\.html$/, ".png"), { width: 1600, height: 2000, hash: "step=7" });
 * ```
 */
export async function screenshotHtml(htmlPath: string, pngPath: string, options: ScreenshotOptions = {}): Promise<void> {
  const parsed = optionsSchema.safeParse(options);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    throw new ScreenshotError(
      "SCREENSHOT_INVALID_ARGUMENT",
      `invalid screenshot option ${issue?.path.join(".") ?? "?"}: ${issue?.message ?? "invalid"}`,
    );
  }
  const opts = parsed.data;
  const logger = opts.logger ?? pino({ level: "silent" });
  if (!existsSync(opts.chromiumPath)) {
    throw new ScreenshotError("SCREENSHOT_NO_BROWSER", `no chromium at ${opts.chromiumPath} (apt-get install chromium)`);
  }
  const absHtml = resolve(htmlPath);
  const absPng = resolve(pngPath);
  const url = pathToFileURL(absHtml).href + (opts.hash ? `#${opts.hash}` : "");
  // A fresh profile per shot: no state from earlier runs, nothing left behind.
  const profile = await mkdtemp(join(tmpdir(), "viz-chromium-"));
  const args = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    `--user-data-dir=${profile}`,
    `--screenshot=${absPng}`,
    `--window-size=${opts.width},${opts.height}`,
    `--virtual-time-budget=${opts.virtualTimeBudgetMs}`,
    url,
  ];
  try {
    await new Promise<void>((resolvePromise, reject) => {
      execFile(opts.chromiumPath, args, { timeout: opts.timeoutMs, maxBuffer: 4 * 1024 * 1024 }, (err, _stdout, stderr) => {
        if (err) {
          reject(
            new ScreenshotError("SCREENSHOT_FAILED", `chromium failed for ${absHtml}: ${err.message}\n${stderr.slice(-2000)}`, {
              cause: err,
            }),
          );
        } else resolvePromise();
      });
    });
    const info = await stat(absPng).catch(() => undefined);
    if (info === undefined || info.size === 0) {
      throw new ScreenshotError("SCREENSHOT_FAILED", `chromium wrote no screenshot to ${absPng}`);
    }
    logger.info({ event: "inspect.screenshot", bytes: info.size, width: opts.width, height: opts.height }, "screenshot written");
  } finally {
    await rm(profile, { recursive: true, force: true });
  }
}
