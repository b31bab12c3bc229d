// Baseline for case 3: vscode-jsonrpc (the library behind the Language Server Protocol) over
// stdio, answering the same request with the same result object (parsed once from BENCH_RESULT;
// the library serialises it per reply, as any handler returning an object would). Its framing is
// LSP's Content-Length headers; the bench drives it with a lean client that speaks that framing
// (bench/lib/rpc.ts lspClient). Run as its own process.
import { createMessageConnection, StreamMessageReader, StreamMessageWriter } from 'vscode-jsonrpc/node';

const result: unknown = JSON.parse(process.env.BENCH_RESULT ?? 'null');
const connection = createMessageConnection(new StreamMessageReader(process.stdin), new StreamMessageWriter(process.stdout));
connection.onRequest('subagent.list', () => result);
connection.onClose(() => process.exit(0));
connection.listen();
