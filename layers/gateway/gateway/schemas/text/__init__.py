"""Request models of the text routes, carrying every rule of the spec for them: one module per
dialect (`chat`, `messages`, `responses`, `content`, and `embeddings`), on the pieces they share
(`shapes`).

Unknown fields are kept (`extra="allow"`): the gateway relays a request to an upstream that may
know newer fields than we do, and it must not drop them on the way.

Numbers and booleans are strict: `"stream": "true"` or `"max_tokens": 1.5` is an error, as it is
for the upstreams, instead of being silently coerced.

Error messages come out of `gateway.validation.describe` as "<field path>: <rule>". Fields that
may take several shapes (a string or a list of parts) are validated by `shapes.by_shape`, which
picks the one shape that fits so the error names the real field instead of every union member.
"""
