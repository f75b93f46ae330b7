"""Human-in-the-loop: a tool that only runs after the user approves the call.

    PONDER_MODEL=openai:gpt-4.1-mini ponder serve examples/chat_approval.py

When the model calls ``delete_file`` the turn ends with the call in ``approval-requested``; the client shows
it and answers with ``addToolApprovalResponse`` (a ``cf_agent_tool_approval`` frame). On approval the tool
runs and the model continues in the same assistant message; on denial the model is told the user said no.
Small payments are approved automatically (``needs_approval`` can be a function of the input), and every
call is checked by ``before_tool_call``.
"""

from __future__ import annotations

import os

from ponder.think import Think, ToolCallContext, ToolCallDecision, tool


@tool(needs_approval=True)
def delete_file(path: str) -> str:
    """Delete a file from the user's workspace."""
    return f"{path} deleted"


@tool(needs_approval=lambda args: args["amount"] > 100)
def send_payment(to: str, amount: float) -> str:
    """Send a payment. Payments above 100 need the user's approval."""
    return f"sent {amount:.2f} to {to}"


class ApprovalChat(Think):
    def get_model(self) -> str:
        return os.environ.get("PONDER_MODEL", "test")

    def get_tools(self) -> list:
        return [delete_file, send_payment]

    async def before_tool_call(self, ctx: ToolCallContext) -> ToolCallDecision | None:
        if ctx.tool_name == "delete_file" and ctx.input.get("path", "").startswith("/etc"):
            return ToolCallDecision.block("System files cannot be deleted.")
        return None
