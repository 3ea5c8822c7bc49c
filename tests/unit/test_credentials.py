"""One rule for credentials on every route: two different ones in one request are a 401."""

import pytest

from gateway.auth import first_values, single_credential
from gateway.errors import AuthenticationFailed

A, B = "sk-" + "a" * 48, "sk-" + "b" * 48


@pytest.mark.parametrize("headers,query", [
    ([("Authorization", f"Bearer {A}"), ("Authorization", f"Bearer {B}")], []),
    ([("authorization", f"Bearer {A}"), ("x-api-key", B)], []),
    ([("x-goog-api-key", A)], [B]),
    ([], [A, B]),
])
def test_two_different_credentials_are_refused(headers, query):
    with pytest.raises(AuthenticationFailed) as refused:
        single_credential(headers, query)
    assert refused.value.status == 401 and refused.value.code == "conflicting_credentials"


@pytest.mark.parametrize("headers,query", [
    ([("Authorization", f"Bearer {A}"), ("x-api-key", A)], [A]), ([("Authorization", f"bearer  {A} ")], []),
    ([("Content-Type", "application/json")], []), ([("X-Api-User", "1"), ("Authorization", "access-token")], []),
])
def test_one_credential_in_one_or_several_places_passes(headers, query):
    single_credential(headers, query)


def test_headers_become_a_dict_of_first_values_in_one_pass():
    # One pass: an iterator, which can be read only once, gives the whole answer (linear time is
    # the consequence; the timing of 20,000 headers is bench/abuse.py's)
    pairs = iter([(f"X-H{i % 10}", str(i)) for i in range(200_000)])
    found = first_values(pairs)
    assert found["x-h3"] == "3" and len(found) == 10 and next(pairs, None) is None
