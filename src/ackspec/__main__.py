import sys

from ackspec.cli import main

sys.exit(main())
