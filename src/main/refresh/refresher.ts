// Config refresh: `evaluate` is a dry run (the changes and whether each is
// mutable); `apply` commits a valid, mutable-only candidate as one new
// snapshot, tells the connected nodes what changed for them, and retires
// sessions whose node was removed or whose token changed. Anything else
// (an invalid config, a restart-required change) is rejected with reasons
// and the running snapshot stays. Refreshes run one at a time: the admin
// API and SIGHUP share this path. After a commit each concerned node that
// answers commands is sent refresh_config and the apply waits (up to the
// node timeout) for every answer: applied, restart_required, failed,
// unsupported or timeout. The commit is never rolled back for an answer:
// the edge's snapshot is the edge's, and a node that failed is reported.
// Every refresh also re-reads the certificate files tls names: files that do
// not load reject it, and an apply swaps in any that changed, so a renewed
// certificate goes live on SIGHUP with no config change at all.
import { createHash } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import type { EdgeConfig } from '../../shared/config-types.js';
import { DEFAULT_COMMAND_DEADLINE_MS, type NodeCommandResult } from '../../shared/node-commands.js';
import { ConfigError } from '../../shared/config-reader.js';
import { parseEdgeConfig } from '../config.js';
import { ConfigParser } from './config-parse.js';
import { pathsByNode } from './concern.js';
import { readTlsMaterial, type TlsMaterial } from '../../shared/tls-material.js';
import type { CertificateReport, ServedCertificates } from './certificates.js';
import { diffConfigs, type ConfigChange } from './diff.js';
import { ruleFor } from './mutability.js';

export type RefreshMode = 'evaluate' | 'apply';

export interface RefreshRequest {
  readonly mode: RefreshMode;
  /** Inline candidate: YAML/JSON text or an already parsed object. Absent: the config file is read again. */
  readonly config?: unknown;
  /** Who asked, for logs: 'admin', 'SIGHUP'. */
  readonly origin?: string;
  /** How long an apply waits for the concerned nodes' answers; default 5 s. */
  readonly nodeTimeoutMs?: number;
  /**
   * With no inline config: go on only if the config file still has this
   * digest (an evaluate's `sourceDigest`), so an apply commits what was
   * evaluated and shown, never an edit made to the file since.
   */
  readonly sourceDigest?: string;
}

/** One concerned node's answer to the refresh (what its agent did with it). */
export type NodeRefreshResult = Pick<NodeCommandResult, 'node' | 'status' | 'message'>;

export interface ClassifiedChange extends ConfigChange {
  readonly mutable: boolean;
  /** What applying it does, or why it needs a restart. */
  readonly effect: string;
}

export interface RefreshResult {
  readonly mode: RefreshMode;
  /** evaluated: dry run done; applied: committed; unchanged: nothing to commit; rejected: nothing committed. */
  readonly status: 'evaluated' | 'applied' | 'unchanged' | 'rejected';
  /** Why it was (or, for evaluate, would be) rejected. */
  readonly rejection: 'invalid_config' | 'restart_required' | 'no_config_source' | 'source_changed' | null;
  /** SHA-256 (hex) of the config file's text this call read; null for an inline candidate. */
  readonly sourceDigest: string | null;
  /** True when an apply of this candidate would be committed. */
  readonly applicable: boolean;
  /** The running snapshot's version after this call. */
  readonly configVersion: number;
  readonly changes: readonly ClassifiedChange[];
  readonly reasons: readonly string[];
  /** Nodes sent a ConfigRefresh, with the paths each was told. */
  readonly notified: readonly { readonly node: string; readonly paths: readonly string[] }[];
  /** Nodes whose session is closed once idle (removed, or token changed). */
  readonly retired: readonly string[];
  /** Each notified node's answer to refresh_config (apply only). */
  readonly nodes: readonly NodeRefreshResult[];
  /**
   * Each TLS listener's certificate as the candidate's files hold it, and
   * whether it differs from the one served: an apply swaps a changed one in
   * (a renewal written over the same files counts), with or without config changes.
   */
  readonly certificates: readonly CertificateReport[];
}

