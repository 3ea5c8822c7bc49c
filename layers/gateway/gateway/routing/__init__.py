"""Routing: the channels document, channel selection and health, and the pooled outbound client."""
