"""One client per upstream wire protocol, each of the same shape."""
