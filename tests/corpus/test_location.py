"""Where the corpus tests look for the corpus, and what they say when it is not there."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from .corpus import SOURCES

REPO = Path(__file__).resolve().parents[2]


def _run_corpus_tests(env_updates: dict[str, str | None]) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in env_updates}
    env.update({k: v for k, v in env_updates.items() if v is not None})
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-rs",
         "tests/corpus/test_corpus.py"],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=600)


def test_a_missing_corpus_is_skipped_with_how_to_get_it(tmp_path: Path) -> None:
    run = _run_corpus_tests({"CONVERGENCE_CORPUS_DIR": str(tmp_path / "none"), "CI": None})
    assert run.returncode == 0, run.stdout + run.stderr
    assert "skipped" in run.stdout
    assert str(tmp_path / "none") in run.stdout
    assert "tests/corpus/fetch.sh" in run.stdout
    assert "CONVERGENCE_CORPUS_DIR" in run.stdout


def test_a_missing_corpus_fails_under_ci(tmp_path: Path) -> None:
    run = _run_corpus_tests({"CONVERGENCE_CORPUS_DIR": str(tmp_path / "none"), "CI": "true"})
    assert run.returncode == 1, run.stdout + run.stderr
    assert "tests/corpus/fetch.sh" in run.stdout


def test_the_corpus_is_read_from_the_configured_folder(tmp_path: Path) -> None:
    good = ("heat_template_version: 2018-08-31\n"
            "resources:\n  a: {type: OS::Heat::None}\n")
    bad = ("heat_template_version: 2018-08-31\n"
           "resources:\n  a: {type: OS::Heat::None, properties: {x: {get_param: nope}}}\n")
    for source in SOURCES:
        (tmp_path / source).mkdir()
        (tmp_path / source / "ok.yaml").write_text(good)
    (tmp_path / "tripleo" / "broken.yaml").write_text(bad)
    run = _run_corpus_tests({"CONVERGENCE_CORPUS_DIR": str(tmp_path), "CI": "true"})
    assert run.returncode == 1, run.stdout + run.stderr
    assert "3 passed" in run.stdout and "1 failed" in run.stdout
    assert "tripleo/broken.yaml" in run.stdout
