"""The asynchronous task engine and each family's status mapping."""
