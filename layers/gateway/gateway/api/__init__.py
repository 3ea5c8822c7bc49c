"""The route-level services: what each family of routes does, between the handler and the layer."""
