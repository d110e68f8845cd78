"""IPython magics: thin layers that parse arguments and call a ``Lab`` method.

Parsing lives in ``_magic_args`` (re-exported here), completion in ``_magic_complete``,
the ``Aklab`` defaults (``%config Aklab.default_model = ...``) in ``_settings``.

Errors: an ``AklabError`` (bad arguments included) fails the cell with one line starting
with ``aklab:`` and no traceback (IPython shows what ``_render_traceback_`` returns), so
Run All, nbclient and papermill stop there; anything else keeps its traceback.

=============================================  ==========================================
``%aklab``                                     status of the lab
``%aklab team NAME|PATH``                      start the built-in team NAME, or a team file
``%aklab model provider:model [options]``      restart the team on another model
``%aklab list``                                teams, providers, which keys are set
``%aklab teams`` / ``resume [TEAM]``           stored teams / bring one back after a restart
``%aklab forget TEAM`` / ``recover``           delete a stored team / repair a damaged store
``%aklab dashboard``                           the live panels in tabs
``%aklab help``                                every magic, with examples
``%%ask [@Agent] [--bg] [--timeout S]``        send the cell (``{var}`` expanded) to the
``      [--out VAR] [--format F]``             team; the replies are the cell's value
``%ask [@Agent] question``                     the same, in one line
``%stop [@Agent]``                             stop every ask (runs and queued asks)
``%usage [--by agent|run|model|ask|request]``  tokens and cost as a DataFrame
``       [--live]``                            ... or as a live panel
``%team``                                      the roster, busy members marked
``%transcript [@Agent] [--last N]``            messages sent (by or to @Agent)
``%context [@Agent] [--last N]``               context-update blocks delivered
=============================================  ==========================================

Every magic takes ``-h`` / ``--help``; ``%%ask?`` shows the same text.
"""

from __future__ import annotations

import inspect
import re
import sys
from typing import TYPE_CHECKING, Any, Literal, NoReturn, cast

from IPython.core.magic import Magics, line_cell_magic, line_magic, magics_class

from aklab._text import one_line
from aklab.errors import AklabError, ConfigError
from aklab.lab._magic_args import (
    SUBCOMMANDS,
    AskArgs,
    UsageError,
    expand,
    parse_aklab,
    parse_ask,
    parse_ask_line,
    parse_member,
    parse_member_last,
    parse_model,
    parse_usage,
    wants_help,
)

if TYPE_CHECKING:
    from aklab.lab.result import AskResult
    from aklab.lab.session import Lab

__all__ = [
    "AklabMagics",
    "AskArgs",
    "AskInterrupted",
    "PendingReplies",
    "UsageError",
    "parse_aklab",
    "parse_ask",
    "parse_ask_line",
    "parse_member",
    "parse_model",
    "parse_usage",
    "protect_questions",
]


def _fail(exc: AklabError) -> NoReturn:
    """Re-raise ``exc`` so that IPython shows one line, no traceback, and fails the cell."""
    line = f"aklab: {exc}"
    setattr(exc, "_render_traceback_", lambda: [line])  # noqa: B010 (IPython looks it up on the instance)
    raise exc.with_traceback(None)


class PendingReplies:
    """What ``%%ask --bg --out VAR`` stores: the ask's replies, which keep arriving."""

    def __init__(self, lab: Lab, start: int, ask_id: str | None = None) -> None:
        self._lab = lab
        self._start = start
        self._ask_id = ask_id

    @property
    def messages(self) -> AskResult:
        from aklab.lab.result import AskResult

        if self._ask_id is None:
            return AskResult(self._lab.inbox.messages[self._start :])
        return self._lab.result(self._ask_id, self._start)

    def wait(self, timeout: float | None = None) -> AskResult:
        """Block until the team is quiet, then return the replies (an ``AskResult``)."""
        self._lab.wait(timeout)
        return self.messages

    def __repr__(self) -> str:
        return f"<PendingReplies: {len(self.messages)} so far>"


#: How long `%stop` waits for the runs it interrupted to end before it returns.
STOP_SETTLE = 5.0

_ONE_LINE_ASK = re.compile(r"^(\s*)%ask\s+(\S.*?)\s*$")


