/**
 * The environment of the `codex app-server` child, and of the commands Codex runs for the model. The parent's
 * environment is NOT inherited; only what Codex needs to run and to reach its provider passes. Codex itself hands its
 * whole environment to every command it runs (shell, unified exec), so a model that runs `env` would read a provider
 * key named in `passEnv`: {@link commandEnvironmentPolicy} keeps those out of the commands (Codex's
 * `shell_environment_policy`), letting through only {@link INHERITED_ENV_VARS} and what the host names in `commandEnv`.
 */

/**
 * Passed through when set: PATH and HOME, then the proxy and certificate variables Codex's HTTP client honours
 * (both spellings of the proxy names: tools disagree on case).
 */
export const INHERITED_ENV_VARS: readonly string[] = [
  "PATH",
  "HOME",
  "HTTPS_PROXY",
  "https_proxy",
  "HTTP_PROXY",
  "http_proxy",
  "NO_PROXY",
  "no_proxy",
  "SSL_CERT_FILE",
  "SSL_CERT_DIR",
  "NODE_EXTRA_CA_CERTS",
];

/**
 * Build the child's environment: {@link INHERITED_ENV_VARS} and `passEnv` names from `parent` when set, then
 * `RUST_LOG=warn` (stderr carries no prompt content), then `extra`, then `CODEX_HOME` (always last: it is ours).
 *
 * @example
 * ```ts
 * buildChildEnv({ parent: process.env, passEnv: ["OPENAI_API_KEY"], extra: {}, codexHome: path.join(os.homedir(), ".codex") });
 * ```
 */
export function buildChildEnv(options: {
  parent: NodeJS.ProcessEnv;
  passEnv?: readonly string[] | undefined;
  extra?: Record<string, string> | undefined;
  codexHome: string;
}): Record<string, string> {
  const env: Record<string, string> = {};
  for (const name of [...INHERITED_ENV_VARS, ...(options.passEnv ?? [])]) {
    const value = options.parent[name];
    if (value !== undefined) env[name] = value;
  }
  env.RUST_LOG = "warn";
  Object.assign(env, options.extra ?? {});
  env.CODEX_HOME = options.codexHome;
  return env;
}

/**
 * The `shell_environment_policy` filters that keep Codex's own environment out of the commands it runs for the model:
 * every variable of `childEnv` (the child's environment, from {@link buildChildEnv}) is excluded by its exact name,
 * except {@link INHERITED_ENV_VARS} (PATH, HOME, proxies, certificates: what commands need to work) and the names in
 * `commandEnv` (the host's explicit opt-in). So `passEnv` names (a provider key), the extra `env` (the offline fake's
 * key, the hook relay socket) and CODEX_HOME never reach a command. Filters merge with the user's config.toml ones
 * (Codex merges its `filters` table across config layers by key). Sorted, so the spawn arguments are stable.
 *
 * @example
 * ```ts
 * commandEnvironmentPolicy({ PATH: "/bin", OPENAI_API_KEY: "sk-1", CODEX_HOME: "/h" }, []);
 * // => { filters: { CODEX_HOME: "exclude", OPENAI_API_KEY: "exclude" } }
 * ```
 */
export function commandEnvironmentPolicy(childEnv: Record<string, string>, commandEnv: readonly string[] = []): { filters: Record<string, "exclude"> } {
  const visible = new Set([...INHERITED_ENV_VARS, ...commandEnv].map((n) => n.toUpperCase()));
  const filters: Record<string, "exclude"> = {};
  // Codex matches filter patterns case-insensitively.
  for (const name of Object.keys(childEnv).sort()) if (!visible.has(name.toUpperCase())) filters[name] = "exclude";
  return { filters };
}

/**
 * `config` with {@link commandEnvironmentPolicy}'s filters added to its `shell_environment_policy` (the caller's own
 * filters and other policy keys are kept; a caller's filter for a name we exclude is overridden: `commandEnv` is the one
 * way to let a variable of Codex's environment through).
 *
 * @example
 * ```ts
 * withCommandEnvironmentPolicy({ model: "m" }, { OPENAI_API_KEY: "sk-1" }, []);
 * // => { model: "m", shell_environment_policy: { filters: { OPENAI_API_KEY: "exclude" } } }
 * ```
 */
export function withCommandEnvironmentPolicy(
  config: Record<string, unknown>,
  childEnv: Record<string, string>,
  commandEnv: readonly string[] = [],
): Record<string, unknown> {
  const { filters } = commandEnvironmentPolicy(childEnv, commandEnv);
  if (Object.keys(filters).length === 0) return config;
  const own = config.shell_environment_policy;
  const policy = typeof own === "object" && own !== null && !Array.isArray(own) ? (own as Record<string, unknown>) : {};
  const ownFilters = typeof policy.filters === "object" && policy.filters !== null ? (policy.filters as Record<string, unknown>) : {};
  return { ...config, shell_environment_policy: { ...policy, filters: { ...ownFilters, ...filters } } };
}
