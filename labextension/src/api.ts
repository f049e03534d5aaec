/**
 * Typed client for the agent-memory REST API (`/agent-memory/api/`).
 *
 * The response shapes mirror the TypedDicts in `jupyter_agent_memory/server/handlers.py`.
 * Requests go through `ServerConnection.makeRequest`, which adds the token and the XSRF header.
 */

import { URLExt } from '@jupyterlab/coreutils';
import { ServerConnection } from '@jupyterlab/services';

/** `GET agents`. */
export interface IAgentsResponse {
  root: string;
  default_agent: string;
  agents: string[];
  templates: string[];
}

/** `POST agents`. */
export interface IAgentCreatedResponse {
  id: string;
  path: string;
  created: boolean;
  template: string | null;
}

/**
 * `GET agents/{id}/facts`: `content` is cut to the view bound when `truncated`; `chars` and
 * `sha256` are always those of the whole file.
 */
export interface IFactsResponse {
  agent: string;
  path: string;
  content: string;
  sha256: string;
  chars: number;
  truncated: boolean;
  /** `content` rendered by the server's Markdown renderer (asked for with `render`). */
  html?: string;
}

/**
 * `POST handover`: the agent a notebook's kernel uses, by the id every route knows it by
 * (`how`: `agents-root`, `server-root`, or `handed-over` for a handle of a folder outside both).
 */
export interface IHandoverResponse {
  agent: string;
  path: string;
  how: string;
  agent_id: string | null;
}

/** `PUT agents/{id}/facts`. */
export interface IFactsSavedResponse {
  agent: string;
  sha256: string;
  previous_sha256: string;
}

/**
 * One journal entry as stored. Entries this package writes have a string `ts`, a list of
 * string `tags` and a string `text`, but any JSON object on a journal line is an entry (other
 * tools write other shapes and extra keys), so nothing about its values is assumed.
 */
export interface IJournalEntry {
  ts?: unknown;
  tags?: unknown;
  text?: unknown;
  [key: string]: unknown;
}

/** `GET agents/{id}/journal`. */
export interface IJournalResponse {
  agent: string;
  entries: IJournalEntry[];
  skipped: number;
  scanned: number;
  indexed: boolean;
}

/** `POST agents/{id}/journal`. */
export interface IJournalAppendedResponse {
  agent: string;
  entry: IJournalEntry;
}

/** One part of a built prompt. */
export interface IPromptSection {
  name: string;
  source: string | null;
  chars: number;
  tokens: number;
}

/** `GET agents/{id}/prompt`. */
export interface IPromptResponse {
  agent: string;
  workspace: string;
  text: string;
  chars: number;
  truncated: boolean;
  base: string | null;
  context: string;
  bootstrap: boolean;
  tokens: number;
  memory_tokens: number;
  budget_tokens: number | null;
  over_budget: boolean;
  warnings: string[];
  sections: IPromptSection[];
}

/** One stored FACT.md version. */
export interface IHistoryVersion {
  ts: string;
  sha256: string;
  size: number;
}

/** `GET agents/{id}/history`. */
export interface IHistoryResponse {
  agent: string;
  versions: IHistoryVersion[];
}

/** `GET agents/{id}/history/{sha}`. */
export interface IVersionResponse {
  agent: string;
  sha256: string;
  content: string;
}

/** `GET agents/{id}/soul` and `.../user`. */
export interface IPersonaResponse {
  agent: string;
  name: string;
  path: string;
  content: string;
  sha256: string;
  chars: number;
  truncated: boolean;
}

/** `PUT agents/{id}/soul` and `.../user`. */
export interface IPersonaSavedResponse {
  agent: string;
  name: string;
  sha256: string;
  previous_sha256: string;
}

/** The receipt of one recorded session start (what the engine appends to its log). */
export interface ISessionReceipt {
  ts: string;
  session_id: string;
  client: { name?: string; version?: string } | null;
  prompt_sha256: string;
  chars: number;
  tokens: number;
  budget_tokens: number | null;
  warnings: string[];
  sections: IPromptSection[];
  [key: string]: unknown;
}

/** `GET agents/{id}/sessions`. */
export interface ISessionsResponse {
  agent: string;
  sessions: ISessionReceipt[];
}

/** `GET agents/{id}/sessions/{sid}`. */
export interface ISessionResponse {
  agent: string;
  receipt: ISessionReceipt;
  text: string;
  chars: number;
  truncated: boolean;
}

