"""The seed executors shipped with Metnos, one folder each (seeds/000 ch. 3).

``metnos init`` copies them into the workspace's seed dir and signs them with
the instance key; nothing runs from this folder directly.
"""

from pathlib import Path

SEED_DIR = Path(__file__).resolve().parent
