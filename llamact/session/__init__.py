"""What applications write around a chat model: ``ChatSession`` (a conversation that remembers and
fits the context), the tool loop (``send_with_tools``) and typed structured output."""

from .session import ChatSession, SessionStream, TemplateTimeChatSession
from .tool_functions import Tool
from .tools import ToolCallRequest, ToolLoopResult
from .trimming import Fit, fit_history

__all__ = ["ChatSession", "Fit", "SessionStream", "TemplateTimeChatSession", "Tool", "ToolCallRequest",
           "ToolLoopResult", "fit_history"]
