# approve: everyday commands. Needs Python 3.11 and make, nothing else.
#
# With no DATABASE_URL / REDIS_URL in the environment the project uses SQLite
# and runs Celery tasks in-process; set them to use PostgreSQL and Redis. The
# environment is passed through to every command untouched.

VENV := .venv
PYTHON := $(VENV)/bin/python
STAMP := $(VENV)/.installed
# The full mlflow package, for the tests' tracking server (and `make mlflow`):
# it caps pyarrow and gunicorn below the project's pins, so it lives apart.
MLFLOW_VENV := .venv-mlflow
MLFLOW_STAMP := $(MLFLOW_VENV)/.installed
MLFLOW_PORT ?= 5000
# The interpreter that creates the virtualenv; override with
# `make BOOTSTRAP_PYTHON=/path/to/python3.11 install`.
BOOTSTRAP_PYTHON ?= $(shell command -v python3.11 2>/dev/null || command -v python3 2>/dev/null)
# Extra arguments for pytest: `make test PYTEST_ARGS="-k ranges -x"`.
PYTEST_ARGS ?=
# Extra arguments for bench/mutation.py: `make mutation MUTATION_ARGS="--module engine/core.py --all"`.
MUTATION_ARGS ?=
RUNSERVER_ADDRESS ?= 127.0.0.1:8000

.DEFAULT_GOAL := help
.PHONY: help install install-mlflow lock run test worker check migrate mlflow mutation

help:
	@echo "make run      install, migrate, load the demo study, serve on http://$(RUNSERVER_ADDRESS)/"
	@echo "make test     install, then run the test suite"
	@echo "make install  create $(VENV) and install requirements-dev.txt (again only when it changes)"
	@echo "make lock     compile the requirements*.in files into their locks (requirements*.txt, with hashes)"
	@echo "make migrate  apply database migrations"
	@echo "make worker   run a Celery worker (needs REDIS_URL)"
	@echo "make check    Django's system checks"
	@echo "make mlflow   a local MLflow tracking server on http://127.0.0.1:$(MLFLOW_PORT)/ (data in ./mlflow-data)"
	@echo "make mutation mutation testing of the method and the analyses (about 20 minutes; MUTATION_ARGS=\"--sample 300 --jobs 1\")"

install: $(STAMP)

# Only the tests and `make mlflow` need it: `make run` does not wait for it.
install-mlflow: $(MLFLOW_STAMP)

$(PYTHON):
	@test -n "$(BOOTSTRAP_PYTHON)" || { echo "Python 3.11 not found: install python3.11 or pass BOOTSTRAP_PYTHON=..." >&2; exit 1; }
	@echo "Creating $(VENV) with $(BOOTSTRAP_PYTHON) ($$($(BOOTSTRAP_PYTHON) --version 2>&1))"
	$(BOOTSTRAP_PYTHON) -m venv $(VENV)

# The stamp is newer than both lock files once they are installed, so pip runs
# again only after one of them changes. Every package is pinned and hashed in
# the locks: pip installs exactly those files or fails.
$(STAMP): requirements.txt requirements-dev.txt | $(PYTHON)
	$(PYTHON) -m pip install --quiet --upgrade pip
	$(PYTHON) -m pip install --quiet --require-hashes -r requirements-dev.txt
	@touch $(STAMP)

$(MLFLOW_STAMP): requirements-mlflow-server.txt
	@test -x $(MLFLOW_VENV)/bin/python || $(BOOTSTRAP_PYTHON) -m venv $(MLFLOW_VENV)
	$(MLFLOW_VENV)/bin/python -m pip install --quiet --require-hashes -r requirements-mlflow-server.txt
	@touch $(MLFLOW_STAMP)

# The locks, compiled from the pins in the .in files (README.md, "Dependencies"):
# every package they bring pinned with the hashes of its files, for every
# platform (--universal), Python 3.11. A version already in a lock is kept
# unless an .in file asks otherwise; `make lock LOCK_ARGS=--upgrade` takes the
# newest that the pins allow, `LOCK_ARGS="--upgrade-package NAME"` one package's.
# The development lock is constrained to the production one (requirements-dev.in's -c line).
LOCK := $(VENV)/bin/uv pip compile --quiet --generate-hashes --universal --python-version 3.11 \
	--custom-compile-command "make lock" $(LOCK_ARGS)
LOCK_ARGS ?=

lock: install
	$(LOCK) requirements.in -o requirements.txt
	$(LOCK) requirements-dev.in -o requirements-dev.txt
	$(LOCK) requirements-mlflow-server.in -o requirements-mlflow-server.txt

mlflow: install install-mlflow
	mkdir -p mlflow-data
	$(MLFLOW_VENV)/bin/mlflow server --host 127.0.0.1 --port $(MLFLOW_PORT) --workers 1 \
		--backend-store-uri sqlite:///$(CURDIR)/mlflow-data/mlflow.db --artifacts-destination $(CURDIR)/mlflow-data/artifacts

migrate: install
	$(PYTHON) manage.py migrate --noinput

run: migrate
	$(PYTHON) manage.py load_demo
	$(PYTHON) manage.py runserver $(RUNSERVER_ADDRESS)

test: install install-mlflow
	$(VENV)/bin/pytest $(PYTEST_ARGS)

# Not part of CI (too slow): bench/mutation.py, README.md "Mutation testing".
mutation: install
	$(PYTHON) bench/mutation.py $(MUTATION_ARGS)

worker: install
	$(VENV)/bin/celery -A approve_site worker -l info

check: install
	$(PYTHON) manage.py check