/** `GET agents/{id}/sessions/{sid}/diff/{other}`. */
export interface ISessionDiffResponse {
  agent: string;
  first: string;
  second: string;
  diff: string;
}

/** Where one line of a recorded prompt came from (`source` null: builder text). */
export interface ISessionOrigin {
  section: string;
  source: string | null;
  version: string | null;
  line: number | null;
  text: string;
  description: string;
}

/** `GET agents/{id}/sessions/{sid}/why?text=`. */
export interface ISessionWhyResponse {
  agent: string;
  session_id: string;
  text: string;
  origins: ISessionOrigin[];
}

/**
 * How much text a view asks for (`max_chars`): a number of characters, or `'all'`. Left out,
 * the server sends its default bound (about 100 KB).
 */
export type ViewBound = number | 'all';

/** The query string asking for `bound` (none: the server's default). */
function boundParams(bound?: ViewBound): URLSearchParams | undefined {
  return bound === undefined ? undefined : new URLSearchParams({ max_chars: `${bound}` });
}

/** Which persona file: SOUL.md (`soul`) or USER.md (`user`). */
export type PersonaName = 'soul' | 'user';

/** Journal search parameters; empty values are left out of the query. */
export interface IJournalQuery {
  query?: string;
  tag?: string;
  limit?: number | string;
  since?: string;
  until?: string;
}

/** An error answered by the server: status code and the engine's message. */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly body: Record<string, unknown> = {}
  ) {
    super(message);
    this.name = 'ApiError';
  }
}

/** 409 from a compare-and-swap save: FACT.md changed since it was read. */
export class ConflictError extends ApiError {
  constructor(
    message: string,
    readonly expected: string,
    readonly actual: string,
    body: Record<string, unknown>
  ) {
    super(409, message, body);
    this.name = 'ConflictError';
  }
}

/** Client for one Jupyter server's agent-memory API. */
export class AgentMemoryClient {
  constructor(readonly settings: ServerConnection.ISettings = ServerConnection.makeSettings()) {}

  /** List agents, the default agent and the built-in templates. */
  listAgents(): Promise<IAgentsResponse> {
    return this.request<IAgentsResponse>('GET', ['agents']);
  }

  /** Create an agent (idempotent), optionally provisioned from a template. */
  createAgent(id: string, template: string | null = null): Promise<IAgentCreatedResponse> {
    return this.request<IAgentCreatedResponse>('POST', ['agents'], {
      id,
      template
    });
  }

  /**
   * Read FACT.md (up to `bound` characters) and the sha256 of the whole file; with `render`,
   * also the text as HTML from the server's renderer (the one `%fact` uses).
   */
  getFacts(agent: string, bound?: ViewBound, render = false): Promise<IFactsResponse> {
    const params = boundParams(bound) ?? new URLSearchParams();
    if (render) {
      params.set('render', 'html');
    }
    return this.request<IFactsResponse>('GET', ['agents', agent, 'facts'], undefined, params);
  }

  /**
   * Ask the server to ask kernel `kernelId` where its notebook's agent is. The server takes
   * no path from us: the kernel's answer is the only way a folder outside the server's root
   * becomes reachable (by the handle this returns).
   */
  handover(kernelId: string): Promise<IHandoverResponse> {
    return this.request<IHandoverResponse>('POST', ['handover'], {
      kernel_id: kernelId
    });
  }

  /**
   * Save FACT.md only if it is still the version whose sha256 is `expectedSha256`; rejects
   * with `ConflictError` when it changed. There is no unconditional save: an editor always
   * knows which version it showed.
   */
  saveFacts(agent: string, content: string, expectedSha256: string): Promise<IFactsSavedResponse> {
    return this.request<IFactsSavedResponse>('PUT', ['agents', agent, 'facts'], {
      content,
      expected_sha256: expectedSha256
    });
  }

  /** Search the journal, newest first. */
  searchJournal(agent: string, query: IJournalQuery = {}): Promise<IJournalResponse> {
    const params = new URLSearchParams();
    for (const [key, value] of Object.entries(query)) {
      if (value !== undefined && value !== null && `${value}` !== '') {
        params.set(key, `${value}`);
      }
    }
    return this.request<IJournalResponse>('GET', ['agents', agent, 'journal'], undefined, params);
  }

