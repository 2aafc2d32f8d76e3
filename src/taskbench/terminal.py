"""Text from a file made safe for the terminal: no escape sequence of a crafted result reaches it raw.

A result.json is data a user may be handed; a label holding ``\\x1b]0;...\\x07`` or ``\\x1b[2J`` would
retitle or clear the terminal that ``report`` or ``compare`` prints it on. :func:`printable` writes each
control character as its escape (``\\x1b``); :func:`console` is a rich Console that does the same to
every string it renders and drops any control character left in what it writes (rich's own styles are
not text, and pass). :func:`json_text` does it for JSON, where only DEL and the C1 controls may be raw.

Neutral: imports nothing of taskbench (rich inside :func:`console`, for the commands that print tables).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from rich.console import Console

__all__ = ["console", "json_text", "printable"]

#: C0 but newline and tab, DEL, C1 (``\x9b`` is a CSI of its own on some terminals)
CONTROL: Final = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
_RAW_IN_JSON: Final = re.compile(r"[\x7f-\x9f]")


def printable(text: str) -> str:
    """``text`` with each control character written as its escape, ``\\x1b`` for ESC."""
    return CONTROL.sub(lambda found: f"\\x{ord(found[0]):02x}", text)


def json_text(text: str) -> str:
    """JSON text with DEL and the C1 controls escaped as ``\\u007f``: the same JSON, none of them raw."""
    return _RAW_IN_JSON.sub(lambda found: f"\\u{ord(found[0]):04x}", text)


def console(**settings: Any) -> Console:
    """A rich Console that never writes a control character of the text it is given."""
    from rich.console import Console
    from rich.segment import Segment

    class _Safe(Console):
        def render_str(self, text: str, **kwargs: Any) -> Any:
            # before rich measures it: the escape's width is the width the table gives it
            return super().render_str(printable(text), **kwargs)

        def render(self, renderable: Any, options: Any = None) -> Iterable[Segment]:
            # a Text built from a file's string was never a str to render_str: stripped here (a control
            # character has no width, so the layout stays)
            for segment in super().render(renderable, options):
                if segment.control or not CONTROL.search(segment.text):
                    yield segment
                else:
                    yield Segment(CONTROL.sub("", segment.text), segment.style)

    return _Safe(**settings)
