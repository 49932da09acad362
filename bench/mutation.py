"""Mutation testing of the pure method and the analyses (not a test; not in CI: too slow).

Run from the repository root:  .venv/bin/python bench/mutation.py   (or `make mutation`)
Options: --sample N (mutants drawn, default 100) or --all; --seed S (which ones, default
20240611); --hypothesis-seed H (the property tests', default 0); --module PATH (only that
module, repeatable); --jobs J (parallel copies, default 2); --goal P (exit 1 below P %
killed, default 90); --timeout-factor F (default 3); --count (how many mutants each module
has; run nothing); --json FILE (every result, for tooling).

Each mutant is one small change to one module of MODULES below (a comparison's boundary or
sense flipped, + and - or * and / swapped, `and`/`or` swapped, True/False swapped, a number
+1, a condition or a returned value negated, a loop made to run zero times, a
`break`/`continue` swapped, a `not` or a unary minus dropped, an `except` clause made to
catch nothing: OPERATORS). The tests that cover the module (its row of MODULES, nothing
else) then run against it, as `python -m pytest FILES -x -q -p no:cacheprovider`, with a
timeout of F times their clean run (plus 10 s). A mutant is *killed* when they fail, *timed
out* when they exceed the timeout (an endless loop: counted as killed), *survived* when they
pass: a change to the method that no test notices, to be turned into a test. The score is
(killed + timed out) / (killed + timed out + survived); *invalid* mutants, which do not
compile or change a `*` or `/` that is no arithmetic (a signature's, an unpacking's), are
counted apart and left out of it.

The mutants are drawn at random from all of them, reproducibly: the same --seed on the
same sources draws the same ones, and their outcome is deterministic too (Hypothesis runs
with --hypothesis-seed=H and no example database), so two runs compare. The default
sample takes about 15-20 minutes with two jobs on a two-core machine (estimated from 150
mutants with one job: 46 minutes on a busy machine, the clean runs included); --all runs every
mutant (a few thousand: hours). The score of a sample estimates the whole's; the README
states the last measured one.

The mutants are made by Cosmic Ray's operators (`cosmic-ray`, pinned in
requirements-dev.txt for this script only), on its parso trees, plus one of ours
(NegateReturnValue). Its own runner is not used: `cosmic-ray exec` mutates the working tree
in place (a crash leaves a mutant behind), runs one test command for every module (here
each module has its own, much shorter, list of tests), draws no sample and runs one mutant
at a time. So this script applies each mutant to a throw-away copy of the repository (one
per job, under the system's temporary directory, removed at the end): the working tree is
never written to. The copies run with the embedded defaults (SQLite, eager Celery:
DATABASE_URL and REDIS_URL are dropped) and single-threaded BLAS, so jobs do not share a
database or fight over the cores.

Not part of `.ci/run`. Exit status: 0 when the score reaches --goal, 1 below it, 2 when a
module's tests fail without any mutant (its mutants are then skipped, the others run: the
sources, the MODULES table or a property test's seed is wrong).
"""

from __future__ import annotations

import argparse
import ast
import concurrent.futures
import contextlib
import dataclasses
import difflib
import json
import os
import queue
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import parso
import parso.python.tree
from cosmic_ray.ast import ast_nodes, is_none, is_number
from cosmic_ray.mutating import mutate_code
from cosmic_ray.operators.number_replacer import NumberReplacer
from cosmic_ray.operators.operator import Example, Operator
from cosmic_ray.plugins import get_operator

ROOT = Path(__file__).resolve().parent.parent

