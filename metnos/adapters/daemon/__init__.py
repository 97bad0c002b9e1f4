"""The daemon: the one long-running process and its HTTP surfaces (docs/daemon.md)."""
