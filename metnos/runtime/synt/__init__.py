"""Synt: new executors from what use asks for, with the user at both gates (seeds/000 ch. 7)."""
