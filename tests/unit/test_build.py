"""What `make build` ships: locked dependencies (every pin with its hashes) and bytecode."""

import re

import pytest

from tests.conftest import ROOT

LOCKS = ["layers/gateway/requirements.txt", "functions/text/requirements.txt", "functions/images/requirements.txt",
         "requirements-dev.txt"]


@pytest.mark.parametrize("lock", LOCKS)
def test_every_dependency_is_pinned_with_its_hashes(lock):
    text = (ROOT / lock).read_text()
    pin = r"^([A-Za-z0-9_.\-\[\]]+)(==[^ \\\n]+)?((?:\s*\\\n\s+--hash=sha256:[0-9a-f]{64})*)"
    entries = re.findall(pin, text, re.M)
    assert entries, lock
    for name, version, hashes in entries:
        assert version and hashes, f"{lock}: {name} is not pinned with its hashes"


def test_the_build_installs_the_locks_and_compiles_everything_to_bytecode():
    makefile = (ROOT / "Makefile").read_text()
    build = makefile.split("\nbuild:", 1)[1].split("\n\n", 1)[0]
    # /opt and /var/task are read-only on Lambda: a module without its .pyc is compiled at every cold start
    assert "compileall" in build and "--invalidation-mode unchecked-hash .aws-sam/build" in build
    # SAM's python builder installs each CodeUri's requirements.txt: the hashed locks themselves
    assert (ROOT / "layers/gateway/requirements.in").exists() and (ROOT / "functions/text/requirements.in").exists()
    # the streaming functions (run.sh) ship the same starlette and uvicorn, locked the same
    for streaming in ("text", "images"):
        assert (ROOT / "functions" / streaming / "run.sh").exists()
        assert (ROOT / "functions" / streaming / "requirements.in").read_text() == \
            (ROOT / "functions/text/requirements.in").read_text()
        assert f"functions/{streaming}/requirements.in -o functions/{streaming}/requirements.txt" in makefile
    installed = makefile.split("$(BIN)/.installed:", 1)[1].split("\n\n", 1)[0]
    assert "--require-hashes -r requirements-dev.txt" in installed and "--no-deps -e ." in installed
