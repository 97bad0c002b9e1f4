"""MCP servers as executors: each tool of a server a signed, sandboxed executor of origin ``mcp``."""
