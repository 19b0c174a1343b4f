"""The build command's checks and generated entry module (building a component takes ~20 s and
componentize-py: set KUBEWASM_BUILD_TESTS=1 to build a Controller and a CompositeController too)."""

import os
import shutil
from pathlib import Path

import pytest

from kubewasm import build


def test_wit_is_shipped_with_the_package():
    wit = build.wit_dir()
    assert (wit / "world.wit").is_file()
    assert "package kubewasm:controller@0.1.6;" in (wit / "world.wit").read_text()


@pytest.mark.parametrize(
    "file,problem",
    [
        ("app.txt", "expected a Python module"),
        ("my-app.py", "not a valid module name"),
        ("class.py", "not a valid module name"),
        ("controller.py", "taken by the build"),
        ("wit_world.py", "taken by the build"),
        ("kubewasm.py", "taken by the build"),
    ],
)
def test_module_names(file, problem):
    with pytest.raises(build.BuildError, match=problem):
        build._module_name(Path(file))


def test_entry_module_imports_the_app():
    entry = build.ENTRY_TEMPLATE.format(app="sample_controller")
    assert "import sample_controller as _app" in entry
    assert "Plugin, Reconciler, Access, Release, Views, Composite, Clusters, Projections, Webhooks = _exports(_app)" in entry
    compile(entry, "kubewasm_component.py", "exec")


def test_missing_app_and_bad_wit(tmp_path):
    with pytest.raises(build.BuildError, match="no such file"):
        build.build(tmp_path / "nope.py", tmp_path / "out.wasm")
    (tmp_path / "app.py").write_text("")
    with pytest.raises(build.BuildError, match="no world.wit"):
        build.build(tmp_path / "app.py", tmp_path / "out.wasm", wit=tmp_path)


def test_cli_reports_errors(capsys):
    assert build.main(["build", "missing.py"]) == 1
    assert "no such file" in capsys.readouterr().err
    assert build.main(["wit"]) == 0
    assert capsys.readouterr().out.strip().endswith("wit")


@pytest.mark.skipif(not os.environ.get("KUBEWASM_BUILD_TESTS"), reason="set KUBEWASM_BUILD_TESTS=1 to build a component")
@pytest.mark.parametrize(
    "app",
    [
        Path(__file__).resolve().parents[3] / "examples/sample-controller/python/sample_controller.py",  # a Controller
        Path(__file__).resolve().parent / "greetings.py",  # a CompositeController
    ],
    ids=["controller", "composite"],
)
def test_builds_a_component(tmp_path, app):
    shutil.copy(app, tmp_path / app.name)
    seconds = build.build(tmp_path / app.name, tmp_path / "out.wasm", quiet=True)
    data = (tmp_path / "out.wasm").read_bytes()
    assert data[:4] == b"\0asm" and len(data) > 1_000_000
    assert seconds > 0
