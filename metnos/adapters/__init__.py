"""The ways in: the CLI, the daemon (HTTP API and dashboard), the channels (Telegram, MCP)."""
