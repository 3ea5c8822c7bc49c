import time

import pytest

from gateway.auth import authenticate
from gateway.errors import AuthenticationFailed


@pytest.mark.parametrize("place", ["bearer", "x-api-key", "x-goog-api-key", "query"])
def test_a_key_is_accepted_in_each_sdks_own_place(demo, place):
    key = demo["key"]
    headers, query = {
        "bearer": ({"Authorization": f"Bearer {key}"}, None), "x-api-key": ({"x-api-key": key}, None),
        "x-goog-api-key": ({"X-Goog-Api-Key": key}, None), "query": ({}, {"key": key}),
    }[place]
    assert authenticate(headers, query).user_id == 1


def test_missing_unknown_revoked_and_expired_keys_are_refused(demo, accounts):
    with pytest.raises(AuthenticationFailed, match="no API key"):
        authenticate({})
    with pytest.raises(AuthenticationFailed, match="not valid"):
        authenticate({"Authorization": "Bearer sk-" + "x" * 48})
    expired, _ = accounts.create_key(1, name="old", expires_at=int(time.time()) - 1)
    with pytest.raises(AuthenticationFailed, match="expired"):
        authenticate({"Authorization": f"Bearer {expired}"})
    revoked, record = accounts.create_key(1, name="gone")
    accounts.revoke_key(record["key_id"])
    with pytest.raises(AuthenticationFailed, match="revoked"):
        authenticate({"Authorization": f"Bearer {revoked}"})


def test_keys_are_stored_only_as_hashes(demo, accounts):
    key, record = accounts.create_key(1, name="secret")
    assert key not in repr(record) and key not in repr(accounts.list_keys(1))
    assert key.startswith("sk-") and len(key) >= 35
