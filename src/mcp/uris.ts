// The resources' addresses: the session, and each child's snapshot and transcript tail, under the
// session's id (so a URI names whose child it is; another session's is never readable here).
export const SESSION_URI = 'subrun://session';
export const CHILD_TEMPLATE = 'subrun://sessions/{session_id}/subagents/{subagent_id}';
export const TAIL_TEMPLATE = 'subrun://sessions/{session_id}/subagents/{subagent_id}/tail';

export const childUri = (session_id: string, subagent_id: string): string =>
  `subrun://sessions/${encodeURIComponent(session_id)}/subagents/${encodeURIComponent(subagent_id)}`;
export const tailUri = (session_id: string, subagent_id: string): string => `${childUri(session_id, subagent_id)}/tail`;

export type ParsedUri = { readonly kind: 'session' } | { readonly kind: 'child' | 'tail'; readonly session_id: string; readonly subagent_id: string };

const CHILD = /^subrun:\/\/sessions\/([^/]+)\/subagents\/([^/]+?)(\/tail)?$/;

/** What a URI names, or undefined for one that is none of ours. */
export function parseUri(uri: string): ParsedUri | undefined {
  if (uri === SESSION_URI) return { kind: 'session' };
  const m = CHILD.exec(uri);
  if (!m?.[1] || !m[2]) return undefined;
  try {
    return { kind: m[3] ? 'tail' : 'child', session_id: decodeURIComponent(m[1]), subagent_id: decodeURIComponent(m[2]) };
  } catch {
    return undefined;
  }
}
