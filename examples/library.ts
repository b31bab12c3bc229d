// In-process delegation on the scripted runner: no server, no network, no keys.
// Run it after `npm ci`: npx tsx examples/library.ts
import { createRuntime, scripted } from 'subrun';

const runtime = createRuntime({ max_concurrent_children: 3 });

// Every event, typed by its `type`; here one line per tool call and per finished child.
runtime.events.subscribe('subagent.**', (e) => {
  if (e.type === 'subagent.tool') console.log(`  ${e.goal}: used ${e.tool_name}`);
  if (e.type === 'subagent.steer.delivered') console.log(`  ${e.goal}: took the steer "${e.text}"`);
});

const { subagent_ids, results } = runtime.delegate([
  // Takes a steer right after its tool step (a delivery point), then finishes.
  {
    goal: 'read the spec',
    runner: scripted([
      { op: 'tool', name: 'read_file', ms: 50 },
      { op: 'finish', summary: 'read it' },
    ]),
  },
  // Waits for a steer that never comes: the interrupt stops it.
  { goal: 'draft a summary', runner: scripted([{ op: 'wait_steer' }, { op: 'finish', summary: 'never' }]) },
]);
const [reader = '', drafter = ''] = subagent_ids;

console.log('steer:', runtime.steer(reader, 'focus on section 5').status); // queued: accepted, not yet delivered
console.log('interrupt:', runtime.interrupt(drafter).interrupted.length, 'child');

for (const entry of await results) {
  console.log(`${entry.subagent_id === reader ? 'reader ' : 'drafter'} ${entry.status.padEnd(11)} ${JSON.stringify(entry.summary)}`);
}
// A steer to a finished child is refused, and says why.
const late = runtime.steer(reader, 'too late');
console.log('late steer:', late.status === 'rejected' ? late.reason : late.status);
