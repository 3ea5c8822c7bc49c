"""Built-in simulated upstreams: one ASGI app per wire protocol, mounted at `/<protocol>`.

Adding a simulator is adding its module and one line here.
"""

SIMULATORS: dict[str, str] = {
    # protocol: "module:attribute" of its ASGI app
}
