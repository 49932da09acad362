"""Benchmark of a process's start (not a test; issue 33, item 6).

Run from the repository root:  .venv/bin/python bench/startup.py [--base REV] [--rounds N]

The CPU seconds (user + system) and the peak memory (max RSS) of
``django.setup()`` and of management commands' starts (``check``,
``evaluate_predictions --help``, ``import_study --help``), each in a fresh
process, the best of ``--rounds`` (default 3) after one that fills the
bytecode cache: the tree of ``--base`` (default ``main``, read with ``git
archive`` into a temporary folder) against this tree's, side by side in one
run. SQLite (DATABASE_URL unset): no command here opens a connection.
"""

import argparse
import io
import os
import pathlib
import subprocess
import sys
import tarfile
import tempfile

ROOT = pathlib.Path(__file__).resolve().parent.parent

SETUP = "import os, django; os.environ.setdefault('DJANGO_SETTINGS_MODULE', 'approve_site.settings'); django.setup()"
STARTS = {
    "django.setup()": ["-c", SETUP],
    "manage.py check": ["manage.py", "check"],
    "manage.py evaluate_predictions --help": ["manage.py", "evaluate_predictions", "--help"],
    "manage.py import_study --help": ["manage.py", "import_study", "--help"],
}


def tree_at(revision: str, folder: pathlib.Path) -> pathlib.Path:
    """The whole tree of ``revision``, extracted into ``folder``."""
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", revision], check=True, capture_output=True)
    with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
        tar.extractall(folder, filter="data")
    return folder


def measured(tree: pathlib.Path, arguments: list[str], cache: str) -> tuple[float, int]:
    """CPU seconds and max RSS (KiB) of one process started in ``tree``."""
    environment = {key: value for key, value in os.environ.items() if key not in ("DATABASE_URL", "PYTHONPATH")}
    environment.pop("PYTHONDONTWRITEBYTECODE", None)
    environment["PYTHONPYCACHEPREFIX"] = cache
    process = subprocess.Popen(
        [sys.executable, *arguments], cwd=tree, env=environment, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    _, status, usage = os.wait4(process.pid, 0)
    process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode:
        raise SystemExit(f"{' '.join(arguments)} in {tree} failed: {process.stderr.read().decode()[-2000:]}")
    process.stderr.close()
    return usage.ru_utime + usage.ru_stime, usage.ru_maxrss


def best(tree: pathlib.Path, arguments: list[str], rounds: int, cache: str) -> str:
    measured(tree, arguments, cache)  # fills the bytecode cache
    runs = [measured(tree, arguments, cache) for _ in range(rounds)]
    return f"{min(cpu for cpu, _ in runs):5.2f} s {min(rss for _, rss in runs) // 1024:4d} MiB"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", default="main")
    parser.add_argument("--rounds", type=int, default=3)
    options = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        base = tree_at(options.base, pathlib.Path(folder) / "base")
        cache = str(pathlib.Path(folder) / "pycache")
        print(f"best of {options.rounds}, CPU seconds (user + system) and max RSS, a fresh process each")
        print(f"{'':40} {options.base:>18} {'this tree':>18}")
        for name, arguments in STARTS.items():
            before = best(base, arguments, options.rounds, cache)
            after = best(ROOT, arguments, options.rounds, cache)
            print(f"{name:40} {before:>18} {after:>18}", flush=True)


if __name__ == "__main__":
    main()
