import { AgentMemoryClient, ApiError, IHandoverResponse } from '../src/api';
import { AgentMemoryModel, IAgentListing, IStatus } from '../src/model';

/** The part of the REST client the model uses, over an in-memory set of agents. */
class FakeClient {
  agents = ['default', 'tutor'];
  existing = new Set(['default', 'tutor']);
  created: string[] = [];
  handedOver: IHandoverResponse | Error = new Error('no kernel');

  async listAgents() {
    return { root: '/agents', default_agent: 'default', agents: [...this.agents], templates: [] };
  }

  async createAgent(id: string) {
    this.created.push(id);
    this.agents.push(id);
    this.existing.add(id);
    return { id, path: `/agents/${id}`, created: true, template: null };
  }

  async getFacts(agent: string) {
    if (agent === 'bad/id') {
      throw new ApiError(400, 'Invalid agent id "bad/id": it cannot contain "/" or "\\"');
    }
    if (!this.existing.has(agent)) {
      throw new ApiError(404, `Agent "${agent}" does not exist`);
    }
    return {
      agent,
      path: `/x/${agent}/memory/FACT.md`,
      content: '',
      sha256: 's',
      chars: 0,
      truncated: false
    };
  }

  async handover() {
    if (this.handedOver instanceof Error) {
      throw this.handedOver;
    }
    return this.handedOver;
  }
}

function modelOver(client: FakeClient) {
  const model = new AgentMemoryModel({ client: client as unknown as AgentMemoryClient });
  const listings: IAgentListing[] = [];
  const statuses: IStatus[] = [];
  model.agentsListed.connect((_, listing) => listings.push(listing));
  model.statusChanged.connect((_, status) => statuses.push(status));
  return { model, listings, statuses };
}

describe('AgentMemoryModel', () => {
  it('starts on the default agent, creating it as every surface does', async () => {
    const client = new FakeClient();
    client.agents = [];
    client.existing.clear();
    const { model, listings } = modelOver(client);
    await model.refresh();
    expect(model.agent).toBe('default');
    expect(client.created).toEqual(['default']);
    expect(listings).toEqual([{ agents: ['default'], extras: [], agent: 'default' }]);
  });

  it("follows a notebook's agent handed over from outside both roots", async () => {
    const client = new FakeClient();
    const handle = '~0123456789abcdef';
    client.existing.add(handle);
    client.handedOver = {
      agent: handle,
      path: '/tmp/tutorial/demo-agent',
      how: 'handed-over',
      agent_id: null
    };
    const { model, listings, statuses } = modelOver(client);
    expect(await model.followKernel('k-1')).toBe(true);
    expect(model.agent).toBe(handle);
    expect(listings[listings.length - 1]).toEqual({
      agents: ['default', 'tutor'],
      extras: [{ id: handle, label: "/tmp/tutorial/demo-agent (notebook's agent)" }],
      agent: handle
    });
    expect(statuses[statuses.length - 1]).toEqual({
      text: "Showing the notebook's agent (/tmp/tutorial/demo-agent).",
      isError: false
    });
    expect(client.created).toEqual([]);
  });

  it('says nothing and changes nothing when a quiet follow finds no agent', async () => {
    const client = new FakeClient();
    const { model, statuses } = modelOver(client);
    await model.refresh();
    client.handedOver = new ApiError(409, 'The notebook has not loaded the extension');
    statuses.length = 0;
    expect(await model.followKernel('k-1', true)).toBe(false);
    expect(model.agent).toBe('default');
    expect(statuses).toEqual([]);
    expect(await model.followKernel('k-1')).toBe(false);
    expect(statuses).toEqual([
      {
        text: "Could not show the notebook's agent: The notebook has not loaded the extension",
        isError: true
      }
    ]);
  });

  it('never switches agents in the middle of an edit', async () => {
    const client = new FakeClient();
    client.handedOver = {
      agent: 'tutor',
      path: '/agents/tutor',
      how: 'agents-root',
      agent_id: 'tutor'
    };
    const { model, statuses } = modelOver(client);
    await model.refresh();
    model.setEditing({}, true);
    expect(await model.followKernel('k-1')).toBe(false);
    expect(model.agent).toBe('default');
    expect(statuses[statuses.length - 1]).toEqual({
      text: 'Save or cancel the edit first.',
      isError: true
    });
  });

  it('goes back to the default agent when a handed-over folder is gone', async () => {
    const client = new FakeClient();
    const handle = '~fedcba9876543210';
    client.existing.add(handle);
    client.handedOver = { agent: handle, path: '/tmp/gone', how: 'handed-over', agent_id: null };
    const { model, listings, statuses } = modelOver(client);
    await model.followKernel('k-1');
    client.existing.delete(handle);
    await model.refresh();
    expect(model.agent).toBe('default');
    expect(listings[listings.length - 1].extras).toEqual([]);
    expect(statuses[statuses.length - 1].text).toBe(
      'The folder "/tmp/gone" is gone (deleted or moved); nothing was recreated. Showing the default agent.'
    );
  });

  it('checks a new id with the server before anything is created', async () => {
    const { model } = modelOver(new FakeClient());
    expect(await model.checkAgentId('tutor')).toEqual({ kind: 'exists' });
    expect(await model.checkAgentId('fresh')).toEqual({ kind: 'new' });
    expect(await model.checkAgentId('bad/id')).toEqual({
      kind: 'invalid',
      message: 'Invalid agent id "bad/id": it cannot contain "/" or "\\"'
    });
  });
});
