"""Persistence: one repository per table, boto3 behind a small interface."""
