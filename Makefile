# Every habit of the project has a name here. `make run` and `make test` create the
# virtual environment on first use, so a fresh machine needs nothing else.
# Python 3.13 (the Lambda runtime) when there is one that runs: on PATH, or installed by pyenv
# but not selected (its shim then fails); else any python3.
PYTHON ?= $(shell for p in python3.13 $$HOME/.pyenv/versions/3.13*/bin/python3.13 python3; do \
	"$$p" -c 'import sys' >/dev/null 2>&1 && { command -v "$$p"; break; }; done)
VENV := .venv
BIN := $(VENV)/bin
SAM_VENV := .venv-sam
CHECKOV_VENV := .venv-checkov
PEERS_VENV := .venv-peers
# The peer of `make bench-peers`, pinned (never 1.107.0, a compromised release).
LITELLM_VERSION := 1.102.4
PIP_QUIET := --quiet --disable-pip-version-check
# SAM CLI sends usage telemetry unless told not to.
SAM := SAM_CLI_TELEMETRY=0 $(SAM_VENV)/bin/sam

.PHONY: run test unit integration e2e mutate bench bench-cold bench-abuse bench-faults bench-peers bench-scale bench-signin \
	validate checkov build deploy admin invoke clean openapi lint typecheck console screenshots lock

# Exactly the locked versions, each checked against its hash (requirements-dev.txt, from `make lock`).
$(BIN)/.installed: pyproject.toml requirements-dev.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install $(PIP_QUIET) --upgrade pip
	$(BIN)/pip install $(PIP_QUIET) --require-hashes -r requirements-dev.txt
	$(BIN)/pip install $(PIP_QUIET) --no-deps -e .
	touch $@

# The benchmarks' own dependencies (matplotlib for the plot): never in the Lambda layer.
$(BIN)/.bench-installed: $(BIN)/.installed
	$(BIN)/pip install $(PIP_QUIET) -e '.[dev,bench]'
	touch $@

# The mutation tool of `make mutate` (cosmic-ray, pinned in the `mutate` extra): never in CI.
$(BIN)/.mutate-installed: $(BIN)/.installed
	$(BIN)/pip install $(PIP_QUIET) -e '.[dev,mutate]'
	touch $@

$(PEERS_VENV)/bin/litellm:
	$(PYTHON) -m venv $(PEERS_VENV)
	$(PEERS_VENV)/bin/pip install $(PIP_QUIET) 'litellm[proxy]==$(LITELLM_VERSION)'

$(SAM_VENV)/bin/sam:
	$(PYTHON) -m venv $(SAM_VENV)
	$(SAM_VENV)/bin/pip install $(PIP_QUIET) aws-sam-cli

$(CHECKOV_VENV)/bin/checkov:
	$(PYTHON) -m venv $(CHECKOV_VENV)
	$(CHECKOV_VENV)/bin/pip install $(PIP_QUIET) checkov

venv: $(BIN)/.installed

## The whole gateway on http://127.0.0.1:$${PORT:-3000}, with the AWS emulator and simulated upstreams.
## Its data is kept in .local/state across restarts; `make run FRESH=1` starts empty.
run: $(BIN)/.installed
	$(if $(FRESH),GATEWAY_LOCAL_FRESH=$(FRESH)) $(BIN)/python -m gateway_local

## The whole test suite (unit, integration against the emulator, end-to-end over HTTP).
test: $(BIN)/.installed
	$(BIN)/python -m pytest

unit: $(BIN)/.installed
	$(BIN)/python -m pytest tests/unit

integration: $(BIN)/.installed
	$(BIN)/python -m pytest tests/integration

e2e: $(BIN)/.installed
	$(BIN)/python -m pytest tests/e2e

## Mutation testing of the money and state modules (tools/mutate.py): a seeded sample of each
## module's mutants against the tests that cover it; ends with `mutation: killed=<n> survived=<n>
## timeout=<n>`. Not in CI (too slow): run it before a change to those modules lands.
mutate: $(BIN)/.mutate-installed
	$(BIN)/python tools/mutate.py

## ruff (pyflakes, pycodestyle, import order, bugbear, pyupgrade, complexity), then import-linter: the
## layers of the layer and of the local runner, and the siblings that must not know each other
## ([tool.importlinter] in pyproject.toml; an import inside a function counts, one under
## `if TYPE_CHECKING:` does not).
lint: $(BIN)/.installed
	$(BIN)/ruff check .
	PYTHONPATH=layers/gateway:local $(BIN)/lint-imports

