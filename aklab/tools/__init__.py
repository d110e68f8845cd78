"""aklab.tools: tool cards, the four channels, commands and context updates."""

from aklab.tools.card import Channel, ToolCard, ToolHost
from aklab.tools.commands import (
    CommandDescriptor,
    CommandNotRecognized,
    CommandRegistry,
    CommandsAnnouncedEvent,
)
from aklab.tools.context import ContextUpdater, ToolState
from aklab.tools.factory import ToolFactory
from aklab.tools.mailbox import MailboxTool
from aklab.tools.planning import PlanningTool
from aklab.tools.team import TeamTool
from aklab.tools.workspace import WorkspaceTool

__all__ = [
    "Channel",
    "CommandDescriptor",
    "CommandNotRecognized",
    "CommandRegistry",
    "CommandsAnnouncedEvent",
    "ContextUpdater",
    "MailboxTool",
    "PlanningTool",
    "TeamTool",
    "ToolCard",
    "ToolFactory",
    "ToolHost",
    "ToolState",
    "WorkspaceTool",
]
