"""tools/trace_path.py: the path of an event through the real handler, counted by the
code rather than by hand (issue 39, item 8)."""

from __future__ import annotations

from tools.trace_path import Path_, trace


def test_returns__counted_each_time_the_path_enters_a_file_it_had_left() -> None:
    path = Path_([("a.py", "f"), ("a.py", "g"), ("b.py", "h"), ("a.py", "i"), ("c.py", "j"),
                  ("b.py", "k"), ("b.py", "l")])  # fmt: skip
    assert path.files == ["a.py", "b.py", "c.py"]
    assert path.returns == 2
    assert path.summary() == "7 hops in 3 files, coming back to a file it had left 2 times"


def test_scale_in__from_the_handler_through_one_drain_to_the_lifecycle_answer() -> None:
    path = trace("scale-in")

    functions = [f"{file}:{name}" for file, name in path.hops]
    assert functions[0] == "drainer/handler.py:lambda_handler"
    assert functions.count("drainer/engine/drain.py:Drain.run") == 1
    assert "drainer/aws/autoscaling.py:complete_lifecycle_action" in functions
    assert not any(name.startswith("<") for _, name in path.hops)
    # the clients' insides are not the path: no transport, no retry loop
    assert not any(file == "drainer/k8s/transport.py" for file, _ in path.hops)


def test_architecture_states_the_paths_as_the_tracer_counts_them() -> None:
    """docs/ARCHITECTURE.md's figures are the code's, not a count by hand."""
    from pathlib import Path

    text = (Path(__file__).resolve().parents[1] / "docs" / "ARCHITECTURE.md").read_text()
    scale_in, spot = trace("scale-in"), trace("spot")
    said = (
        f"a scale-in is {len(scale_in.hops)} hops in {len(scale_in.files)} files, coming back "
        f"to a file it had left {scale_in.returns} times, and a spot warning "
        f"{len(spot.hops)} hops in {len(spot.files)} files"
    )
    assert said in " ".join(text.split()), f"docs/ARCHITECTURE.md should say: {said}"