# The modules mutated, each with the test files that cover it (fastest first: with -x the
# first failure ends the run). A module is named by its app and file; it is looked for in
# the app's `method/` subpackage first, then in the app itself (MODULE_DIRS), so moving the
# pure modules to engine/method/ needs no change here. Paths of tests are as they are.
MODULES: dict[str, tuple[str, ...]] = {
    # The pure method (METHOD.md).
    "engine/core.py": ("tests/engine/test_rules.py", "tests/engine/test_core.py"),
    "engine/rules.py": ("tests/engine/test_rules.py", "tests/engine/test_scale.py", "tests/test_rule_literals.py"),
    "engine/layers.py": ("tests/engine/test_core.py",),
    "engine/prioritisation.py": ("tests/engine/test_scale.py", "tests/engine/test_prioritisation.py"),
    "engine/disagreement.py": ("tests/engine/test_disagreement.py",),
    "engine/robustness.py": (
        "tests/engine/test_robustness_experts.py",
        "tests/engine/test_robustness_monte_carlo.py",
        "tests/engine/test_robustness_elicited.py",
        "tests/engine/test_sensitivity.py",
        "tests/engine/test_robustness.py",
    ),
    "engine/sensitivity.py": ("tests/engine/test_sensitivity.py",),
    "engine/compare.py": ("tests/engine/test_compare.py",),
    "engine/explain.py": ("tests/engine/test_explain.py",),
    "engine/feedback.py": ("tests/engine/test_feedback_inversion.py",),
    "engine/analysis_words.py": ("tests/engine/test_analysis_words.py",),
    "evaluation/metrics.py": (
        "tests/evaluation/test_arr_a3r.py",
        "tests/evaluation/test_relevance.py",
        "tests/evaluation/test_metrics.py",
    ),
    "evaluation/elicitation.py": ("tests/evaluation/test_elicitation.py", "tests/evaluation/test_elicited.py"),
    "evaluation/bootstrap.py": ("tests/evaluation/test_bootstrap.py",),
    # The analyses (leave-one-out, Monte Carlo) and their kernels.
    "engine/analyses.py": (
        "tests/engine/test_analyses.py",
        "tests/engine/test_analysis_bounds.py",
        "tests/engine/test_leave_one_out_production.py",
    ),
    "engine/robustness_kernels.py": (
        "tests/engine/test_analyses.py",
        "tests/engine/test_leave_one_out_production.py",
        "tests/engine/test_robustness_ahp_snapshot.py",
    ),
}

# Tests left out of every run (`--deselect`), each with why: a test that fails without any
# mutant keeps its modules from being tested at all. Remove a line once its test passes.
DESELECT: tuple[str, ...] = ()

# Where a module "APP/FILE.py" of MODULES is looked for, in this order.
MODULE_DIRS = ("{app}/method", "{app}")


class NegateReturnValue(Operator):
    """``return X`` -> ``return not (X)`` (a bare ``return`` and ``return None`` left alone):
    a boolean answer reversed, any other value replaced by a boolean."""

    def mutation_positions(self, node: Any) -> Iterator[tuple[tuple[int, int], tuple[int, int]]]:
        if isinstance(node, parso.python.tree.ReturnStmt) and len(node.children) == 2 and not is_none(node.children[1]):
            value = node.children[1]
            yield (value.start_pos, value.end_pos)

    def mutate(self, node: Any, index: int) -> Any:
        value = node.children[1]
        node.children[1] = parso.parse(f" not ({value.get_code(include_prefix=False)})")
        return node

    @classmethod
    def examples(cls) -> tuple[Example, ...]:
        return (Example("def f():\n    return x < y\n", "def f():\n    return not (x < y)\n"),)


class IncrementNumber(NumberReplacer):
    """A number +1 (Cosmic Ray's NumberReplacer makes +1 and -1 of each: half of them
    would be numbers, crowding out the other operators in a sample)."""

    def mutation_positions(self, node: Any) -> Iterator[tuple[tuple[int, int], tuple[int, int]]]:
        if is_number(node):
            yield (node.start_pos, node.end_pos)


