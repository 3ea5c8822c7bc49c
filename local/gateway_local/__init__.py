"""Dev-only: the local runner, the AWS emulator wiring and the simulated upstreams."""
