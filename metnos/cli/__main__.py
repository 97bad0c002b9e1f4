import sys

from metnos.cli import main

sys.exit(main())
