"""tools/words.py, the glossary's retired words kept out of drainer/'s identifiers by
`make lint` (issue 39, item 5)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tools import words


def test_drainer_uses_no_retired_word() -> None:
    assert list(words.retired_uses([words.ROOT / "drainer"])) == []


@pytest.mark.parametrize(
    ("code", "identifier", "word"),
    [
        ("def follow_drain() -> None: ...\n", "follow_drain", "follow"),
        ("class _Follower: ...\n", "_Follower", "follower"),
        ("FOLLOW_POLL_SECONDS = 2.0\n", "FOLLOW_POLL_SECONDS", "follow"),
        ("def f(job):\n    return job.plan\n", "plan", "plan"),
        ("def f(follows: frozenset[str]) -> None: ...\n", "follows", "follows"),
        ("from drainer.k8s.events import EventRecorder\n", "EventRecorder", "recorder"),
        ("import drainer.lifecycle.follow\n", "follow", "follow"),
    ],
)
def test_a_retired_word_in_an_identifier__named_with_its_line_and_its_replacement(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], code: str, identifier: str, word: str
) -> None:
    module = tmp_path / "m.py"
    module.write_text("x = 1\n" + code)

    assert words.main([str(tmp_path)]) == 1

    out = capsys.readouterr().out.splitlines()
    assert out, "nothing named"
    assert all(line.startswith(f"{module}:") for line in out)
    assert f"{identifier}: '{word}' is retired" in out[0]
    assert "say " in out[0]


def test_a_module_named_with_a_retired_word__refused(tmp_path: Path) -> None:
    (tmp_path / "follow.py").write_text("x = 1\n")

    assert [line.split(": ")[1] for line in words.retired_uses([tmp_path])] == ["follow"]


def test_comments_docstrings_and_strings__not_read(tmp_path: Path) -> None:
    (tmp_path / "m.py").write_text(
        '"""The following pods: the plan of the recorder."""\n'
        "# a follower\n"
        'LOG_KEY = "followed_trigger"  # the log key, an interface\n'
    )

    assert list(words.retired_uses([tmp_path])) == []


def test_a_word_kept_in_its_one_meaning__only_in_its_modules() -> None:
    assert words._retired("following", "drainer/engine/following.py") is None
    assert words._retired("plan", "drainer/plan/model.py") is None
    assert words._retired("following", "drainer/lifecycle/runner.py") is not None
    assert words._retired("plan", "drainer/engine/drain.py") is not None


@pytest.mark.parametrize(
    ("identifier", "parts"),
    [
        ("EventRecorder", ["event", "recorder"]),
        ("FOLLOW_POLL_SECONDS", ["follow", "poll", "seconds"]),
        ("_list_and_watch", ["list", "and", "watch"]),
        ("HTTPServer", ["http", "server"]),
        ("planned", ["planned"]),
        ("explanation", ["explanation"]),
    ],
)
def test_words_of_an_identifier(identifier: str, parts: list[str]) -> None:
    assert words.words_of(identifier) == parts


def test_every_pending_rename_is_still_pending() -> None:
    """An exemption waits for a rename in a module someone else is changing: once the
    module no longer uses the word, it is removed from PENDING."""
    for module, retired in sorted(words.PENDING.items()):
        path = words.ROOT / module
        used = {w for _, name in words._identifiers(path) for w in words.words_of(name)}
        for word in retired:
            forms = next(r.words for r in words.RETIRED if r.words[0] == word)
            assert used & set(forms), f"{module} no longer says {word!r}: drop it from PENDING"
