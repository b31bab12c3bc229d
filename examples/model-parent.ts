// A parent agent on a real model: it plans, hands a subtask to a child on the same model with its
// delegate_task tool, waits for the child's report and answers. Any OpenAI-compatible server works.
// Run it after `npm ci`:
//   SUBRUN_BASE_URL=https://api.openai.com/v1 SUBRUN_MODEL=gpt-4o-mini SUBRUN_API_KEY=sk-... npx tsx examples/model-parent.ts
//   SUBRUN_BASE_URL=http://127.0.0.1:8080/v1 SUBRUN_MODEL=local npx tsx examples/model-parent.ts   # llama.cpp, vLLM, Ollama
import { createRuntime, openaiRunner, workspaceTools } from 'subrun';

const base_url = process.env.SUBRUN_BASE_URL;
const model = process.env.SUBRUN_MODEL;
if (!base_url || !model) {
  console.error('set SUBRUN_BASE_URL and SUBRUN_MODEL (and SUBRUN_API_KEY if the server needs one)');
  process.exit(2);
}
const endpoint = { base_url, model, ...(process.env.SUBRUN_API_KEY ? { api_key: process.env.SUBRUN_API_KEY } : {}) };

// Depth 2: the parent (depth 0) may spawn children; they read this folder, and nothing outside it.
const runtime = createRuntime({ max_spawn_depth: 2, max_concurrent_children: 2 });
const agent = openaiRunner({ endpoint, tools: workspaceTools(new URL('.', import.meta.url).pathname), max_iterations: 8 });

runtime.events.subscribe('subagent.**', (e) => {
  if (e.type === 'subagent.spawn_requested' && e.depth > 0) console.log(`child spawned: ${e.goal}`);
  if (e.type === 'subagent.complete' && e.depth > 0) console.log(`child ${e.entry.status}: ${e.entry.summary}`);
});

const { results } = runtime.delegate([
  {
    goal: 'Find out which example programs are in this folder. Delegate the listing to one subagent with delegate_task, then answer in one sentence.',
    runner: agent,
  },
]);
const [entry] = await results;
console.log(`parent ${entry?.status} after ${entry?.api_calls} model calls: ${entry?.summary}`);