# The mutation operators: Cosmic Ray's by name ("core/..."), and ours. Not all of Cosmic
# Ray's: every comparison into every other, every binary operator into every other (``|``,
# ``<<``, ``**``...), would swamp a sample with mutants that mostly die at once; removing a
# decorator mostly drops a cache (an equivalent mutant); its variable operators need
# per-variable settings.
OPERATORS: dict[str, type[Operator]] = {
    name: get_operator(name)
    for name in (
        # Boundaries: < and <=, > and >=.
        "core/ReplaceComparisonOperator_Lt_LtE",
        "core/ReplaceComparisonOperator_LtE_Lt",
        "core/ReplaceComparisonOperator_Gt_GtE",
        "core/ReplaceComparisonOperator_GtE_Gt",
        # Senses: each comparison into its negation.
        "core/ReplaceComparisonOperator_Lt_GtE",
        "core/ReplaceComparisonOperator_GtE_Lt",
        "core/ReplaceComparisonOperator_Gt_LtE",
        "core/ReplaceComparisonOperator_LtE_Gt",
        "core/ReplaceComparisonOperator_Eq_NotEq",
        "core/ReplaceComparisonOperator_NotEq_Eq",
        "core/ReplaceComparisonOperator_Is_IsNot",
        "core/ReplaceComparisonOperator_IsNot_Is",
        # Arithmetic.
        "core/ReplaceBinaryOperator_Add_Sub",
        "core/ReplaceBinaryOperator_Sub_Add",
        "core/ReplaceBinaryOperator_Mul_Div",
        "core/ReplaceBinaryOperator_Div_Mul",
        "core/ReplaceUnaryOperator_Delete_USub",
        # Logic.
        "core/ReplaceAndWithOr",
        "core/ReplaceOrWithAnd",
        "core/ReplaceTrueWithFalse",
        "core/ReplaceFalseWithTrue",
        "core/ReplaceUnaryOperator_Delete_Not",
        "core/AddNot",
        # Control flow.
        "core/ZeroIterationForLoop",
        "core/ReplaceBreakWithContinue",
        "core/ReplaceContinueWithBreak",
        "core/ExceptionReplacer",
    )
}
OPERATORS["approve/IncrementNumber"] = IncrementNumber
OPERATORS["approve/NegateReturnValue"] = NegateReturnValue

# The parso nodes whose `*` or `/` is no arithmetic (a signature's bare `*` or `/`, `*args`,
# an unpacking): Cosmic Ray's binary operators still swap them, into a mutant that does not
# compile or only lets a keyword argument be passed by position.
NOT_ARITHMETIC = frozenset({"parameters", "param", "lambdef", "argument", "star_expr", "dictorsetmaker"})

# A line carrying this comment is never mutated (Cosmic Ray's convention).
PRAGMA = "pragma: no mutate"
DEFAULT_SAMPLE = 100
DEFAULT_SEED = 20240611
TIMEOUT_SLACK = 10.0  # seconds added to F x the clean run


@dataclasses.dataclass(frozen=True)
class Mutant:
    module: str  # key of MODULES
    path: str  # the file mutated, relative to ROOT
    operator: str
    occurrence: int  # the operator's occurrence in the file, as Cosmic Ray counts them
    line: int
    column: int


@dataclasses.dataclass
class Result:
    mutant: Mutant
    outcome: str  # killed, survived, timeout, invalid
    original: str  # the first changed line, before and after
    mutated: str
    seconds: float


def resolve(module: str) -> Path:
    """The file of a MODULES key, relative to ROOT, in the first MODULE_DIRS that has it."""
    app, name = module.split("/", 1)
    for directory in MODULE_DIRS:
        candidate = Path(directory.format(app=app)) / name
        if (ROOT / candidate).is_file():
            return candidate
    raise SystemExit(f"mutation: {module} is in none of {', '.join(d.format(app=app) for d in MODULE_DIRS)}")


