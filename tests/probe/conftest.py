"""The probe (``probe/``, installable alone) is imported from its source folder, as its own package."""

from __future__ import annotations

import sys
from pathlib import Path

SOURCE = Path(__file__).resolve().parents[2] / "probe" / "src"
if str(SOURCE) not in sys.path:
    sys.path.insert(0, str(SOURCE))