def protect_questions(lines: list[str]) -> list[str]:
    """An input transformer: ``%ask Why?`` stays a question.

    IPython reads a line ending in ``?`` as a help request (it would look up ``Why``), so a
    ``%ask`` line that ends in ``?`` becomes the call the magic line turns into anyway. A
    cell magic's cell is left alone (its body is the magic's text).
    """
    if not lines or lines[0].lstrip().startswith("%%"):
        return lines
    out = []
    for line in lines:
        m = _ONE_LINE_ASK.match(line.rstrip("\r\n"))
        if m is not None and m.group(2).endswith("?"):
            out.append(f"{m.group(1)}get_ipython().run_line_magic('ask', {m.group(2)!r})\n")
        else:
            out.append(line)
    return out


def _in_kernel(shell: Any) -> bool:
    return type(shell).__name__ == "ZMQInteractiveShell"


@magics_class
class AklabMagics(Magics):
    def _lab(self) -> Lab:
        from aklab.lab import get_lab

        return get_lab()

    def _help(self, name: str) -> None:
        print(inspect.getdoc(getattr(self, name)))

    @line_magic
    def aklab(self, line: str) -> Any:
        """Start, switch and inspect the lab.

        Usage:
          %aklab                         status: team, members, models, usage so far, store
          %aklab team NAME|PATH          start a built-in team, or a team file (.toml/.yaml)
          %aklab model provider:model [--base-url URL] [--api-key-env VAR] [--temperature T]
                [--max-tokens N] [--timeout S] [--retries N] [--output-mode MODE] [--context-length N]
                                         restart the team on another model (a bad spec is one line)
          %aklab list                    built-in teams, model providers, which keys are set
          %aklab teams [--all]           the teams in the event store, latest activity first
                                         (--all: with those never asked anything)
          %aklab resume [TEAM]           bring a stored team back (the latest not running elsewhere, or by name or id)
            [--model SPEC]               on another model than the one it ran on
          %aklab forget TEAM             delete a stored team for good (by id, id prefix or name; not while it runs)
          %aklab recover                 repair a damaged event store: keep every record before the damage
          %aklab batch FILE [--engine local|process|ray] [--concurrency N] [--retries N] [--timeout S]
                [--team T] [--model M]   run the team over every scenario in FILE (CSV/JSONL/YAML)
          %aklab dashboard               the live panels (roster, transcript, context, usage)
          %aklab help                    every magic, with examples

        Examples:
          %aklab team dev-team
          %aklab model local:smollm2 --max-tokens 256
          %aklab model openai:gpt-4.1-mini --temperature 0.2
          %config Aklab.default_model = "local:smollm2"    (defaults: %config Aklab)
        """
        from aklab.lab import set_lab
        from aklab.lab.session import Lab
        from aklab.llm.profiles import resolve

        try:
            action, value = parse_aklab(line)
            if action == "help":
                print(_overview())
                return None
            if action == "usage":
                self._help("aklab")
                return None
            if action == "list":
                from aklab.lab._magic_show import listing

                print(listing())
                return None
            if action == "batch":
                return _batch(value or "")
            if action == "teams":
                from aklab.lab._magic_show import stored_teams

                print(stored_teams(everything=value == "--all"))
                return None
            if action == "recover":
                from aklab.lab._magic_show import recover_store

                print(recover_store())
                return None
            if action == "forget":
                import aklab

                assert value is not None  # parse_aklab requires TEAM
                _not_the_running_team(value)
                print(aklab.forget(value))
                return None
            left = _left_unfinished() if action in ("resume", "team", "model") else None
            if action == "resume":
                from aklab.lab._magic_args import parse_resume

                team, spec = parse_resume(value or "")
                resumed = Lab.resume(team, model=spec)
                set_lab(resumed)
                print(resumed.resume_report)
                _warn_servers(resumed, "%aklab resume TEAM --model SPEC resumes it on another")
            elif action == "team":
                set_lab(_new_lab(value or "dev-team"))
                _warn_servers(self._lab(), "the team file's base_url")
            elif action == "model":
                model_cfg = parse_model(value or "")
                resolve(model_cfg).close()  # a bad spec fails here, before the team restarts
                from aklab.lab import current_spec

                set_lab(Lab(current_spec(), model=model_cfg))
                _warn_servers(self._lab(), "--base-url")  # a self-hosted server not up, or without the model
            elif action == "dashboard":
                return self._lab().dashboard()
            if left is not None:
                print(left)
            print(self._lab().status())
        except AklabError as exc:
            _fail(exc)
        return None

    @line_cell_magic
    def ask(self, line: str, cell: str | None = None) -> Any:
        """Send a message to the team and show the replies (the cell's value is an AskResult).

        Usage:
          %%ask [@Agent] [--bg] [--timeout S] [--out VAR] [--format markdown|text|json]
          <message, several lines>

          %ask [--format F] [@Agent] message in one line

        @Agent      whom to ask (@Developer or Developer; default: the team's entry agent);
                    in the one-line %ask, write the @.
        --bg        return at once; the team works in the background (%stop stops it) and the
                    cell keeps showing the ask's live transcript
        --timeout S seconds to wait (default: Aklab.timeout, 300); the team keeps working after
        --out VAR   also store the replies in VAR (with --bg: a PendingReplies, VAR.wait())
        --format F  markdown (default: Aklab.default_format), text, or json

        {name} in the message is replaced by the value of the variable `name` when it is defined;
        any other brace (JSON, code, an undefined name) is left as typed; {{ and }} give { and }.
        The value (_) is an AskResult: a list of replies with .usage(), .totals(), .run_ids,
        .summary(), .as_text(), .as_markdown(), .as_json(). The notebook's stop button stops the ask.
        An ask that ends in a notice (a failed model call, a limit) shows it and the cell passes;
        with %config Aklab.fail_on_notice = True such a cell fails after it (papermill stops there).

        Examples:
          %%ask
          Plan the next sprint for {page}.

          %%ask @Developer --format text
          Review this config: {"retries": 3}

          %ask @Manager What is the plan?
        """
        try:
            if cell is None:
                if line.strip().split(" ", 1)[0] in ("-h", "--help"):
                    self._help("ask")
                    return None
                args, text = parse_ask_line(line)
            else:
                if wants_help(line):
                    self._help("ask")
                    return None
                args, text = parse_ask(line), cell
            return self._ask(args, text)
        except AklabError as exc:
            _fail(exc)

    def _ask(self, args: AskArgs, text: str) -> Any:
        from aklab.lab._settings import settings
        from aklab.lab.session import AskTimeout

        shell: Any = self.shell
        defaults = settings()
        namespace = shell.user_ns if shell is not None else {}
        lab = self._lab()
        seen_errors = len(lab.recorder.errors)
        start = lab.send(expand(text.strip(), namespace), to=args.agent)
        ask_id = lab.last_ask_id
        if args.bg:
            if args.out:
                namespace[args.out] = PendingReplies(lab, start, ask_id)
            print(f"Sent to {args.agent or lab.entry.name}; the team works in the background. %stop stops it.")
            if _in_kernel(shell) and ask_id is not None:  # the cell returns; its transcript goes on showing the work
                from IPython.display import display

                from aklab.lab._magic_show import LIVE_TEXT_BG, LiveView
                from aklab.lab.panels import ask_transcript

                display(LiveView(ask_transcript(lab, ask_id), LIVE_TEXT_BG))  # type: ignore[no-untyped-call]
            return None
        timeout = args.timeout or defaults.timeout
        fmt = args.format or defaults.default_format
        try:
            if _in_kernel(shell) and ask_id is not None:
                from IPython.display import display

                from aklab.lab._magic_show import LiveView
                from aklab.lab.panels import ask_transcript

                display(LiveView(ask_transcript(lab, ask_id)))  # type: ignore[no-untyped-call]
            done = lab.wait(timeout)
        except KeyboardInterrupt:  # the notebook's stop button: stop, keep what arrived, fail the cell
            stopped = lab.interrupt()
            summary = stopped.summary()
            self._show(lab, ask_id, start, fmt, args.out)
            raise AskInterrupted(f"interrupted. {summary}") from None
        result = self._show(lab, ask_id, start, fmt, args.out, display_it=False)
        for error in lab.errors(since=seen_errors, told=False):  # a failure the cell shows as a notice: once
            print(f"aklab: {error}", file=sys.stderr)
        if not done:
            self._display(result)
            where = "this cell's transcript and %transcript" if _in_kernel(shell) else "%transcript"
            raise AskTimeout(
                f"the team is still working after {timeout:g}s; its replies keep arriving ({where}); %stop stops it"
            )
        if defaults.fail_on_notice and result.ok is False:
            self._display(result)
            raise AskNotOk(_not_ok_line(result))
        return result

    def _show(
        self, lab: Lab, ask_id: str | None, start: int, fmt: str, out: str | None, *, display_it: bool = True
    ) -> AskResult:
        from aklab.lab._magic_show import shown
        from aklab.lab.result import AskResult

        result = shown(lab.result(ask_id, start) if ask_id else AskResult(lab.inbox.messages[start:]), fmt)
        if out and self.shell is not None:
            self.shell.user_ns[out] = result
        if display_it:
            self._display(result)
        return result

    @staticmethod
    def _display(result: AskResult) -> None:
        if result:
            from IPython.display import display

            display(result)  # type: ignore[no-untyped-call]

    @line_magic
    def stop(self, line: str) -> None:
        """Stop the team: every ask in progress ends, queued asks are withdrawn.

        Usage:
          %stop [@Agent]

          %stop            interrupt every run and withdraw the asks not started yet
          %stop @Agent     cancel only @Agent's current run (its ask goes on); if it has
                           none in flight, says so and sends nothing

        Prints what it did, e.g. "Stopped: interrupted the run of @Manager; withdrew 1 ask
        not started yet." It returns once the interrupted runs have ended (at most 5 s; it
        names an agent still in a call that does not yield to a stop). The notebook's stop
        button does the same to a waiting %%ask.
        """
        if wants_help(line):
            self._help("stop")
            return
        try:
            lab = self._lab()
            agent = parse_member(line, "%stop")
            stopped = lab.stop(agent)
        except AklabError as exc:
            _fail(exc)
        print(stopped.summary())
        # A stop is asynchronous: wait (briefly) for the interrupted runs to end, so that the
        # next cell sees the team as it is left (no member still busy, the stopped run's usage
        # counted). `%stop @Agent` leaves the ask going on: nothing to wait for.
        if agent is None and (stopped or stopped.withdrawn) and not lab.wait(STOP_SETTLE):
            still = ", ".join(lab.busy()) or "the team"
            print(
                f"{still} still winding down after {STOP_SETTLE:g} s (a tool or model call that does not "
                "yield to a stop); it ends when that call returns. %aklab shows who is busy."
            )

    @line_magic
    def usage(self, line: str) -> Any:
        """Tokens and cost as a DataFrame (or a live panel).

        Usage:
          %usage [--by agent|run|model|ask|request] [--live]

        --by ask gives one row per question: everything it caused, across every agent it
        involved, and ok: False after a notice from aklab (a failure, a limit) or a stop,
        <NA> while it still runs (the store keeps asks from before a resume too).
        --by run, ask and request are shown narrow, to fit the notebook: ids cut to 8
        characters, questions to 31, no role or start time, short headers (req, in, out,
        tokens, cost $, secs); the value (_) is the full DataFrame, every column and id whole.

        Examples:
          %usage
          %usage --by run
          %usage --by ask
          frame = _   # every column, full ids
        """
        if wants_help(line):
            self._help("usage")
            return None
        try:
            by, live = parse_usage(line)
            lab = self._lab()
            if live:
                return lab.panel("usage")
            frame = lab.usage(by=by)
            from aklab.lab._magic_show import usage_view

            return usage_view(frame) if by in ("run", "ask", "request") else frame
        except AklabError as exc:
            _fail(exc)

    @line_magic
    def team(self, line: str) -> None:
        """The roster, with busy members marked.

        Usage:
          %team
        """
        if wants_help(line):
            self._help("team")
            return
        lab = self._lab()
        busy = lab.recorder.busy
        for member in lab.team():
            print(f"{member.name} ({member.role}){' busy' if member.name in busy else ''}")

    @line_magic
    def transcript(self, line: str) -> None:
        """Every message sent in the team, one line each (by or to @Agent only, if given).

        Usage:
          %transcript [@Agent] [--last N]      (@Developer or Developer)

        The newest 2,000 messages (or N), the conversation before a resume included: what
        memory no longer holds is read back from the event store. A first line says when
        older ones are left out.

        Examples:
          %transcript
          %transcript @Developer --last 20
        """
        if wants_help(line):
            self._help("transcript")
            return
        from aklab.lab._magic_show import transcript_line
        from aklab.lab.recorder import TRANSCRIPT_LIMIT  # here: it imports pydantic-ai (%load_ext stays instant)
        from aklab.lab.result import intent_label

        try:
            agent, last = parse_member_last(line, "%transcript")
            limit = last or TRANSCRIPT_LIMIT
            lab = self._lab()
            messages = lab.transcript(agent, limit=limit)
            older = _older_note(lab, agent, messages[0]) if messages else None
        except AklabError as exc:
            _fail(exc)
        if not messages and agent is not None:
            print(_nothing_of(lab, agent, "messages"))
        if older:
            print(f"(the newest {len(messages):,} shown; {older})")
        for message in messages:
            sender = message.sender.name if message.sender else "?"
            recipient = message.recipient.name if message.recipient else "?"
            print(f"{sender} → {recipient} ({intent_label(message)}): {transcript_line(message.content or '')}")

    @line_magic
    def context(self, line: str) -> None:
        """The context-update blocks each agent received (@Agent's only, if given).

        Usage:
          %context [@Agent] [--last N]         (@Manager or Manager)

        The newest 500 blocks (or N), those before a resume included: what memory no
        longer holds is read back from the event store.

        Examples:
          %context @Manager --last 2
        """
        if wants_help(line):
            self._help("context")
            return
        from aklab.lab.recorder import CONTEXT_UPDATES_LIMIT  # here: it imports pydantic-ai

        try:
            agent, last = parse_member_last(line, "%context")
            limit = last or CONTEXT_UPDATES_LIMIT
            lab = self._lab()
            updates = lab.context(agent, limit=limit + 1)  # one more: are there older ones?
        except AklabError as exc:
            _fail(exc)
        if len(updates) > limit:
            updates = updates[1:]
            print(f"(the newest {limit:,} shown; %context --last N shows more)\n")
        for update in updates:
            print(f"── {update.agent}")
            print(update.block)
            print()
        if not updates:
            print("(no context updates yet)" if agent is None else _nothing_of(lab, agent, "context updates"))


