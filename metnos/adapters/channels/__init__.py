"""Ways in besides the command line: Telegram and MCP (docs/channels.md).

Each is an adapter: it turns its medium's input into the same service calls
the CLI makes (run a turn, answer an approval, call one executor through the
checks of a turn's step) and implements the approver for its medium.
"""
