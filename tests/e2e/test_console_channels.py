"""Channels managed like data, as an operator does it: in the console in Chromium (Playwright, by
accessible names) against the local gateway (`python -m gateway_local`, what `make run` starts),
then requests through the channel with the openai SDK, without a restart.

The channels document has one channel (`main`, m-small, at the runner's chat simulator) and
prices for m-small and m-console: m-console is served by no channel until the operator adds one."""

from __future__ import annotations

import time

import openai
import pytest
from playwright.sync_api import expect

from tests.e2e.browser_support import DESKTOP, browser, chromium_missing, go_to, sign_in
from tests.e2e.conftest import DEMO_KEY, LocalGateway, free_port

pytestmark = [pytest.mark.e2e, pytest.mark.skipif(chromium_missing() is not None, reason=chromium_missing() or "")]

PASSWORD = "operator password"
KEY = "sk-console-upstream-key-abcd"


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    simulators = free_port()
    path = tmp_path_factory.mktemp("channels") / "channels.yaml"
    path.write_text(
        "channels:\n"
        f"  - {{name: main, protocol: chat, base_url: 'http://127.0.0.1:{simulators}/chat', api_key: sk-main,"
        " models: [m-small]}\n"
        "prices:\n  m-small: {input_per_million: 1, output_per_million: 2}\n"
        "  m-console: {input_per_million: 1, output_per_million: 2}\n")
    server = LocalGateway({"GATEWAY_CHANNELS_FILE": str(path), "GATEWAY_SIMULATOR_PORT": str(simulators)})
    try:
        server.admin("set-password", "--user", "1", "--password", PASSWORD)
        server.simulators = f"http://127.0.0.1:{simulators}"
        yield server
    finally:
        server.release()


def ask(site) -> str:
    with openai.OpenAI(api_key=DEMO_KEY, base_url=f"{site.url}/v1", max_retries=0, timeout=60) as sdk:
        answer = sdk.chat.completions.create(model="m-console", messages=[{"role": "user", "content": "hello"}])
    return answer.choices[0].message.content or ""


def eventually(check, what: str, seconds: float = 60):
    """`check()` until it holds: every serving process reads the channels again within its refresh."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            if check():
                return
        except openai.APIError:
            pass
        assert time.monotonic() < deadline, what
        time.sleep(0.5)


def refused(site, status: int) -> bool:
    try:
        ask(site)
    except openai.APIStatusError as exc:
        return exc.status_code == status
    return False


def test_an_operator_adds_tests_edits_disables_and_deletes_a_channel_that_serves_without_a_restart(site):
    with pytest.raises(openai.NotFoundError):
        ask(site)
    with browser() as chromium:
        page = chromium.new_context(viewport=DESKTOP).new_page()
        sign_in(page, site.url, "demo", PASSWORD)
        go_to(page, "Channels")
        table = page.get_by_role("table", name="Channels")
        main = table.get_by_role("row").filter(has_text="main")
        main.wait_for()
        # The document's channel is read-only: tested, disabled, enabled, never edited nor deleted here
        assert "from the channels document" in main.inner_text()
        assert main.get_by_role("button", name="Edit main").count() == 0
        assert main.get_by_role("button", name="Delete main").count() == 0

        page.get_by_text("New channel", exact=True).click()  # the form folds away under the list's note
        form = page.get_by_role("form", name="Add channel")
        form.get_by_label("Name", exact=True).fill("console-chat")
        form.get_by_label("Protocol").select_option("chat")
        form.get_by_label("Base URL").fill("ftp://127.0.0.1/chat")
        form.get_by_label("Upstream key", exact=True).fill(KEY)
        form.get_by_label("Models (comma separated; * for any)").fill("m-console")
        form.get_by_role("button", name="Add channel").click()
        # A bad field: the gateway's 400 appears next to it, and nothing was added
        error = form.get_by_role("alert")
        error.wait_for()
        assert "base_url" not in error.inner_text() and error.inner_text()[0].isupper()  # at its field, in words
        assert form.get_by_label("Base URL").get_attribute("aria-invalid") == "true"
        assert table.get_by_role("row").filter(has_text="console-chat").count() == 0

        form.get_by_label("Base URL").fill(f"{site.simulators}/chat")
        form.get_by_role("button", name="Add channel").click()
        page.get_by_role("status").filter(has_text="Added channel console-chat.").wait_for()
        row = table.get_by_role("row").filter(has_text="console-chat")
        row.wait_for()
        # The key is written once: the page shows its last four, never the key
        assert "…abcd" in row.inner_text() and KEY not in page.content()

        row.get_by_role("button", name="Test console-chat").click()
        tested = page.get_by_role("status").filter(has_text="Test of console-chat: ok in")
        tested.wait_for()
        assert "the model list answered" in tested.inner_text()
        expect(row.get_by_role("cell").nth(9)).to_contain_text("passed")  # Last test

        # A channel whose upstream does not answer: its failed test shows in its row, not "healthy" alone
        form.get_by_label("Name", exact=True).fill("console-gone")  # the form is still open
        form.get_by_label("Base URL").fill(f"http://127.0.0.1:{free_port()}/chat")
        form.get_by_label("Upstream key", exact=True).fill(KEY)
        form.get_by_label("Models (comma separated; * for any)").fill("m-gone")
        form.get_by_role("button", name="Add channel").click()
        page.get_by_role("status").filter(has_text="Added channel console-gone.").wait_for()
        gone = table.get_by_role("row").filter(has_text="console-gone")
        gone.get_by_role("button", name="Test console-gone").click()
        failed = page.get_by_role("alert").filter(has_text="Test of console-gone:")
        failed.wait_for()
        assert failed.inner_text().count("answered nothing") == 1, failed.inner_text()
        expect(gone.get_by_role("cell").nth(9)).to_contain_text("failed")
        expect(gone.get_by_role("cell").nth(8)).not_to_have_text("healthy")
        gone.get_by_role("button", name="Delete console-gone").click()
        gone.get_by_role("button", name="Confirm delete console-gone").click()
        gone.wait_for(state="detached")

        # Served through the new channel by the next requests, without a restart
        eventually(lambda: ask(site) != "", "m-console is not served through the added channel")

        row.get_by_role("button", name="Edit console-chat").click()
        edit = page.get_by_role("form", name="Edit channel console-chat")
        assert edit.get_by_label("Upstream key (now …abcd; empty keeps it)").input_value() == ""
        edit.get_by_label("Weight").fill("3")
        edit.get_by_role("button", name="Save channel").click()
        page.get_by_role("status").filter(has_text="Saved channel console-chat.").wait_for()
        expect(row.get_by_role("cell").nth(6)).to_have_text("3")  # the list read again
        eventually(lambda: ask(site) != "", "the edited channel does not serve")  # its key kept

        row.get_by_role("button", name="Disable console-chat").click()
        row.get_by_role("button", name="Enable console-chat").wait_for()
        assert "disabled" in row.inner_text()
        eventually(lambda: refused(site, 503), "the disabled channel still serves")
        row.get_by_role("button", name="Enable console-chat").click()
        row.get_by_role("button", name="Disable console-chat").wait_for()
        eventually(lambda: ask(site) != "", "the enabled channel does not serve")

        row.get_by_role("button", name="Delete console-chat").click()
        row.get_by_role("button", name="Confirm delete console-chat").click()
        page.get_by_role("status").filter(has_text="Deleted channel console-chat.").wait_for()
        row.wait_for(state="detached")  # the list read again without it
        eventually(lambda: refused(site, 404), "the deleted channel still serves")