  /** Append a journal entry. */
  appendJournal(
    agent: string,
    text: string,
    tags: string[] = []
  ): Promise<IJournalAppendedResponse> {
    return this.request<IJournalAppendedResponse>('POST', ['agents', agent, 'journal'], {
      text,
      tags
    });
  }

  /** Build the system prompt the agent would get (its text up to `bound` characters). */
  getPrompt(agent: string, bound?: ViewBound): Promise<IPromptResponse> {
    return this.request<IPromptResponse>(
      'GET',
      ['agents', agent, 'prompt'],
      undefined,
      boundParams(bound)
    );
  }

  /** List stored FACT.md versions, newest first. */
  getHistory(agent: string): Promise<IHistoryResponse> {
    return this.request<IHistoryResponse>('GET', ['agents', agent, 'history']);
  }

  /** Read one stored FACT.md version. */
  getVersion(agent: string, sha: string): Promise<IVersionResponse> {
    return this.request<IVersionResponse>('GET', ['agents', agent, 'history', sha]);
  }

  /** Read SOUL.md or USER.md (up to `bound` characters) and the whole file's sha256. */
  getPersona(agent: string, name: PersonaName, bound?: ViewBound): Promise<IPersonaResponse> {
    return this.request<IPersonaResponse>(
      'GET',
      ['agents', agent, name],
      undefined,
      boundParams(bound)
    );
  }

  /** Save SOUL.md or USER.md only if it is still the version `expectedSha256`. */
  savePersona(
    agent: string,
    name: PersonaName,
    content: string,
    expectedSha256: string
  ): Promise<IPersonaSavedResponse> {
    return this.request<IPersonaSavedResponse>('PUT', ['agents', agent, name], {
      content,
      expected_sha256: expectedSha256
    });
  }

  /** Receipts of recorded session starts, newest first. */
  listSessions(agent: string): Promise<ISessionsResponse> {
    return this.request<ISessionsResponse>('GET', ['agents', agent, 'sessions']);
  }

  /**
   * One recorded session: its receipt and the exact prompt it started with (up to `bound`
   * characters).
   */
  getSession(agent: string, sid: string, bound?: ViewBound): Promise<ISessionResponse> {
    return this.request<ISessionResponse>(
      'GET',
      ['agents', agent, 'sessions', sid],
      undefined,
      boundParams(bound)
    );
  }

  /** A unified diff from one recorded session's prompt to another's. */
  diffSessions(agent: string, sid: string, other: string): Promise<ISessionDiffResponse> {
    return this.request<ISessionDiffResponse>('GET', [
      'agents',
      agent,
      'sessions',
      sid,
      'diff',
      other
    ]);
  }

  /** Where each line of a recorded prompt holding `text` came from. */
  why(agent: string, sid: string, text: string): Promise<ISessionWhyResponse> {
    return this.request<ISessionWhyResponse>(
      'GET',
      ['agents', agent, 'sessions', sid, 'why'],
      undefined,
      new URLSearchParams({ text })
    );
  }

  private async request<T>(
    method: string,
    parts: string[],
    body?: unknown,
    params?: URLSearchParams
  ): Promise<T> {
    // Each part is encoded, so an id can never add path segments.
    const path = parts.map(encodeURIComponent);
    let url = URLExt.join(this.settings.baseUrl, 'agent-memory', 'api', ...path);
    const search = params?.toString();
    if (search) {
      url += `?${search}`;
    }
    const init: RequestInit = { method };
    if (body !== undefined) {
      init.body = JSON.stringify(body);
      init.headers = { 'Content-Type': 'application/json' };
    }
    // makeRequest itself rejects with a NetworkError when the server is unreachable.
    const response = await ServerConnection.makeRequest(url, init, this.settings);
    const text = await response.text();
    let data: Record<string, unknown> = {};
    if (text) {
      try {
        data = JSON.parse(text);
      } catch {
        data = { message: text };
      }
    }
    if (!response.ok) {
      const message =
        typeof data.message === 'string'
          ? data.message
          : `${response.status} ${response.statusText}`;
      if (response.status === 409 && typeof data.expected === 'string') {
        throw new ConflictError(message, data.expected, String(data.actual ?? ''), data);
      }
      throw new ApiError(response.status, message, data);
    }
    return data as unknown as T;
  }
}