def _char_column(lines: list[str], line: int, byte_offset: int) -> int:
    """The character column of an ast byte offset (parso counts characters)."""
    text = lines[line - 1] if 0 < line <= len(lines) else ""
    return len(text.encode("utf-8")[:byte_offset].decode("utf-8", errors="ignore"))


def excluded_spans(source: str) -> list[tuple[tuple[int, int], tuple[int, int]]]:
    """Spans no mutant may start in: type annotations (``from __future__ import
    annotations`` makes them strings, so changing them changes nothing) and the tests
    of ``if TYPE_CHECKING:`` blocks (imports for the type checker alone)."""
    lines = source.splitlines()
    spans = []
    nodes: list[ast.AST] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.returns is not None:
            nodes.append(node.returns)
        elif isinstance(node, (ast.arg, ast.AnnAssign)) and node.annotation is not None:
            nodes.append(node.annotation)
        elif isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            nodes.append(node.test)
    for node in nodes:
        assert isinstance(node, ast.expr)
        end_line = node.end_lineno or node.lineno
        start = (node.lineno, _char_column(lines, node.lineno, node.col_offset))
        end = (end_line, _char_column(lines, end_line, node.end_col_offset or 0))
        spans.append((start, end))
    return spans


def module_mutants(module: str) -> list[Mutant]:
    """Every mutant of one module, in a stable order (operator, then occurrence)."""
    path = resolve(module)
    source = (ROOT / path).read_text(encoding="utf-8")
    lines = source.splitlines()
    spans = excluded_spans(source)
    tree = parso.parse(source)
    mutants = []
    for name, operator_class in OPERATORS.items():
        operator = operator_class()
        positions = (position for node in ast_nodes(tree) for position in operator.mutation_positions(node))
        for occurrence, (start, _end) in enumerate(positions):
            line, column = start
            if any(low <= (line, column) < high for low, high in spans):
                continue
            if PRAGMA in (lines[line - 1] if line <= len(lines) else ""):
                continue
            mutants.append(Mutant(module, str(path), name, occurrence, line, column))
    return mutants


def mutated_source(mutant: Mutant, source: str) -> str | None:
    """The module's source with the mutant applied (None when the operator finds nothing)."""
    result: str | None = mutate_code(source, OPERATORS[mutant.operator](), mutant.occurrence)
    return result


def not_arithmetic(mutant: Mutant, source: str) -> bool:
    """Whether a binary operator's mutant changes a `*` or `/` that is no operator."""
    if not mutant.operator.startswith("core/ReplaceBinaryOperator_"):
        return False
    leaf = parso.parse(source).get_leaf_for_position((mutant.line, mutant.column))
    return leaf is not None and leaf.parent is not None and leaf.parent.type in NOT_ARITHMETIC


def changed_line(original: str, mutated: str) -> tuple[str, str]:
    """The first line the mutant changes, before and after (stripped)."""
    before, after = original.splitlines(), mutated.splitlines()
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(a=before, b=after, autojunk=False).get_opcodes():
        if tag != "equal":
            old = " / ".join(line.strip() for line in before[i1:i2])
            new = " / ".join(line.strip() for line in after[j1:j2])
            return old, new
    return "", ""


def project_files() -> list[Path]:
    """The repository's files as git sees them (tracked and untracked, not ignored)."""
    listed = subprocess.run(
        ["git", "-C", str(ROOT), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        check=True,
        capture_output=True,
    ).stdout.decode()
    return [Path(name) for name in listed.split("\0") if name and (ROOT / name).is_file()]


def make_copy(destination: Path, files: list[Path]) -> None:
    for name in files:
        target = destination / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, target, follow_symlinks=True)


def child_environment() -> dict[str, str]:
    environment = dict(os.environ)
    for variable in ("DATABASE_URL", "REDIS_URL"):
        environment.pop(variable, None)
    environment["PYTHONDONTWRITEBYTECODE"] = "1"  # a mutant's file is rewritten within a second
    for variable in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        environment[variable] = "1"
    return environment