class AskInterrupted(AklabError):
    """The notebook's stop button ended a waiting ``%%ask``: one line, and the cell fails."""

    def _render_traceback_(self) -> list[str]:
        return [f"aklab: {self}"]


class AskNotOk(AklabError):
    """A ``%%ask`` that was not ok, with ``Aklab.fail_on_notice`` set: one line, and the cell fails."""

    def _render_traceback_(self) -> list[str]:
        return [f"aklab: {self}"]


def _not_ok_line(result: AskResult) -> str:
    """Why the ask was not ok, in one line, for ``AskNotOk``."""
    notices = result.notices
    if notices:
        why = f"it ended in a notice: {one_line(notices[0].content, 200)}"
    else:
        why = "it was stopped"
    return f"the ask was not ok ({why}); the cell fails because Aklab.fail_on_notice is set"


def _batch(line: str) -> Any:
    """``%aklab batch FILE ...``: a progress bar while it runs, then the result (table and summary)."""
    from aklab import batch
    from aklab.lab._magic_args import parse_batch

    args = parse_batch(line)
    from aklab.lab import get_lab

    current = get_lab()
    team: Any = args.team or (current.spec if current is not None else "dev-team")
    return batch.run(
        batch.load_scenarios(args.path),
        team=team,
        model=args.model,
        engine=cast(Literal["local", "process", "ray"], args.engine),  # parse_batch checked the choice
        concurrency=args.concurrency,
        retries=args.retries,
        timeout_s=args.timeout,
    )


