"""Nothing raw reaches a terminal: control characters are shown, never sent (issue 48)."""

import io

from graphs.consoles import SafeConsole, shown


def test_escapes_are_shown_not_sent():
    question = "Is \x1b[2Jaspirin\x07 effective?\x9b"
    assert shown(question) == "Is \\x1b[2Jaspirin\\x07 effective?\\x9b"
    assert shown("two\nlines\tand a tab") == "two\nlines\tand a tab"


def test_the_console_prints_a_question_with_escapes_as_text():
    screen = SafeConsole(file=io.StringIO(), width=200, force_terminal=True, highlight=False)
    screen.print("question: Is \x1b]52;c;ZXZpbA==\x07aspirin effective?", markup=False)
    written = screen.file.getvalue()
    assert "\x1b]52" not in written and "\\x1b]52;c;ZXZpbA==\\x07aspirin" in written
    # Control: a plain rich Console sends the escape as it came.
    from rich.console import Console

    plain = Console(file=io.StringIO(), width=200, force_terminal=True, highlight=False)
    plain.print("question: Is \x1b]52;c;ZXZpbA==\x07aspirin effective?", markup=False)
    assert "\x1b]52" in plain.file.getvalue()