class Runner:
    """Runs test files in one of ``jobs`` copies of the repository at a time."""

    def __init__(self, workdir: Path, jobs: int, hypothesis_seed: int) -> None:
        files = project_files()
        self.copies: queue.Queue[Path] = queue.Queue()
        for index in range(jobs):
            copy = workdir / f"job-{index}"
            make_copy(copy, files)
            self.copies.put(copy)
        self.hypothesis_seed = hypothesis_seed
        self.workdir = workdir
        self.environment = child_environment()
        self.running: set[subprocess.Popen[bytes]] = set()
        self.lock = threading.Lock()
        self.stopping = False
        self.check_imports(workdir / "job-0")

    def check_imports(self, copy: Path) -> None:
        """The copy's modules are the ones imported (not an installed ``engine``)."""
        found = subprocess.run(
            [sys.executable, "-c", "import engine; print(engine.__file__)"],
            cwd=copy,
            env=self.environment,
            capture_output=True,
            text=True,
        ).stdout.strip()
        if not found.startswith(str(copy)):
            raise SystemExit(f"mutation: the copy in {copy} imports engine from {found or 'nowhere'}")

    def pytest(
        self, copy: Path, tests: tuple[str, ...], timeout: float | None, log: Path | None = None
    ) -> tuple[str, float]:
        """Run the tests in a copy: ('passed'|'failed'|'timeout', seconds); their output to
        ``log``, if given."""
        shutil.rmtree(copy / ".hypothesis", ignore_errors=True)  # no examples carried over
        command = [sys.executable, "-m", "pytest", *tests, "-x", "-q", "-p", "no:cacheprovider"]
        command.append(f"--hypothesis-seed={self.hypothesis_seed}")
        for test in DESELECT:
            if test.split("::", 1)[0] in tests:
                command += ["--deselect", test]
        started = time.monotonic()
        with open(log or os.devnull, "wb") as output:
            process = subprocess.Popen(
                command, cwd=copy, env=self.environment, stdout=output, stderr=subprocess.STDOUT, start_new_session=True
            )
        with self.lock:
            self.running.add(process)
            if self.stopping:
                self.kill(process)
        try:
            process.wait(timeout=timeout)
            outcome = "passed" if process.returncode == 0 else "failed"
        except subprocess.TimeoutExpired:
            outcome = "timeout"
        finally:
            self.kill(process)
            with self.lock:
                self.running.discard(process)
        return outcome, time.monotonic() - started

    @staticmethod
    def kill(process: subprocess.Popen[bytes]) -> None:
        with contextlib.suppress(ProcessLookupError):  # the group may be gone already
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()

    def stop(self) -> None:
        with self.lock:
            self.stopping = True
            for process in list(self.running):
                self.kill(process)

    def clean(self, module: str) -> tuple[str, float, str]:
        """The module's tests without a mutant: outcome, seconds, and the output's end."""
        copy = self.copies.get()
        log = self.workdir / f"clean-{module.replace('/', '-')}.log"
        try:
            outcome, seconds = self.pytest(copy, MODULES[module], None, log)
        finally:
            self.copies.put(copy)
        return outcome, seconds, "\n".join(log.read_text(errors="replace").splitlines()[-25:])

    def mutant(self, mutant: Mutant, source: str, timeout: float) -> Result:
        mutated = mutated_source(mutant, source)
        if mutated is None:
            return Result(mutant, "invalid", "", "", 0.0)
        original, changed = changed_line(source, mutated)
        if not_arithmetic(mutant, source):
            return Result(mutant, "invalid", original, changed, 0.0)
        try:
            compile(mutated, mutant.path, "exec")
        except SyntaxError:
            return Result(mutant, "invalid", original, changed, 0.0)
        copy = self.copies.get()
        target = copy / mutant.path
        try:
            target.write_text(mutated, encoding="utf-8")
            outcome, seconds = self.pytest(copy, MODULES[mutant.module], timeout)
        finally:
            target.write_text(source, encoding="utf-8")
            self.copies.put(copy)
        outcome = {"failed": "killed", "passed": "survived"}.get(outcome, outcome)
        return Result(mutant, outcome, original, changed, seconds)


