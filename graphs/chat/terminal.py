"""`quorum chat`: a terminal conversation over a corpus, every turn a traceable run.

Each line is a turn (graphs/chat/conversation.py): follow-ups are rewritten into standalone
questions from the history, progress shows live while the graph runs ("searching… 8,412 hits",
"ensemble 12/15"), the answer's text streams when the model streams it, and the answer comes
with the evidence it cites (each PMID's title and supporting sentence) apart from the documents
retrieved, in retrieval order. Commands: /open PMID, /trace, /new, /quit. Ctrl-C during a turn
cancels that turn and keeps the conversation.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable
from typing import Any

from rich.console import Console
from rich.markup import escape

from graphs.chat.conversation import Conversations, Turn, run_turn
from graphs.describe import LABELS, answer_lines, progress_line, step_lines
from graphs.live import LiveStatus
from graphs.traces.read import node_updates
from infra.settings import Settings
from nodes.context import Context
from nodes.records import model_failed
from nodes.state import QAState

HELP = "commands: /open PMID · /trace · /new · /quit (Ctrl-C cancels a running turn)"


class IdealStream:
    """Pull the ideal answer's text out of a streamed JSON reply, as it arrives."""

    KEY = '"ideal_answer"'

    def __init__(self) -> None:
        self._buffer = ""
        self._shown = 0

    def feed(self, text: str) -> str:
        """Add streamed text; return the new characters of the ideal answer, if any."""
        self._buffer += text
        start = self._buffer.find(self.KEY)
        if start < 0:
            return ""
        quote = self._buffer.find('"', start + len(self.KEY) + 1)
        if quote < 0:
            return ""
        body, i, escaped = [], quote + 1, False
        while i < len(self._buffer):
            ch = self._buffer[i]
            if escaped:
                body.append({"n": "\n", "t": "\t"}.get(ch, ch))
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                break
            else:
                body.append(ch)
            i += 1
        text = "".join(body)
        new, self._shown = text[self._shown :], len(text)
        return new


