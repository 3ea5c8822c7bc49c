"""Admission and metering: holds, settlement, refunds, and the rules that decide whether a request may spend."""
