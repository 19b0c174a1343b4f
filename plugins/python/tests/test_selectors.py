"""The fake host's label selectors against the table the host's parser is held to."""

import json
from pathlib import Path

import pytest

from kubewasm import Invalid
from kubewasm.testing import FakeHost, match_labels, parse_selector

TABLE = Path(__file__).resolve().parents[3] / "tests" / "cases" / "selectors.yaml"


def shared_cases() -> list[dict]:
    # JSON written as YAML: drop the comment lines, then the standard library reads it.
    text = "".join(line for line in TABLE.read_text().splitlines(keepends=True) if not line.lstrip().startswith("#"))
    return json.loads(text)


CASES = shared_cases()


def test_the_table_is_there():
    assert len(CASES) > 30


@pytest.mark.parametrize("case", CASES, ids=[repr(c["selector"]) for c in CASES])
def test_selects_what_the_host_selects(case):
    if case.get("invalid"):
        with pytest.raises(Invalid, match="label selector"):
            parse_selector(case["selector"])
        return
    for labels in case.get("match", []):
        assert match_labels(labels, case["selector"]), labels
    for labels in case.get("miss", []):
        assert not match_labels(labels, case["selector"]), labels


def test_list_uses_it():
    host = FakeHost([{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": n, "namespace": "ns", "labels": {"app": n}}} for n in "ab"])
    from kubewasm import kinds

    assert [json.loads(t)["metadata"]["name"] for t in host.cache_list(kinds.CONFIG_MAP, None, "app in (b)")] == ["b"]
    with pytest.raises(Invalid):
        host.cache_list(kinds.CONFIG_MAP, None, "app in b")
