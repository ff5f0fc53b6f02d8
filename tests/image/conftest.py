"""The image tests build the Dockerfile (minutes, a few GB of disk, root): collected in
CI (`CI` set, as `.ci/run` runs) or when `COMPANION_IMAGE_TEST=1` asks for them, never in
a quick local `pytest`."""

from __future__ import annotations

import os

collect_ignore_glob = (
    [] if os.environ.get("CI") or os.environ.get("COMPANION_IMAGE_TEST") else ["test_*.py"]
)