/** What the refresher needs from the running edge. */
export interface RefreshTarget {
  /** The running snapshot. */
  readonly config: EdgeConfig;
  /** Swaps the whole snapshot in one synchronous step; resolves once every thread has it. */
  setConfig(next: EdgeConfig): Promise<void>;
  /** Ids of nodes with a live session. */
  connectedNodeIds(): Iterable<string>;
  /** Sends a ConfigRefresh to the node's session; false if it has none. */
  notifyNode(nodeId: string, changedPaths: readonly string[], configVersion: number): boolean;
  /** No new requests for the node's session; close it once its open ones finish. False: it had no session to retire. */
  retireNode(nodeId: string, reason: string): boolean;
  /** What the listeners serve; absent: a refresh reads no TLS files. */
  readonly certificates?: ServedCertificates;
  /** Every listener serves `tls` to new handshakes; resolves once every thread has it. */
  setCertificates?(tls: TlsMaterial): Promise<void>;
  /** Sends a node command and resolves with its answer (never rejects); absent: nodes are only notified. */
  commandNode?(nodeId: string, kind: string, args: Readonly<Record<string, string>>, deadlineMs: number): Promise<NodeCommandResult>;
}

export interface RefreshListener {
  /** The answer, once every concerned node answered (or its deadline passed). */
  refreshed(result: RefreshResult, origin: string): void;
  /** An apply is committed (snapshot swapped, version bumped): said at once, before the nodes are told. */
  committed?(configVersion: number, changedPaths: readonly string[], origin: string): void;
  /**
   * Every I/O worker serves the committed apply (each swaps it when the pool's message arrives), or `late`
   * says which did not in time: a script that waits for this before its next request finds it everywhere.
   */
  live?(configVersion: number, changedPaths: readonly string[], origin: string, late: string | undefined): void;
}

const TOKEN_PATH = /^nodes\[([^\]]*)\]\.token$/;
const NODE_ENTRY_PATH = /^nodes\[([^\]]*)\]$/;

export class ConfigRefresher {
  #version = 1;
  /** The digest of the file the running refresh read (refreshes run one at a time). */
  #sourceDigest: string | null = null;
  #tail: Promise<unknown> = Promise.resolve();
  /** YAML texts of some size are parsed off the main thread (config-parse.ts). */
  readonly parser = new ConfigParser();

  readonly #target: RefreshTarget;
  readonly #configFile: string | undefined;
  readonly #listener: RefreshListener | undefined;

  constructor(target: RefreshTarget, configFile: string | undefined, listener: RefreshListener | undefined) {
    this.#target = target;
    this.#configFile = configFile;
    this.#listener = listener;
  }

  get configVersion(): number {
    return this.#version;
  }

  /** Ends the parsing thread (edge shutdown); a refresh after it parses inline. */
  close(): Promise<void> {
    return this.parser.close();
  }

  /** Runs after every refresh already asked for; never rejects (failures are results). */
  refresh(request: RefreshRequest): Promise<RefreshResult> {
    const run = this.#tail.then(() => this.#refresh(request));
    this.#tail = run.catch(() => undefined);
    return run;
  }