## mypy with the pydantic plugin over the layer, the local runner and each function (settings in pyproject.toml).
typecheck: $(BIN)/.installed
	$(BIN)/mypy layers/gateway/gateway local/gateway_local functions/*/app.py

## docs/openapi.json from the code (template.yaml routes, request models, error envelopes);
## a test fails while the committed copy is stale.
openapi: $(BIN)/.installed
	PYTHONPATH=layers/gateway:local $(BIN)/python -m gateway_local.openapi

## The console and the docs page (console/: Vite, Preact, uPlot, swagger-ui-dist) built into
## functions/console/static, which is committed: `make run`, `make build` and CI need no node.
## Run this after changing console/ (node 20 and npm; `npm ci` installs the locked versions).
console:
	cd console && npm ci --no-audit --no-fund && npm run build

## PNGs of each console page and of /docs at 375 and 1280 px into docs/screenshots/ (Playwright
## driving Debian's chromium: apt-get install -y chromium).
screenshots: $(BIN)/.installed
	$(BIN)/python -m tests.e2e.screenshots

## Benchmarks print figures; they are not tests. The first one goes through `make run` and
## writes bench/results.md and bench/results.png.
bench: $(BIN)/.bench-installed
	$(BIN)/python bench/embedded.py
	$(BIN)/python bench/cold_start.py
	$(BIN)/python bench/relay.py
	$(BIN)/python bench/tasks.py

## One account past 1000 requests a second: the admission path (today's and the leases) against the
## emulator with its model of DynamoDB's limits on; writes its section of bench/results.md.
bench-scale: $(BIN)/.bench-installed
	$(BIN)/python bench/scale.py

## Wrong sign-ins for a known and an unknown username through `make run`, their timings side by side.
bench-signin: $(BIN)/.installed
	$(BIN)/python bench/signin.py

## Another user's latency while the runner is abused (header flood, slowloris, one key's streams); ends
## `bench-abuse: idle_p50_ms=... header_flood_x=... slowloris_x=... stream_flood_x=...`.
bench-abuse: $(BIN)/.installed
	$(BIN)/python bench/abuse.py

## A few thousand requests of every family through `make run` while the emulator throttles, fails and
## loses answers of DynamoDB calls and delivers SQS messages twice (GATEWAY_LOCAL_FAULTS); ends with
## `bench-faults: requests=<n> server_errors=<n> lost_units=<n> double_charges=<n> stuck_tasks=<n>`.
bench-faults: $(BIN)/.installed
	$(BIN)/python bench/faults.py

## The same load through `make run` and through LiteLLM's proxy (in .venv-peers), side by side.
bench-peers: $(BIN)/.bench-installed $(PEERS_VENV)/bin/litellm
	$(BIN)/python bench/peers.py --litellm $(PEERS_VENV)/bin/litellm

## sam validate --lint, with SAM CLI in its own virtual environment.
validate: $(SAM_VENV)/bin/sam
	$(SAM) validate --lint

## checkov over template.yaml, in its own virtual environment; skipped checks and their reasons: .checkov.yaml.
checkov: $(CHECKOV_VENV)/bin/checkov
	$(CHECKOV_VENV)/bin/checkov --config-file .checkov.yaml

## sam build (the layer and the streaming functions install their hashed lock files, requirements.txt),
## then every module of the build compiled to bytecode: Lambda's /opt and /var/task are read-only,
## so a module without its .pyc is compiled again at every cold start. unchecked-hash: the .pyc is
## used without comparing the source's time stamp (a zip does not keep it exactly).
build: $(SAM_VENV)/bin/sam
	PATH="$(dir $(PYTHON)):$$PATH" $(SAM) build
	$(PYTHON) -m compileall -q -j 0 --invalidation-mode unchecked-hash .aws-sam/build

## The lock files the build and CI install from: exact versions with the hashes of every file of
## each (layers/gateway, functions/text and functions/images: for Lambda's arm64 Python 3.13; requirements-dev.txt:
## the development and CI machine's x86_64), resolved by uv from requirements.in and pyproject.toml.
## Run it after changing a dependency; a version already locked stays unless it no longer fits.
UV_COMPILE = $(BIN)/uv pip compile --quiet --generate-hashes --python-version 3.13 --annotation-style line \
	--custom-compile-command "make lock"
lock: $(BIN)/.installed
	$(BIN)/pip install $(PIP_QUIET) uv
	$(UV_COMPILE) --python-platform aarch64-manylinux_2_28 layers/gateway/requirements.in -o layers/gateway/requirements.txt
	$(UV_COMPILE) --python-platform aarch64-manylinux_2_28 functions/text/requirements.in -o functions/text/requirements.txt
	$(UV_COMPILE) --python-platform aarch64-manylinux_2_28 functions/images/requirements.in -o functions/images/requirements.txt
	$(UV_COMPILE) --python-platform x86_64-manylinux_2_28 pyproject.toml --extra dev -o requirements-dev.txt

## Each function's cold start: a fresh interpreter importing the function as built (its locked
## dependencies and the layer, compiled to bytecode), median of several, and the layer's import
## profile; ends with `bench-cold: text_ms=<n> account_ms=<n> ...`.
bench-cold: $(BIN)/.installed
	$(BIN)/python bench/cold_start.py

deploy: build
	$(SAM) deploy

## The admin command line, e.g. make admin ARGS="create-user --username ann". Under `make run` it
## finds the running gateway by itself (.local/gateway.json); on AWS add --stack (and --profile, --region).
admin: $(BIN)/.installed
	$(BIN)/python -m gateway.admin $(ARGS)

## One function's handler run once on a sample event, in-process, against the running `make run`
## (its emulator, tables and simulators), printing the answer as `sam local invoke -e` does:
## make invoke FUNCTION=plants EVENT=events/plants.json
invoke: $(BIN)/.installed
	$(BIN)/python -m gateway_local.invoke "$(FUNCTION)" "$(EVENT)"

clean:
	rm -rf $(VENV) $(SAM_VENV) $(CHECKOV_VENV) $(PEERS_VENV) .aws-sam .pytest_cache bench/.work console/node_modules
