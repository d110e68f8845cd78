"""Live widget panels: roster, transcript, context-update diffs and usage.

``attach_panels(lab)`` returns a :class:`Dashboard` that replays what the lab recorded
and follows it live; ``ask_transcript(lab, ask_id)`` a transcript of one ask (a cell's).
Each panel is a plain model (any thread) plus widgets written only
by a :class:`PanelHub`; see ``_hub`` for the threading choices.
"""

from __future__ import annotations

from aklab.lab.panels._context import ContextModel, ContextPanel
from aklab.lab.panels._dashboard import Dashboard, ask_transcript, attach_panels, carry_panels, detach_panels
from aklab.lab.panels._feed import watch_lab
from aklab.lab.panels._hub import Panel, PanelHub, PanelModel
from aklab.lab.panels._roster import RosterModel, RosterPanel
from aklab.lab.panels._transcript import TranscriptModel
from aklab.lab.panels._transcript_panel import TranscriptPanel
from aklab.lab.panels._usage import UsageModel, UsagePanel

__all__ = [
    "ContextModel",
    "ContextPanel",
    "Dashboard",
    "Panel",
    "PanelHub",
    "PanelModel",
    "RosterModel",
    "RosterPanel",
    "TranscriptModel",
    "TranscriptPanel",
    "UsageModel",
    "UsagePanel",
    "ask_transcript",
    "attach_panels",
    "carry_panels",
    "detach_panels",
    "watch_lab",
]
