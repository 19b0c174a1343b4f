"""Makes the plugin's requirements (requirements.txt: what the build bundles into the component)
importable by the unit tests: installed with pip into deps/, as `make deps` does, when deps/ does
not hold them yet (its stamp names the digest of requirements.txt)."""

import hashlib
import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
DEPS = HERE / "deps"
STAMP = DEPS / ".requirements-sha256"

# croniter's own tests are not this plugin's.
collect_ignore = ["deps"]


def _install_requirements() -> None:
    requirements = HERE / "requirements.txt"
    digest = hashlib.sha256(requirements.read_bytes()).hexdigest()
    if not (STAMP.is_file() and STAMP.read_text().strip() == digest):
        shutil.rmtree(DEPS, ignore_errors=True)
        pip = [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--target", str(DEPS), "-r", str(requirements)]
        subprocess.run(pip, check=True)
        STAMP.write_text(digest + "\n")
    sys.path.insert(0, str(DEPS))


_install_requirements()