def score(results: list[Result]) -> tuple[float, dict[str, int]]:
    counts = dict.fromkeys(("killed", "survived", "timeout", "invalid"), 0)
    for result in results:
        counts[result.outcome] += 1
    tested = counts["killed"] + counts["survived"] + counts["timeout"]
    return (100.0 * (counts["killed"] + counts["timeout"]) / tested if tested else 100.0), counts


def report(results: list[Result], goal: float, elapsed: float) -> float:
    print()
    print(f"{'module':<32} {'killed':>6} {'survived':>8} {'timeout':>7} {'invalid':>7} {'score':>8}")
    for module in MODULES:
        mine = [result for result in results if result.mutant.module == module]
        if mine:
            value, counts = score(mine)
            print(
                f"{module:<32} {counts['killed']:>6} {counts['survived']:>8} {counts['timeout']:>7}"
                f" {counts['invalid']:>7} {value:>7.1f}%"
            )
    value, counts = score(results)
    tested = counts["killed"] + counts["survived"] + counts["timeout"]
    print(
        f"\nScore: {value:.1f} % killed ({counts['killed']} killed + {counts['timeout']} timed out of {tested}"
        f" mutants tested; {counts['invalid']} invalid) in {elapsed / 60:.1f} min; goal {goal:g} %"
    )
    survivors = sorted(
        (result for result in results if result.outcome == "survived"),
        key=lambda result: (result.mutant.path, result.mutant.line),
    )
    if survivors:
        print(f"\nSurviving mutants ({len(survivors)}): each a change no covering test notices")
        for result in survivors:
            mutant = result.mutant
            print(f"  {mutant.path}:{mutant.line}  {mutant.operator.split('/', 1)[1]}")
            print(f"      {result.original}")
            print(f"   -> {result.mutated}")
    return value


def draw(modules: list[str], sample: int | None, seed: int) -> tuple[list[Mutant], dict[str, int]]:
    every = {module: module_mutants(module) for module in modules}
    population = [mutant for module in modules for mutant in every[module]]
    chosen = list(population)
    if sample is not None and sample < len(population):
        chosen = random.Random(seed).sample(population, sample)
    order = {module: index for index, module in enumerate(modules)}
    chosen.sort(key=lambda mutant: (order[mutant.module], mutant.line, mutant.column, mutant.operator))
    return chosen, {module: len(found) for module, found in every.items()}


def parse_arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    size = parser.add_mutually_exclusive_group()
    size.add_argument("--sample", type=int, default=DEFAULT_SAMPLE, help=f"mutants drawn (default {DEFAULT_SAMPLE})")
    size.add_argument("--all", action="store_true", help="every mutant (hours)")
    parser.add_argument(
        "--seed", type=int, default=DEFAULT_SEED, help=f"which mutants are drawn (default {DEFAULT_SEED})"
    )
    parser.add_argument("--hypothesis-seed", type=int, default=0, help="the property tests' seed (default 0)")
    parser.add_argument("--module", action="append", choices=sorted(MODULES), help="only this module (repeatable)")
    parser.add_argument("--jobs", type=int, default=2, help="mutants tested at once, each in its own copy (default 2)")
    parser.add_argument("--goal", type=float, default=90.0, help="exit 1 below this score, in %% (default 90)")
    parser.add_argument("--timeout-factor", type=float, default=3.0, help="timeout: F x the clean run + 10 s")
    parser.add_argument("--count", action="store_true", help="list the mutants each module has; run nothing")
    parser.add_argument("--json", type=Path, help="write every result to this file")
    arguments = parser.parse_args(argv)
    if arguments.jobs < 1 or (arguments.sample is not None and arguments.sample < 1):
        parser.error("--jobs and --sample must be at least 1")
    return arguments


