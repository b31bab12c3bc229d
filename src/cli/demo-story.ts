// The demo's story as data: its children's scripted tasks and its steers, and how its entries are
// read off the bus; shared by the terminal demo (demo.ts) and the dashboard's (demo-ui.ts).
import { completionEntrySchema } from '../contract/entities.ts';
import type { CompletionEntry, TaskSpec } from '../types.ts';

/** The `entry` of a bus `subagent.complete` is a completion entry (checked; the same object). */
export function isCompletionEntry(value: unknown): value is CompletionEntry {
  return completionEntrySchema.safeParse(value).success;
}

/**
 * The story's three children (the third spawns a grandchild), as scripted tasks: the same for the
 * terminal demo and the dashboard's (`--ui`). `ms` scales every pause.
 */
export function storyTasks(ms: (n: number) => number): TaskSpec[] {
  return [
    {
      goal: 'research: read the spec and take guidance',
      agent: {
        kind: 'scripted',
        steps: [
          { op: 'say', text: 'Reading the spec' },
          { op: 'tool', name: 'read_file', args: { path: 'docs/spec.md' }, result: '412 lines', ms: ms(600) },
          { op: 'say', text: 'Waiting for guidance' },
          { op: 'wait_steer', timeout_ms: ms(5000) },
          { op: 'tool', name: 'write_notes', args: { section: 5 }, ms: ms(500) },
          { op: 'finish', summary: 'Notes on section 5 written, as the host asked' },
        ],
      },
    },
    {
      goal: 'summarize: draft a summary',
      agent: {
        kind: 'scripted',
        steps: [
          { op: 'tool', name: 'summarize', args: { words: 200 }, ms: ms(500) },
          { op: 'say', text: 'Drafting the summary' },
          { op: 'sleep', ms: ms(1500) },
          { op: 'finish', summary: 'A 200-word summary' },
        ],
      },
    },
    {
      goal: 'crawl: index the site with a helper',
      agent: {
        kind: 'scripted',
        steps: [
          { op: 'tool', name: 'fetch_index', args: { url: 'https://example.test/' }, ms: ms(400) },
          {
            op: 'spawn',
            tasks: [
              {
                goal: 'crawl page 2',
                agent: { kind: 'scripted', steps: [{ op: 'tool', name: 'fetch_page', args: { page: 2 }, ms: ms(300) }, { op: 'hang' }] },
              },
            ],
          },
          { op: 'say', text: 'never reached: the subtree is interrupted' },
        ],
      },
    },
  ];
}

/** The story's steers, each sent when its child says the line (`text` events). */
export const STORY_STEERS = {
  research: { when: 'Waiting for guidance', text: 'Focus on section 5 (steering) and skip the appendix.' },
  summarize: { when: 'Drafting the summary', text: 'Keep it under 100 words.' },
} as const;
