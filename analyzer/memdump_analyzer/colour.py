"""The colour policy of every report and message, the analyser's and GDB's commands' alike."""

from __future__ import annotations

import os

__all__ = ["colour_wanted"]


def colour_wanted(is_terminal: bool) -> bool:
    """Colour only on a terminal, and never when NO_COLOR is set to a non-empty value
    (https://no-color.org: "when present and not an empty string")."""
    return is_terminal and not os.environ.get("NO_COLOR")