def main(argv: list[str] | None = None) -> int:
    arguments = parse_arguments(argv)
    modules = [module for module in MODULES if not arguments.module or module in arguments.module]
    for module in modules:
        missing = [test for test in MODULES[module] if not (ROOT / test).is_file()]
        if missing:
            raise SystemExit(f"mutation: {module}'s tests {', '.join(missing)} do not exist: update MODULES")
    mutants, population = draw(modules, None if arguments.all else arguments.sample, arguments.seed)
    if arguments.count:
        for module in modules:
            print(f"{module:<32} {population[module]:>6}")
        print(f"{'total':<32} {sum(population.values()):>6}")
        return 0
    sampled = sorted({mutant.module for mutant in mutants}, key=modules.index)
    print(
        f"{len(mutants)} of {sum(population.values())} mutants (seed {arguments.seed}) in {len(sampled)} modules,"
        f" {arguments.jobs} job(s), {sys.executable}",
        flush=True,
    )
    sources = {mutant.path: (ROOT / mutant.path).read_text(encoding="utf-8") for mutant in mutants}
    started = time.monotonic()
    results: list[Result] = []
    broken: list[str] = []
    workdir = Path(tempfile.mkdtemp(prefix="approve-mutation-"))
    previous = signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    try:
        runner = Runner(workdir, arguments.jobs, arguments.hypothesis_seed)
        pool = concurrent.futures.ThreadPoolExecutor(max_workers=arguments.jobs)
        try:
            timeouts = {}
            for module, (outcome, seconds, tail) in zip(sampled, pool.map(runner.clean, sampled), strict=True):
                print(f"clean run of {module}'s tests: {outcome} in {seconds:.1f} s", flush=True)
                if outcome == "passed":
                    timeouts[module] = arguments.timeout_factor * seconds + TIMEOUT_SLACK
                else:
                    broken.append(module)
                    print(
                        f"{tail}\nmutation: {module}'s tests fail without a mutant: its mutants are skipped", flush=True
                    )
            mutants = [mutant for mutant in mutants if mutant.module in timeouts]
            futures = [
                pool.submit(runner.mutant, mutant, sources[mutant.path], timeouts[mutant.module]) for mutant in mutants
            ]
            for index, future in enumerate(concurrent.futures.as_completed(futures), 1):
                result = future.result()
                results.append(result)
                mutant = result.mutant
                print(
                    f"[{index}/{len(mutants)}] {result.outcome:<8} {mutant.path}:{mutant.line}"
                    f" {mutant.operator.split('/', 1)[1]} ({result.seconds:.1f} s)",
                    flush=True,
                )
        except BaseException:
            pool.shutdown(wait=False, cancel_futures=True)
            runner.stop()
            raise
        finally:
            pool.shutdown(wait=True, cancel_futures=True)
    finally:
        signal.signal(signal.SIGTERM, previous)
        shutil.rmtree(workdir, ignore_errors=True)
    value = report(results, arguments.goal, time.monotonic() - started)
    if broken:
        print(f"\nNot tested (their tests fail without a mutant, exit status 2): {', '.join(broken)}")
    if arguments.json:
        document = {
            "score": value,
            "seed": arguments.seed,
            "hypothesis_seed": arguments.hypothesis_seed,
            "not_tested": broken,
            "population": population,
            "results": [
                dataclasses.asdict(result.mutant)
                | {
                    "outcome": result.outcome,
                    "original": result.original,
                    "mutated": result.mutated,
                    "seconds": round(result.seconds, 1),
                }
                for result in results
            ],
        }
        arguments.json.write_text(json.dumps(document, indent=2) + "\n")
    if broken:
        return 2
    return 0 if value >= arguments.goal else 1


if __name__ == "__main__":
    sys.exit(main())
