"""The gateway's shared layer: everything two functions need."""
