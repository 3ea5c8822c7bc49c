"""Request models: every rule of the spec, one module per family."""