  async #refresh(request: RefreshRequest): Promise<RefreshResult> {
    const origin = request.origin ?? 'admin';
    let candidate: EdgeConfig;
    this.#sourceDigest = null;
    try {
      candidate = await this.#candidate(request.config);
      if (request.sourceDigest !== undefined && this.#sourceDigest !== null && request.sourceDigest !== this.#sourceDigest) {
        return this.#report(this.#rejected(request.mode, 'source_changed', [`${this.#configFile ?? 'the config file'} changed since it was evaluated (its digest is no longer ${request.sourceDigest}): evaluate it again, and apply what that shows`], []), origin);
      }
    } catch (err) {
      const noSource = err instanceof NoConfigSource;
      const reasons = err instanceof ConfigError ? err.problems : [(err as Error).message];
      return this.#report(this.#rejected(request.mode, noSource ? 'no_config_source' : 'invalid_config', reasons, []), origin);
    }
    // The files tls names, read again even when their paths did not change: a renewal rewrites them in place.
    let tls: TlsMaterial | undefined;
    let certificates: CertificateReport[] = [];
    const served = this.#target.certificates;
    if (served !== undefined) {
      const problems: string[] = [];
      tls = await readTlsMaterial(candidate.tls, problems);
      if (tls === undefined) return this.#report(this.#rejected(request.mode, 'invalid_config', problems, []), origin);
      certificates = served.compare(tls);
    }
    const renewed = tls !== undefined && certificates.some((c) => c.changed) ? tls : undefined;
    const current = this.#target.config;
    const changes = withAuthGuard(diffConfigs(current, candidate).map(classify), current, candidate);
    const restart = changes.filter((c) => !c.mutable);
    const reasons = restart.map((c) => `${c.path}: needs a restart (${c.effect})`);
    if (request.mode === 'evaluate') {
      return this.#report(
        {
          ...this.#empty('evaluate', 'evaluated'),
          rejection: restart.length > 0 ? 'restart_required' : null,
          applicable: restart.length === 0,
          changes,
          reasons,
          certificates,
        },
        origin,
      );
    }
    if (restart.length > 0) return this.#report({ ...this.#rejected('apply', 'restart_required', reasons, changes), certificates }, origin);
    if (changes.length === 0 && renewed === undefined) return this.#report({ ...this.#empty('apply', 'unchanged'), applicable: true, certificates }, origin);
    // Certificates first: a changed path and the file it names go live together, before the nodes are told.
    const swapped = renewed === undefined ? undefined : await this.#swapCertificates(renewed, served);
    const swapReasons = swapped === undefined ? [] : [swapped];
    if (changes.length === 0) return this.#report({ ...this.#empty('apply', 'applied'), applicable: true, certificates, reasons: swapReasons }, origin);
    const result = await this.#commit(current, candidate, changes, request.nodeTimeoutMs ?? DEFAULT_COMMAND_DEADLINE_MS, origin);
    return this.#report({ ...result, certificates, reasons: [...swapReasons, ...result.reasons] }, origin);
  }

  /** Every thread serves `tls`; undefined once all have, else why not (a reason for the answer). */
  async #swapCertificates(tls: TlsMaterial, served: ServedCertificates | undefined): Promise<string | undefined> {
    const everywhere = this.#target.setCertificates?.(tls) ?? Promise.resolve();
    const late = await settledWithin(everywhere, WORKERS_ACK_MS, 'the certificates');
    served?.commit(tls);
    return late;
  }

  async #commit(current: EdgeConfig, candidate: EdgeConfig, changes: readonly ClassifiedChange[], nodeTimeoutMs: number, origin: string): Promise<RefreshResult> {
    // Swapped here in one step; each I/O worker swaps it when the pool's message arrives. Nodes are told and
    // retired in this same turn, as before the workers answer (a registration on the new token meanwhile is
    // not mistaken for the old connection). The answer then waits for every worker, up to a bound: once it
    // says applied, a removed key or alias is refused everywhere.
    const everywhere = this.#target.setConfig(candidate);
    const version = ++this.#version;
    // Before the nodes are told or retired: consumers of the event see the change before what it causes.
    this.#listener?.committed?.(version, changes.map((c) => c.path), origin);
    const notified: { node: string; paths: string[] }[] = [];
    const offline: string[] = [];
    const connected = new Set(this.#target.connectedNodeIds());
    const configured = new Set([...current.nodes, ...candidate.nodes].map((n) => n.id));
    for (const [node, paths] of pathsByNode(changes, current, candidate, configured)) {
      if (connected.has(node) && this.#target.notifyNode(node, paths, version)) notified.push({ node, paths });
      else offline.push(node);
    }
    const retired: string[] = [];
    /** Nodes the change removes: one with no connection will never register again to hear of it. */
    const removed = new Set<string>();
    for (const { path, new: next } of changes) {
      const token = TOKEN_PATH.exec(path);
      const entry = NODE_ENTRY_PATH.exec(path);
      // Only a session there was: a node with none has nothing to retire, and is reported not_connected below.
      if (token !== null) {
        if (this.#target.retireNode(token[1], 'its token changed')) retired.push(token[1]);
      } else if (entry !== null && next === null) {
        removed.add(entry[1]);
        if (this.#target.retireNode(entry[1], 'removed from the config')) retired.push(entry[1]);
      }
    }
    const threads = await settledWithin(everywhere, WORKERS_ACK_MS, 'the config');
    this.#listener?.live?.(version, changes.map((c) => c.path), origin, threads);
    const nodes = await this.#askNodes(notified, version, nodeTimeoutMs, new Set(retired));
    // A concerned node with no connection is reported, not skipped: the operator sees it was not told.
    for (const node of offline) {
      if (retired.includes(node)) continue;
      const message = removed.has(node) ? 'no live connection: removed from the config, so it can no longer register' : 'no live connection: not told; the change reaches it when it next registers';
      nodes.push({ node, status: 'not_connected', message });
    }
    return { ...this.#empty('apply', 'applied'), applicable: true, changes, notified, retired, nodes, ...(threads === undefined ? {} : { reasons: [threads] }) };
  }

  /** refresh_config to every notified node at once; a node being retired is not asked (its session is closing). */
  async #askNodes(notified: readonly { node: string; paths: readonly string[] }[], version: number, timeoutMs: number, retired: ReadonlySet<string>): Promise<NodeRefreshResult[]> {
    const commandNode = this.#target.commandNode?.bind(this.#target);
    if (commandNode === undefined) return [];
    const asked = notified.filter((n) => !retired.has(n.node));
    const answers = await Promise.all(
      asked.map(({ node, paths }) => commandNode(node, 'refresh_config', { changed_paths: paths.join(','), config_version: String(version) }, timeoutMs)),
    );
    return answers.map(({ node, status, message }) => ({ node, status, message }));
  }

  async #candidate(inline: unknown): Promise<EdgeConfig> {
    if (inline === undefined || inline === null) {
      if (this.#configFile === undefined) throw new NoConfigSource();
      const text = await readFile(this.#configFile, 'utf8');
      this.#sourceDigest = createHash('sha256').update(text).digest('hex');
      return this.parser.parse(text, this.#configFile);
    }
    if (typeof inline === 'string') return this.parser.parse(inline, 'inline config');
    return parseEdgeConfig(inline, 'inline config');
  }

  #empty(mode: RefreshMode, status: RefreshResult['status']): RefreshResult {
    return { mode, status, rejection: null, sourceDigest: this.#sourceDigest, applicable: false, configVersion: this.#version, changes: [], reasons: [], notified: [], retired: [], nodes: [], certificates: [] };
  }

  #rejected(mode: RefreshMode, rejection: NonNullable<RefreshResult['rejection']>, reasons: readonly string[], changes: readonly ClassifiedChange[]): RefreshResult {
    return { ...this.#empty(mode, mode === 'evaluate' ? 'evaluated' : 'rejected'), rejection, changes, reasons };
  }

  #report(result: RefreshResult, origin: string): RefreshResult {
    this.#listener?.refreshed(result, origin);
    return result;
  }
}

class NoConfigSource extends Error {
  constructor() {
    super('no config given and the edge was not started from a config file');
  }
}

/** How long a refresh's answer waits for the I/O workers to take the config (a worker stalls, it does not hang the refresh queue). */
const WORKERS_ACK_MS = 5_000;

/** undefined once `swap` resolved within `ms`; else why not (a reason for the answer). */
function settledWithin(swap: Promise<void>, ms: number, what: string): Promise<string | undefined> {
  return new Promise((resolve) => {
    const timer = setTimeout(() => resolve(`not every I/O worker had taken ${what} after ${ms} ms; each swaps it when it reads the pool's message`), ms);
    swap.then(
      () => {
        clearTimeout(timer);
        resolve(undefined);
      },
      (err: unknown) => {
        clearTimeout(timer);
        resolve(`${what} did not reach every I/O worker: ${(err as Error).message}; one replaced later starts on it`);
      },
    );
  });
}

/**
 * Removing every API key turns client auth off (an empty list lets every
 * request in). Done by a live refresh, revoking the last (leaked) key would
 * open the gateway to anyone: that transition takes a restart, so it is a
 * deliberate act. Its auth changes say so.
 */
function withAuthGuard(changes: ClassifiedChange[], current: EdgeConfig, candidate: EdgeConfig): ClassifiedChange[] {
  if ((current.auth?.apiKeys.length ?? 0) === 0 || (candidate.auth?.apiKeys.length ?? 0) > 0) return changes;
  const effect = 'this turns client auth off (no API key left: every request would be let in), which takes a restart; to revoke the last key and stay closed, replace it with a new one';
  return changes.map((change) => (change.path.startsWith('auth.') || change.path === 'auth' ? { ...change, mutable: false, effect } : change));
}

function classify(change: ConfigChange): ClassifiedChange {
  const rule = ruleFor(change.path);
  return { ...change, mutable: rule.mutable, effect: rule.effect };
}
