"""Persistence: one repository per table (the accounts table: one per concept over `table`, their
shared base), boto3 behind a small interface."""
