import sys

from tablectl.controller.commands.cli import main

sys.exit(main())