def _left_unfinished() -> str | None:
    """What switching to another team stops of the running one (closing a lab interrupts its
    runs), to say once the switch is made; None when it was idle."""
    from aklab.lab import running_lab

    old = running_lab()
    active = {a.ask_id for a in old.system.asks.active()} if old is not None else set()
    if old is None or not active:
        return None
    questions = [m.content for m in old.transcript() if m.id in active]
    shown = ", ".join(repr(q if len(q) <= 60 else q[:59] + "…") for q in questions) or f"{len(active)} ask(s)"
    return f"note: the previous team was still working on {shown}; the switch stopped it (ask again for an answer)"


def _not_the_running_team(team: str) -> None:
    """Refuse ``%aklab forget`` of the team these magics run, saying how to let go of it (a
    notebook user holds no ``lab`` to close)."""
    from aklab.lab import running_lab
    from aklab.lab.resume import find_team
    from aklab.store import TeamInUseError

    current = running_lab()
    if current is None or current.store is None:
        return
    try:
        info = find_team(current.store, team)
    except AklabError:  # no such team here, or several: aklab.forget says so
        return
    if info.team_id == current.team_id:
        from aklab.lab.teams import BUILTIN_TEAMS

        short = info.team_id[:8]
        again = current.spec.name if current.spec.name in BUILTIN_TEAMS else "FILE (its team file)"
        raise TeamInUseError(
            f"team {short} ({info.name!r}) is the team this notebook runs: start another first "
            f"(%aklab team {again}), then %aklab forget {short}",
            here=True,
        )


