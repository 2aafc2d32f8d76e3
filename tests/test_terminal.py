"""Text for the terminal: every control character written as its escape or dropped, rich's own styles kept."""

from __future__ import annotations

import io
import json

from rich.table import Table
from rich.text import Text

from taskbench.terminal import console, json_text, printable

CONTROLS = "".join(chr(c) for c in [*range(0x00, 0x09), *range(0x0b, 0x20), *range(0x7f, 0xa0)])


def test_printable_writes_every_control_character_as_its_escape() -> None:
    assert printable("a\x1b[2Jb\x9bc\td\ne") == "a\\x1b[2Jb\\x9bc\td\ne"
    assert not any(char in printable(CONTROLS) for char in CONTROLS)
    assert printable("plain, é, 漢字") == "plain, é, 漢字"


def test_json_text_keeps_the_json_and_escapes_what_json_leaves_raw() -> None:
    text = json.dumps({"label": "x\x7fy\x9bz\x1b"}, ensure_ascii=False)
    safe = json_text(text)
    assert json.loads(safe) == {"label": "x\x7fy\x9bz\x1b"}
    assert not any(char in safe for char in CONTROLS)


def test_the_console_writes_no_control_character_of_a_string_a_text_or_a_table() -> None:
    out = io.StringIO()
    shown = console(file=out, width=80, force_terminal=True, color_system="standard")
    table = Table("label")
    table.add_row("cell\x1b]0;owned\x07")
    table.add_row(Text("text\x1b[2J\x9b6n"))
    shown.print("string\x1b[31m", highlight=False)
    shown.print(table)
    shown.print("[bold]styled[/]")
    written = out.getvalue()
    assert "\x1b]0;owned" not in written and "\x1b[2J" not in written and "\x9b" not in written
    assert "\x07" not in written and "\x1b[31m" not in written
    assert "string\\x1b[31m" in written and "cell\\x1b]0;owned\\x07" in written and "text[2J6n" in written
    assert "\x1b[1mstyled" in written  # rich's own style is no text of the file's
