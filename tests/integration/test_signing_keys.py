"""The signing secrets from Secrets Manager: read at start, cached, rotated without a redeploy."""

import pytest

from gateway import signing_keys
from gateway.store.aws import client
from gateway.tasks import links
from tests.conftest import use_environment


@pytest.fixture
def link_secret(store):
    secretsmanager = client("secretsmanager")
    arn = secretsmanager.create_secret(Name="links-under-test", SecretString="first-value")["ARN"]
    saved = use_environment(GATEWAY_RESULT_LINK_SECRET=None, GATEWAY_RESULT_LINK_SECRET_ID=arn)
    signing_keys.forget()
    yield arn
    use_environment(**saved)
    signing_keys.forget()


def test_a_link_signed_before_a_rotation_still_verifies_and_new_links_use_the_new_value(link_secret):
    # Given a link signed with the secret as it is
    old = links.sign("https://gw.example", "/imgtask/image/1", now=1000)
    # When the secret rotates and the cache expires
    client("secretsmanager").put_secret_value(SecretId=link_secret, SecretString="second-value")
    signing_keys.forget()
    new = links.sign("https://gw.example", "/imgtask/image/1", now=1000)
    # Then new links differ, and both verify (AWSPREVIOUS is accepted)
    assert new != old
    for link in (old, new):
        query = dict(part.split("=") for part in link.split("?", 1)[1].split("&"))
        assert links.valid("/imgtask/image/1", query["expires"], query["signature"], now=1500)
    assert signing_keys.versions(signing_keys.RESULT_LINK) == ("second-value", "first-value")


def test_the_value_is_cached_between_reads(link_secret):
    assert signing_keys.current(signing_keys.RESULT_LINK) == "first-value"
    client("secretsmanager").put_secret_value(SecretId=link_secret, SecretString="second-value")
    assert signing_keys.current(signing_keys.RESULT_LINK) == "first-value"  # inside CACHE_SECONDS


def test_a_secret_that_cannot_be_read_fails_the_start_naming_it(store):
    saved = use_environment(GATEWAY_RESULT_LINK_SECRET=None, GATEWAY_RESULT_LINK_SECRET_ID="no-such-secret")
    signing_keys.forget()
    try:
        with pytest.raises(signing_keys.SecretUnavailable, match="no-such-secret.*ResourceNotFoundException"):
            signing_keys.load_at_start(signing_keys.RESULT_LINK)
    finally:
        use_environment(**saved)
        signing_keys.forget()