class Chat:
    """One terminal conversation; `handle` takes a line and returns False to stop."""

    def __init__(
        self, settings: Settings, context: Context, console: Console, qtype: str | None = None
    ):
        self.settings = settings
        self.qtype = qtype
        self.context = context
        self.console = console
        self.store = Conversations.for_settings(settings)
        self.conversation = self.store.new_id()
        self.last: Turn | None = None
        # One event loop for the whole conversation, so its HTTP clients and their kept-alive
        # connections serve every turn (a loop per turn left the next turn the sockets of a
        # closed one: issue 56). Runner.run cancels a turn on Ctrl-C as asyncio.run did.
        self.runner = asyncio.Runner()

    def close(self) -> None:
        """Close the conversation's event loop (and the clients it holds) and its store."""
        self.runner.close()
        self.store.close()

    def handle(self, line: str) -> bool:
        """Act on one input line: a command or a question."""
        line = line.strip()
        if not line:
            return True
        if line in ("/quit", "/exit"):
            return False
        if line == "/new":
            self.conversation, self.last = self.store.new_id(), None
            self.console.print(f"[dim]new conversation {self.conversation}[/dim]")
        elif line == "/trace":
            self.show_trace()
        elif line.startswith("/open"):
            self.open(line.removeprefix("/open").strip())
        elif line.startswith("/"):
            self.console.print(f"[red]unknown command {escape(line.split()[0])}[/red] — {HELP}")
        else:
            self.ask(line)
        return True

    def ask(self, question: str) -> None:
        """Run one turn with live progress; Ctrl-C cancels it and keeps the conversation."""
        stream = IdealStream()
        streamed: list[str] = []
        with LiveStatus(self.console, "starting…") as status:

            def on_start(node: str) -> None:
                status.update(f"{LABELS.get(node, node)}…")

            def on_event(node: str, update: QAState) -> None:
                status.print(f"[dim]{escape(progress_line(node, update))}[/dim]")

            def on_progress(event: dict[str, Any]) -> None:
                if event.get("node") == "ensemble" and "total" in event:
                    status.update(f"ensemble {event['done']}/{event['total']}")

            def on_token(node: str, text: str) -> None:
                if node == "synthesize" and (new := stream.feed(text)):
                    streamed.append(new)
                    status.update(f"answering: {''.join(streamed)[-60:]}")

            try:
                turn = self.runner.run(
                    self._turn(question, on_start, on_event, on_progress, on_token)
                )
            except KeyboardInterrupt:
                self.console.print("[yellow]turn cancelled; the conversation goes on[/yellow]")
                return
        self.last = turn
        self.show_answer(turn)

    async def _turn(
        self,
        question: str,
        on_start: Callable[[str], None],
        on_event: Callable[[str, QAState], None],
        on_progress: Callable[[dict[str, Any]], None],
        on_token: Callable[[str, str], None],
    ) -> Turn:
        return await run_turn(
            self.settings,
            self.context,
            self.store,
            self.conversation,
            question,
            self.qtype,
            on_start=on_start,
            on_event=on_event,
            on_progress=on_progress,
            on_token=on_token,
        )

    def show_answer(self, turn: Turn) -> None:
        """Print the answer, the evidence it cites, what was retrieved, how to see every step."""
        result = turn.result
        if turn.question != turn.asked:
            self.console.print(f"[dim]read as: {escape(turn.question)}[/dim]")
        if model_failed(result):  # as `ask` exits 1: an error, never printed as an answer
            reason = result.get("insufficient_reason") or "no model gave a usable answer"
            self.console.print(f"[red]no answer: {escape(reason)}[/red]")
            self.console.print(f"[dim]/trace for every step · thread {turn.thread_id}[/dim]")
            return
        for line in answer_lines(result, documents=5):
            self.console.print(line, markup=False, highlight=False)
        self.console.print(
            # The commands first: a narrow terminal wraps the long thread id, not them.
            "[dim]/trace for every step · /open PMID for an abstract · "
            f"thread {turn.thread_id}[/dim]"
        )

    def open(self, pmid: str) -> None:
        """Show a document's title and abstract."""
        if not pmid.isdigit():
            self.console.print("[red]usage: /open PMID[/red]")
            return
        docs = self.context.search.fetch([pmid])
        if not docs:
            self.console.print(f"[red]PMID {pmid} is not in the index[/red]")
            return
        doc = docs[0]
        self.console.print(f"[bold][{pmid}] {escape(doc.get('title') or '')}[/bold]")
        self.console.print(escape(doc.get("abstract") or ""))

    def show_trace(self) -> None:
        """Print the last turn's nodes, with the readable lines of those that have them."""
        if self.last is None:
            self.console.print("[dim]no turn yet[/dim]")
            return
        for step in node_updates(self.settings, self.last.thread_id):
            took = f" {step['seconds']:.2f}s" if step["seconds"] is not None else ""
            self.console.print(f"[bold]{step['node']}[/bold][dim]{took}[/dim]")
            for line in step_lines(step["node"], step["update"], width=160, skip=("calls",)):
                self.console.print(f"    {line}", markup=False, highlight=False)


_SURROGATE = re.compile("[\ud800-\udfff]")
"""How bytes that were not UTF-8 arrive when stdin decodes with surrogateescape."""


def run_chat(
    settings: Settings,
    context: Context,
    console: Console,
    read: Callable[[], str],
    qtype: str | None = None,
) -> None:
    """Read lines until /quit or end of input."""
    chat = Chat(settings, context, console, qtype)
    console.print(f"[bold]quorum chat[/bold] — {HELP}")
    try:
        _converse(chat, console, read)
    finally:
        chat.close()


def _converse(chat: Chat, console: Console, read: Callable[[], str]) -> None:
    while True:
        try:
            line = read()
        except EOFError:
            break
        except KeyboardInterrupt:
            console.print()
            continue
        except UnicodeDecodeError:
            line = "\udcff"  # strict decoding refused it: the same answer as an escaped byte
        if _SURROGATE.search(line):
            # Bytes that are not UTF-8 (read as surrogate escapes) end nothing: say so and read
            # the next line, rather than fail later where the line is stored (issue 48).
            console.print("[red]that line is not UTF-8 text; type it again[/red]")
            continue
        if not chat.handle(line):
            break
