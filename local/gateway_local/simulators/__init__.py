"""Built-in simulated upstreams: one ASGI app per wire protocol, mounted at `/<protocol>`.

Adding a simulator is adding its module and one line here.
"""

SIMULATORS: dict[str, str] = {
    # protocol: "module:attribute" of its ASGI app
    "chat": "gateway_local.simulators.images:app",
    "delta": "gateway_local.simulators.delta:app",
    "zeta": "gateway_local.simulators.zeta:app",
    "epsilon": "gateway_local.simulators.epsilon:app",
}