def _warn_servers(lab: Lab, address: str) -> None:
    """Say at once when a self-hosted server the team's models name does not answer (or, for
    Ollama, lacks the model), as ``%aklab model`` does, instead of at the first ask."""
    from aklab.llm.preflight import team_server_warnings

    cfgs = [c.config.model_cfg for c in lab.spec.cards if hasattr(c.config, "model_cfg")]
    for warning in team_server_warnings(cfgs, address=address):
        print(warning)


def _new_lab(team: str) -> Lab:
    """A lab on ``team`` with the ``Aklab.default_model``, if one is set."""
    from aklab.lab._settings import settings
    from aklab.lab.session import Lab

    model = settings().default_model
    return Lab(team, model=model or None)


def _nothing_of(lab: Lab, agent: str, what: str) -> str:
    """Why ``%transcript @X`` / ``%context @X`` show nothing: a name that is no member (a typo,
    or a role not hired yet) is said so, with the members, rather than 'nothing yet'."""
    name = agent if agent.startswith("@") else f"@{agent}"
    members = [a.name for a in lab.team()]
    if name in members:
        return f"(no {what} of {name} yet)"
    return f"(no {what} of {name}: no such member; members: {', '.join(members)})"


def _older_note(lab: Any, agent: str | None, first: Any) -> str | None:
    """What ``%transcript`` says of the messages before ``first``: None when there are none."""
    try:
        return "%transcript --last N shows more" if lab.transcript(agent, before=first, limit=1) else None
    except ConfigError as exc:  # memory let them go, and no event store keeps them
        return f"older ones are not kept: {exc}"


_MAGICS = ("aklab", "ask", "stop", "usage", "team", "transcript", "context")


def _overview() -> str:
    """``%aklab help``: one line per magic, then where to read more."""
    lines = ["aklab magics (each takes -h/--help; %%ask? shows the same):", ""]
    for name in _MAGICS:
        doc = inspect.getdoc(getattr(AklabMagics, name)) or ""
        summary, _, rest = doc.partition("\n")
        usage = next((u.strip() for u in rest.split("Usage:", 1)[-1].splitlines() if u.strip()), "")
        prefix = "%%ask / %ask" if name == "ask" else f"%{name}"
        lines.append(f"  {prefix:<14} {summary}")
        if usage:
            lines.append(f"  {'':<14}   {usage}")
        if name == "aklab":
            lines.append(
                f"  {'':<14}   %aklab {'|'.join(w for w in SUBCOMMANDS if w != 'help')} ...  (%aklab -h: each one)"
            )
    lines += [
        "",
        "Examples:",
        "  %%ask",
        "  Plan the next sprint for the login page.",
        "",
        "  %ask @Developer Write a haiku about tests.",
        "  %stop",
        "  %usage --by run",
        '  %config Aklab.default_model = "local:smollm2"',
    ]
    return "\n".join(lines)
