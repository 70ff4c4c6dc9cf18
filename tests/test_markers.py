import pytest

from grader.author.markers import MarkerError, has_markers, remove_markers, stub_regions

SOURCE = '''def f(x):
    """Docstring stays."""
    ### BEGIN SOLUTION
    y = x * 2
    return y
    ### END SOLUTION

print(f(1))'''


def test_region_becomes_a_stub_naming_the_task_at_its_indent():
    out = stub_regions(SOURCE, "1.4", "MACs")
    assert "y = x * 2" not in out and not has_markers(out)
    assert '    raise NotImplementedError(\'Implement task 1.4: MACs\')' in out
    assert out.startswith('def f(x):\n    """Docstring stays."""\n    # YOUR CODE HERE\n')
    assert out.endswith("print(f(1))")


def test_stubbed_code_compiles_and_raises_with_the_task():
    namespace = {}
    exec(stub_regions(SOURCE.replace("print(f(1))", ""), "2.3", "Bandwidth"), namespace)
    with pytest.raises(NotImplementedError, match="task 2.3: Bandwidth"):
        namespace["f"](1)


def test_remove_markers_keeps_the_solution():
    out = remove_markers(SOURCE)
    assert "y = x * 2" in out and not has_markers(out)


@pytest.mark.parametrize("source, message", [
    ("### BEGIN SOLUTION\nx = 1", "never closed"),
    ("x = 1\n### END SOLUTION", "without a BEGIN"),
    ("### BEGIN SOLUTION\n### BEGIN SOLUTION\n### END SOLUTION", "inside the region"),
    ("### begin solution\nx=1\n### END SOLUTION", "malformed marker"),
])
def test_bad_markers_fail_with_the_line(source, message):
    with pytest.raises(MarkerError, match=message):
        stub_regions(source, "1.1", "Parameters", "cell 3")
