"""The daemon: the one long-running process and its HTTP surfaces (docs/daemon.md)."""

DEFAULT_HTTP = "127.0.0.1:8737"
