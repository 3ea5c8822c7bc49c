"""Built-in simulated upstreams: one ASGI app per wire protocol, mounted at `/<protocol>`.

Adding a simulator is adding its module and one line here.
"""

SIMULATORS: dict[str, str] = {
    # protocol: "module:attribute" of its ASGI app
    "chat": "gateway_local.simulators.chat:app",  # text, embeddings, models and images
    "messages": "gateway_local.simulators.messages:app",
    "content": "gateway_local.simulators.content:app",
    # Azure OpenAI: deployment routes, the v1 Responses route, Entra ID's token endpoint
    "azure": "gateway_local.simulators.azure:app",
    "bedrock": "gateway_local.simulators.bedrock:app",  # Converse, ConverseStream, InvokeModel; SigV4 checked
    "delta": "gateway_local.simulators.delta:app",
    "zeta": "gateway_local.simulators.zeta:app",
    "epsilon": "gateway_local.simulators.epsilon:app",
    "gamma": "gateway_local.simulators.gamma:app",
    "beta": "gateway_local.simulators.beta:app",
    "imgtask": "gateway_local.simulators.imgtask:app",
    "alpha": "gateway_local.simulators.alpha:app",
    "cohere": "gateway_local.simulators.cohere:app",  # rerank, Cohere v2
    "jina": "gateway_local.simulators.jina:app",  # rerank: Jina, Voyage and TEI shapes
    "stripe": "gateway_local.simulators.stripe:app",  # payments: Checkout Sessions and signed webhooks
    # Vertex AI: Google's OAuth token endpoint and the content and delta methods under a project
    "vertex": "gateway_local.simulators.vertex:app",
}
