"""Imported skills: agentskills.io folders translated into executors, and the vault of their credentials."""
