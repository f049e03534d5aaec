import { AgentMemoryClient, ApiError, ConflictError } from '../src/api';

interface ICall {
  url: string;
  method: string;
  body: unknown;
}

/** A client whose server answers `status` and `body` to every request, recording each. */
function clientAnswering(
  status: number,
  body: string
): { client: AgentMemoryClient; calls: ICall[] } {
  const calls: ICall[] = [];
  const settings = {
    baseUrl: 'http://lab.test/base/',
    fetch: async (url: string, init: RequestInit) => {
      calls.push({
        url,
        method: init.method ?? 'GET',
        body: init.body === undefined ? undefined : JSON.parse(init.body as string)
      });
      return new Response(body, { status, statusText: status === 200 ? 'OK' : 'Error' });
    }
  };
  return { client: new AgentMemoryClient(settings as never), calls };
}

describe('AgentMemoryClient', () => {
  it('asks for FACT.md rendered by the server, with the id encoded as one segment', async () => {
    const reply = {
      agent: 'a/b',
      path: '/x',
      content: 'c',
      sha256: 's',
      chars: 1,
      truncated: false,
      html: '<p>c</p>'
    };
    const { client, calls } = clientAnswering(200, JSON.stringify(reply));
    const facts = await client.getFacts('a/b', 5, true);
    expect(facts.html).toBe('<p>c</p>');
    expect(calls).toEqual([
      {
        url: 'http://lab.test/base/agent-memory/api/agents/a%2Fb/facts?max_chars=5&render=html',
        method: 'GET',
        body: undefined
      }
    ]);
  });

  it('sends no render parameter unless asked', async () => {
    const { client, calls } = clientAnswering(200, '{}');
    await client.getFacts('default');
    expect(calls[0].url).toBe('http://lab.test/base/agent-memory/api/agents/default/facts');
  });

  it('hands a kernel id over, never a path', async () => {
    const reply = {
      agent: '~0123456789abcdef',
      path: '/tmp/t',
      how: 'handed-over',
      agent_id: null
    };
    const { client, calls } = clientAnswering(200, JSON.stringify(reply));
    expect(await client.handover('k-1')).toEqual(reply);
    expect(calls).toEqual([
      {
        url: 'http://lab.test/base/agent-memory/api/handover',
        method: 'POST',
        body: { kernel_id: 'k-1' }
      }
    ]);
  });

  it('turns a 409 with both hashes into a ConflictError', async () => {
    const body = { message: 'FACT.md changed', expected: 'a'.repeat(64), actual: 'b'.repeat(64) };
    const { client } = clientAnswering(409, JSON.stringify(body));
    const error = await client.saveFacts('default', 'x', 'a'.repeat(64)).catch(e => e);
    expect(error).toBeInstanceOf(ConflictError);
    expect([error.status, error.message, error.expected, error.actual]).toEqual([
      409,
      'FACT.md changed',
      'a'.repeat(64),
      'b'.repeat(64)
    ]);
  });

  it("keeps the server's message, or its text when the body is not JSON", async () => {
    const json = await clientAnswering(400, '{"message": "Invalid agent id"}')
      .client.listAgents()
      .catch(e => e);
    expect(json).toBeInstanceOf(ApiError);
    expect([json.status, json.message]).toEqual([400, 'Invalid agent id']);
    const text = await clientAnswering(502, 'Bad gateway')
      .client.listAgents()
      .catch(e => e);
    expect([text.status, text.message]).toEqual([502, 'Bad gateway']);
    const empty = await clientAnswering(500, '')
      .client.listAgents()
      .catch(e => e);
    expect(empty.message).toBe('500 Error');
  });
});
