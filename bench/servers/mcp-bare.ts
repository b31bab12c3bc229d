// Floor for the MCP case: the official SDK's McpServer over stdio with subrun's own
// `steer_subagent` input and output schemas (src/mcp/schemas.ts), answering a fixed queued result
// at once: no runtime, no translation. What a steer through `serve --mcp` costs beyond this is
// subrun's; what this costs beyond a JSON-RPC steer is the SDK's. Run as its own process.
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { success } from '../../src/mcp/results.ts';
import { outputSchemas, toolInputs } from '../../src/mcp/schemas.ts';

const mcp = new McpServer({ name: 'mcp-bare', version: '1' });
mcp.registerTool('steer_subagent', { description: 'floor', inputSchema: toolInputs.steer_subagent, outputSchema: outputSchemas.steer_subagent }, (args) =>
  Promise.resolve(success({ status: 'queued', subagent_id: args.subagent_id, text: args.text, steer_id: 'st_0123456789ab' })),
);
await mcp.connect(new StdioServerTransport());
