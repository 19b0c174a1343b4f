"""The typed models of kubewasm.k8s: one per kind of kubewasm.kinds, and a type checker that
takes a controller using them and refuses a misspelled or mistyped field."""

import subprocess
import sys
import typing

import pytest

from kubewasm import k8s, kinds
from kubewasm.core import Gvk


def test_every_kind_has_a_model_of_its_api_version_and_kind():
    constants = {name: value for name, value in vars(kinds).items() if isinstance(value, Gvk)}
    assert len(constants) >= 24
    for constant, gvk in constants.items():
        model = getattr(k8s, gvk.kind)
        hints = typing.get_type_hints(model, include_extras=True)
        assert hints["apiVersion"] == typing.Required[typing.Literal[gvk.api_version]], constant
        assert hints["kind"] == typing.Required[typing.Literal[gvk.kind]], constant
        assert "metadata" in model.__optional_keys__, constant


def test_models_are_dicts_at_run_time():
    cm = k8s.ConfigMap(apiVersion="v1", kind="ConfigMap", metadata={"name": "x"}, data={"k": "v"})
    assert cm == {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}, "data": {"k": "v"}}


GOOD = """
from typing import cast

from kubewasm import Context, kinds, k8s


def reconcile(ctx: Context, name: str) -> int:
    deployment = cast(k8s.Deployment, ctx.get(kinds.DEPLOYMENT, "default", name))
    container: k8s.Container = deployment["spec"]["template"]["spec"]["containers"][0]
    ctx.apply(
        k8s.ConfigMap(
            apiVersion="v1",
            kind="ConfigMap",
            metadata={"name": name, "labels": {"app": container["name"]}},
            data={"image": container.get("image", "")},
        )
    )
    return deployment["spec"].get("replicas", 1)
"""

BAD = """
from kubewasm import k8s

misspelled = k8s.ConfigMap(apiVersion="v1", kind="ConfigMap", metadata={"name": "x"}, datta={})
mistyped = k8s.ConfigMap(apiVersion="v1", kind="ConfigMap", data={"replicas": 3})
wrong_kind = k8s.ConfigMap(apiVersion="v1", kind="Secret")
no_name: k8s.Container = {"image": "nginx"}
"""


def mypy(tmp_path, source: str) -> subprocess.CompletedProcess[str]:
    pytest.importorskip("mypy")
    path = tmp_path / "controller.py"
    path.write_text(source)
    return subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-incremental", "--follow-imports=silent", str(path)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )


def test_a_type_checker_takes_a_controller_using_the_models(tmp_path):
    result = mypy(tmp_path, GOOD)
    assert result.returncode == 0, result.stdout + result.stderr


def test_a_type_checker_refuses_wrong_fields(tmp_path):
    result = mypy(tmp_path, BAD)
    assert result.returncode == 1, result.stdout + result.stderr
    out = result.stdout
    assert 'controller.py:4: error: Extra key "datta" for TypedDict "ConfigMap"' in out, out
    assert 'controller.py:5: error: Dict entry 0 has incompatible type "str": "int"; expected "str": "str"' in out, out
    assert (
        """controller.py:6: error: Incompatible types (expression has type "Literal['Secret']", TypedDict item "kind" has type "Literal['ConfigMap']")""" in out
    ), out
    assert 'controller.py:7: error: Missing key "name" for TypedDict "Container"' in out, out
